/* encode.h: allocation-free encoders for trace records (see format.h for the layout), and the
 * bounded varint reader that the decoders share.
 *
 * Used by the agent on its hot path: every function writes into a caller-provided buffer that
 * the caller has checked has room for MS_REC_MAX_EVENT (or ms_stack_record_max()) bytes, and
 * returns the new end. Also used by tests to build traces. */
#ifndef MS_TRACE_ENCODE_H
#define MS_TRACE_ENCODE_H

#include "format.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MS_VARINT_MAX 10
/* Largest event record (type + 4 varints). */
#define MS_REC_MAX_EVENT (1 + 4 * MS_VARINT_MAX)

static inline uint8_t *ms_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Reads a varint at *pp (not past end) into *v and advances *pp. Returns 0, or -1 when it runs
 * past end or is longer than 10 bytes or 64 bits, or, when `minimal` (a constant at each call),
 * is longer than it needs to be (ends in a zero byte); *pp is then unchanged. */
static inline int ms_get_varint_x(const uint8_t **pp, const uint8_t *end, uint64_t *v, int minimal)
{
    const uint8_t *p = *pp;
    uint64_t x = 0;
    int room = end - p >= MS_VARINT_MAX; /* no bounds check per byte then */
    if (room && p[0] < 0x80) {           /* the common short ones first */
        *v = p[0];
        *pp = p + 1;
        return 0;
    }
    if (room && p[1] < 0x80 && !(minimal && p[1] == 0)) {
        *v = (p[0] & 0x7fu) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return 0;
    }
    for (int shift = 0; shift < 70; shift += 7) {
        if (!room && p >= end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return -1;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (minimal && b == 0 && shift)
                return -1;
            *pp = p;
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* The bounded varint reader of outside bytes (the trace reader, the packed-chunk decoder). */
static inline int ms_get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    return ms_get_varint_x(pp, end, v, 0);
}

static inline uint64_t ms_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t ms_unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A heap event (HEAP_ALLOC or HEAP_FREE) decoded: what the reader's fast path
 * (ms_trace_cursor_next_heap(), reader.h) returns and what the packed-trace model codes. */
struct ms_heap_record {
    int type; /* MS_REC_HEAP_FREE, or MS_REC_HEAP_ALLOC + MS_FN_* */
    uint64_t ns, addr, size;
    uint32_t stack_id;
};

/* Delta state of one chunk; reset at each chunk start. */
struct ms_enc_state {
    uint64_t prev_ns;
    uint64_t prev_addr;
};

static inline uint8_t *ms_put_ts(uint8_t *p, struct ms_enc_state *s, uint64_t ns)
{
    uint64_t d = ns > s->prev_ns ? ns - s->prev_ns : 0;
    if (ns > s->prev_ns)
        s->prev_ns = ns;
    return ms_put_varint(p, d);
}

static inline uint8_t *ms_put_addr(uint8_t *p, struct ms_enc_state *s, uint64_t addr)
{
    p = ms_put_varint(p, ms_zigzag((int64_t)(addr - s->prev_addr)));
    s->prev_addr = addr;
    return p;
}

/* Heap addresses are 16-byte aligned almost always: then the delta is stored in 16-byte units
 * and the record type says so (the ALIGNED bit); otherwise in bytes. */
static inline uint8_t *ms_put_heap_addr(uint8_t *p, uint8_t *type, struct ms_enc_state *s,
                                        uint64_t addr)
{
    if (((addr | s->prev_addr) & 15) == 0) {
        *type |= MS_REC_F_ALIGNED16;
        p = ms_put_varint(p, ms_zigzag((int64_t)(addr - s->prev_addr) / 16));
        s->prev_addr = addr;
        return p;
    }
    return ms_put_addr(p, s, addr);
}

/* HEAP_ALLOC / MMAP_ALLOC: type is MS_REC_HEAP_ALLOC + fn or MS_REC_MMAP_ALLOC + fn. */
static inline uint8_t *ms_enc_alloc(uint8_t *p, struct ms_enc_state *s, int type, uint64_t ns,
                                    uint64_t addr, uint64_t size, uint32_t stack)
{
    uint8_t *t = p;
    *p++ = (uint8_t)type;
    p = ms_put_ts(p, s, ns);
    if ((type & 0xf0) == MS_REC_HEAP_ALLOC)
        p = ms_put_heap_addr(p, t, s, addr);
    else
        p = ms_put_addr(p, s, addr);
    p = ms_put_varint(p, size);
    return ms_put_varint(p, stack);
}

static inline uint8_t *ms_enc_free(uint8_t *p, struct ms_enc_state *s, uint64_t ns, uint64_t addr)
{
    uint8_t *t = p;
    *p++ = MS_REC_HEAP_FREE;
    p = ms_put_ts(p, s, ns);
    return ms_put_heap_addr(p, t, s, addr);
}

static inline uint8_t *ms_enc_munmap(uint8_t *p, struct ms_enc_state *s, uint64_t ns, uint64_t addr,
                                     uint64_t size)
{
    *p++ = MS_REC_MUNMAP;
    p = ms_put_ts(p, s, ns);
    p = ms_put_addr(p, s, addr);
    return ms_put_varint(p, size);
}

static inline uint8_t *ms_enc_lost(uint8_t *p, struct ms_enc_state *s, uint64_t ns, uint64_t n)
{
    *p++ = MS_REC_LOST;
    p = ms_put_ts(p, s, ns);
    return ms_put_varint(p, n);
}

/* Largest extension record: type, length, dts, three integers, a string. */
#define MS_EXT_MAX (1 + 6 * MS_VARINT_MAX + MS_TRACE_MAX_LABEL)

/* Writes an extension record of type ext: dts, then the n integers in v, then the string s of
 * slen bytes (slen is capped at MS_TRACE_MAX_LABEL; pass s = NULL for none). The payload length
 * is written as a two-byte varint so it can be filled in after the payload. */
static inline uint8_t *ms_enc_ext(uint8_t *p, struct ms_enc_state *st, int ext, uint64_t ns,
                                  const uint64_t *v, int n, const char *s, size_t slen)
{
    *p++ = (uint8_t)ext;
    uint8_t *len = p;
    p += 2;
    uint8_t *start = p;
    p = ms_put_ts(p, st, ns);
    for (int i = 0; i < n; i++)
        p = ms_put_varint(p, v[i]);
    if (s) {
        if (slen > MS_TRACE_MAX_LABEL)
            slen = MS_TRACE_MAX_LABEL;
        p = ms_put_varint(p, slen);
        memcpy(p, s, slen);
        p += slen;
    }
    size_t plen = (size_t)(p - start); /* < 2^14 by the caps above */
    len[0] = (uint8_t)((plen & 0x7f) | 0x80);
    len[1] = (uint8_t)(plen >> 7);
    return p;
}

/* PYSTACK: the Python part of stack id; frames[2i] is a frame id, frames[2i+1] its line. */
static inline size_t ms_pystack_record_max(unsigned depth)
{
    return 1 + 2 + 3 * MS_VARINT_MAX + (size_t)depth * 2 * MS_VARINT_MAX;
}

static inline uint8_t *ms_enc_pystack(uint8_t *p, struct ms_enc_state *st, uint64_t ns, uint32_t id,
                                      const uint32_t *frames, unsigned depth)
{
    *p++ = MS_EXT_PYSTACK;
    uint8_t *len = p;
    p += 3; /* three-byte varint length: up to 2^21 */
    uint8_t *start = p;
    p = ms_put_ts(p, st, ns);
    p = ms_put_varint(p, id);
    p = ms_put_varint(p, depth);
    for (unsigned i = 0; i < 2 * depth; i++)
        p = ms_put_varint(p, frames[i]);
    size_t plen = (size_t)(p - start);
    len[0] = (uint8_t)((plen & 0x7f) | 0x80);
    len[1] = (uint8_t)(((plen >> 7) & 0x7f) | 0x80);
    len[2] = (uint8_t)(plen >> 14);
    return p;
}

static inline size_t ms_stack_record_max(unsigned depth)
{
    return 1 + 2 * MS_VARINT_MAX + (size_t)depth * MS_VARINT_MAX;
}

static inline uint8_t *ms_enc_stack(uint8_t *p, uint32_t id, const uint64_t *pcs, unsigned depth)
{
    *p++ = MS_REC_STACK;
    p = ms_put_varint(p, id);
    p = ms_put_varint(p, depth);
    for (unsigned i = 0; i < depth; i++)
        p = i ? ms_put_varint(p, ms_zigzag((int64_t)(pcs[i] - pcs[i - 1])))
              : ms_put_varint(p, pcs[0]);
    return p;
}

static inline size_t ms_module_record_max(size_t pathlen)
{
    return 1 + 4 * MS_VARINT_MAX + pathlen;
}

static inline uint8_t *ms_enc_module(uint8_t *p, uint64_t bias, uint64_t lo, uint64_t hi,
                                     const char *path, size_t pathlen)
{
    *p++ = MS_REC_MODULE;
    p = ms_put_varint(p, bias);
    p = ms_put_varint(p, lo);
    p = ms_put_varint(p, hi);
    p = ms_put_varint(p, pathlen);
    memcpy(p, path, pathlen);
    return p + pathlen;
}

static inline uint8_t *ms_enc_process(uint8_t *p, uint64_t ppid, const char *exe, size_t exelen,
                                      const char *cmd, size_t cmdlen)
{
    *p++ = MS_REC_PROCESS;
    p = ms_put_varint(p, ppid);
    p = ms_put_varint(p, exelen);
    memcpy(p, exe, exelen);
    p += exelen;
    p = ms_put_varint(p, cmdlen);
    memcpy(p, cmd, cmdlen);
    return p + cmdlen;
}

#endif
