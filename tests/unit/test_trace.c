/* test_trace.c: the trace format module: encode.h writes, reader.c reads back every record
 * type; extension records are skippable; zero pages between chunks are ignored; a truncated file
 * reads up to the damage; a corrupt record stops only its chunk; newer versions are refused. */
#include "tracegen.h"
#include "test.h"

#include "common/ms_error.h"
#include "trace/reader.h"

#include <unistd.h>

#define MONO0 1000000000ull
#define REAL0 1700000000000000000ull

static const uint64_t pcs[3] = {0x401234, 0x401100, 0x7f0000001000};

/* Writes an extension record of a type no reader knows, by hand: type byte, varint length,
 * then the payload, which starts with dts (0 here) as every extension's does. */
static uint8_t *put_extension(uint8_t *p, int type, const char *payload)
{
    size_t n = strlen(payload);
    *p++ = (uint8_t)type;
    p = ms_put_varint(p, n + 1);
    *p++ = 0;
    memcpy(p, payload, n);
    return p + n;
}

/* Builds: header | T1 chunk 0 | T2 chunk 0 | 2 zero pages | T1 chunk 1. Returns in g; sets
 * *corrupt_at to the offset of the type byte of T1 chunk 0's third record. */
static void build(struct tg *g, size_t *corrupt_at)
{
    struct tg_chunk c;
    tg_init(g, 4242, 1, MONO0, REAL0);
    tg_chunk_begin(g, &c, 4242, 1, 0, MONO0, 4096);
    c.p = ms_enc_process(c.p, 1, "/bin/prog", 9, "prog\0-x\0", 8);
    c.p = ms_enc_module(c.p, 0x400000 - 0x400000, 0x400000, 0x402000, "/bin/prog", 9);
    *corrupt_at = (size_t)(c.p - g->buf);
    c.p = ms_enc_stack(c.p, 7, pcs, 3);
    for (int fn = 0; fn < MS_FN_HEAP_COUNT; fn++)
        c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + fn, MONO0 + 10 + (uint64_t)fn,
                           0x10000 + 0x100 * (uint64_t)fn, 16 + (uint64_t)fn, 7);
    c.p = put_extension(c.p, 0xf5, "future stuff");
    c.p = ms_enc_free(c.p, &c.st, MONO0 + 30, 0x10000);
    tg_chunk_end(g, &c);

    tg_chunk_begin(g, &c, 4243, 2, 0, MONO0 + 5, 4096);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_MMAP_ALLOC + MS_FN_MMAP, MONO0 + 6, 0x7f0000000000, 8192,
                       0);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_MMAP_ALLOC + MS_FN_MREMAP, MONO0 + 7, 0x7f0000010000,
                       16384, 0);
    c.p = ms_enc_munmap(c.p, &c.st, MONO0 + 8, 0x7f0000010000, 16384);
    tg_chunk_end(g, &c);

    tg_zero_pages(g, 2 * 4096);

    tg_chunk_begin(g, &c, 4242, 1, 1, MONO0 + 40, 8192);
    c.p = ms_enc_lost(c.p, &c.st, MONO0 + 41, 3);
    c.p = ms_enc_free(c.p, &c.st, MONO0 + 42, 0x10100);
    tg_chunk_end(g, &c);
}

struct rec_summary {
    int type, fn;
    uint64_t ns, addr, size;
};

/* Reads all streams; returns the count of records, filling out (max n). */
static size_t read_all(struct ms_trace *t, struct rec_summary *out, size_t n)
{
    size_t k = 0;
    struct ms_trace_stream s;
    for (size_t first = 0; first < t->nchunks;) {
        first = ms_trace_stream_init(&s, t, first);
        struct ms_record r;
        while (ms_trace_stream_next(&s, &r) == 1) {
            if (k < n)
                out[k] = (struct rec_summary){r.type, r.fn, r.ns, r.addr, r.size};
            k++;
        }
    }
    return k;
}

