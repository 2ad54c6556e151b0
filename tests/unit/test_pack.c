/* test_pack.c: packed traces (src/trace/pack.c): ms_pack_file() keeps every record of a raw
 * trace, field by field, and the reader returns them from the packed file; descriptions (stacks,
 * modules, process, Python frames and stacks, extensions too big for a packed chunk) may move to
 * the front of their thread's stream, every other record stays in order.
 *
 * Cases: a many-thread trace with every record kind and the allocator patterns the model
 * predicts (and those it does not); one thread long enough for several packed chunks; damage
 * (a truncated file, flipped bytes in a packed chunk) gives each thread a prefix of its records
 * and counts the damage; a damaged raw chunk is packed up to its damage; already packed and
 * non-trace inputs are refused. tracegen.h builds the raw traces with the agent's encoders. */
#include "tracegen.h"
#include "test.h"

#include "common/ms_error.h"
#include "trace/pack.h"
#include "trace/reader.h"

#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MONO0 1000000000ull
#define REAL0 1700000000000000000ull
#define EXT_REST_MAX 65536u /* pack.c: bigger extension payloads become descriptions */

/* ---- Building raw traces ------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Uniform in [0, n). */
static uint64_t rnd_below(uint64_t n)
{
    return rnd() % n;
}

/* One thread's writer: keeps offsets, not pointers, so several threads can write chunks that
 * interleave in the file (tg_chunk_begin may move g->buf). */
struct wr {
    struct tg *g;
    uint32_t tid, serial, seq;
    int open;
    size_t off, pos;  /* chunk header and write position in g->buf */
    uint32_t size;
    struct ms_enc_state st;
    uint64_t now;     /* the thread's clock: every record's ns is >= the previous one */
    uint64_t gap;     /* added to the next chunk's base_ns (0: the previous ns, as the agent) */
    uint32_t csize;   /* size of the chunks it starts */
    uint64_t bytes;   /* record bytes written so far */
};

static void wr_init(struct wr *w, struct tg *g, uint32_t tid, uint32_t serial, uint64_t now)
{
    memset(w, 0, sizeof *w);
    w->g = g;
    w->tid = tid;
    w->serial = serial;
    w->now = now;
    w->st.prev_ns = now;
    w->csize = 4096;
}

static void wr_publish(struct wr *w)
{
    uint32_t used = (uint32_t)(w->pos - w->off - MS_TRACE_CHUNK_HEADER_SIZE);
    memcpy(w->g->buf + w->off + 20, &used, 4);
    tg_header(w->g)->file_end = w->g->len;
}

/* Starts a new chunk of the thread (of at least `size` bytes) at the end of the file. */
static void wr_new_chunk(struct wr *w, uint32_t size)
{
    struct tg_chunk c;
    uint64_t base = w->st.prev_ns + w->gap;
    if (w->gap) {
        w->now += w->gap;
        w->gap = 0;
    }
    tg_chunk_begin(w->g, &c, w->tid, w->serial, w->seq++, base, size);
    w->off = c.off;
    w->pos = c.off + MS_TRACE_CHUNK_HEADER_SIZE;
    w->size = size;
    w->st = c.st;
    w->open = 1;
    wr_publish(w);
}

/* Returns where to write a record of at most n bytes, in a new chunk if this one is full. */
static uint8_t *wr_begin(struct wr *w, size_t n)
{
    if (!w->open || w->off + w->size - w->pos < n) {
        uint32_t size = w->csize;
        while (size < n + MS_TRACE_CHUNK_HEADER_SIZE)
            size *= 2;
        wr_new_chunk(w, size);
    }
    return w->g->buf + w->pos;
}

static void wr_commit(struct wr *w, uint8_t *p)
{
    w->bytes += (size_t)(p - w->g->buf) - w->pos;
    w->pos = (size_t)(p - w->g->buf);
    wr_publish(w);
}

/* Advances the thread's clock by dt and returns the new time. */
static uint64_t tick(struct wr *w, uint64_t dt)
{
    w->now += dt;
    return w->now;
}

static void w_alloc(struct wr *w, int fn, uint64_t dt, uint64_t addr, uint64_t size,
                    uint32_t stack)
{
    uint8_t *p = wr_begin(w, MS_REC_MAX_EVENT);
    wr_commit(w, ms_enc_alloc(p, &w->st, MS_REC_HEAP_ALLOC + fn, tick(w, dt), addr, size, stack));
}

static void w_free(struct wr *w, uint64_t dt, uint64_t addr)
{
    uint8_t *p = wr_begin(w, MS_REC_MAX_EVENT);
    wr_commit(w, ms_enc_free(p, &w->st, tick(w, dt), addr));
}

static void w_mmap(struct wr *w, int fn, uint64_t dt, uint64_t addr, uint64_t size, uint32_t stack)
{
    uint8_t *p = wr_begin(w, MS_REC_MAX_EVENT);
    wr_commit(w, ms_enc_alloc(p, &w->st, MS_REC_MMAP_ALLOC + fn, tick(w, dt), addr, size, stack));
}

static void w_munmap(struct wr *w, uint64_t dt, uint64_t addr, uint64_t size)
{
    uint8_t *p = wr_begin(w, MS_REC_MAX_EVENT);
    wr_commit(w, ms_enc_munmap(p, &w->st, tick(w, dt), addr, size));
}

static void w_lost(struct wr *w, uint64_t dt, uint64_t n)
{
    uint8_t *p = wr_begin(w, MS_REC_MAX_EVENT);
    wr_commit(w, ms_enc_lost(p, &w->st, tick(w, dt), n));
}

static void w_stack(struct wr *w, uint32_t id, const uint64_t *pcs, unsigned depth)
{
    uint8_t *p = wr_begin(w, ms_stack_record_max(depth));
    wr_commit(w, ms_enc_stack(p, id, pcs, depth));
}

static void w_module(struct wr *w, uint64_t bias, uint64_t lo, uint64_t hi, const char *path)
{
    uint8_t *p = wr_begin(w, ms_module_record_max(strlen(path)));
    wr_commit(w, ms_enc_module(p, bias, lo, hi, path, strlen(path)));
}

static void w_process(struct wr *w, uint64_t ppid, const char *exe, const char *cmd, size_t cmdlen)
{
    uint8_t *p = wr_begin(w, 1 + 3 * MS_VARINT_MAX + strlen(exe) + cmdlen);
    wr_commit(w, ms_enc_process(p, ppid, exe, strlen(exe), cmd, cmdlen));
}

/* A known extension: n integers then the string s (NULL: none), as the agent writes them. */
static void w_ext(struct wr *w, int ext, uint64_t dt, const uint64_t *v, int n, const char *s,
                  size_t slen)
{
    uint8_t *p = wr_begin(w, MS_EXT_MAX);
    wr_commit(w, ms_enc_ext(p, &w->st, ext, tick(w, dt), v, n, s, slen));
}

static void w_pystack(struct wr *w, uint64_t dt, uint32_t id, const uint32_t *frames,
                      unsigned depth)
{
    uint8_t *p = wr_begin(w, ms_pystack_record_max(depth));
    wr_commit(w, ms_enc_pystack(p, &w->st, tick(w, dt), id, frames, depth));
}

/* An extension record by hand (any type byte): type, varint length, dts, then `len` bytes. */
static void w_raw_ext(struct wr *w, int type, uint64_t dt, const uint8_t *bytes, size_t len)
{
    uint8_t *p = wr_begin(w, 1 + 2 * MS_VARINT_MAX + len);
    uint8_t ts[MS_VARINT_MAX];
    uint8_t *te = ms_put_ts(ts, &w->st, tick(w, dt));
    *p++ = (uint8_t)type;
    p = ms_put_varint(p, (size_t)(te - ts) + len);
    memcpy(p, ts, (size_t)(te - ts));
    p += te - ts;
    memcpy(p, bytes, len);
    wr_commit(w, p + len);
}

