/* pack_model.h: the model and token coder of packed traces (format version 2, see pack.h),
 * shared by the packer (pack.c) and the decoder (unpack.c); internal to src/trace.
 *
 * Everything here is static and inlined into its two users: the model is written once for both
 * directions (`dec` is a constant at each call of code_record(), pack_record.h), and each user
 * is built twice from the same inlined code, for any x86-64 CPU and for CPUs with POPCNT. A
 * translation unit of its own would cost a call per token on the hottest path of both.
 *
 * What a packed file holds, per thread of the raw trace:
 * - description chunks (raw "MSCK" chunks, version-1 records): the thread's STACK, MODULE,
 *   PROCESS, PYFRAME and PYSTACK records, in order. Readers gather those before any event
 *   anyway, so moving them out of the event stream loses nothing.
 * - packed chunks ("MSPK"): every other record, in order, coded with the model below. A chunk
 *   decodes to at most MS_PACK_MAX_RAW bytes of version-1 records; the model restarts at each
 *   packed chunk, so damage never spreads past one.
 *
 * The model turns each record into a few tokens, each from the small alphabet of one stream
 * (kinds[] below), plus raw bits for the nearly random low bits of numbers. At the end of a
 * chunk each stream is coded with rANS under its own frequency table, which the chunk stores.
 * Per record:
 * - kind: free / allocation by the same function as the last one, with the move-to-front rank
 *   of its stack id / anything else (then the type byte), in the context of the previous kind;
 * - time: the nanoseconds since the previous record, in the context of (previous kind, kind);
 * - allocation: the size as "this stack's last size" or a number; the address by where it came
 *   from: the last or second-to-last freed block of the same size class (an allocator's
 *   per-size free lists), the end of the previous allocation (a block carved after it), the
 *   k-th most recent free, or else a delta from the previous address;
 * - free: the block by its rank among the thread's live blocks counted from the newest (order
 *   statistics over allocation numbers), or an address delta for a block this thread did not
 *   allocate in this chunk;
 * - other events (mmap, munmap, lost, annotations): their fields as numbers and bytes.
 * The decoder runs the same model on the same history, so both sides make the same predictions.
 * Decoded records are written back in version-1 encoding, with addresses and times exactly as
 * recorded. The coding restarts every SEGMENT records, each segment with a check value, so
 * that damage costs the segment it hits and the rest of its chunk, and never passes for data. */
#ifndef MS_TRACE_PACK_MODEL_H
#define MS_TRACE_PACK_MODEL_H

#include "encode.h"
#include "format.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- Output buffers ----------------------------------------------------------------------- */

/* The model code is written once for both directions: `dec` is a constant in each of the two
 * places that call code_record(), and everything below it is inlined there. */
#define INLINE static inline __attribute__((always_inline))

struct obuf {
    uint8_t *p;
    size_t len, cap;
    int oom;
};

static inline int obuf_reserve(struct obuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->len + n <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->len + n)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline void obuf_put(struct obuf *b, const void *src, size_t n)
{
    if (n && obuf_reserve(b, n) == 0) {
        memcpy(b->p + b->len, src, n);
        b->len += n;
    }
}

static inline void obuf_varint(struct obuf *b, uint64_t v)
{
    uint8_t tmp[MS_VARINT_MAX];
    obuf_put(b, tmp, (size_t)(ms_put_varint(tmp, v) - tmp));
}

/* ---- Token streams ------------------------------------------------------------------------- */

/* Each kind of decision has its own stream of tokens from a small alphabet. The encoder
 * collects a chunk's tokens, then codes each stream with rANS (range asymmetric numeral
 * systems) under the stream's own frequency table, which it stores; bits that are close to
 * random go to a separate raw bit stream. The decoder pulls tokens from each stream as the model
 * asks for them. */
#define SCALE_BITS 12
#define SCALE (1u << SCALE_BITS)
#define RANS_L (1ull << 31) /* states stay in [RANS_L, RANS_L << 32) */
#define ALPHA_MAX 1024

#define MTF_LEN 16               /* recent stack ids ranked */
#define KIND_OTHER (MTF_LEN + 2) /* the kind token of records other than heap events */

