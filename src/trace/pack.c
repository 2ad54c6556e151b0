/* pack.c: packed traces (see pack.h): the model, the token coder, the packer and the decoder.
 *
 * Called by `memscope run` after the traced program has ended (ms_pack_file) and by the reader
 * for each packed chunk (ms_pack_decode). Workload: millions of events per thread, packed once
 * and decoded once; a trace is cut into jobs of about one packed chunk, packed in parallel.
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
#include "pack.h"

#include "encode.h"
#include "common/ms_error.h"
#include "format.h"
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

static int obuf_reserve(struct obuf *b, size_t n)
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

static void obuf_put(struct obuf *b, const void *src, size_t n)
{
    if (n && obuf_reserve(b, n) == 0) {
        memcpy(b->p + b->len, src, n);
        b->len += n;
    }
}

static void obuf_varint(struct obuf *b, uint64_t v)
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

static void model_free(struct model *m)
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
static struct model *model_new(uint64_t base_ns)
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
static int enc_buffers(struct model *m)
{
    for (int i = 0; i < NSTREAM; i++)
        if (!(m->et[i].tok = m->et[i].w = malloc(MS_PACK_MAX_RAW * sizeof *m->et[i].tok)) ||
            !(m->et[i].count = calloc(kinds[i].alpha, sizeof *m->et[i].count)))
            return -1;
    return 0;
}

/* The encoder's next chunk: a fresh model that keeps m's buffers (their pages are warm). */
static void model_reset(struct model *m, uint64_t base_ns)
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

static size_t hash_addr(uint64_t a)
{
    return (size_t)((a >> 4) * 0x9e3779b97f4a7c15ull >> 20);
}

/* Live map: open addressing, linear probing, backward-shift deletion; load <= 1/4 (short
 * clusters: the loops over them end after a probe or two, and their ends are hard to predict). */
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
static int map_grow(struct model *m)
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
static uint32_t rank_find(const struct model *m, uint32_t r)
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

static int size_class(uint64_t size)
{
    uint64_t c = (size + 8 + 15) >> 4;
    return c < NCLASS ? (int)c : -1;
}

static uint64_t chunk_end(uint64_t addr, uint64_t size)
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

/* ---- Records ------------------------------------------------------------------------------- */

/* One event record as the packer sees it. */
struct prec {
    struct ms_heap_record h; /* type: the version-1 type byte, without the aligned flag; the
                                reader's fast path fills it in place */
    const uint8_t *rest;     /* EXTENSION: the payload after its dts */
    size_t rest_len;
};

static int kind_of(int type)
{
    if ((type & 0xf0) == MS_REC_HEAP_ALLOC)
        return K_ALLOC;
    return type == MS_REC_HEAP_FREE ? K_FREE : K_OTHER;
}

static int valid_type(int t)
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

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80)
        v >>= 7, n++;
    return n;
}

/* Writes r in version-1 encoding at out (NULL: only counts); returns its length. The largest
 * record is 1 + 2 varints + EXT_REST_MAX bytes. */
static size_t emit(uint8_t *out, struct ms_enc_state *st, const struct prec *r)
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
static void check_record(struct model *m, const struct prec *r)
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
static void seg_close(struct model *m)
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

/* ---- Chunk payload -------------------------------------------------------------------------- */

/* Scales counts (total n) to frequencies summing to SCALE, each used symbol at least 1. */
static void normalize_freqs(const uint32_t *count, unsigned alpha, size_t n, uint16_t *freq)
{
    uint32_t sum = 0;
    unsigned big = 0;
    for (unsigned i = 0; i < alpha; i++) {
        freq[i] = 0;
        if (!count[i])
            continue;
        uint64_t f = ((uint64_t)count[i] * SCALE + n / 2) / n;
        freq[i] = (uint16_t)(f ? f : 1);
        sum += freq[i];
        if (freq[i] > freq[big])
            big = i;
    }
    if (sum <= SCALE) {
        freq[big] = (uint16_t)(freq[big] + (SCALE - sum));
        return;
    }
    /* Many rare symbols were rounded up: take one from the largest, the first of equals, until
     * the sum is right. The largest stay the largest until each has given one, so each pass
     * over the alphabet takes one from every symbol at the top, in order. */
    while (sum > SCALE) {
        uint16_t top = 0;
        for (unsigned i = 0; i < alpha; i++)
            top = freq[i] > top ? freq[i] : top;
        for (unsigned i = 0; i < alpha && sum > SCALE; i++)
            if (freq[i] == top) {
                freq[i]--;
                sum--;
            }
    }
}