/* A simulated allocator for one thread: per-size free lists (LIFO) over a bump pointer, so that
 * reused addresses, blocks carved one after another and out-of-order frees all occur. */
#define SIM_CLASSES 64
#define SIM_LIVE_MAX 4096
struct sim {
    struct wr *w;
    uint64_t bump;
    uint64_t freel[SIM_CLASSES][64];
    int nfree[SIM_CLASSES];
    struct { uint64_t addr, size; } live[SIM_LIVE_MAX];
    int nlive;
    uint64_t events;
};

static const uint64_t sim_sizes[] = {8,  16, 24,  40,  64,   100,  128,  200,
                                     256, 500, 1000, 4000, 4096, 8000, 70000, 1u << 20};

static int sim_class(uint64_t size)
{
    for (int i = 0; i < (int)(sizeof sim_sizes / sizeof *sim_sizes); i++)
        if (sim_sizes[i] == size)
            return i;
    return SIM_CLASSES - 1;
}

static uint64_t sim_dt(void)
{
    uint64_t r = rnd_below(100);
    if (r < 10)
        return 0;
    if (r < 80)
        return 20 + rnd_below(200);
    if (r < 98)
        return 1000 + rnd_below(100000);
    return rnd_below(1ull << 40);
}

static uint32_t sim_stack(void)
{
    uint64_t r = rnd_below(100);
    return r < 60 ? 1 + (uint32_t)rnd_below(4) : r < 95 ? 5 + (uint32_t)rnd_below(40)
                                                         : (uint32_t)rnd_below(2000000);
}

static void sim_alloc(struct sim *s, int fn)
{
    uint64_t size = sim_sizes[rnd_below(rnd_below(4) ? 8 : sizeof sim_sizes / sizeof *sim_sizes)];
    int cl = sim_class(size);
    uint64_t addr;
    if (s->nfree[cl] && rnd_below(8)) {
        addr = s->freel[cl][--s->nfree[cl]];
    } else {
        addr = s->bump;
        s->bump += (size + 8 + 15) & ~15ull;
        if (rnd_below(50) == 0)
            s->bump += 8; /* an unaligned block now and then (memalign-style slack) */
    }
    w_alloc(s->w, fn, sim_dt(), addr, size, sim_stack());
    s->events++;
    if (s->nlive < SIM_LIVE_MAX) {
        s->live[s->nlive].addr = addr;
        s->live[s->nlive].size = size;
        s->nlive++;
    }
}

static void sim_free(struct sim *s)
{
    if (!s->nlive) {
        w_free(s->w, sim_dt(), 0x5000000000ull + 16 * rnd_below(1000)); /* never allocated here */
        s->events++;
        return;
    }
    /* mostly the newest blocks, sometimes any */
    int i = rnd_below(3) ? s->nlive - 1 - (int)rnd_below(s->nlive < 4 ? (uint64_t)s->nlive : 4)
                         : (int)rnd_below((uint64_t)s->nlive);
    uint64_t addr = s->live[i].addr, size = s->live[i].size;
    s->live[i] = s->live[--s->nlive];
    w_free(s->w, sim_dt(), addr);
    s->events++;
    int cl = sim_class(size);
    if (s->nfree[cl] < 64)
        s->freel[cl][s->nfree[cl]++] = addr;
}

/* n events of a mixed workload. */
static void sim_run(struct sim *s, long n)
{
    for (long k = 0; k < n; k++) {
        uint64_t r = rnd_below(100);
        if (r < 50)
            sim_alloc(s, r < 44 ? MS_FN_MALLOC : (int)rnd_below(MS_FN_HEAP_COUNT));
        else if (r < 95)
            sim_free(s);
        else if (r < 98 && s->nlive) { /* realloc: the old block freed, the new one allocated */
            sim_free(s);
            sim_alloc(s, rnd_below(2) ? MS_FN_REALLOC : MS_FN_REALLOCARRAY);
        } else { /* a block this thread never allocated, unaligned */
            w_free(s->w, sim_dt(), 0x6000000000ull + rnd_below(1u << 20));
            s->events++;
        }
    }
}

static void sim_init(struct sim *s, struct wr *w, uint64_t heap)
{
    memset(s, 0, sizeof *s);
    s->w = w;
    s->bump = heap;
}