static void test_round_trip(void)
{
    struct tg g;
    size_t corrupt_at;
    build(&g, &corrupt_at);
    struct ms_trace t;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    CHECK_EQ(t.hdr.pid, 4242);
    CHECK_EQ(t.hdr.start_real_ns, REAL0);
    CHECK_EQ(t.nchunks, 3);
    CHECK_STREQ(t.warning, "");
    CHECK_EQ(t.skipped_bytes, 0);
    /* Sorted by (thread_serial, seq). */
    CHECK_EQ(t.chunks[0].thread_serial, 1);
    CHECK_EQ(t.chunks[1].thread_serial, 1);
    CHECK_EQ(t.chunks[1].seq, 1);
    CHECK_EQ(t.chunks[2].thread_serial, 2);
    CHECK_EQ(t.chunks[2].tid, 4243);

    struct ms_trace_stream s;
    struct ms_record r;
    size_t next = ms_trace_stream_init(&s, &t, 0);
    CHECK_EQ(next, 2);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_PROCESS);
    CHECK_EQ(r.ppid, 1);
    CHECK(r.len1 == 9 && !memcmp(r.str1, "/bin/prog", 9));
    CHECK(r.len2 == 8 && !memcmp(r.str2, "prog\0-x\0", 8));
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_MODULE);
    CHECK_EQ(r.lo, 0x400000);
    CHECK_EQ(r.hi, 0x402000);
    CHECK(r.len1 == 9 && !memcmp(r.str1, "/bin/prog", 9));
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_STACK);
    CHECK_EQ(r.stack_id, 7);
    CHECK_EQ(r.depth, 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(r.pcs[i], pcs[i]);
    for (int fn = 0; fn < MS_FN_HEAP_COUNT; fn++) {
        CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
        CHECK_EQ(r.type, MS_REC_HEAP_ALLOC);
        CHECK_EQ(r.fn, fn);
        CHECK_EQ(r.ns, MONO0 + 10 + (uint64_t)fn);
        CHECK_EQ(r.addr, 0x10000 + 0x100 * (uint64_t)fn);
        CHECK_EQ(r.size, 16 + fn);
        CHECK_EQ(r.stack_id, 7);
    }
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_EXTENSION);
    CHECK_EQ(r.fn, 0xf5);
    CHECK(r.len1 == 12 && !memcmp(r.str1, "future stuff", 12));
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1); /* the record after the extension decodes */
    CHECK_EQ(r.type, MS_REC_HEAP_FREE);
    CHECK_EQ(r.addr, 0x10000);
    CHECK_EQ(r.ns, MONO0 + 30);
    /* Chunk 1 of thread 1: delta state restarts. */
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_LOST);
    CHECK_EQ(r.size, 3);
    CHECK_EQ(r.ns, MONO0 + 41);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_HEAP_FREE);
    CHECK_EQ(r.addr, 0x10100);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 0);

    next = ms_trace_stream_init(&s, &t, next);
    CHECK_EQ(next, 3);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_MMAP_ALLOC);
    CHECK_EQ(r.fn, MS_FN_MMAP);
    CHECK_EQ(r.addr, 0x7f0000000000);
    CHECK_EQ(r.size, 8192);
    CHECK_EQ(r.stack_id, 0);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_MMAP_ALLOC);
    CHECK_EQ(r.fn, MS_FN_MREMAP);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_MUNMAP);
    CHECK_EQ(r.addr, 0x7f0000010000);
    CHECK_EQ(r.size, 16384);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 0);
    CHECK_EQ(t.damaged_chunks, 0);
    ms_trace_release(&t);

    /* The same through a file. */
    char path[] = "/tmp/memscope-test-trace-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_EQ(tg_write(&g, path), 0);
    CHECK_EQ(ms_trace_open(&t, path), 0);
    struct rec_summary sum[32];
    CHECK_EQ(read_all(&t, sum, 32), 19);
    CHECK(t.mapped);
    ms_trace_release(&t);
    unlink(path);
    tg_release(&g);
}