enum {
    S_KIND = 0,   /* 3 streams, by previous kind: free / alloc by the last fn and the rank of
                     its stack id (as S_STACK) / other */
    S_TYPE = 3,   /* the type byte of an "other" record */
    S_DT = 4,     /* 9 streams, by (previous kind, kind): time deltas */
    S_STACK = 13, /* move-to-front rank of the stack id, MTF_LEN = a new id (allocations by
                     another function than the last one) */
    S_SIZE = 14,  /* escape 0: the stack's last size; or the size */
    S_SRC = 15,   /* 2 streams (a same-class block is known or not): where an allocation's
                     address comes from (escapes SRC_*), or its age among recent frees */
    S_ADDR = 17,  /* address deltas */
    S_RANK = 18,  /* escapes 0, 1: a block this thread did not allocate, its delta / 16 or
                     delta follows; or the freed block's rank among the live ones */
    S_MISC = 19,
    S_BYTES = 20,
    NSTREAM = 21,
};

/* Alphabet of each stream. Number streams have `esc` tokens for the caller's special cases,
 * then a token of its own for each value below 2^lim_bits, then for larger values their bit
 * length with the `mant` bits below the top one (the other bits go to the raw bit stream). */
struct stream_kind {
    uint8_t esc, lim_bits, mant;
    uint16_t alpha;
};
#define SYMK(n)    \
    {              \
        0, 0, 0, n \
    }
#define NUMK(e, l, m)                                                 \
    {                                                                 \
        e, l, m, (uint16_t)((e) + (1u << (l)) + ((64u - (l)) << (m))) \
    }
static const struct stream_kind kinds[NSTREAM] = {
    [0] = SYMK(KIND_OTHER + 1), [1] = SYMK(KIND_OTHER + 1),    [2] = SYMK(KIND_OTHER + 1),
    [S_TYPE] = SYMK(256),       [4] = NUMK(0, 9, 3),           [5] = NUMK(0, 9, 3),
    [6] = NUMK(0, 9, 3),        [7] = NUMK(0, 9, 3),           [8] = NUMK(0, 9, 3),
    [9] = NUMK(0, 9, 3),        [10] = NUMK(0, 9, 3),          [11] = NUMK(0, 9, 3),
    [12] = NUMK(0, 9, 3),       [S_STACK] = SYMK(MTF_LEN + 1), [S_SIZE] = NUMK(1, 6, 4),
    [S_SRC] = NUMK(5, 6, 3),    [S_SRC + 1] = NUMK(5, 6, 3),   [S_ADDR] = NUMK(0, 4, 3),
    [S_RANK] = NUMK(2, 6, 4),   [S_MISC] = NUMK(0, 4, 2),      [S_BYTES] = SYMK(256),
};

/* The encoder's tokens of one stream: the chunk's, in order (tok up to w), and how often each
 * value occurs among them. */
struct etok {
    uint16_t *tok, *w;
    uint32_t *count;
};

/* The decoder's state of one stream. */
struct tstream {
    int present;   /* the chunk has a table for it */
    int live;      /* the open segment has tokens for it */
    uint64_t x[2]; /* two interleaved states: token i uses x[i & 1] */
    unsigned next; /* parity of the next token */
    const uint8_t *p, *end;
    uint16_t freq[ALPHA_MAX], start[ALPHA_MAX];
    uint16_t lut[SCALE];
};

/* The raw bits: written least significant first. */
struct bitio {
    uint64_t acc;
    int n;
    struct obuf *out;       /* encoder */
    const uint8_t *p, *end; /* decoder */
};

/* ---- The model ----------------------------------------------------------------------------- */

enum { K_ALLOC, K_FREE, K_OTHER };
/* Where an allocation's address comes from: the S_SRC escapes, or (SRC_AGE) a recent free. */
enum { SRC_CLASS0, SRC_CLASS1, SRC_END, SRC_DELTA16, SRC_DELTA1, SRC_AGE = -1 };

#define NCLASS 1024 /* size classes of 16 bytes: blocks up to ~16 KiB */
#define RING 1024   /* recent frees remembered for SRC_AGE */
#define FHASH 4096  /* encoder's index of the ring */
#define SIZE_CACHE 1024
#define EXT_REST_MAX 65536u           /* bigger annotation payloads go to the description chunk */
#define MAX_SEQ (MS_PACK_MAX_RAW / 4) /* allocations per chunk: each takes >= 5 raw bytes */
#define SEGMENT 8192u                 /* records per segment: the unit of damage */
#define MAX_SEGS (MS_PACK_MAX_RAW / 2 / SEGMENT + 2)
#define NWORDS (MAX_SEQ / 64) /* words of the live bitmap */
#define WORD_BLOCK 2          /* words per counted block: 128 allocation numbers */
#define BLOCK_SUPER 16        /* blocks per superblock: 2048 allocation numbers */
#define NBLK (NWORDS / WORD_BLOCK)
#define NSUPER (NBLK / BLOCK_SUPER)