/* The encoder's view of one symbol of frequency f starting at cumulative frequency c:
 * x -> (x / f) * SCALE + x % f + c computed as x + bias + q * cmpl with q = x / f by a
 * multiplication: q = (x * rcp) >> (64 + shift), exact for x < 2^63 with sh = ceil(log2 f),
 * rcp = ceil(2^(63 + sh) / f) and shift = sh - 1 (the error x * (rcp - 2^(63 + sh) / f) /
 * 2^(63 + sh) stays below 1 / f). For f = 1, rcp = 2^64 - 1 gives q = x - 1, which bias and
 * cmpl make up for. */
struct rsym {
    uint64_t xmax; /* states from here on put out a 32-bit word first */
    uint64_t rcp;
    uint32_t bias;
    uint16_t cmpl;
    uint16_t shift;
};

__extension__ typedef unsigned __int128 pack_u128; /* GCC and Clang on 64-bit targets */

static struct rsym rsym_make(uint32_t f, uint32_t c)
{
    struct rsym y = {((RANS_L >> SCALE_BITS) << 32) * f, ~0ull, c + SCALE - 1,
                     (uint16_t)(SCALE - f), 0};
    if (f >= 2) {
        unsigned sh = 0;
        while ((1u << sh) < f)
            sh++;
        y.rcp = (uint64_t)((((pack_u128)1 << (63 + sh)) + f - 1) / f);
        y.shift = (uint16_t)(sh - 1);
        y.bias = c;
    }
    return y;
}

/* Puts a token into rANS state x, 32-bit words going down from *pp; returns the new state.
 * The state stays below 2^63, so at most one word goes out, stored unconditionally and kept
 * or not (no branch: this is the encoder's dependency chain). */
INLINE uint64_t rans_put(uint64_t x, const struct rsym *y, uint8_t **pp)
{
    uint8_t *p = *pp;
    int out = x >= y->xmax;
    uint32_t lo = (uint32_t)x;
    memcpy(p - 4, &lo, 4);
    *pp = p - 4 * out;
    x = out ? x >> 32 : x;
    uint64_t q = (uint64_t)(((pack_u128)x * y->rcp) >> 64) >> y->shift;
    return x + y->bias + q * y->cmpl;
}

/* Codes tokens tok[0..n) of one stream with rANS into out: two 64-bit states, then the 32-bit words
 * the decoder reads forwards. buf has room for 4 * n + 16 bytes. */
static void rans_encode(const uint16_t *tok, size_t n, const struct rsym *sym, uint8_t *buf,
                        size_t cap, struct obuf *out)
{
    uint8_t *p = buf + cap;
    /* Two states, token i in x_(i & 1), so that two dependency chains overlap; both stay in
     * registers (an indexed array of states would go through memory). */
    uint64_t x0 = RANS_L, x1 = RANS_L;
    size_t i = n;
    if (i & 1) {
        i--;
        x0 = rans_put(x0, &sym[tok[i]], &p);
    }
    while (i) {
        i -= 2;
        x1 = rans_put(x1, &sym[tok[i + 1]], &p);
        x0 = rans_put(x0, &sym[tok[i]], &p);
    }
    p -= 16;
    memcpy(p, &x0, 8);
    memcpy(p + 8, &x1, 8);
    obuf_varint(out, (uint64_t)(buf + cap - p));
    obuf_put(out, p, (size_t)(buf + cap - p));
}

/* chunk_finish()'s tables: one stream's frequencies, and each stream's symbols for rANS. */
struct tables {
    uint16_t freq[ALPHA_MAX];
    struct rsym sym[NSTREAM][ALPHA_MAX];
};

/* Writes the chunk's payload: the frequency table of each stream used, then each segment: for
 * each stream used its rANS bytes, the raw bits, the check value. Returns 0 or -1 (memory). */