static void test_truncated(void)
{
    struct tg g;
    size_t corrupt_at;
    build(&g, &corrupt_at);
    struct rec_summary full[32], part[32];
    struct ms_trace t;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    size_t nfull = read_all(&t, full, 32);
    ms_trace_release(&t);

    /* Cut inside thread 1's first chunk, in the middle of its records: what was before the cut
     * is read, the rest of that chunk is damage, the other chunks are gone (beyond the end). */
    size_t cut = corrupt_at + 30;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, cut), 0);
    CHECK(strstr(t.warning, "truncated") != NULL);
    CHECK_EQ(t.nchunks, 1);
    size_t n = read_all(&t, part, 32);
    CHECK(n >= 3 && n < 3 + MS_FN_HEAP_COUNT);
    for (size_t i = 0; i < n; i++)
        CHECK(part[i].type == full[i].type && part[i].addr == full[i].addr);
    CHECK_EQ(t.damaged_chunks, 1);
    ms_trace_release(&t);

    /* Cut inside the trailing zero pages: everything before is intact. */
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, 3 * 4096 + 100), 0);
    CHECK_EQ(t.nchunks, 2);
    CHECK_EQ(read_all(&t, part, 32), nfull - 2);
    CHECK_EQ(t.damaged_chunks, 0);
    ms_trace_release(&t);

    /* A header alone. */
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, 4096), 0);
    CHECK_EQ(t.nchunks, 0);
    ms_trace_release(&t);
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, 50), MS_ETRUNC);
    tg_release(&g);
}

static void test_corrupt_record(void)
{
    struct tg g;
    size_t corrupt_at;
    build(&g, &corrupt_at);
    g.buf[corrupt_at] = 0x05; /* no such record type: the STACK record and the rest are lost */
    struct ms_trace t;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    struct rec_summary sum[32];
    size_t n = read_all(&t, sum, 32);
    /* Thread 1: PROCESS, MODULE, then chunk 1 (LOST, FREE); thread 2: 3 records. */
    CHECK_EQ(n, 7);
    CHECK_EQ(sum[0].type, MS_REC_PROCESS);
    CHECK_EQ(sum[1].type, MS_REC_MODULE);
    CHECK_EQ(sum[2].type, MS_REC_LOST);
    CHECK_EQ(sum[3].type, MS_REC_HEAP_FREE);
    CHECK_EQ(sum[4].type, MS_REC_MMAP_ALLOC);
    CHECK_EQ(t.damaged_chunks, 1);
    CHECK(strstr(t.warning, "malformed record") != NULL);
    ms_trace_release(&t);
    tg_release(&g);

    /* A damaged chunk header: the chunk is skipped with a warning, the others read. */
    build(&g, &corrupt_at);
    g.buf[4096 + 4096] ^= 0xff; /* thread 2's chunk magic */
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    CHECK_EQ(t.nchunks, 2);
    CHECK(strstr(t.warning, "damaged chunk header") != NULL);
    CHECK_EQ(read_all(&t, sum, 32), 16);
    ms_trace_release(&t);
    tg_release(&g);
}

static void test_refused(void)
{
    struct tg g;
    size_t corrupt_at;
    struct ms_trace t;
    build(&g, &corrupt_at);
    tg_header(&g)->version = MS_TRACE_MAX_VERSION + 1;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), MS_EVERSION);
    tg_header(&g)->version = MS_TRACE_VERSION;
    g.buf[0] = 'X';
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), MS_EFORMAT);
    g.buf[0] = 'M';
    tg_header(&g)->header_size = 512;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), MS_EFORMAT);
    tg_release(&g);
    CHECK(ms_trace_open(&t, "/nonexistent/memscope/1.0.mst") < 0);
}

/* ms_trace_cursor_next_heap(): heap events read the same as with ms_trace_cursor_next(), and
 * anything else (another record, a malformed heap record) is left for ms_trace_cursor_next(). */