struct live_slot {
    uint64_t addr; /* 0: empty */
    uint32_t seq;  /* allocation number */
    int32_t cls;   /* size_class() */
};

struct model {
    struct etok et[NSTREAM];    /* encoder */
    struct tstream ts[NSTREAM]; /* decoder */
    struct bitio bits;
    struct obuf raw; /* encoder: the raw bits */
    /* Segments: every SEGMENT records the token coding restarts (the model goes on) and a
     * check value of the records so far is stored. */
    uint64_t hash, nrec;
    uint32_t nseg;                       /* encoder: segments closed */
    uint32_t seg_end[MAX_SEGS][NSTREAM]; /* encoder: tokens of each stream at a segment's end */
    size_t seg_raw[MAX_SEGS];            /* encoder: raw bytes at a segment's end */
    uint32_t seg_check[MAX_SEGS];
    const uint8_t *seg_p, *seg_limit; /* decoder: the next segment's bytes */
    uint64_t segs_left;
    uint32_t check; /* decoder: the open segment's check value */
    int bad;        /* decoder: the input broke a rule (a table, a stream, the model) */
    /* history */
    int prev_kind, last_fn;
    uint64_t prev_ns, prev_addr, prev_end, prev_maddr;
    uint32_t mtf[MTF_LEN];
    unsigned nmtf;
    struct {
        uint32_t id;
        uint64_t size;
    } size_cache[SIZE_CACHE];
    uint64_t cls[NCLASS][2];
    uint64_t ring[RING];
    uint64_t nfree;
    /* encoder only: the number of the last free whose address hashed here; the ring entry it
     * names tells whether that free was of the address looked up */
    uint32_t fhash[FHASH];
    /* live blocks allocated in this chunk: addr -> allocation number, and back */
    struct live_slot *map;
    size_t map_cap, map_used;
    uint64_t *live_bits;   /* bit n: allocation n is live */
    uint16_t bcnt[NBLK];   /* live allocations per block of WORD_BLOCK words */
    uint32_t scnt[NSUPER]; /* and per superblock of BLOCK_SUPER blocks */
    uint64_t *seq_addr;
    uint32_t nseq, nlive;
    /* encoder: chunk_finish()'s work space, kept across chunks (its pages stay warm) */
    struct tables *tables;
    uint8_t *rans_buf;
    size_t rans_cap;
};

static inline void model_free(struct model *m)
{
    if (!m)
        return;
    for (int i = 0; i < NSTREAM; i++) {
        free(m->et[i].tok);
        free(m->et[i].count);
    }
    free(m->raw.p);
    free(m->map);
    free(m->live_bits);
    free(m->seq_addr);
    free(m->tables);
    free(m->rans_buf);
    free(m);
}

/* Returns a fresh model whose history starts at base_ns, or NULL when memory is short. The
 * per-allocation arrays are calloc'ed at their cap; only the pages a chunk uses are touched. */
static inline struct model *model_new(uint64_t base_ns)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->prev_kind = K_OTHER;
    m->prev_ns = base_ns;
    m->bits.out = &m->raw;
    m->map_cap = 1024;
    m->map = calloc(m->map_cap, sizeof *m->map);
    m->live_bits = calloc(NWORDS, sizeof *m->live_bits);
    m->seq_addr = calloc(MAX_SEQ, sizeof *m->seq_addr);
    if (!m->map || !m->live_bits || !m->seq_addr) {
        model_free(m);
        return NULL;
    }
    return m;
}

/* The encoder's token count of stream i in this chunk. */
static inline size_t ntok(const struct model *m, int i)
{
    return (size_t)(m->et[i].w - m->et[i].tok);
}

/* Gives an encoder's model its token arrays: MS_PACK_MAX_RAW tokens each, so that ctok() needs
 * no check. That is enough: a chunk holds at most MS_PACK_MAX_RAW bytes of records (pack_thread()
 * closes it before that), and no record puts more tokens into one stream than it has bytes (one
 * token per field at most; an EXTENSION one per payload byte). Only the pages used are touched.
 * Returns 0 or -1 (memory). */
static inline int enc_buffers(struct model *m)
{
    for (int i = 0; i < NSTREAM; i++)
        if (!(m->et[i].tok = m->et[i].w = malloc(MS_PACK_MAX_RAW * sizeof *m->et[i].tok)) ||
            !(m->et[i].count = calloc(kinds[i].alpha, sizeof *m->et[i].count)))
            return -1;
    return 0;
}