static int chunk_finish(struct model *m, struct obuf *out)
{
    if (!m->tables && !(m->tables = malloc(sizeof *m->tables)))
        return -1;
    struct tables *tb = m->tables;
    size_t most = 0;
    if (m->nrec % SEGMENT || !m->nseg)
        seg_close(m);
    uint8_t nused = 0;
    for (int i = 0; i < NSTREAM; i++) {
        nused = (uint8_t)(nused + (ntok(m, i) > 0));
        if (ntok(m, i) > most)
            most = ntok(m, i);
    }
    obuf_put(out, &nused, 1);
    for (int sid = 0; sid < NSTREAM; sid++) {
        const struct etok *e = &m->et[sid];
        unsigned alpha = kinds[sid].alpha;
        size_t n = ntok(m, sid);
        if (!n)
            continue;
        uint16_t *freq = tb->freq;
        normalize_freqs(e->count, alpha, n, freq);
        uint8_t id = (uint8_t)sid;
        obuf_put(out, &id, 1);
        unsigned used = 0;
        for (unsigned i = 0; i < alpha; i++)
            used += freq[i] > 0;
        obuf_varint(out, used);
        uint32_t cum = 0;
        for (unsigned i = 0, prev = 0; i < alpha; i++) {
            uint16_t f = freq[i];
            if (f)
                tb->sym[sid][i] = rsym_make(f, cum);
            cum += f;
            if (!f)
                continue;
            obuf_varint(out, i - prev);
            obuf_varint(out, f - 1u);
            prev = i + 1;
        }
    }
    size_t cap = 4 * most + 16;
    if (cap > m->rans_cap) {
        free(m->rans_buf);
        if (!(m->rans_buf = malloc(cap))) {
            m->rans_cap = 0;
            return -1;
        }
        m->rans_cap = cap;
    }
    uint8_t *buf = m->rans_buf;
    obuf_varint(out, m->nseg);
    for (uint32_t g = 0; g < m->nseg; g++) {
        for (int sid = 0; sid < NSTREAM; sid++) {
            const struct etok *e = &m->et[sid];
            if (e->w == e->tok)
                continue;
            uint32_t a = g ? m->seg_end[g - 1][sid] : 0, b = m->seg_end[g][sid];
            if (a == b)
                obuf_varint(out, 0);
            else
                rans_encode(e->tok + a, b - a, tb->sym[sid], buf, cap, out);
        }
        size_t a = g ? m->seg_raw[g - 1] : 0;
        obuf_varint(out, m->seg_raw[g] - a);
        obuf_put(out, m->raw.p + a, m->seg_raw[g] - a);
        obuf_put(out, &m->seg_check[g], 4);
    }
    return out->oom || m->raw.oom ? -1 : 0;
}

/* Reads the frequency tables of a chunk's payload and finds its first segment. Returns 0, or -1
 * when the payload is malformed (every count, symbol, frequency and length is checked). */
static int chunk_open(struct model *m, const uint8_t *in, size_t len)
{
    const uint8_t *p = in, *end = in + len;
    uint64_t v;
    if (p >= end || *p > NSTREAM)
        return -1;
    unsigned nused = *p++;
    for (unsigned k = 0; k < nused; k++) {
        if (p >= end || *p >= NSTREAM || m->ts[*p].present)
            return -1;
        int sid = *p++;
        struct tstream *s = &m->ts[sid];
        unsigned alpha = kinds[sid].alpha;
        uint64_t used;
        if (ms_get_varint(&p, end, &used) || used == 0 || used > alpha)
            return -1;
        memset(s->freq, 0, sizeof s->freq);
        uint64_t sym = 0, total = 0;
        for (uint64_t i = 0; i < used; i++) {
            uint64_t gap, f;
            if (ms_get_varint(&p, end, &gap) || ms_get_varint(&p, end, &f) || gap >= alpha ||
                (sym += gap) >= alpha || f >= SCALE || (total += f + 1) > SCALE)
                return -1;
            s->freq[sym++] = (uint16_t)(f + 1);
        }
        if (total != SCALE)
            return -1;
        uint32_t cum = 0;
        for (unsigned i = 0; i < alpha; i++) {
            s->start[i] = (uint16_t)cum;
            for (uint32_t j = 0; j < s->freq[i]; j++)
                s->lut[cum + j] = (uint16_t)i;
            cum += s->freq[i];
        }
        s->present = 1;
    }
    if (ms_get_varint(&p, end, &v) || v == 0 || v > MAX_SEGS)
        return -1;
    m->segs_left = v;
    m->seg_p = p;
    m->seg_limit = end;
    return 0;
}

