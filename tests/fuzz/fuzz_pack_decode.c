/* fuzz_pack_decode.c: fuzz target for the packed-chunk decoder (src/trace/pack.c) and the
 * reader's version-2 path (src/trace/reader.c).
 *
 * Each input is used twice:
 * 1. ms_pack_decode() on it directly: bytes 0..7 are base_ns, bytes 8..11 `want` (capped at
 *    1 MiB), the rest is the payload. The decoder must write at most `want` bytes, exactly
 *    `want` unless it reports damage, and only whole version-1 records: the output is read back
 *    as a raw chunk, where every record must decode (known extension types excepted: their
 *    fields come from the payload and the reader may refuse them).
 * 2. The input after a valid version-2 file header, opened with ms_trace_open_mem(): every
 *    thread's stream and every chunk's cursor read to the end, each record's strings and pcs
 *    touched, so the sanitizers see any read outside the input.
 * Built like fuzz_trace_reader (tests/fuzz/CMakeLists.txt): a libFuzzer target with
 * MEMSCOPE_FUZZ, else a program that replays the files and directories on its command line. The
 * seed corpus comes from fuzz_pack_seed_gen.c. */
#include "common/ms_error.h"
#include "read_all.h"
#include "trace/reader.h"
#include "trace/unpack.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WANT_MAX (1u << 20)

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

/* A version-2 header: what ms_pack_file() writes, for a trace of pid 1. */
static void v2_header(uint8_t *h, uint64_t file_end)
{
    struct ms_trace_file_header fh;
    memset(h, 0, MS_TRACE_V2_HEADER_SIZE);
    memset(&fh, 0, sizeof fh);
    memcpy(fh.magic, MS_TRACE_MAGIC, 8);
    fh.version = MS_TRACE_PACKED_VERSION;
    fh.header_size = MS_TRACE_V2_HEADER_SIZE;
    fh.chunk_align = 1;
    fh.flags = MS_TRACE_F_STACKS | MS_TRACE_F_PACKED;
    fh.pid = 1;
    fh.max_depth = 64;
    fh.file_end = file_end;
    memcpy(h, &fh, sizeof fh);
}

/* Part 1: the decoder on its own. */
static void fuzz_decode(const uint8_t *data, size_t size)
{
    if (size < 12)
        return;
    uint64_t base_ns;
    uint32_t want;
    memcpy(&base_ns, data, 8);
    memcpy(&want, data + 8, 4);
    want %= WANT_MAX + 1;
    /* The output lies after a version-2 header and a raw chunk header, to be read back. */
    size_t pre = MS_TRACE_V2_HEADER_SIZE + MS_TRACE_CHUNK_HEADER_SIZE;
    uint8_t *buf = malloc(pre + want + 1);
    if (!buf)
        abort();
    uint8_t *out = buf + pre;
    int damaged = -1;
    size_t n = ms_pack_decode(data + 12, size - 12, base_ns, out, want, &damaged);
    if (n > want || (damaged != 0 && damaged != 1) || (!damaged && n != want))
        abort();

    v2_header(buf, pre + n);
    uint8_t *ch = buf + MS_TRACE_V2_HEADER_SIZE;
    put32(ch, MS_TRACE_CHUNK_MAGIC);
    put32(ch + 4, (uint32_t)(MS_TRACE_CHUNK_HEADER_SIZE + n));
    put32(ch + 8, 1);
    put32(ch + 12, 1);
    put32(ch + 16, 0);
    put32(ch + 20, (uint32_t)n);
    memcpy(ch + 24, &base_ns, 8);
    struct ms_trace t;
    if (ms_trace_open_mem(&t, buf, pre + n) != 0 || t.nchunks != 1)
        abort();
    struct ms_trace_cursor *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    ms_trace_cursor_init(c, &t, 0);
    struct ms_record r;
    for (;;) {
        int type = c->p < c->end ? *c->p : -1;
        int rc = ms_trace_cursor_next(c, &r);
        if (rc == 1) {
            touch(&r);
            continue;
        }
        /* Only a known extension's fields may be refused; anything else is a broken record. */
        if (rc < 0 && !(type >= MS_EXT_STEP && type <= MS_EXT_PYRETURN))
            abort();
        break;
    }
    ms_trace_cursor_release(c);
    free(c);
    ms_trace_release(&t);
    free(buf);
}

/* Part 2: the input as the chunks of a version-2 file. */
static void fuzz_trace(const uint8_t *data, size_t size)
{
    uint8_t *buf = malloc(MS_TRACE_V2_HEADER_SIZE + size + 1);
    if (!buf)
        abort();
    v2_header(buf, MS_TRACE_V2_HEADER_SIZE + size);
    if (size)
        memcpy(buf + MS_TRACE_V2_HEADER_SIZE, data, size);
    struct ms_trace t;
    if (ms_trace_open_mem(&t, buf, MS_TRACE_V2_HEADER_SIZE + size) != 0)
        abort(); /* the header is valid: whatever follows is damage, not an error */
    read_all(&t);
    ms_trace_release(&t);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_decode(data, size);
    fuzz_trace(data, size);
    return 0;
}

#ifdef MS_FUZZ_REPLAY_MAIN
#include "replay_main.h"
#endif