/* The encoder's next chunk: a fresh model that keeps m's buffers (their pages are warm). */
static inline void model_reset(struct model *m, uint64_t base_ns)
{
    struct etok et[NSTREAM];
    for (int i = 0; i < NSTREAM; i++) {
        et[i] = m->et[i];
        if (et[i].w != et[i].tok)
            memset(et[i].count, 0, kinds[i].alpha * sizeof *et[i].count);
        et[i].w = et[i].tok;
    }
    struct obuf raw = m->raw;
    struct live_slot *map = m->map;
    size_t map_cap = m->map_cap;
    uint64_t *live_bits = m->live_bits, *seq_addr = m->seq_addr;
    size_t words = (m->nseq + 63) / 64;
    struct tables *tables = m->tables;
    uint8_t *rans_buf = m->rans_buf;
    size_t rans_cap = m->rans_cap;
    memset(m, 0, sizeof *m);
    m->tables = tables;
    m->rans_buf = rans_buf;
    m->rans_cap = rans_cap;
    memcpy(m->et, et, sizeof et);
    m->raw = raw;
    m->raw.len = 0;
    m->map = map;
    m->map_cap = map_cap;
    memset(map, 0, map_cap * sizeof *map);
    m->live_bits = live_bits;
    memset(live_bits, 0, words * sizeof *live_bits);
    m->seq_addr = seq_addr;
    m->prev_kind = K_OTHER;
    m->prev_ns = base_ns;
    m->bits.out = &m->raw;
}

/* Codes token v of stream sid: the encoder appends it, the decoder returns the next one. */
INLINE unsigned ctok(const int dec, struct model *m, int sid, unsigned v)
{
    if (dec) {
        struct tstream *s = &m->ts[sid];
        if (!s->live) { /* no table, or no tokens in this segment */
            m->bad = 1;
            return 0;
        }
        uint64_t *x = &s->x[s->next];
        s->next ^= 1;
        uint32_t slot = (uint32_t)*x & (SCALE - 1);
        unsigned sym = s->lut[slot];
        *x = s->freq[sym] * (*x >> SCALE_BITS) + slot - s->start[sym];
        if (*x < RANS_L) { /* one 32-bit word brings it back above RANS_L */
            uint32_t w;
            if (s->end - s->p < 4) { /* a whole stream never runs dry */
                m->bad = 1;
                return sym;
            }
            memcpy(&w, s->p, 4);
            s->p += 4;
            *x = *x << 32 | w;
        }
        return sym;
    }
    struct etok *e = &m->et[sid];
    *e->w++ = (uint16_t)v; /* room: see enc_buffers() */
    e->count[v]++;
    return v;
}

/* Codes the n <= 32 low bits of v as they are; returns them. */
INLINE uint64_t craw32(const int dec, struct model *m, uint64_t v, int n)
{
    struct bitio *b = &m->bits;
    uint64_t mask = n ? ~0ull >> (64 - n) : 0;
    if (dec) {
        while (b->n < n) {
            if (b->p >= b->end) {
                m->bad = 1;
                return 0;
            }
            b->acc |= (uint64_t)*b->p++ << b->n;
            b->n += 8;
        }
        v = b->acc & mask;
        b->acc = n < 64 ? b->acc >> n : 0;
        b->n -= n;
        return v;
    }
    /* the encoder holds up to 31 bits and writes them 32 at a time, least significant first */
    b->acc |= (v & mask) << b->n;
    b->n += n;
    if (b->n >= 32) {
        uint8_t w[4] = {(uint8_t)b->acc, (uint8_t)(b->acc >> 8), (uint8_t)(b->acc >> 16),
                        (uint8_t)(b->acc >> 24)};
        if (b->out->len + 4 <= b->out->cap) {
            memcpy(b->out->p + b->out->len, w, 4);
            b->out->len += 4;
        } else
            obuf_put(b->out, w, 4);
        b->acc >>= 32;
        b->n -= 32;
    }
    return v & mask;
}

INLINE uint64_t craw(const int dec, struct model *m, uint64_t v, int n)
{
    if (n <= 32)
        return craw32(dec, m, v, n);
    uint64_t lo = craw32(dec, m, v, 32);
    return lo | craw32(dec, m, v >> 32, n - 32) << 32;
}

/* Codes, in number stream sid, either the escape *esc (0 <= *esc < kinds[kid].esc) or, when
 * *esc is -1, the number v. kid is the first stream of sid's family (streams that share one
 * struct stream_kind), a constant at every call so that the alphabet's parameters are too.
 * Returns the number (0 for an escape); the decoder sets *esc. */