/* Opens the next segment: each stream's states and bytes, the raw bits, the check value.
 * Returns 0, or -1 when there is none or it is cut short or malformed. */
static int seg_open(struct model *m)
{
    const uint8_t *p = m->seg_p, *end = m->seg_limit;
    uint64_t v;
    if (!m->segs_left)
        return -1;
    for (int sid = 0; sid < NSTREAM; sid++) {
        struct tstream *s = &m->ts[sid];
        if (!s->present)
            continue;
        if (ms_get_varint(&p, end, &v) || (v && v < 16) || v > (uint64_t)(end - p))
            return -1;
        s->live = v != 0;
        if (v) {
            memcpy(&s->x[0], p, 8);
            memcpy(&s->x[1], p + 8, 8);
        }
        s->next = 0;
        s->p = p + (v ? 16 : 0);
        s->end = p + v;
        p += v;
    }
    if (ms_get_varint(&p, end, &v) || v > (uint64_t)(end - p))
        return -1;
    m->bits.p = p;
    m->bits.end = p + v;
    m->bits.acc = 0;
    m->bits.n = 0;
    p += v;
    if (end - p < 4)
        return -1;
    memcpy(&m->check, p, 4);
    m->seg_p = p + 4;
    m->segs_left--;
    return 0;
}

/* ---- Decoder ------------------------------------------------------------------------------- */

INLINE size_t pack_decode(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out,
                          size_t want, int *damaged)
{
    *damaged = 0;
    size_t n = 0;
    if (want == 0)
        return 0;
    struct model *m = model_new(base_ns);
    uint8_t *scratch = malloc(EXT_REST_MAX);
    if (!m || !scratch) {
        model_free(m);
        free(scratch);
        *damaged = 1;
        return 0;
    }
    if (chunk_open(m, in, len) < 0) {
        model_free(m);
        free(scratch);
        *damaged = 1;
        return 0;
    }
    /* Records are returned by whole segments whose check value matched: damage drops the
     * segment it is in and everything after it. */
    struct ms_enc_state st = {base_ns, 0};
    size_t good = 0;
    while (n < want) {
        struct prec r = {0};
        if ((m->nrec % SEGMENT == 0 && seg_open(m) < 0) || code_record(1, m, &r, scratch) < 0) {
            *damaged = 1;
            break;
        }
        struct ms_enc_state probe = st;
        size_t k = emit(NULL, &probe, &r);
        if (k > want - n) {
            *damaged = 1;
            break;
        }
        emit(out + n, &st, &r);
        n += k;
        check_record(m, &r);
        if (m->nrec % SEGMENT == 0 || n == want) {
            if (m->check != (uint32_t)(m->hash >> 32)) {
                *damaged = 1;
                break;
            }
            good = n;
        }
    }
    model_free(m);
    free(scratch);
    return good;
}

static size_t pack_decode_any(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out,
                              size_t want, int *damaged)
{
    return pack_decode(in, len, base_ns, out, want, damaged);
}

POPCNT_CLONE static size_t pack_decode_popcnt(const uint8_t *in, size_t len, uint64_t base_ns,
                                              uint8_t *out, size_t want, int *damaged)
{
    return pack_decode(in, len, base_ns, out, want, damaged);
}

size_t ms_pack_decode(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out, size_t want,
                      int *damaged)
{
    return (HAVE_POPCNT() ? pack_decode_popcnt : pack_decode_any)(in, len, base_ns, out, want,
                                                                  damaged);
}

/* ---- Packer -------------------------------------------------------------------------------- */

/* The output of one thread: description chunks then packed chunks, each with its header. */
struct job {
    const struct ms_trace *t;
    size_t first, end;  /* its raw chunks */
    struct obuf out[2]; /* its description chunks, then its packed chunks */
    uint64_t events, records, damaged;
    int rc;
    int done; /* packed (under the pool's lock) */
};