/* The trace of case (a): seven threads, every record kind, chunks of threads interleaved. */
static void build_all_kinds(struct tg *g)
{
    static struct sim sim2, sim5;
    static const uint64_t pcs3[3] = {0x401234, 0x401100, 0x7f0000001000};
    static uint64_t deep[MS_TRACE_MAX_DEPTH];
    static const uint32_t pyframes[6] = {1, 10, 2, 20, 3, 4000000};
    static uint8_t big[70000];
    struct wr w1, w2, w3, w4, w5, w6, w7;
    tg_init(g, 4242, 17, MONO0, REAL0);
    tg_header(g)->max_depth = 128;
    tg_header(g)->image_seq = 3;
    tg_header(g)->lost_events = 5;
    tg_header(g)->stopped_errno = 28;
    for (unsigned i = 0; i < MS_TRACE_MAX_DEPTH; i++)
        deep[i] = 0x400000 + (uint64_t)((i * 7919u) % 65536u) * 16 - (i & 1) * 0x100000;
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 131 + (i >> 8));

    /* Thread 1: every kind of record, by hand. */
    wr_init(&w1, g, 4242, 1, MONO0);
    w_process(&w1, 17, "/usr/bin/prog", "prog\0--flag\0x y\0", 16);
    w_module(&w1, 0, 0x400000, 0x410000, "/usr/bin/prog");
    w_module(&w1, 0x7f0000000000, 0x7f0000001000, 0x7f0000200000, "/lib/libc.so.6");
    w_stack(&w1, 1, pcs3, 3);
    w_stack(&w1, 2, pcs3 + 2, 1);
    w_stack(&w1, 3, deep, MS_TRACE_MAX_DEPTH);
    w_stack(&w1, UINT32_MAX, pcs3, 2);
    for (int fn = 0; fn < MS_FN_HEAP_COUNT; fn++) /* each function, aligned */
        w_alloc(&w1, fn, 10, 0x10000 + 0x100 * (uint64_t)fn, 16 + (uint64_t)fn, 1);
    for (int fn = 0; fn < MS_FN_HEAP_COUNT; fn++) /* each function, unaligned */
        w_alloc(&w1, fn, 1, 0x20001 + 0x33 * (uint64_t)fn, 7 + (uint64_t)fn, 2);
    w_alloc(&w1, MS_FN_MALLOC, 0, 0, 1ull << 40, 1);          /* a failed malloc: address 0 */
    w_alloc(&w1, MS_FN_CALLOC, 0, 0, 0, 0);                   /* and again, size 0, no stack */
    w_alloc(&w1, MS_FN_MALLOC, 0, 0x30000, 0, 0);             /* malloc(0) */
    w_alloc(&w1, MS_FN_MALLOC, 5, 0x30020, UINT64_MAX, UINT32_MAX); /* extremes */
    w_free(&w1, 3, 0x10300);                                  /* own block, out of order */
    w_free(&w1, 3, 0x10000);                                  /* own block, oldest */
    w_free(&w1, 0, 0x20001 + 0x33 * 8);                       /* own unaligned, newest */
    w_alloc(&w1, MS_FN_MALLOC, 2, 0x10000, 16, 1);            /* same address again */
    w_alloc(&w1, MS_FN_MALLOC, 2, 0x10300, 19, 1);
    w_alloc(&w1, MS_FN_MALLOC, 2, 0x10000, 16, 1);            /* again, never freed between */
    w_free(&w1, 1, 0x10000);
    w_free(&w1, 1, 0x10000);                                  /* double free */
    w_free(&w1, 1, 0xdead0000);                               /* never allocated */
    w_free(&w1, 1, 0xdead0001);                               /* never allocated, unaligned */
    w_free(&w1, 1, 0xfffffffffffffff0ull);                    /* far away */
    w_free(&w1, 1, 0x10);                                     /* and back */
    w_free(&w1, 0, 0x10100);                                  /* realloc: free old ... */
    w_alloc(&w1, MS_FN_REALLOC, 0, 0x40000, 4096, 2);          /* ... new block elsewhere */
    w_free(&w1, 0, 0x40000);                                  /* realloc in place */
    w_alloc(&w1, MS_FN_REALLOC, 0, 0x40000, 8192, 2);
    w_free(&w1, 0, 0x40000);
    w_alloc(&w1, MS_FN_REALLOCARRAY, 0, 0x40010, 100, 1);
    w_alloc(&w1, MS_FN_MALLOC, 1, 0x40010 + 112, 100, 1);      /* carved right after */
    w_mmap(&w1, MS_FN_MMAP, 100, 0x7f1200000000, 1 << 20, 1);
    w_mmap(&w1, MS_FN_MREMAP, 100, 0x7f1300000000, 2 << 20, 0);
    w_munmap(&w1, 100, 0x7f1300000000, 2 << 20);
    w_munmap(&w1, 0, 0x1000, 4096);                           /* never mapped */
    w_lost(&w1, 0, 0);
    w_lost(&w1, 7, 123456789);
    {
        uint64_t v[3];
        w_ext(&w1, MS_EXT_STEP, 1, NULL, 0, NULL, 0);
        w_ext(&w1, MS_EXT_OWNER_PUSH, 1, NULL, 0, "weights", 7);
        w_ext(&w1, MS_EXT_OWNER_POP, 0, NULL, 0, NULL, 0);
        w_ext(&w1, MS_EXT_MARK, 2, NULL, 0, "", 0);
        w_ext(&w1, MS_EXT_RANGE_PUSH, 2, NULL, 0, "forward\0pass", 12);
        w_ext(&w1, MS_EXT_RANGE_POP, 2, NULL, 0, NULL, 0);
        v[0] = 0x10300, v[1] = 19, v[2] = MS_ACCESS_READ | MS_ACCESS_WRITE;
        w_ext(&w1, MS_EXT_ACCESS, 3, v, 3, "matmul", 6);
        v[0] = 0x7f1200000100, v[1] = 256, v[2] = 2;
        w_ext(&w1, MS_EXT_POOL_ALLOC, 3, v, 3, "pool", 4);
        w_ext(&w1, MS_EXT_POOL_FREE, 3, v, 1, "pool", 4);
        v[0] = 0x7f1200000000, v[1] = 1 << 20, v[2] = 0;
        w_ext(&w1, MS_EXT_POOL_RESERVE, 3, v, 3, "pool", 4);
        w_ext(&w1, MS_EXT_POOL_RELEASE, 3, v, 1, "pool", 4);
        v[0] = 1, v[1] = 10;
        w_ext(&w1, MS_EXT_PYFRAME, 4, v, 2, "a.py\0main", 9);  /* a description */
        v[0] = 2, v[1] = 20;
        w_ext(&w1, MS_EXT_PYFRAME, 0, v, 2, "b.py\0f", 6);
        v[0] = 3, v[1] = 3000000;
        w_ext(&w1, MS_EXT_PYFRAME, 0, v, 2, "c.py\0g", 6);
        w_pystack(&w1, 1, 1, pyframes, 3);                     /* a description */
        w_pystack(&w1, 0, UINT32_MAX, pyframes, 0);
        v[0] = 1;
        w_ext(&w1, MS_EXT_PYCALL, 5, v, 1, NULL, 0);
        w_ext(&w1, MS_EXT_PYRETURN, 5, NULL, 0, NULL, 0);
        w_ext(&w1, MS_EXT_MARK, 0, NULL, 0, (const char *)big, MS_TRACE_MAX_LABEL);
    }
    w_raw_ext(&w1, 0xf0, 9, (const uint8_t *)"\0ext", 4);      /* unknown types */
    w_raw_ext(&w1, 0x80, 0, (const uint8_t *)"", 0);
    w_raw_ext(&w1, 0xff, 1ull << 50, big, 300);                 /* with a very large dts */
    w_alloc(&w1, MS_FN_MALLOC, 0, 0x50000, 32, 1);
    w_raw_ext(&w1, 0xf1, 1, big, EXT_REST_MAX);                 /* the largest packed in-line */
    w_alloc(&w1, MS_FN_MALLOC, 1, 0x50040, 32, 1);
    w_raw_ext(&w1, 0xf2, 1, big, EXT_REST_MAX + 1);             /* too big: a description */
    w_alloc(&w1, MS_FN_MALLOC, 1, 0x50080, 32, 1);
    w_raw_ext(&w1, 0xf3, 2, big + 1, sizeof big - 1);
    w_free(&w1, 1, 0x50040);
    w_free(&w1, 1ull << 62, 0x50000);                            /* a very large time delta */
    w_free(&w1, 0, 0x50080);

    /* Thread 2: a long mixed workload, its chunks interleaved with threads 1 and 3. */
    wr_init(&w2, g, 4243, 2, MONO0 + 50);
    sim_init(&sim2, &w2, 0x555555560000ull);
    w_stack(&w2, 10, pcs3, 3);
    sim_run(&sim2, 3000);

    /* Thread 1 again: a chunk whose base_ns jumps ahead of its last record. */
    w1.gap = 1000000;
    wr_new_chunk(&w1, 4096);
    w_alloc(&w1, MS_FN_MALLOC, 0, 0x10000, 16, 1);              /* allocated in the last chunk */
    w_free(&w1, 0, 0x10300);                                    /* freed across chunks */
    w_free(&w1, 0, 0x10000);
    w1.open = 0;                                                /* an empty chunk, then more */
    wr_new_chunk(&w1, 4096);
    wr_new_chunk(&w1, 8192);
    w_alloc(&w1, MS_FN_VALLOC, 1, 0x7000, 4096, 2);
    w_stack(&w1, 4, deep + 10, 17);                              /* a description late */
    w_alloc(&w1, MS_FN_VALLOC, 1, 0x9000, 4096, 4);

    /* Thread 3: descriptions only. */
    wr_init(&w3, g, 4244, 3, MONO0 + 70);
    w_stack(&w3, 20, deep, 50);
    w_module(&w3, 0, 0x500000, 0x501000, "/tmp/with space.so");

    sim_run(&sim2, 3000);

    /* Thread 4: one LOST record. Thread 5: another workload. Thread 6: an empty chunk only.
     * Thread 7: frees only. */
    wr_init(&w4, g, 4245, 4, MONO0 + 90);
    w_lost(&w4, 0, 1);
    wr_init(&w5, g, 4246, 5, MONO0 + 100);
    sim_init(&sim5, &w5, 0x7f5500000000ull);
    sim_run(&sim5, 2000);
    wr_init(&w6, g, 4247, 6, MONO0);
    wr_new_chunk(&w6, 4096);
    wr_init(&w7, g, 4248, 7, MONO0);
    for (int i = 0; i < 100; i++)
        w_free(&w7, (uint64_t)i, 0x1000 * (uint64_t)(i % 7 + 1) + (uint64_t)(i & 1) * 8);
    sim_run(&sim2, 2000);
    sim_run(&sim5, 1000);
}