INLINE uint64_t cnum_esc(const int dec, struct model *m, int sid, int kid, int *esc, uint64_t v)
{
    const struct stream_kind *k = &kinds[kid];
    unsigned lim = 1u << k->lim_bits, tok = 0;
    int mant = k->mant;
    if (!dec) { /* the token, and the bits below it raw: v as it is */
        if (*esc >= 0)
            ctok(0, m, sid, (unsigned)*esc);
        else if (v < lim)
            ctok(0, m, sid, k->esc + (unsigned)v);
        else {
            int n = 64 - __builtin_clzll(v);
            ctok(0, m, sid,
                 k->esc + lim + ((unsigned)(n - k->lim_bits - 1) << mant) +
                     (unsigned)((v >> (n - 1 - mant)) & ((1u << mant) - 1)));
            craw(0, m, v, n - 1 - mant);
        }
        return *esc >= 0 ? 0 : v;
    }
    tok = ctok(dec, m, sid, tok);
    if (tok < k->esc) {
        *esc = (int)tok;
        return 0;
    }
    *esc = -1;
    tok -= k->esc;
    if (tok < lim)
        return tok;
    tok -= lim;
    int n = (int)(tok >> mant) + k->lim_bits + 1, mb = n - 1;
    if (n > 64) {
        m->bad = 1;
        return 0;
    }
    uint64_t top = tok & ((1u << mant) - 1);
    uint64_t low = craw(dec, m, v, mb - mant);
    return (1ull << mb) | (top << (mb - mant)) | low;
}

/* Codes the number v in stream sid (of family kid); returns it. */
INLINE uint64_t cnum(const int dec, struct model *m, int sid, int kid, uint64_t v)
{
    int esc = -1;
    v = cnum_esc(dec, m, sid, kid, &esc, v);
    if (esc >= 0)
        m->bad = 1;
    return v;
}

static inline size_t hash_addr(uint64_t a)
{
    return (size_t)((a >> 4) * 0x9e3779b97f4a7c15ull >> 20);
}

/* Live map: open addressing, linear probing, backward-shift deletion; load <= 1/4 (short
 * clusters: the loops over them end after a probe or two, and their ends are hard to predict).
 * Not common/u64map.h: its slots are the model's own (address, allocation number, size class),
 * the lookups are inlined into both builds of the coder and the map never outgrows one chunk's
 * allocations (MAX_SEQ); a call per lookup would sit on the hottest path of pack and decode. */
INLINE struct live_slot *map_find(struct model *m, uint64_t addr)
{
    size_t mask = m->map_cap - 1;
    if (!addr) /* 0 marks empty slots; a null block is never live */
        return NULL;
    for (size_t i = hash_addr(addr) & mask;; i = (i + 1) & mask) {
        if (m->map[i].addr == addr)
            return &m->map[i];
        if (!m->map[i].addr)
            return NULL;
    }
}

INLINE void map_delete(struct model *m, struct live_slot *s)
{
    size_t mask = m->map_cap - 1, i = (size_t)(s - m->map);
    for (size_t j = (i + 1) & mask; m->map[j].addr; j = (j + 1) & mask) {
        size_t h = hash_addr(m->map[j].addr) & mask;
        /* move j to the hole i if its home is not in (i, j] */
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            m->map[i] = m->map[j];
            i = j;
        }
    }
    m->map[i].addr = 0;
    m->map_used--;
}

/* Doubles the live map. */
static inline int map_grow(struct model *m)
{
    size_t cap = m->map_cap * 2;
    struct live_slot *n = calloc(cap, sizeof *n), *old = m->map;
    if (!n)
        return -1;
    for (size_t i = 0; i < m->map_cap; i++)
        if (old[i].addr) {
            size_t j = hash_addr(old[i].addr) & (cap - 1);
            while (n[j].addr)
                j = (j + 1) & (cap - 1);
            n[j] = old[i];
        }
    free(old);
    m->map = n;
    m->map_cap = cap;
    return 0;
}

/* Bits set in w: one instruction in the functions built for CPUs with POPCNT (POPCNT_CLONE
 * below), a libgcc call elsewhere (x86-64 CPUs before 2008). */
INLINE uint32_t popcount64(uint64_t w)
{
    return (uint32_t)__builtin_popcountll(w);
}

/* The packer and the decoder come in two builds of the same code: one for any x86-64 CPU and one
 * for CPUs with the POPCNT instruction (every x86-64 CPU since 2008), picked at run time.
 * Elsewhere there is one build. */