static void test_next_heap(void)
{
    struct tg g;
    struct tg_chunk c;
    tg_init(&g, 4242, 1, MONO0, REAL0);
    tg_chunk_begin(&g, &c, 4242, 1, 0, MONO0, 4096);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_CALLOC, MONO0 + 3, 0x5000, 40, 9);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC, MONO0 + 300, 0x5008, 1u << 20, 70000);
    c.p = ms_enc_free(c.p, &c.st, MONO0 + 301, 0x5000);
    c.p = ms_enc_lost(c.p, &c.st, MONO0 + 302, 5);
    c.p = ms_enc_free(c.p, &c.st, MONO0 + 303, 0x5008);
    /* forms the agent never writes, for the slow path: a time delta of 2 in two bytes (address
     * 0x5000), then 0x5010 after 0x5000 (both aligned) without the ALIGNED flag */
    static const uint8_t odd[] = {MS_REC_HEAP_FREE, 0x82, 0x00, 0x0f /* zigzag(-8) */,
                                  MS_REC_HEAP_FREE, 0x01, 0x20 /* zigzag(16) */};
    memcpy(c.p, odd, sizeof odd);
    c.p += sizeof odd;
    *c.p++ = MS_REC_HEAP_ALLOC; /* cut short: type and a varint that never ends */
    *c.p++ = 0x85;
    tg_chunk_end(&g, &c);
    struct ms_trace t;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    struct ms_trace_cursor *cur = calloc(1, sizeof *cur);
    struct ms_heap_record h;
    struct ms_record r;
    ms_trace_cursor_init(cur, &t, 0);
    CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 1);
    CHECK(h.type == MS_REC_HEAP_ALLOC + MS_FN_CALLOC && h.ns == MONO0 + 3 && h.addr == 0x5000 &&
          h.size == 40 && h.stack_id == 9);
    CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 1); /* unaligned: the 1-byte unit form */
    CHECK(h.type == MS_REC_HEAP_ALLOC && h.ns == MONO0 + 300 && h.addr == 0x5008 &&
          h.size == (1u << 20) && h.stack_id == 70000);
    CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 1);
    CHECK(h.type == MS_REC_HEAP_FREE && h.ns == MONO0 + 301 && h.addr == 0x5000 && h.size == 0);
    CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 0); /* LOST: not for the fast path */
    CHECK_EQ(ms_trace_cursor_next(cur, &r), 1);
    CHECK(r.type == MS_REC_LOST && r.size == 5 && r.ns == MONO0 + 302);
    CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 1); /* the delta state went on through LOST */
    CHECK(h.type == MS_REC_HEAP_FREE && h.ns == MONO0 + 303 && h.addr == 0x5008);
    for (int i = 0; i < 2; i++) { /* not the agent's form: left for the slow path */
        CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 0);
        CHECK_EQ(ms_trace_cursor_next(cur, &r), 1);
        CHECK(r.type == MS_REC_HEAP_FREE && r.ns == MONO0 + 305 + (uint64_t)i &&
              r.addr == (i ? 0x5010 : 0x5000));
    }
    CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 0); /* malformed: left for the slow path */
    CHECK_EQ(ms_trace_cursor_next(cur, &r), MS_EFORMAT);
    CHECK_EQ(ms_trace_cursor_next_heap(cur, &h), 0);
    CHECK_EQ(ms_trace_cursor_next(cur, &r), 0);
    ms_trace_cursor_release(cur);
    free(cur);
    ms_trace_release(&t);
    tg_release(&g);
}