struct meta {
    struct obuf buf; /* records of the open description chunk */
    struct ms_enc_state st;
};

static void put_chunk_header(struct obuf *o, uint32_t magic, size_t payload, const struct job *j,
                             uint32_t seq, uint32_t used, uint64_t base_ns)
{
    const struct ms_trace_chunk_info *ci = &j->t->chunks[j->first];
    struct ms_trace_chunk_header h = {magic,   (uint32_t)(MS_TRACE_CHUNK_HEADER_SIZE + payload),
                                      ci->tid, ci->thread_serial,
                                      seq,     used,
                                      base_ns};
    obuf_put(o, &h, sizeof h);
}

/* Closes the open packed chunk: its payload goes to o right after a header (no copy through
 * another buffer). Returns 0 or -1 (memory). */
static int packed_chunk(struct model *m, struct obuf *o, const struct job *j, uint32_t seq,
                        uint32_t used, uint64_t base_ns)
{
    size_t at = o->len;
    put_chunk_header(o, MS_TRACE_PACK_MAGIC, 0, j, seq, used, base_ns);
    if (chunk_finish(m, o) < 0)
        return -1;
    uint32_t size = (uint32_t)(o->len - at); /* header + payload */
    memcpy(o->p + at + offsetof(struct ms_trace_chunk_header, size), &size, sizeof size);
    return 0;
}

/* Finds the payload after dts in an extension record's raw bytes (which the reader accepted, so
 * its varints are whole and its payload inside them). */
static void ext_rest(const uint8_t *rec, size_t n, const uint8_t **rest, size_t *rest_len)
{
    const uint8_t *p = rec + 1, *end = rec + n;
    uint64_t plen = 0;
    int shift = 0;
    while (p < end && (*p & 0x80))
        plen |= (uint64_t)(*p++ & 0x7f) << shift, shift += 7;
    if (p < end)
        plen |= (uint64_t)*p++ << shift;
    const uint8_t *payload = p;
    while (p < end && (*p & 0x80))
        p++;
    p++;
    *rest = p;
    *rest_len = (size_t)(payload + plen - p);
}

/* Copies one description record (raw bytes rec[0..n)) into the description chunks. Extension
 * records get their dts recomputed for the description chunk's own time state. */
static void meta_add(struct meta *mt, const struct ms_record *r, const uint8_t *rec, size_t n)
{
    if (rec[0] < MS_REC_EXTENSION) {
        obuf_put(&mt->buf, rec, n);
        return;
    }
    const uint8_t *rest;
    size_t rest_len;
    ext_rest(rec, n, &rest, &rest_len);
    uint8_t hdr[1 + MS_VARINT_MAX], ts[MS_VARINT_MAX];
    uint8_t *q = ms_put_ts(ts, &mt->st, r->ns);
    size_t tlen = (size_t)(q - ts);
    hdr[0] = rec[0];
    q = ms_put_varint(hdr + 1, tlen + rest_len);
    obuf_put(&mt->buf, hdr, (size_t)(q - hdr));
    obuf_put(&mt->buf, ts, tlen);
    obuf_put(&mt->buf, rest, rest_len);
}

static int is_description(const struct ms_record *r)
{
    return r->type == MS_REC_STACK || r->type == MS_REC_MODULE || r->type == MS_REC_PROCESS ||
           (r->type == MS_REC_EXTENSION &&
            (r->fn == MS_EXT_PYFRAME || r->fn == MS_EXT_PYSTACK || r->fn == MS_EXT_CUDA_FUNC));
}