#if defined(__x86_64__)
#define POPCNT_CLONE __attribute__((target("popcnt")))
#define HAVE_POPCNT() __builtin_cpu_supports("popcnt")
#else
#define POPCNT_CLONE
#define HAVE_POPCNT() 0
#endif

/* Order statistics over allocation numbers: a bitmap of the live ones, with live counts per
 * block of WORD_BLOCK words and per superblock of BLOCK_SUPER blocks. Frees are mostly of recent
 * allocations, so ranks are counted from the newest end: a few words, blocks and superblocks,
 * and an update is three stores. */
INLINE void rank_set(struct model *m, uint32_t seq, int live)
{
    uint64_t bit = 1ull << (seq % 64);
    if (live) {
        m->live_bits[seq / 64] |= bit;
        m->bcnt[seq / 64 / WORD_BLOCK]++;
        m->scnt[seq / 64 / WORD_BLOCK / BLOCK_SUPER]++;
    } else {
        m->live_bits[seq / 64] &= ~bit;
        m->bcnt[seq / 64 / WORD_BLOCK]--;
        m->scnt[seq / 64 / WORD_BLOCK / BLOCK_SUPER]--;
    }
}

/* Live blocks with an allocation number above seq (< nseq): the freed block's rank. */
INLINE uint32_t rank_above(const struct model *m, uint32_t seq)
{
    /* Words, blocks and superblocks past the newest allocation are all zero (model_reset()),
     * so the rest of seq's block and of its superblock are summed whole, without a branch on
     * where the newest allocation is: the word after seq's when seq's is the first of its
     * block, and the blocks after seq's in its superblock. */
    _Static_assert(WORD_BLOCK == 2 && BLOCK_SUPER == 16, "the sums below");
    uint32_t w = seq / 64, last = (m->nseq - 1) / 64;
    uint32_t n = popcount64(m->live_bits[w] >> (seq % 64) >> 1);
    n += popcount64(m->live_bits[w | 1]) & (0u - (~w & 1));
    uint32_t b = w / WORD_BLOCK, blast = last / WORD_BLOCK;
    const uint16_t *g = m->bcnt + (b & ~(uint32_t)(BLOCK_SUPER - 1));
#if defined(__SSE2__)
    __m128i k = _mm_set1_epi16((short)(b % BLOCK_SUPER));
    __m128i lo = _mm_and_si128(_mm_loadu_si128((const __m128i *)g),
                               _mm_cmpgt_epi16(_mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7), k));
    __m128i hi = _mm_and_si128(_mm_loadu_si128((const __m128i *)(g + 8)),
                               _mm_cmpgt_epi16(_mm_setr_epi16(8, 9, 10, 11, 12, 13, 14, 15), k));
    __m128i sum = _mm_madd_epi16(_mm_add_epi16(lo, hi), _mm_set1_epi16(1)); /* 4 x 32 bits */
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(1, 0, 3, 2)));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(2, 3, 0, 1)));
    n += (uint32_t)_mm_cvtsi128_si32(sum);
#else
    for (uint32_t i = b % BLOCK_SUPER + 1; i < BLOCK_SUPER; i++)
        n += g[i];
#endif
    for (uint32_t i = b / BLOCK_SUPER + 1; i <= blast / BLOCK_SUPER; i++)
        n += m->scnt[i];
    return n;
}

/* The decoder's inverse: the allocation number of the live block with r live blocks above it
 * (r < nlive, so every walk below ends inside the arrays). */
static inline uint32_t rank_find(const struct model *m, uint32_t r)
{
    uint32_t w = (m->nseq - 1) / 64, b = w / WORD_BLOCK, sb = b / BLOCK_SUPER;
    while (m->scnt[sb] <= r)
        r -= m->scnt[sb--];
    if (b / BLOCK_SUPER != sb)
        b = sb * BLOCK_SUPER + BLOCK_SUPER - 1;
    while (m->bcnt[b] <= r)
        r -= m->bcnt[b--];
    if (w / WORD_BLOCK != b)
        w = b * WORD_BLOCK + WORD_BLOCK - 1;
    for (uint32_t c; (c = popcount64(m->live_bits[w])) <= r; w--)
        r -= c;
    uint64_t x = m->live_bits[w]; /* its (r+1)-th highest bit */
    while (r--)
        x &= ~(1ull << (63 - __builtin_clzll(x)));
    return w * 64 + 63 - (uint32_t)__builtin_clzll(x);
}

static inline int size_class(uint64_t size)
{
    uint64_t c = (size + 8 + 15) >> 4;
    return c < NCLASS ? (int)c : -1;
}