/* ---- Reading and comparing ---------------------------------------------------------------- */

/* A record flattened to bytes: every field, then the pcs, then the strings. */
struct blob {
    uint8_t *p;
    size_t n;
};

struct flat {
    int type, fn;
    uint32_t flags, stack_id, depth, npcs;
    uint64_t ns, addr, size, bias, lo, hi, ppid, len1, len2;
};

static int is_known_ext(int fn)
{
    return fn >= MS_EXT_STEP && fn <= MS_EXT_PYRETURN;
}

static int is_desc(const struct ms_record *r)
{
    if (r->type == MS_REC_STACK || r->type == MS_REC_MODULE || r->type == MS_REC_PROCESS)
        return 1;
    if (r->type != MS_REC_EXTENSION)
        return 0;
    return r->fn == MS_EXT_PYFRAME || r->fn == MS_EXT_PYSTACK ||
           (!is_known_ext(r->fn) && r->len1 > EXT_REST_MAX);
}

static uint32_t npcs_of(const struct ms_record *r)
{
    if (r->type == MS_REC_STACK)
        return r->depth;
    if (r->type == MS_REC_EXTENSION && r->fn == MS_EXT_PYSTACK)
        return 2 * r->depth;
    return 0;
}

static struct blob flatten(const struct ms_record *r)
{
    struct flat f;
    memset(&f, 0, sizeof f);
    f.type = r->type, f.fn = r->fn, f.flags = r->flags, f.stack_id = r->stack_id;
    f.depth = r->depth, f.npcs = npcs_of(r), f.ns = r->ns, f.addr = r->addr, f.size = r->size;
    f.bias = r->bias, f.lo = r->lo, f.hi = r->hi, f.ppid = r->ppid, f.len1 = r->len1;
    f.len2 = r->len2;
    struct blob b;
    b.n = sizeof f + f.npcs * 8 + r->len1 + r->len2;
    b.p = malloc(b.n);
    CHECK(b.p);
    memcpy(b.p, &f, sizeof f);
    if (f.npcs)
        memcpy(b.p + sizeof f, r->pcs, f.npcs * 8);
    if (r->len1)
        memcpy(b.p + sizeof f + f.npcs * 8, r->str1, r->len1);
    if (r->len2)
        memcpy(b.p + sizeof f + f.npcs * 8 + r->len1, r->str2, r->len2);
    return b;
}

static void describe(const char *what, const struct blob *b)
{
    struct flat f;
    memcpy(&f, b->p, sizeof f);
    fprintf(stderr,
            "  %s: type 0x%x fn 0x%x flags %u ns %llu addr 0x%llx size %llu stack %u depth %u "
            "bias 0x%llx lo 0x%llx hi 0x%llx ppid %llu len1 %llu len2 %llu\n",
            what, (unsigned)f.type, (unsigned)f.fn, f.flags, (unsigned long long)f.ns,
            (unsigned long long)f.addr, (unsigned long long)f.size, f.stack_id, f.depth,
            (unsigned long long)f.bias, (unsigned long long)f.lo, (unsigned long long)f.hi,
            (unsigned long long)f.ppid, (unsigned long long)f.len1, (unsigned long long)f.len2);
}

static int blob_cmp(const void *x, const void *y)
{
    const struct blob *a = x, *b = y;
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return memcmp(a->p, b->p, a->n);
}

/* One side of a comparison: a thread's stream, its events one at a time, its descriptions
 * gathered. */
struct side {
    struct ms_trace_stream s;
    int live;
    struct blob *desc;
    size_t ndesc, cap;
    uint64_t events;
};

/* Returns 1 with the next event record in *r, 0 at the end of the thread. */
static int side_next(struct side *sd, struct ms_record *r)
{
    if (!sd->live)
        return 0;
    while (ms_trace_stream_next(&sd->s, r) == 1) {
        if (!is_desc(r)) {
            sd->events++;
            return 1;
        }
        if (sd->ndesc == sd->cap) {
            sd->cap = sd->cap ? 2 * sd->cap : 64;
            sd->desc = realloc(sd->desc, sd->cap * sizeof *sd->desc);
            CHECK(sd->desc);
        }
        sd->desc[sd->ndesc++] = flatten(r);
    }
    sd->live = 0;
    return 0;
}

static void side_release(struct side *sd)
{
    for (size_t i = 0; i < sd->ndesc; i++)
        free(sd->desc[i].p);
    free(sd->desc);
    if (sd->live)
        ms_trace_cursor_release(&sd->s.cur);
}

/* Where each thread's stream starts. */
static size_t find_thread(const struct ms_trace *t, uint32_t serial)
{
    for (size_t k = 0; k < t->nchunks; k++)
        if (t->chunks[k].thread_serial == serial)
            return k;
    return SIZE_MAX;
}

/* What is being compared, printed when a comparison fails. */
static char cmp_ctx[160];

struct cmp_out {
    uint64_t events_a, events_b, desc_a, desc_b;
    uint32_t short_serial; /* a thread that lost records (prefix mode), 0 if none */
    int short_threads;     /* threads that lost events or descriptions */
};

/* Compares every thread of a (the raw trace) with the same thread of b. Exact mode: the same
 * events in the same order and the same multiset of descriptions, per thread. Prefix mode
 * (b damaged): each thread's events in b are the first ones of a, each equal to the one at the
 * same position, and its descriptions a sub-multiset of a's. Fails the test otherwise. */
static void compare(struct ms_trace *a, struct ms_trace *b, int prefix, struct cmp_out *o)
{
    memset(o, 0, sizeof *o);
    for (size_t k = 0; k < b->nchunks; k++) /* no thread in b that a lacks */
        CHECK(find_thread(a, b->chunks[k].thread_serial) != SIZE_MAX);
    static struct side sa, sb;
    for (size_t first = 0; first < a->nchunks;) {
        uint32_t serial = a->chunks[first].thread_serial;
        memset(&sa, 0, sizeof sa);
        memset(&sb, 0, sizeof sb);
        size_t next = ms_trace_stream_init(&sa.s, a, first);
        sa.live = 1;
        size_t fb = find_thread(b, serial);
        if (fb != SIZE_MAX) {
            ms_trace_stream_init(&sb.s, b, fb);
            sb.live = 1;
            CHECK_EQ(b->chunks[fb].tid, a->chunks[first].tid);
        }
        first = next;
        struct ms_record ra, rb;
        for (;;) {
            int ha = side_next(&sa, &ra), hb = side_next(&sb, &rb);
            if (!ha) {
                CHECK(!hb);
                break;
            }
            if (!hb) {
                if (!prefix) {
                    fprintf(stderr, "%s: thread %u: the packed trace ends after %llu events\n",
                            cmp_ctx, serial, (unsigned long long)sb.events);
                    CHECK(hb);
                }
                while (side_next(&sa, &ra))
                    ;
                break;
            }
            struct blob x = flatten(&ra), y = flatten(&rb);
            if (blob_cmp(&x, &y) != 0) {
                fprintf(stderr, "%s: thread %u: event %llu differs\n", cmp_ctx, serial,
                        (unsigned long long)sa.events - 1);
                describe("raw   ", &x);
                describe("packed", &y);
                CHECK(blob_cmp(&x, &y) == 0);
            }
            free(x.p);
            free(y.p);
        }
        if (sa.ndesc > 1)
            qsort(sa.desc, sa.ndesc, sizeof *sa.desc, blob_cmp);
        if (sb.ndesc > 1)
            qsort(sb.desc, sb.ndesc, sizeof *sb.desc, blob_cmp);
        if (!prefix) {
            CHECK_EQ(sb.ndesc, sa.ndesc);
            for (size_t i = 0; i < sa.ndesc; i++)
                if (blob_cmp(&sa.desc[i], &sb.desc[i]) != 0) {
                    fprintf(stderr, "%s: thread %u: description %zu of %zu differs\n", cmp_ctx,
                            serial, i, sa.ndesc);
                    describe("raw   ", &sa.desc[i]);
                    describe("packed", &sb.desc[i]);
                    CHECK(blob_cmp(&sa.desc[i], &sb.desc[i]) == 0);
                }
        } else { /* sub-multiset: a sorted merge */
            size_t i = 0;
            for (size_t j = 0; j < sb.ndesc; j++) {
                while (i < sa.ndesc && blob_cmp(&sa.desc[i], &sb.desc[j]) < 0)
                    i++;
                if (i == sa.ndesc || blob_cmp(&sa.desc[i], &sb.desc[j]) != 0) {
                    describe("packed description not in the raw trace", &sb.desc[j]);
                    CHECK(i < sa.ndesc && blob_cmp(&sa.desc[i], &sb.desc[j]) == 0);
                }
                i++;
            }
        }
        if (sb.events < sa.events || sb.ndesc < sa.ndesc) {
            o->short_serial = serial;
            o->short_threads++;
        }
        o->events_a += sa.events;
        o->events_b += sb.events;
        o->desc_a += sa.ndesc;
        o->desc_b += sb.ndesc;
        side_release(&sa);
        side_release(&sb);
    }
}

