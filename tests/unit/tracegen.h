/* tracegen.h: builds memscope trace files in memory for tests, the fuzz seed corpus and
 * benchmarks, with the agent's own encoders (encode.h). Test code: it mallocs and aborts on
 * failure.
 *
 *   struct tg g; tg_init(&g, pid, ppid, mono0, real0);
 *   struct tg_chunk c; tg_chunk_begin(&g, &c, tid, serial, seq, base_ns, 4096);
 *   c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, ns, addr, size, stack);
 *   tg_chunk_end(&g, &c);
 *   tg_write(&g, path) or use g.buf / g.len. */
#ifndef MS_TRACEGEN_H
#define MS_TRACEGEN_H

#include "trace/encode.h"
#include "trace/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tg {
    uint8_t *buf;
    size_t len, cap;
};

struct tg_chunk {
    size_t off;            /* of the chunk header in g->buf */
    uint32_t size;
    uint8_t *p;            /* write position; valid until the next tg_* call */
    struct ms_enc_state st;
};

static inline void tg_reserve(struct tg *g, size_t n)
{
    if (g->len + n <= g->cap)
        return;
    size_t cap = g->cap ? g->cap : 1 << 16;
    while (cap < g->len + n)
        cap *= 2;
    g->buf = realloc(g->buf, cap);
    if (!g->buf)
        abort();
    g->cap = cap;
}

/* Starts a trace with a version-1 header; flags MS_TRACE_F_STACKS, max_depth 64. */
static inline void tg_init(struct tg *g, uint64_t pid, uint64_t ppid, uint64_t mono0,
                           uint64_t real0)
{
    memset(g, 0, sizeof *g);
    tg_reserve(g, MS_TRACE_HEADER_SIZE);
    memset(g->buf, 0, MS_TRACE_HEADER_SIZE);
    struct ms_trace_file_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MS_TRACE_MAGIC, 8);
    h.version = MS_TRACE_VERSION;
    h.header_size = MS_TRACE_HEADER_SIZE;
    h.chunk_align = MS_TRACE_CHUNK_ALIGN;
    h.flags = MS_TRACE_F_STACKS;
    h.pid = pid;
    h.ppid = ppid;
    h.start_mono_ns = mono0;
    h.start_real_ns = real0;
    h.max_depth = 64;
    memcpy(g->buf, &h, sizeof h);
    g->len = MS_TRACE_HEADER_SIZE;
}

static inline struct ms_trace_file_header *tg_header(struct tg *g)
{
    return (struct ms_trace_file_header *)g->buf;
}

/* Appends size bytes of zeros (a reserved chunk whose writer died before its header). */
static inline void tg_zero_pages(struct tg *g, size_t size)
{
    tg_reserve(g, size);
    memset(g->buf + g->len, 0, size);
    g->len += size;
}

static inline void tg_chunk_begin(struct tg *g, struct tg_chunk *c, uint32_t tid, uint32_t serial,
                                  uint32_t seq, uint64_t base_ns, uint32_t size)
{
    tg_reserve(g, size);
    c->off = g->len;
    c->size = size;
    memset(g->buf + c->off, 0, size);
    struct ms_trace_chunk_header h = {MS_TRACE_CHUNK_MAGIC, size, tid, serial, seq, 0, base_ns};
    memcpy(g->buf + c->off, &h, sizeof h);
    g->len += size;
    c->p = g->buf + c->off + MS_TRACE_CHUNK_HEADER_SIZE;
    c->st.prev_ns = base_ns;
    c->st.prev_addr = 0;
}

/* Room left in the chunk. */
static inline size_t tg_chunk_room(const struct tg *g, const struct tg_chunk *c)
{
    return (size_t)(g->buf + c->off + c->size - c->p);
}

/* Publishes the records written so far (sets `used`). */
static inline void tg_chunk_end(struct tg *g, struct tg_chunk *c)
{
    uint32_t used = (uint32_t)(c->p - (g->buf + c->off + MS_TRACE_CHUNK_HEADER_SIZE));
    memcpy(g->buf + c->off + 20, &used, 4);
    tg_header(g)->file_end = g->len;
}

static inline int tg_write(const struct tg *g, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(g->buf, 1, g->len, f);
    return fclose(f) == 0 && n == g->len ? 0 : -1;
}

static inline void tg_release(struct tg *g)
{
    free(g->buf);
    memset(g, 0, sizeof *g);
}

#endif