/* Packs one job with model m (reset here: a worker keeps one model for all its jobs). */
INLINE void pack_thread(struct job *j, struct model *m)
{
    const struct ms_trace *t = j->t;
    struct obuf packed = {0}, metas = {0};
    struct meta mt = {{0}, {t->chunks[j->first].base_ns, 0}};
    uint64_t meta_base = t->chunks[j->first].base_ns, chunk_base = meta_base;
    struct ms_enc_state st = {chunk_base, 0};
    struct ms_trace_cursor *cur = calloc(1, sizeof *cur);
    uint32_t nmeta = 0, npacked = 0;
    size_t raw = 0;
    model_reset(m, chunk_base);
    if (!cur) {
        j->rc = MS_ENOMEM;
        goto out;
    }
    for (size_t k = j->first; k < j->end; k++) {
        ms_trace_cursor_init(cur, t, k);
        for (;;) {
            const uint8_t *start = cur->p;
            struct ms_record r;
            struct prec pr;
            struct ms_enc_state probe;
            size_t len;
            /* the raw record's delta state: when it is the decoded chunk's, a record of the
             * fast path decodes to the same bytes (ms_trace_cursor_next_heap()) */
            int same = cur->prev_ns == st.prev_ns && cur->prev_addr == st.prev_addr;
            if (ms_trace_cursor_next_heap(cur, &pr.h)) { /* most records */
                j->records++;
                pr.rest = NULL;
                pr.rest_len = 0;
                if (same && raw + (size_t)(cur->p - start) <= MS_PACK_MAX_RAW) {
                    len = (size_t)(cur->p - start);
                    st.prev_ns = cur->prev_ns;
                    st.prev_addr = cur->prev_addr;
                    j->events++;
                    goto code;
                }
                goto event;
            }
            int rc = ms_trace_cursor_next(cur, &r);
            if (rc < 0)
                j->damaged++;
            if (rc != 1)
                break;
            j->records++;
            size_t n = (size_t)(cur->p - start);
            pr = (struct prec){{start[0] >= MS_REC_EXTENSION ? start[0] : r.type + r.fn, r.ns,
                                r.addr, r.size, r.stack_id},
                               NULL,
                               0};
            if (r.type == MS_REC_EXTENSION) { /* its fields stay in the payload bytes */
                ext_rest(start, n, &pr.rest, &pr.rest_len);
                pr.h.addr = pr.h.size = pr.h.stack_id = 0;
            }
            if (is_description(&r) || pr.rest_len > EXT_REST_MAX) {
                if (mt.buf.len + n + 2 * MS_VARINT_MAX >
                    MS_TRACE_MAX_CHUNK - MS_TRACE_CHUNK_HEADER_SIZE) {
                    put_chunk_header(&metas, MS_TRACE_CHUNK_MAGIC, mt.buf.len, j, nmeta++,
                                     (uint32_t)mt.buf.len, meta_base);
                    obuf_put(&metas, mt.buf.p, mt.buf.len);
                    mt.buf.len = 0;
                    meta_base = mt.st.prev_ns;
                    mt.st.prev_addr = 0;
                }
                meta_add(&mt, &r, start, n);
                continue;
            }
        event:
            j->events++;
            probe = st;
            len = kind_of(pr.h.type) == K_OTHER ? emit(NULL, &probe, &pr) : heap_len(&probe, &pr);
            if (raw + len > MS_PACK_MAX_RAW) { /* close this packed chunk, start the next */
                if (packed_chunk(m, &packed, j, npacked++, (uint32_t)raw, chunk_base) < 0) {
                    j->rc = MS_ENOMEM;
                    goto out;
                }
                chunk_base = st.prev_ns;
                st = (struct ms_enc_state){chunk_base, 0};
                model_reset(m, chunk_base);
                probe = st;
                len = emit(NULL, &probe, &pr);
                raw = 0;
            }
            st = probe;
        code:
            if (code_record(0, m, &pr, NULL) < 0) {
                j->rc = MS_ENOMEM; /* the encoder's only failure: the live table is full */
                goto out;
            }
            check_record(m, &pr);
            if (m->nrec % SEGMENT == 0)
                seg_close(m);
            raw += len;
        }
    }
    if (raw) {
        if (packed_chunk(m, &packed, j, npacked++, (uint32_t)raw, chunk_base) < 0) {
            j->rc = MS_ENOMEM;
            goto out;
        }
    }
    if (mt.buf.len) {
        put_chunk_header(&metas, MS_TRACE_CHUNK_MAGIC, mt.buf.len, j, nmeta++, (uint32_t)mt.buf.len,
                         meta_base);
        obuf_put(&metas, mt.buf.p, mt.buf.len);
    }
    /* Description chunks first, then the packed ones; ms_pack_file() numbers them. */
    if (packed.oom || metas.oom || mt.buf.oom)
        j->rc = MS_ENOMEM;
    j->out[0] = metas;
    j->out[1] = packed;
    metas = packed = (struct obuf){0};
out:
    if (cur)
        ms_trace_cursor_release(cur);
    free(cur);
    free(packed.p);
    free(metas.p);
    free(mt.buf.p);
}