/* ---- Files -------------------------------------------------------------------------------- */

static char tmp_dir[] = "/tmp/memscope-test-pack-XXXXXX";

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", tmp_dir, name);
    return p;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0);
    rewind(f);
    uint8_t *p = malloc((size_t)n + 1);
    CHECK(p);
    CHECK(fread(p, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return p;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    CHECK(stat(path, &st) == 0);
    return (uint64_t)st.st_size;
}

/* Records in a trace: all of them, and the descriptions among them. */
static void count_records(struct ms_trace *t, uint64_t *records, uint64_t *descs)
{
    static struct ms_trace_stream s;
    struct ms_record r;
    *records = *descs = 0;
    for (size_t first = 0; first < t->nchunks;) {
        first = ms_trace_stream_init(&s, t, first);
        while (ms_trace_stream_next(&s, &r) == 1) {
            ++*records;
            *descs += (uint64_t)is_desc(&r);
        }
    }
}

/* Packs raw (written to raw_path) into packed_path and checks the header, the statistics and
 * that every record reads back. */
static void pack_and_compare(const struct tg *raw, const char *raw_path, const char *packed_path,
                             int workers, struct ms_pack_stats *st)
{
    snprintf(cmp_ctx, sizeof cmp_ctx, "%s packed into %s", raw_path, packed_path);
    CHECK_EQ(tg_write(raw, raw_path), 0);
    CHECK_EQ(ms_pack_file(raw_path, packed_path, workers, st), 0);
    struct ms_trace a, b;
    CHECK_EQ(ms_trace_open(&a, raw_path), 0);
    CHECK_EQ(ms_trace_open(&b, packed_path), 0);
    CHECK_STREQ(a.warning, "");
    CHECK_STREQ(b.warning, "");
    CHECK_EQ(b.skipped_bytes, 0);
    /* The header: version 2, the raw header's fields kept. */
    CHECK_EQ(b.hdr.version, MS_TRACE_PACKED_VERSION);
    CHECK_EQ(b.hdr.header_size, MS_TRACE_V2_HEADER_SIZE);
    CHECK_EQ(b.hdr.chunk_align, 1);
    CHECK_EQ(b.hdr.flags, a.hdr.flags | MS_TRACE_F_PACKED);
    CHECK_EQ(b.hdr.pid, a.hdr.pid);
    CHECK_EQ(b.hdr.ppid, a.hdr.ppid);
    CHECK(b.hdr.start_mono_ns == a.hdr.start_mono_ns);
    CHECK(b.hdr.start_real_ns == a.hdr.start_real_ns);
    CHECK_EQ(b.hdr.max_depth, a.hdr.max_depth);
    CHECK_EQ(b.hdr.image_seq, a.hdr.image_seq);
    CHECK_EQ(b.hdr.lost_events, a.hdr.lost_events);
    CHECK_EQ(b.hdr.stopped_errno, a.hdr.stopped_errno);
    CHECK_EQ(b.hdr.file_end, file_size(packed_path));
    /* Every chunk is a description chunk or a packed chunk within the caps. */
    for (size_t k = 0; k < b.nchunks; k++)
        CHECK(b.chunks[k].packed ? b.chunks[k].used <= MS_PACK_MAX_RAW
                                 : b.chunks[k].used == b.chunks[k].size - 32);

    struct cmp_out o;
    compare(&a, &b, 0, &o);
    CHECK_EQ(a.damaged_chunks, 0);
    CHECK_EQ(b.damaged_chunks, 0);
    uint64_t records, descs;
    count_records(&a, &records, &descs);
    CHECK_EQ(records, o.events_a + o.desc_a);
    CHECK_EQ(descs, o.desc_a);
    CHECK_EQ(st->records, records);
    CHECK_EQ(st->events, records - descs);
    CHECK_EQ(st->in_bytes, file_size(raw_path));
    CHECK_EQ(st->out_bytes, file_size(packed_path));
    CHECK_EQ(st->damaged, 0);
    ms_trace_release(&a);
    ms_trace_release(&b);
}

/* ---- The cases ---------------------------------------------------------------------------- */

/* (a) Every record kind, seven threads, packed with one worker and with four: the same bytes. */
static void test_all_kinds(void)
{
    struct tg g;
    build_all_kinds(&g);
    struct ms_pack_stats st;
    pack_and_compare(&g, tmp_path("all.mst"), tmp_path("all.pk"), 1, &st);
    CHECK(st.events > 10000);
    CHECK(st.out_bytes < st.in_bytes);

    /* The threads of thread 1 and 2 each span several raw chunks, interleaved. */
    struct ms_trace t;
    CHECK_EQ(ms_trace_open(&t, tmp_path("all.mst")), 0);
    size_t t1 = 0, t2 = 0;
    for (size_t k = 0; k < t.nchunks; k++) {
        t1 += t.chunks[k].thread_serial == 1;
        t2 += t.chunks[k].thread_serial == 2;
    }
    CHECK(t1 >= 5 && t2 >= 5);
    ms_trace_release(&t);

    /* The packed file: per thread, description chunks first (seq 0..), then packed ones. */
    CHECK_EQ(ms_trace_open(&t, tmp_path("all.pk")), 0);
    for (size_t k = 0; k + 1 < t.nchunks; k++)
        if (t.chunks[k].thread_serial == t.chunks[k + 1].thread_serial) {
            CHECK_EQ(t.chunks[k + 1].seq, t.chunks[k].seq + 1);
            CHECK(t.chunks[k].packed <= t.chunks[k + 1].packed);
        }
    size_t t3 = find_thread(&t, 3), t6 = find_thread(&t, 6);
    CHECK(t3 != SIZE_MAX && !t.chunks[t3].packed); /* descriptions only: no packed chunk */
    CHECK_EQ(t6, SIZE_MAX);                         /* no records at all: no chunk */
    ms_trace_release(&t);

    struct ms_pack_stats st4;
    CHECK_EQ(ms_pack_file(tmp_path("all.mst"), tmp_path("all4.pk"), 4, &st4), 0);
    size_t n1, n4;
    uint8_t *p1 = read_file(tmp_path("all.pk"), &n1), *p4 = read_file(tmp_path("all4.pk"), &n4);
    CHECK_EQ(n1, n4);
    CHECK(memcmp(p1, p4, n1) == 0);
    CHECK_EQ(st4.events, st.events);
    free(p1);
    free(p4);
    tg_release(&g);
}

/* (b) One thread long enough for at least three packed chunks (each decodes to at most
 * MS_PACK_MAX_RAW bytes). */
static void test_many_chunks(void)
{
    struct tg g;
    static struct sim sim;
    struct wr w;
    static const uint64_t pcs[2] = {0x401000, 0x402000};
    tg_init(&g, 77, 1, MONO0, REAL0);
    wr_init(&w, &g, 77, 1, MONO0);
    w_stack(&w, 1, pcs, 2);
    sim_init(&sim, &w, 0x555555560000ull);
    w.csize = 1u << 20; /* raw chunks of 1 MiB, as a busy agent thread has */
    while (w.bytes < 5 * (uint64_t)MS_PACK_MAX_RAW / 2)
        sim_run(&sim, 1000);
    struct ms_pack_stats st;
    pack_and_compare(&g, tmp_path("long.mst"), tmp_path("long.pk"), 2, &st);
    CHECK_EQ(st.events, sim.events);
    CHECK(st.out_bytes < st.in_bytes / 2);
    struct ms_trace t;
    CHECK_EQ(ms_trace_open(&t, tmp_path("long.pk")), 0);
    size_t packed = 0;
    uint64_t raw = 0;
    for (size_t k = 0; k < t.nchunks; k++)
        if (t.chunks[k].packed) {
            packed++;
            raw += t.chunks[k].used;
            CHECK(t.chunks[k].used <= MS_PACK_MAX_RAW);
        }
    CHECK(packed >= 3);
    CHECK(raw > 2 * (uint64_t)MS_PACK_MAX_RAW);
    ms_trace_release(&t);
    tg_release(&g);
}

/* A mid-sized trace for the damage cases: three threads; thread 3 is the last in the file. */
static void build_damage(struct tg *g)
{
    static struct sim s1, s2, s3;
    static const uint64_t pcs[2] = {0x401000, 0x402000};
    struct wr w1, w2, w3;
    tg_init(g, 99, 1, MONO0, REAL0);
    wr_init(&w1, g, 99, 1, MONO0);
    w_process(&w1, 1, "/bin/d", "d\0", 2);
    w_stack(&w1, 1, pcs, 2);
    sim_init(&s1, &w1, 0x10000000);
    sim_run(&s1, 4000);
    wr_init(&w2, g, 100, 2, MONO0);
    w_stack(&w2, 2, pcs, 1);
    sim_init(&s2, &w2, 0x20000000);
    sim_run(&s2, 4000);
    wr_init(&w3, g, 101, 3, MONO0);
    w_stack(&w3, 3, pcs + 1, 1);
    sim_init(&s3, &w3, 0x30000000);
    sim_run(&s3, 4000);
    sim_run(&s1, 1000);
}

/* Opens len bytes of a damaged packed trace and checks it against the raw one: every thread a
 * prefix of its records; returns the comparison. */
static void check_damaged(struct ms_trace *raw, const uint8_t *buf, size_t len,
                          struct cmp_out *o, struct ms_trace *out)
{
    CHECK_EQ(ms_trace_open_mem(out, buf, len), 0);
    compare(raw, out, 1, o);
}

/* (c) Damage: a packed trace cut anywhere, and bytes flipped in a packed chunk. */
static void test_damage(void)
{
    struct tg g;
    build_damage(&g);
    struct ms_pack_stats st;
    pack_and_compare(&g, tmp_path("dmg.mst"), tmp_path("dmg.pk"), 1, &st);
    struct ms_trace raw, pk, d;
    CHECK_EQ(ms_trace_open(&raw, tmp_path("dmg.mst")), 0);
    CHECK_EQ(ms_trace_open(&pk, tmp_path("dmg.pk")), 0);
    size_t len;
    uint8_t *file = read_file(tmp_path("dmg.pk"), &len);
    uint8_t *buf = malloc(len);
    CHECK(buf);

    /* The last chunk in the file is thread 3's packed chunk. */
    size_t last = 0;
    for (size_t k = 0; k < pk.nchunks; k++)
        if (pk.chunks[k].offset > pk.chunks[last].offset)
            last = k;
    const struct ms_trace_chunk_info *lc = &pk.chunks[last];
    CHECK(lc->packed);
    CHECK_EQ(lc->thread_serial, 3);
    CHECK_EQ(lc->offset + lc->size, len);
    CHECK(lc->size > 1000);

    /* Cut inside its payload, from just after the header to just before the end. */
    struct cmp_out o;
    int cuts = 0, short_cuts = 0;
    for (uint64_t k = 0; k < lc->size - 32; k += 1 + (k < 64 ? 0 : k / 8)) {
        size_t cut = lc->offset + 32 + k;
        memcpy(buf, file, cut);
        snprintf(cmp_ctx, sizeof cmp_ctx, "cut %llu bytes into the payload of the last chunk",
                 (unsigned long long)k);
        check_damaged(&raw, buf, cut, &o, &d);
        CHECK(d.warning[0]); /* "trace truncated inside a chunk" */
        if (o.events_b < o.events_a) {
            CHECK_EQ(o.short_threads, 1);
            CHECK_EQ(o.short_serial, 3);
            CHECK_EQ(o.desc_b, o.desc_a);
            CHECK_EQ(d.damaged_chunks, 1);
            short_cuts++;
        } else {
            CHECK(d.damaged_chunks <= 1);
        }
        cuts++;
        ms_trace_release(&d);
    }
    CHECK(short_cuts >= cuts - 2);
    /* Cut anywhere in the file (description chunks included): prefixes, never a crash, and a
     * warning unless the cut falls between two chunks. */
    for (size_t cut = MS_TRACE_V2_HEADER_SIZE; cut < len; cut += len / 150 + 1) {
        memcpy(buf, file, cut);
        snprintf(cmp_ctx, sizeof cmp_ctx, "the packed file cut at byte %zu", cut);
        check_damaged(&raw, buf, cut, &o, &d);
        int between = 0;
        for (size_t k = 0; k < pk.nchunks; k++)
            between |= pk.chunks[k].offset == cut;
        CHECK(between || d.warning[0]);
        ms_trace_release(&d);
    }

    /* Flipped bytes inside a packed chunk of each thread: that thread reads a prefix of its
     * records, then the chunk counts as damaged; the other threads are intact. */
    int flips = 0, detected = 0;
    for (size_t k = 0; k < pk.nchunks; k++) {
        const struct ms_trace_chunk_info *ci = &pk.chunks[k];
        if (!ci->packed)
            continue;
        size_t payload = ci->size - 32;
        for (int i = 0; i < 12; i++) {
            size_t at = ci->offset + 32 + (i < 4 ? (size_t)i : (payload * (size_t)i) / 12);
            for (int mask = 1; mask <= 0x80; mask <<= 3) {
                memcpy(buf, file, len);
                buf[at] ^= (uint8_t)mask;
                snprintf(cmp_ctx, sizeof cmp_ctx,
                         "byte %zu of a %u-byte packed chunk (thread %u) xor 0x%02x",
                         (size_t)(at - ci->offset), ci->size, ci->thread_serial, mask);
                check_damaged(&raw, buf, len, &o, &d);
                CHECK(o.short_threads <= 1);
                if (o.short_threads) {
                    CHECK_EQ(o.short_serial, ci->thread_serial);
                    CHECK_EQ(d.damaged_chunks, 1);
                    CHECK(d.warning[0]);
                }
                CHECK(d.damaged_chunks <= 1);
                detected += (int)d.damaged_chunks;
                flips++;
                ms_trace_release(&d);
            }
        }
    }
    CHECK(flips >= 3 * 12 * 3);
    CHECK(detected >= flips / 2); /* the flips hit the data, and the damage is seen */

    free(buf);
    free(file);
    ms_trace_release(&pk);
    ms_trace_release(&raw);
    tg_release(&g);
}

/* A raw trace with a damaged chunk: packed up to the damage, the damage counted. */
static void test_damaged_raw(void)
{
    struct tg g;
    build_damage(&g);
    /* a malformed record (type byte 0x07) in the middle of thread 2's first chunk */
    struct ms_trace t;
    CHECK_EQ(ms_trace_open_mem(&t, g.buf, g.len), 0);
    size_t k2 = find_thread(&t, 2);
    CHECK(k2 != SIZE_MAX && t.chunks[k2].used > 200);
    size_t at = t.chunks[k2].offset + 32 + t.chunks[k2].used / 2;
    ms_trace_release(&t);
    /* find a record boundary at or after `at` by walking the chunk */
    {
        struct ms_trace tt;
        CHECK_EQ(ms_trace_open_mem(&tt, g.buf, g.len), 0);
        struct ms_trace_cursor c;
        memset(&c, 0, sizeof c);
        ms_trace_cursor_init(&c, &tt, find_thread(&tt, 2));
        struct ms_record r;
        while ((size_t)(c.p - g.buf) < at)
            CHECK_EQ(ms_trace_cursor_next(&c, &r), 1);
        at = (size_t)(c.p - g.buf);
        ms_trace_cursor_release(&c);
        ms_trace_release(&tt);
    }
    g.buf[at] = 0x07;
    CHECK_EQ(tg_write(&g, tmp_path("dmgraw.mst")), 0);
    struct ms_pack_stats st;
    CHECK_EQ(ms_pack_file(tmp_path("dmgraw.mst"), tmp_path("dmgraw.pk"), 2, &st), 0);
    CHECK_EQ(st.damaged, 1);
    struct ms_trace a, b;
    CHECK_EQ(ms_trace_open(&a, tmp_path("dmgraw.mst")), 0);
    CHECK_EQ(ms_trace_open(&b, tmp_path("dmgraw.pk")), 0);
    struct cmp_out o;
    compare(&a, &b, 0, &o); /* the same records: the raw reader stops at the damage too */
    CHECK_EQ(a.damaged_chunks, 1);
    CHECK_EQ(b.damaged_chunks, 0);
    CHECK_EQ(st.records, o.events_a + o.desc_a);
    ms_trace_release(&a);
    ms_trace_release(&b);
    tg_release(&g);
}

/* A packed trace cut inside its last chunk's header: that chunk is lost, and the reader says so
 * (a packed file is written whole, so bytes after the last whole chunk are damage). */
static void test_truncated_header(void)
{
    struct tg g;
    build_damage(&g);
    struct ms_pack_stats st;
    pack_and_compare(&g, tmp_path("hdr.mst"), tmp_path("hdr.pk"), 1, &st);
    struct ms_trace raw, pk, d;
    CHECK_EQ(ms_trace_open(&raw, tmp_path("hdr.mst")), 0);
    CHECK_EQ(ms_trace_open(&pk, tmp_path("hdr.pk")), 0);
    size_t len;
    uint8_t *file = read_file(tmp_path("hdr.pk"), &len);
    size_t last = 0;
    for (size_t k = 0; k < pk.nchunks; k++)
        if (pk.chunks[k].offset > pk.chunks[last].offset)
            last = k;
    const struct ms_trace_chunk_info *lc = &pk.chunks[last];
    struct cmp_out o;
    for (size_t k = 1; k < 32; k++) {
        size_t cut = lc->offset + k;
        check_damaged(&raw, file, cut, &o, &d);
        CHECK_EQ(o.short_threads, 1);
        CHECK_EQ(o.short_serial, 3);
        if (!d.warning[0]) {
            fprintf(stderr, "a cut %zu bytes into the last chunk's header is not reported\n", k);
            CHECK(d.warning[0]);
        }
        ms_trace_release(&d);
    }
    free(file);
    ms_trace_release(&pk);
    ms_trace_release(&raw);
    tg_release(&g);
}

/* Events (not descriptions) of one thread of t. */
static uint64_t thread_events(struct ms_trace *t, uint32_t serial)
{
    static struct ms_trace_stream s;
    struct ms_record r;
    uint64_t n = 0;
    size_t first = find_thread(t, serial);
    if (first == SIZE_MAX)
        return 0;
    ms_trace_stream_init(&s, t, first);
    while (ms_trace_stream_next(&s, &r) == 1)
        n += !is_desc(&r);
    return n;
}

/* A packed chunk cut in its middle still gives the records before the cut: at least a quarter
 * of its thread's events (about half are before the cut), then the damage. The thread has
 * 60000 events, all in one packed chunk, the last in the file. */
static void test_truncated_middle(void)
{
    struct tg g;
    static struct sim s1, s2;
    static const uint64_t pcs[2] = {0x401000, 0x402000};
    struct wr w1, w2;
    tg_init(&g, 98, 1, MONO0, REAL0);
    wr_init(&w1, &g, 98, 1, MONO0);
    w_stack(&w1, 1, pcs, 2);
    sim_init(&s1, &w1, 0x10000000);
    sim_run(&s1, 1000);
    wr_init(&w2, &g, 99, 2, MONO0);
    w2.csize = 1u << 20;
    sim_init(&s2, &w2, 0x20000000);
    sim_run(&s2, 60000);
    CHECK(w2.bytes < MS_PACK_MAX_RAW / 2);
    struct ms_pack_stats st;
    pack_and_compare(&g, tmp_path("mid.mst"), tmp_path("mid.pk"), 1, &st);
    struct ms_trace raw, pk, d;
    CHECK_EQ(ms_trace_open(&raw, tmp_path("mid.mst")), 0);
    CHECK_EQ(ms_trace_open(&pk, tmp_path("mid.pk")), 0);
    size_t len;
    uint8_t *file = read_file(tmp_path("mid.pk"), &len);
    size_t last = 0;
    for (size_t k = 0; k < pk.nchunks; k++)
        if (pk.chunks[k].offset > pk.chunks[last].offset)
            last = k;
    CHECK(pk.chunks[last].packed);
    CHECK_EQ(pk.chunks[last].thread_serial, 2);
    CHECK_EQ(pk.chunks[last].seq, 0); /* its only chunk */
    uint64_t all = thread_events(&raw, 2);
    CHECK(all >= 60000);

    size_t cut = pk.chunks[last].offset + pk.chunks[last].size / 2;
    struct cmp_out o;
    snprintf(cmp_ctx, sizeof cmp_ctx, "a packed chunk cut at its middle");
    check_damaged(&raw, file, cut, &o, &d);
    CHECK_EQ(d.damaged_chunks, 1);
    CHECK_EQ(o.short_threads, 1);
    CHECK_EQ(o.short_serial, 2);
    uint64_t kept = thread_events(&d, 2);
    if (kept < all / 4 || kept >= all) {
        fprintf(stderr, "a cut at the middle of a %u-byte packed chunk kept %llu of its %llu "
                "events\n", pk.chunks[last].size, (unsigned long long)kept,
                (unsigned long long)all);
        CHECK(kept >= all / 4 && kept < all);
    }
    ms_trace_release(&d);
    free(file);
    ms_trace_release(&pk);
    ms_trace_release(&raw);
    tg_release(&g);
}

/* (d) Inputs ms_pack_file refuses. */
static void test_refused(void)
{
    struct tg g;
    build_damage(&g);
    CHECK_EQ(tg_write(&g, tmp_path("ref.mst")), 0);
    struct ms_pack_stats st;
    CHECK_EQ(ms_pack_file(tmp_path("ref.mst"), tmp_path("ref.pk"), 1, &st), 0);
    size_t n1, n2;
    uint8_t *before = read_file(tmp_path("ref.pk"), &n1);
    /* already packed */
    CHECK_EQ(ms_pack_file(tmp_path("ref.pk"), tmp_path("ref2.pk"), 1, &st), MS_EINVAL);
    uint8_t *after = read_file(tmp_path("ref.pk"), &n2);
    CHECK(n1 == n2 && memcmp(before, after, n1) == 0); /* the input is untouched */
    free(before);
    free(after);
    /* not a trace, too short, missing */
    FILE *f = fopen(tmp_path("text"), "w");
    CHECK(f);
    for (int i = 0; i < 20; i++)
        fputs("this is not a trace\n", f);
    fclose(f);
    CHECK_EQ(ms_pack_file(tmp_path("text"), tmp_path("text.pk"), 1, &st), MS_EFORMAT);
    f = fopen(tmp_path("short"), "w");
    CHECK(f);
    fputs("MSTRACE", f);
    fclose(f);
    CHECK_EQ(ms_pack_file(tmp_path("short"), tmp_path("short.pk"), 1, &st), MS_ETRUNC);
    CHECK_EQ(ms_pack_file(tmp_path("missing"), tmp_path("missing.pk"), 1, &st), -ENOENT);
    /* a newer version than the reader knows */
    tg_header(&g)->version = MS_TRACE_PACKED_VERSION + 1;
    CHECK_EQ(tg_write(&g, tmp_path("new.mst")), 0);
    CHECK_EQ(ms_pack_file(tmp_path("new.mst"), tmp_path("new.pk"), 1, &st), MS_EVERSION);
    tg_release(&g);
}

/* A raw trace with a free of address 0 (the agent never writes one, but version 1 allows it):
 * packed losslessly like any other free of a block the thread did not allocate. */
static void test_free_null(void)
{
    struct tg g;
    struct wr w;
    tg_init(&g, 5, 1, MONO0, REAL0);
    wr_init(&w, &g, 5, 1, MONO0);
    w_alloc(&w, MS_FN_MALLOC, 1, 0x1000, 16, 0);
    w_alloc(&w, MS_FN_MALLOC, 1, 0x2000, 16, 0);
    w_free(&w, 1, 0);
    w_free(&w, 1, 0x1000);
    w_alloc(&w, MS_FN_MALLOC, 1, 0, 16, 0);
    w_free(&w, 1, 0);
    w_free(&w, 1, 0x2000);
    struct ms_pack_stats st;
    pack_and_compare(&g, tmp_path("null.mst"), tmp_path("null.pk"), 1, &st);
    CHECK_EQ(st.events, 7);
    tg_release(&g);
}

/* A heap record by hand: type byte, then varints each padded to at least pad[i] bytes (a form
 * the agent never writes: longer than needed), the delta state moved as a reader moves it. */
static void w_odd_heap(struct wr *w, int type, const uint64_t *v, const int *pad, int n)
{
    uint8_t *p = wr_begin(w, 1 + 4 * MS_VARINT_MAX), *q = p + 1;
    *p = (uint8_t)type;
    for (int i = 0; i < n; i++) {
        uint8_t *e = ms_put_varint(q, v[i]);
        while (e - q < pad[i]) { /* same value, one more byte: 0x80 on the last, then 0x00 */
            e[-1] |= 0x80;
            *e++ = 0;
        }
        q = e;
    }
    w->st.prev_ns += v[0];
    w->now = w->st.prev_ns;
    w->st.prev_addr += (uint64_t)ms_unzigzag(v[1]) * (type & MS_REC_F_ALIGNED16 ? 16 : 1);
    wr_commit(w, q);
}

/* Heap records in forms the agent does not write (longer varints than needed, the ALIGNED flag
 * left off aligned addresses) pack and read back as the same records: the packer counts their
 * decoded length itself instead of taking the raw one (ms_trace_cursor_next_heap() leaves them
 * to the slow path). A wrong count would cut the chunk's last segment. */
static void test_odd_forms(void)
{
    struct tg g;
    struct wr w;
    tg_init(&g, 6, 1, MONO0, REAL0);
    wr_init(&w, &g, 6, 1, MONO0);
    for (int round = 0; round < 3000; round++) {
        uint64_t a = 0x100000 + 64 * (uint64_t)(round % 50);
        w_alloc(&w, MS_FN_MALLOC, 5, a, 40, 2);
        int k = round % 4;
        if (k == 0) { /* a free with a 3-byte time delta of value 7 */
            uint64_t v[2] = {7, ms_zigzag(0)};
            int pad[2] = {3, 1};
            w_odd_heap(&w, MS_REC_HEAP_FREE, v, pad, 2);
        } else if (k == 1) { /* an aligned free without the flag: the delta in bytes */
            uint64_t v[2] = {2, ms_zigzag(0)};
            int pad[2] = {1, 1};
            w_odd_heap(&w, MS_REC_HEAP_FREE, v, pad, 2);
        } else if (k == 2) { /* an allocation with a 2-byte size and stack id */
            uint64_t v[4] = {1, ms_zigzag(4096), 24, 3};
            int pad[4] = {1, 2, 2, 2};
            w_odd_heap(&w, MS_REC_HEAP_ALLOC + MS_FN_CALLOC, v, pad, 4);
            w_free(&w, 1, a + 4096);
            w_free(&w, 1, a);
        } else {
            w_free(&w, 3, a);
        }
    }
    struct ms_pack_stats st;
    pack_and_compare(&g, tmp_path("odd.mst"), tmp_path("odd.pk"), 1, &st);
    CHECK_EQ(st.events, 3000 * 2 + 750 * 2);
    CHECK_EQ(st.damaged, 0);
    tg_release(&g);
}

/* Removes the temporary files (kept when MS_TEST_KEEP is set, for a look after a failure). */
static void cleanup(void)
{
    if (getenv("MS_TEST_KEEP")) {
        fprintf(stderr, "files kept in %s\n", tmp_dir);
        return;
    }
    static const char *const names[] = {"all.mst", "all.pk",    "all4.pk", "long.mst",
                                        "long.pk", "dmg.mst",   "dmg.pk",  "dmgraw.mst",
                                        "dmgraw.pk", "ref.mst", "ref.pk",  "ref2.pk",
                                        "text",    "text.pk",   "short",   "short.pk",
                                        "new.mst", "new.pk",    "null.mst", "null.pk",
                                        "missing.pk", "mid.mst", "mid.pk", "hdr.mst", "hdr.pk",
                                        "odd.mst", "odd.pk"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        unlink(tmp_path(names[i]));
    rmdir(tmp_dir);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs each test (or the one named by argv[1]) in a child process, so that one failure does not
 * hide the others; exits 1 if any failed. */
int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } tests[] = {
        {"all_kinds", test_all_kinds},     {"many_chunks", test_many_chunks},
        {"damage", test_damage},           {"damaged_raw", test_damaged_raw},
        {"refused", test_refused},         {"truncated_middle", test_truncated_middle},
        {"truncated_header", test_truncated_header},
        {"free_null", test_free_null},     {"odd_forms", test_odd_forms},
    };
    int failed = 0, ran = 0;
    CHECK(mkdtemp(tmp_dir));
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name) != 0)
            continue;
        double t0 = now_s();
        fflush(stdout);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            rng_state = 0x9e3779b97f4a7c15ull;
            tests[i].fn();
            _exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        printf("%s %s (%.2f s)\n", ok ? "ok" : "FAIL", tests[i].name, now_s() - t0);
        failed += !ok;
        ran++;
    }
    cleanup();
    return failed || !ran;
}