/* The CUDA records decode to their fields; an op outside MS_CU_* ends the chunk as damage. */
static void test_cuda_records(void)
{
    struct tg g;
    tg_init(&g, 77, 1, 1000, 1700000000000000000ull);
    struct tg_chunk c;
    tg_chunk_begin(&g, &c, 77, 1, 0, 1000, 4096);
    uint64_t mem[8] = {MS_CU_MEM_MAP, 2, 0x7f1000200000, 2 << 20, 5, 0x9001, 4096, 77};
    uint64_t om[6] = {MS_CU_MEM_ALLOC_ASYNC, 1, 1ull << 34, 6, 123, 1ull << 35};
    uint64_t fn[1] = {0x8003};
    uint64_t la[12] = {MS_CU_LAUNCH_KERNEL_EX, 1, 0x8003, 0x5001, 64, 2, 1, 512, 1, 1, 4096, 7};
    uint64_t bad[8] = {MS_CU_OP_COUNT, 1, 0x1000, 16, 0, 0, 0, 0};
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_MEM, 1010, mem, 8, NULL, 0);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_OOM, 1020, om, 6, NULL, 0);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_FUNC, 1030, fn, 1, "reduce_sum", 10);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_LAUNCH, 1040, la, 12, NULL, 0);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_CUDA_MEM, 1050, bad, 8, NULL, 0);
    c.p = ms_enc_free(c.p, &c.st, 1060, 0x5000);
    tg_chunk_end(&g, &c);
    struct ms_trace t;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    struct ms_trace_stream s;
    struct ms_record r;
    ms_trace_stream_init(&s, &t, 0);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.fn, MS_EXT_CUDA_MEM);
    CHECK_EQ(r.ns, 1010);
    CHECK_EQ(r.flags, MS_CU_MEM_MAP);
    CHECK_EQ(r.addr, 0x7f1000200000);
    CHECK_EQ(r.size, 2 << 20);
    CHECK_EQ(r.stack_id, 5);
    CHECK_EQ(r.depth, 8);
    CHECK_EQ(r.pcs[1], 2);
    CHECK_EQ(r.pcs[5], 0x9001);
    CHECK_EQ(r.pcs[6], 4096);
    CHECK_EQ(r.pcs[7], 77);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.fn, MS_EXT_CUDA_OOM);
    CHECK_EQ(r.flags, MS_CU_MEM_ALLOC_ASYNC);
    CHECK_EQ(r.size, 1ull << 34);
    CHECK_EQ(r.stack_id, 6);
    CHECK_EQ(r.pcs[4], 123);
    CHECK_EQ(r.pcs[5], 1ull << 35);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.fn, MS_EXT_CUDA_FUNC);
    CHECK_EQ(r.addr, 0x8003);
    CHECK_EQ(r.len1, 10);
    CHECK(!memcmp(r.str1, "reduce_sum", 10));
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.fn, MS_EXT_CUDA_LAUNCH);
    CHECK_EQ(r.ns, 1040);
    CHECK_EQ(r.stack_id, 7);
    CHECK_EQ(r.pcs[2], 0x8003);
    CHECK_EQ(r.pcs[4], 64);
    CHECK_EQ(r.pcs[10], 4096);
    CHECK(ms_trace_stream_next(&s, &r) != 1); /* op out of range: damage, the chunk ends */
    CHECK_EQ(t.damaged_chunks, 1);
    ms_trace_release(&t);
    tg_release(&g);
}

/* The address-space records: addr, size and (RESERVE, COMMIT) the stack; a stack id beyond 32
 * bits is damage. */
static void test_mmap_records(void)
{
    struct tg g;
    tg_init(&g, 78, 1, 1000, 1700000000000000000ull);
    struct tg_chunk c;
    tg_chunk_begin(&g, &c, 78, 1, 0, 1000, 4096);
    uint64_t res[3] = {0x7f0000000000, 512ull << 20, 3}, com[3] = {0x7f0000000000, 8 << 20, 4};
    uint64_t dec[2] = {0x7f0000400000, 4 << 20}, bad[3] = {0x1000, 4096, 1ull << 32};
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MMAP_RESERVE, 1010, res, 3, NULL, 0);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MMAP_COMMIT, 1020, com, 3, NULL, 0);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MMAP_DECOMMIT, 1030, dec, 2, NULL, 0);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_MMAP_COMMIT, 1040, bad, 3, NULL, 0);
    tg_chunk_end(&g, &c);
    struct ms_trace t;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    struct ms_trace_stream s;
    struct ms_record r;
    ms_trace_stream_init(&s, &t, 0);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.type, MS_REC_EXTENSION);
    CHECK_EQ(r.fn, MS_EXT_MMAP_RESERVE);
    CHECK_EQ(r.ns, 1010);
    CHECK_EQ(r.addr, 0x7f0000000000);
    CHECK_EQ(r.size, 512ull << 20);
    CHECK_EQ(r.stack_id, 3);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.fn, MS_EXT_MMAP_COMMIT);
    CHECK_EQ(r.size, 8 << 20);
    CHECK_EQ(r.stack_id, 4);
    CHECK_EQ(ms_trace_stream_next(&s, &r), 1);
    CHECK_EQ(r.fn, MS_EXT_MMAP_DECOMMIT);
    CHECK_EQ(r.ns, 1030);
    CHECK_EQ(r.addr, 0x7f0000400000);
    CHECK_EQ(r.size, 4 << 20);
    CHECK_EQ(r.stack_id, 0);
    CHECK(ms_trace_stream_next(&s, &r) != 1); /* stack id out of range: damage */
    CHECK_EQ(t.damaged_chunks, 1);
    ms_trace_release(&t);
    tg_release(&g);
}

int main(void)
{
    test_mmap_records();
    test_cuda_records();
    test_round_trip();
    test_next_heap();
    test_truncated();
    test_corrupt_record();
    test_refused();
    puts("test_trace: ok");
    return 0;
}
