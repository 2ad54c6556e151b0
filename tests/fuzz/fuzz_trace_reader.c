/* fuzz_trace_reader.c: fuzz target for the trace reader (src/trace/reader.c).
 *
 * Opens the input with ms_trace_open_mem(), then reads every thread's stream to its end and every
 * chunk with a plain cursor, touching each decoded string and pc so the sanitizers see any read
 * outside the input. Built two ways (tests/fuzz/CMakeLists.txt): with MEMSCOPE_FUZZ as a
 * libFuzzer target, otherwise as a plain program that replays the files and directories given
 * on its command line (the seed corpus in the normal test run). */
#include "error.h"
#include "reader.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void touch(const struct ms_record *r)
{
    uint64_t h = (uint64_t)r->type ^ r->ns ^ r->addr ^ r->size ^ r->stack_id;
    for (uint32_t i = 0; i < r->depth; i++)
        h += r->pcs[i];
    for (size_t i = 0; i < r->len1; i++)
        h += (unsigned char)r->str1[i];
    for (size_t i = 0; i < r->len2; i++)
        h += (unsigned char)r->str2[i];
    sink += h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ms_trace t;
    if (ms_trace_open_mem(&t, data, size) < 0)
        return 0;
    struct ms_trace_stream *s = calloc(1, sizeof *s);
    struct ms_record r;
    if (!s)
        abort();
    for (size_t first = 0; first < t.nchunks;) {
        size_t next = ms_trace_stream_init(s, &t, first);
        if (next <= first)
            abort(); /* the stream must advance */
        first = next;
        while (ms_trace_stream_next(s, &r) == 1)
            touch(&r);
    }
    for (size_t k = 0; k < t.nchunks; k++) {
        ms_trace_cursor_init(&s->cur, &t, k);
        while (ms_trace_cursor_next(&s->cur, &r) == 1)
            touch(&r);
    }
    if (strlen(t.warning) >= sizeof t.warning)
        abort();
    ms_trace_cursor_release(&s->cur);
    free(s);
    ms_trace_release(&t);
    return 0;
}

#ifdef MS_FUZZ_REPLAY_MAIN
#include "replay_main.h"
#endif