static inline uint64_t chunk_end(uint64_t addr, uint64_t size)
{
    uint64_t c = (size + 8 + 15) & ~(uint64_t)15;
    return addr + (c < 32 ? 32 : c);
}

INLINE void live_remove(struct model *m, struct live_slot *s)
{
    rank_set(m, s->seq, 0);
    m->nlive--;
    map_delete(m, s);
}

INLINE int live_add(struct model *m, uint64_t addr, uint64_t size)
{
    if (!addr)
        return 0;
    if (m->nseq >= MAX_SEQ || (4 * (m->map_used + 1) > m->map_cap && map_grow(m) < 0))
        return -1;
    size_t mask = m->map_cap - 1, i = hash_addr(addr) & mask;
    while (m->map[i].addr && m->map[i].addr != addr)
        i = (i + 1) & mask;
    if (m->map[i].addr) { /* freed by another thread meanwhile: forget the old block */
        rank_set(m, m->map[i].seq, 0);
        m->nlive--;
    } else
        m->map_used++;
    m->map[i] = (struct live_slot){addr, m->nseq, size_class(size)};
    m->seq_addr[m->nseq] = addr;
    rank_set(m, m->nseq, 1);
    m->nseq++;
    m->nlive++;
    return 0;
}

/* Codes an address as a delta from prev_addr (16-byte units when both are aligned). */
INLINE uint64_t code_delta(const int dec, struct model *m, int src, uint64_t addr)
{
    if (src == SRC_DELTA16) {
        int64_t d = (int64_t)(addr - m->prev_addr) / 16;
        return m->prev_addr +
               (uint64_t)ms_unzigzag(cnum(dec, m, S_ADDR, S_ADDR, ms_zigzag(d))) * 16;
    }
    int64_t d = (int64_t)(addr - m->prev_addr);
    return m->prev_addr + (uint64_t)ms_unzigzag(cnum(dec, m, S_ADDR, S_ADDR, ms_zigzag(d)));
}

/* Codes the address of a new heap block of `size` bytes; returns it. */
INLINE uint64_t code_alloc_addr(const int dec, struct model *m, uint64_t addr, uint64_t size)
{
    int cl = size_class(size), src = SRC_DELTA1;
    uint64_t *lifo = cl >= 0 ? m->cls[cl] : NULL;
    uint64_t age = 0;
    if (!dec) {
        size_t h = hash_addr(addr) & (FHASH - 1);
        if (lifo && addr && lifo[0] == addr)
            src = SRC_CLASS0;
        else if (lifo && addr && lifo[1] == addr)
            src = SRC_CLASS1;
        else if (addr && addr == m->prev_end)
            src = SRC_END;
        else if (addr && m->nfree - m->fhash[h] <= RING && m->ring[m->fhash[h] % RING] == addr) {
            src = SRC_AGE;
            age = m->nfree - m->fhash[h] - 1;
        } else if (((addr | m->prev_addr) & 15) == 0)
            src = SRC_DELTA16;
    }
    age = cnum_esc(dec, m, S_SRC + (lifo && lifo[0]), S_SRC, &src, age);
    switch (src) {
    case SRC_CLASS0:
    case SRC_CLASS1:
        if (!lifo || !lifo[src]) {
            m->bad = 1;
            return 0;
        }
        addr = lifo[src];
        if (src == SRC_CLASS0)
            lifo[0] = lifo[1];
        lifo[1] = 0;
        break;
    case SRC_END: addr = m->prev_end; break;
    case SRC_AGE:
        if (age >= RING || age >= m->nfree) {
            m->bad = 1;
            return 0;
        }
        addr = m->ring[(m->nfree - 1 - age) % RING];
        break;
    case SRC_DELTA16:
    case SRC_DELTA1:
        addr = code_delta(dec, m, src, addr);
        m->prev_addr = addr;
        break;
    default: m->bad = 1; return 0;
    }
    m->prev_end = chunk_end(addr, size);
    return addr;
}