static void pack_thread_any(struct job *j, struct model *m)
{
    pack_thread(j, m);
}

POPCNT_CLONE static void pack_thread_popcnt(struct job *j, struct model *m)
{
    pack_thread(j, m);
}

/* The jobs and the output file. Workers take jobs in order; a finished job's output goes to the
 * file as soon as every job before it is there, by whichever worker finds it so (one at a time:
 * `writing`), so that writing overlaps packing and each job's buffer is freed early. */
struct pool {
    struct job *jobs;
    size_t njobs, next; /* jobs planned; the next one to take */
    size_t written;     /* jobs whose output is in the file (or dropped after an error) */
    int writing;        /* a worker is writing finished jobs */
    int fd;
    int rc;               /* the first error; written by the writing worker only */
    uint32_t serial, seq; /* chunk numbering across jobs (number_chunks()) */
    int numbered;         /* a chunk has been numbered */
    uint64_t out_bytes;
    pthread_mutex_t lock;
};

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Gives the chunks of job j (the next in output order) the sequence numbers that follow those
 * of the same thread in the jobs before it: 0, 1, 2, ... per thread. */
static void number_chunks(struct pool *pl, struct job *j)
{
    for (int k = 0; k < 2; k++) {
        struct obuf *o = &j->out[k];
        for (size_t off = 0; off + MS_TRACE_CHUNK_HEADER_SIZE <= o->len;) {
            struct ms_trace_chunk_header h;
            memcpy(&h, o->p + off, sizeof h);
            if (h.thread_serial != pl->serial || !pl->numbered) {
                pl->serial = h.thread_serial;
                pl->seq = 0;
                pl->numbered = 1;
            }
            h.seq = pl->seq++;
            memcpy(o->p + off, &h, sizeof h);
            off += h.size;
        }
    }
}

/* Called with the lock held after a job is done: writes every finished job that is next in
 * order, unless another worker is doing so (it will see this job before it stops). */
static void write_done(struct pool *pl)
{
    if (pl->writing)
        return;
    pl->writing = 1;
    while (pl->written < pl->njobs && pl->jobs[pl->written].done) {
        struct job *j = &pl->jobs[pl->written];
        pthread_mutex_unlock(&pl->lock);
        if (pl->rc == 0)
            pl->rc = j->rc;
        if (pl->rc == 0) {
            number_chunks(pl, j);
            for (int k = 0; k < 2 && pl->rc == 0; k++) {
                pl->rc = write_all(pl->fd, j->out[k].p, j->out[k].len);
                pl->out_bytes += j->out[k].len;
            }
        }
        for (int k = 0; k < 2; k++) {
            free(j->out[k].p);
            j->out[k] = (struct obuf){0};
        }
        pthread_mutex_lock(&pl->lock);
        pl->written++;
    }
    pl->writing = 0;
}

static void *worker(void *arg)
{
    struct pool *pl = arg;
    void (*pack)(struct job *, struct model *) =
        HAVE_POPCNT() ? pack_thread_popcnt : pack_thread_any;
    struct model *m = model_new(0);
    if (m && enc_buffers(m) < 0) {
        model_free(m);
        m = NULL;
    }
    for (;;) {
        pthread_mutex_lock(&pl->lock);
        size_t i = pl->next++;
        pthread_mutex_unlock(&pl->lock);
        if (i >= pl->njobs)
            break;
        if (m)
            pack(&pl->jobs[i], m);
        else
            pl->jobs[i].rc = MS_ENOMEM;
        for (size_t k = pl->jobs[i].first; k < pl->jobs[i].end; k++)
            ms_trace_drop_chunk(pl->jobs[i].t, k); /* packed: not read again */
        pthread_mutex_lock(&pl->lock);
        pl->jobs[i].done = 1;
        write_done(pl);
        pthread_mutex_unlock(&pl->lock);
    }
    model_free(m);
    return NULL;
}

