/* pack_record.h: one record through the model of packed traces (pack_model.h): coding it in
 * either direction, writing a decoded one back in version-1 encoding, the segments' check
 * values. Shared by the packer (pack.c) and the decoder (unpack.c); internal to src/trace. */
#ifndef MS_TRACE_PACK_RECORD_H
#define MS_TRACE_PACK_RECORD_H

#include "pack_model.h"

/* ---- Records ------------------------------------------------------------------------------- */

/* One event record as the packer sees it. */
struct prec {
    struct ms_heap_record h; /* type: the version-1 type byte, without the aligned flag; the
                                reader's fast path fills it in place */
    const uint8_t *rest;     /* EXTENSION: the payload after its dts */
    size_t rest_len;
};

static inline int kind_of(int type)
{
    if ((type & 0xf0) == MS_REC_HEAP_ALLOC)
        return K_ALLOC;
    return type == MS_REC_HEAP_FREE ? K_FREE : K_OTHER;
}

static inline int valid_type(int t)
{
    if ((t & 0xf0) == MS_REC_HEAP_ALLOC)
        return (t & 0x0f) < MS_FN_HEAP_COUNT;
    return t == MS_REC_HEAP_FREE || t == MS_REC_MMAP_ALLOC ||
           t == MS_REC_MMAP_ALLOC + MS_FN_MREMAP || t == MS_REC_MUNMAP || t == MS_REC_LOST ||
           t >= MS_REC_EXTENSION;
}

/* Codes one record: encodes *r, or decodes into *r (rest points into scratch, EXT_REST_MAX
 * bytes). Returns 0, or -1 when the decoder met something the model forbids. */
INLINE int code_record(const int dec, struct model *m, struct prec *r, uint8_t *scratch)
{
    int pk = m->prev_kind;
    int type = r->h.type;
    /* The kind token: 0 a free, 1 + r an allocation by the last function whose stack has
     * move-to-front rank r (MTF_LEN: a new stack), KIND_OTHER another type (its own token). */
    unsigned srank = dec || kind_of(type) != K_ALLOC ? 0 : stack_rank(m, r->h.stack_id), kt;
    if (type == MS_REC_HEAP_FREE)
        kt = 0;
    else if (type == MS_REC_HEAP_ALLOC + m->last_fn)
        kt = 1 + srank;
    else
        kt = KIND_OTHER;
    kt = ctok(dec, m, S_KIND + pk, kt);
    if (kt == 0)
        type = MS_REC_HEAP_FREE;
    else if (kt < KIND_OTHER) {
        type = MS_REC_HEAP_ALLOC + m->last_fn;
        srank = kt - 1;
    } else {
        type = (int)ctok(dec, m, S_TYPE, (unsigned)type);
        if (!valid_type(type))
            return -1;
        if (kind_of(type) == K_ALLOC)
            srank = ctok(dec, m, S_STACK, srank);
    }
    r->h.type = type;
    int k = kind_of(type);
    uint64_t dt = r->h.ns > m->prev_ns ? r->h.ns - m->prev_ns : 0;
    dt = cnum(dec, m, S_DT + pk * 3 + k, S_DT, dt);
    m->prev_ns += dt;
    r->h.ns = m->prev_ns;
    m->prev_kind = k;
    if (k == K_ALLOC) {
        m->last_fn = type & 0x0f;
        r->h.stack_id = code_stack_after(dec, m, srank, r->h.stack_id);
        r->h.size = code_size(dec, m, r->h.stack_id, r->h.size);
        r->h.addr = code_alloc_addr(dec, m, r->h.addr, r->h.size);
        if (!m->bad && live_add(m, r->h.addr, r->h.size) < 0)
            return -1;
    } else if (k == K_FREE) {
        r->h.addr = code_free_addr(dec, m, r->h.addr);
    } else if ((type & 0xf8) == MS_REC_MMAP_ALLOC || type == MS_REC_MUNMAP) {
        int64_t d = (int64_t)(r->h.addr - m->prev_maddr);
        r->h.addr =
            m->prev_maddr + (uint64_t)ms_unzigzag(cnum(dec, m, S_MISC, S_MISC, ms_zigzag(d)));
        m->prev_maddr = r->h.addr;
        r->h.size = cnum(dec, m, S_MISC, S_MISC, r->h.size);
        if (type != MS_REC_MUNMAP) {
            uint64_t s = cnum(dec, m, S_MISC, S_MISC, r->h.stack_id);
            if (s > UINT32_MAX)
                return -1;
            r->h.stack_id = (uint32_t)s;
        }
    } else if (type == MS_REC_LOST) {
        r->h.size = cnum(dec, m, S_MISC, S_MISC, r->h.size);
    } else { /* EXTENSION */
        uint64_t n = cnum(dec, m, S_MISC, S_MISC, r->rest_len);
        if (n > EXT_REST_MAX)
            return -1;
        for (uint64_t i = 0; i < n; i++) {
            unsigned b = ctok(dec, m, S_BYTES, dec ? 0 : r->rest[i]);
            if (dec)
                scratch[i] = (uint8_t)b;
        }
        if (dec)
            r->rest = scratch;
        r->rest_len = (size_t)n;
    }
    return m->bad ? -1 : 0;
}