/* Codes the address of a freed heap block; returns it. */
INLINE uint64_t code_free_addr(const int dec, struct model *m, uint64_t addr)
{
    struct live_slot *s = dec ? NULL : map_find(m, addr);
    uint64_t rank = 0;
    if (s)
        rank = rank_above(m, s->seq);
    int how = s ? -1 : ((addr | m->prev_addr) & 15) == 0 ? 0 : 1;
    rank = cnum_esc(dec, m, S_RANK, S_RANK, &how, rank);
    if (how < 0) { /* a block this thread allocated */
        if (dec) {
            if (rank >= m->nlive) {
                m->bad = 1;
                return 0;
            }
            addr = m->seq_addr[rank_find(m, (uint32_t)rank)];
            s = map_find(m, addr);
            if (!s) {
                m->bad = 1;
                return 0;
            }
        }
        int cl = s->cls;
        if (cl >= 0) {
            m->cls[cl][1] = m->cls[cl][0];
            m->cls[cl][0] = addr;
        }
        live_remove(m, s);
    } else {
        addr = code_delta(dec, m, how == 0 ? SRC_DELTA16 : SRC_DELTA1, addr);
        m->prev_addr = addr;
    }
    if (!dec) {
        size_t h = hash_addr(addr) & (FHASH - 1);
        m->fhash[h] = (uint32_t)m->nfree; /* < MAX_SEQ: frees per chunk */
    }
    m->ring[m->nfree % RING] = addr;
    m->nfree++;
    return addr;
}

/* The move-to-front list is searched and shifted without a branch on the rank where SSE2 is
 * there (every x86-64 CPU): the rank of the next allocation's stack is often as good as random,
 * and a loop that ends at it costs a mispredicted branch in the search and another in the
 * shift. */

/* The encoder's move-to-front rank of stack id: 0..nmtf-1, or MTF_LEN for a new id. */
INLINE unsigned stack_rank(const struct model *m, uint32_t id)
{
#if defined(__SSE2__)
    __m128i k = _mm_set1_epi32((int)id);
    unsigned hit = 0;
    for (unsigned v = 0; v < MTF_LEN / 4; v++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(m->mtf + 4 * v));
        hit |= (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(x, k))) << (4 * v);
    }
    hit &= (1u << m->nmtf) - 1; /* nmtf <= MTF_LEN < 32 */
    return hit ? (unsigned)__builtin_ctz(hit) : MTF_LEN;
#else
    for (unsigned i = 0; i < m->nmtf; i++)
        if (m->mtf[i] == id)
            return i;
    return MTF_LEN;
#endif
}

/* Entries 0..r-1 (r < MTF_LEN) move down one place and id takes place 0. */
INLINE void mtf_front(struct model *m, unsigned r, uint32_t id)
{
#if defined(__SSE2__)
    __m128i upto = _mm_set1_epi32((int)r + 1), prev = _mm_setzero_si128();
    for (unsigned v = 0; v < MTF_LEN / 4; v++) {
        __m128i *q = (__m128i *)(m->mtf + 4 * v);
        __m128i x = _mm_loadu_si128(q);
        /* each lane's left neighbour: x one lane up, the lane below from the previous vector */
        __m128i sh = _mm_or_si128(_mm_slli_si128(x, 4), _mm_srli_si128(prev, 12));
        __m128i lane =
            _mm_setr_epi32((int)(4 * v), (int)(4 * v + 1), (int)(4 * v + 2), (int)(4 * v + 3));
        __m128i move = _mm_cmpgt_epi32(upto, lane); /* lane <= r */
        _mm_storeu_si128(q, _mm_or_si128(_mm_and_si128(move, sh), _mm_andnot_si128(move, x)));
        prev = x;
    }
    m->mtf[0] = id;
#else
    for (unsigned i = 0; i <= r; i++) {
        uint32_t t = m->mtf[i];
        m->mtf[i] = id;
        id = t;
    }
#endif
}

/* Codes a stack id whose rank r is already coded (by the caller's token): a new id follows in
 * the misc stream. Moves the id to the front; returns it. */
INLINE uint32_t code_stack_after(const int dec, struct model *m, unsigned r, uint32_t id)
{
    if (r < m->nmtf)
        id = m->mtf[r];
    else if (r == MTF_LEN) {
        uint64_t v = cnum(dec, m, S_MISC, S_MISC, id);
        if (v > UINT32_MAX) {
            m->bad = 1;
            return 0;
        }
        id = (uint32_t)v;
        r = m->nmtf < MTF_LEN ? m->nmtf++ : MTF_LEN - 1;
    } else {
        m->bad = 1;
        return 0;
    }
    mtf_front(m, r, id);
    return m->mtf[0];
}

INLINE uint64_t code_size(const int dec, struct model *m, uint32_t stack, uint64_t size)
{
    __typeof__(m->size_cache[0]) *e = &m->size_cache[stack % SIZE_CACHE];
    int have = e->id == stack && stack, same = have && e->size == size ? 0 : -1;
    size = cnum_esc(dec, m, S_SIZE, S_SIZE, &same, size);
    if (same == 0) {
        if (!have)
            m->bad = 1;
        return e->size;
    }
    e->id = stack;
    e->size = size;
    return size;
}

#endif