/* Cuts the trace into jobs: runs of one thread's raw chunks holding at most MS_PACK_MAX_RAW
 * bytes of records (or one bigger chunk), so that each job makes about one packed chunk and a
 * thread with many events keeps every worker busy. Fills jobs when not NULL; returns the count. */
static size_t plan_jobs(const struct ms_trace *t, struct job *jobs)
{
    size_t n = 0;
    for (size_t k = 0; k < t->nchunks;) {
        size_t e = k + 1;
        uint64_t bytes = t->chunks[k].used;
        while (e < t->nchunks && t->chunks[e].thread_serial == t->chunks[k].thread_serial &&
               bytes + t->chunks[e].used <= MS_PACK_MAX_RAW)
            bytes += t->chunks[e++].used;
        if (jobs) {
            jobs[n].t = t;
            jobs[n].first = k;
            jobs[n].end = e;
        }
        n++;
        k = e;
    }
    return n;
}

int ms_pack_file(const char *in_path, const char *out_path, int workers, struct ms_pack_stats *st)
{
    struct ms_trace t;
    int rc = ms_trace_open(&t, in_path);
    if (rc < 0)
        return rc;
    if (t.hdr.version != MS_TRACE_VERSION) {
        ms_trace_release(&t);
        return MS_EINVAL;
    }
    size_t njobs = plan_jobs(&t, NULL);
    struct pool pl = {.jobs = calloc(njobs + 1, sizeof *pl.jobs),
                      .njobs = njobs,
                      .lock = PTHREAD_MUTEX_INITIALIZER};
    if (!pl.jobs) {
        ms_trace_release(&t);
        return MS_ENOMEM;
    }
    plan_jobs(&t, pl.jobs);
    /* The header goes first with its magic zero, and whole at the end with the file's size:
     * the magic last, as the agent does, so that a half-written file is never taken for a
     * trace. */
    uint8_t hdr[MS_TRACE_V2_HEADER_SIZE] = {0};
    /* a new file (files.h): a link planted at out_path is never followed */
    pl.fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (pl.fd < 0)
        rc = -errno;
    else
        rc = write_all(pl.fd, hdr, sizeof hdr);
    if (rc == 0) {
        if (workers < 1)
            workers = 1;
        if ((size_t)workers > njobs)
            workers = njobs ? (int)njobs : 1;
        pthread_t tids[64];
        int started = 0;
        for (int i = 1; i < workers && i < 64; i++)
            if (pthread_create(&tids[started], NULL, worker, &pl) == 0)
                started++;
        worker(&pl);
        for (int i = 0; i < started; i++)
            pthread_join(tids[i], NULL);
        rc = pl.rc;
    }
    struct ms_pack_stats s = {0};
    s.in_bytes = t.size;
    for (size_t i = 0; i < njobs; i++) {
        s.events += pl.jobs[i].events;
        s.records += pl.jobs[i].records;
        s.damaged += pl.jobs[i].damaged;
        free(pl.jobs[i].out[0].p); /* only after an error: written jobs are freed at once */
        free(pl.jobs[i].out[1].p);
    }
    s.out_bytes = pl.out_bytes + sizeof hdr;
    if (rc == 0) {
        struct ms_trace_file_header h = t.hdr;
        h.version = MS_TRACE_PACKED_VERSION;
        h.header_size = MS_TRACE_V2_HEADER_SIZE;
        h.chunk_align = 1;
        h.flags |= MS_TRACE_F_PACKED;
        h.file_end = s.out_bytes;
        memcpy(hdr + 8, (const uint8_t *)&h + 8, sizeof h - 8);
        errno = 0;
        if (pwrite(pl.fd, hdr + 8, sizeof hdr - 8, 8) != (ssize_t)(sizeof hdr - 8) ||
            pwrite(pl.fd, MS_TRACE_MAGIC, 8, 0) != 8)
            rc = errno ? -errno : MS_EIO;
    }
    if (pl.fd >= 0 && close(pl.fd) < 0 && rc == 0)
        rc = -errno;
    free(pl.jobs);
    ms_trace_release(&t);
    if (rc == 0 && st)
        *st = s;
    return rc;
}