static inline size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80)
        v >>= 7, n++;
    return n;
}

/* Writes r in version-1 encoding at out (NULL: only counts); returns its length. The largest
 * record is 1 + 2 varints + EXT_REST_MAX bytes. */
static inline size_t emit(uint8_t *out, struct ms_enc_state *st, const struct prec *r)
{
    uint8_t tmp[MS_REC_MAX_EVENT], *p = out ? out : tmp, *e;
    int t = r->h.type;
    if (t >= MS_REC_EXTENSION) {
        uint64_t d = r->h.ns > st->prev_ns ? r->h.ns - st->prev_ns : 0;
        size_t plen = varint_len(d) + r->rest_len;
        size_t n = 1 + varint_len(plen) + plen;
        if (out) {
            *p++ = (uint8_t)t;
            p = ms_put_varint(p, plen);
            p = ms_put_ts(p, st, r->h.ns);
            memcpy(p, r->rest, r->rest_len);
        } else if (r->h.ns > st->prev_ns)
            st->prev_ns = r->h.ns;
        return n;
    }
    if ((t & 0xf0) == MS_REC_HEAP_ALLOC || (t & 0xf8) == MS_REC_MMAP_ALLOC)
        e = ms_enc_alloc(p, st, t, r->h.ns, r->h.addr, r->h.size, r->h.stack_id);
    else if (t == MS_REC_HEAP_FREE)
        e = ms_enc_free(p, st, r->h.ns, r->h.addr);
    else if (t == MS_REC_MUNMAP)
        e = ms_enc_munmap(p, st, r->h.ns, r->h.addr, r->h.size);
    else
        e = ms_enc_lost(p, st, r->h.ns, r->h.size);
    return (size_t)(e - p);
}

/* Length of a varint of v, by its leading zero bits. */
static const uint8_t vlen_by_clz[64] = {
    10, 9, 9, 9, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 5, 5, 5,
    5,  5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
};

static inline size_t vlen(uint64_t v)
{
    return vlen_by_clz[__builtin_clzll(v | 1)];
}

/* emit()'s length and state change for a heap event, without writing it: the packer's count of
 * each record's decoded bytes. */
INLINE size_t heap_len(struct ms_enc_state *st, const struct prec *r)
{
    uint64_t ns = r->h.ns, a = r->h.addr, d = ns > st->prev_ns ? ns - st->prev_ns : 0;
    int64_t da = (int64_t)(a - st->prev_addr);
    st->prev_ns = ns > st->prev_ns ? ns : st->prev_ns;
    uint64_t z = ms_zigzag(((a | st->prev_addr) & 15) == 0 ? da / 16 : da);
    st->prev_addr = a;
    size_t n = 1 + vlen(d) + vlen(z);
    if (r->h.type != MS_REC_HEAP_FREE)
        n += vlen(r->h.size) + vlen(r->h.stack_id);
    return n;
}

/* Folds one decoded record into the chunk's running check value. */
static inline void check_record(struct model *m, const struct prec *r)
{
    /* independent products, one serial step: cheap, and any changed field changes it */
    uint64_t x =
        r->h.ns ^ (r->h.addr * 0xff51afd7ed558ccdull) ^ (r->h.size * 0xc4ceb9fe1a85ec53ull) ^
        (((uint64_t)r->h.type << 40 | r->h.stack_id) * 0x9e3779b97f4a7c15ull) ^ r->rest_len;
    for (size_t i = 0; i < r->rest_len; i++)
        x = (x ^ r->rest[i]) * 0x100000001b3ull;
    uint64_t h = (m->hash ^ x) * 0x9e3779b97f4a7c15ull;
    m->hash = h ^ (h >> 31);
    m->nrec++;
}

/* Encoder: ends a segment after the record just coded (raw bits padded to a byte). */
static inline void seg_close(struct model *m)
{
    for (; m->bits.n > 0; m->bits.n -= 8) { /* the bits held, the last byte padded */
        uint8_t byte = (uint8_t)m->bits.acc;
        obuf_put(&m->raw, &byte, 1);
        m->bits.acc >>= 8;
    }
    m->bits.n = 0;
    m->bits.acc = 0;
    uint32_t g = m->nseg++; /* < MAX_SEGS: a chunk holds at most MS_PACK_MAX_RAW / 2 records */
    for (int i = 0; i < NSTREAM; i++)
        m->seg_end[g][i] = (uint32_t)ntok(m, i);
    m->seg_raw[g] = m->raw.len;
    m->seg_check[g] = (uint32_t)(m->hash >> 32);
}

#endif
