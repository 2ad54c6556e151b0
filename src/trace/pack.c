/* pack.c: packed traces (see pack.h): the model, the range coder, the packer and the decoder.
 *
 * Called by `memscope run` after the traced program has ended (ms_pack_file) and by the reader
 * for each packed chunk (ms_pack_decode). Workload: millions of events per thread, packed once
 * and decoded once; the threads of a trace are packed in parallel.
 *
 * What a packed file holds, per thread of the raw trace:
 * - description chunks (raw "MSCK" chunks, version-1 records): the thread's STACK, MODULE,
 *   PROCESS, PYFRAME and PYSTACK records, in order. Readers gather those before any event
 *   anyway, so moving them out of the event stream loses nothing.
 * - packed chunks ("MSPK"): every other record, in order, coded with the model below. A chunk
 *   decodes to at most MS_PACK_MAX_RAW bytes of version-1 records; the model restarts at each
 *   packed chunk, so damage never spreads past one.
 *
 * The model. Each record is coded as a sequence of binary decisions, each with an adaptive
 * probability (11 bits, moved 1/32 of the way to each outcome), fed to a range coder in the
 * manner of LZMA's; rarely informative low bits are coded at probability 1/2. Numbers are coded
 * as their bit length (a 7-level bit tree) then their bits below the top one, the highest few
 * of them modelled per bit length. Per record:
 * - kind: "free?" then "allocation by the same function as the last one?" (context: the kind
 *   of the previous record), else the type byte;
 * - time: the nanoseconds since the previous record, a number in the context of (previous kind,
 *   this kind);
 * - allocation: the stack id by its place in a move-to-front list of 16 recent ids; the size as
 *   "same as this stack's last size" or a number; the address by where it came from: the last
 *   or second-to-last freed block of the same size class (an allocator's per-size free lists),
 *   the end of the previous allocation (a block carved after it), the k-th most recent free, or
 *   else a delta from the previous address;
 * - free: the block by its rank among the thread's live blocks counted from the newest (an
 *   order-statistics tree over allocation numbers), or an address delta for a block this thread
 *   did not allocate in this chunk;
 * - other events (mmap, munmap, lost, annotations): their fields as numbers and bytes.
 * The decoder runs the same model on the same history, so both sides make the same predictions.
 * Decoded records are written back in version-1 encoding, with addresses and times exactly as
 * recorded. */
#include "pack.h"

#include "encode.h"
#include "error.h"
#include "format.h"
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Range coder -------------------------------------------------------------------------- */

#define PROB_BITS 11
#define PROB_ONE (1u << PROB_BITS)
#define MOVE_BITS 5
#define RC_TOP (1u << 24)

struct obuf {
    uint8_t *p;
    size_t len, cap;
    int oom;
};

static void obuf_put(struct obuf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

/* One coder codes (dec = 0) or decodes (dec = 1): the model code is written once, for both. */
struct coder {
    int dec;
    uint32_t range;
    /* encoder */
    uint64_t low;
    uint64_t cache_size;
    uint8_t cache;
    struct obuf *out;
    /* decoder */
    uint32_t code;
    const uint8_t *p, *end;
    unsigned overrun; /* bytes wanted past the end of the input */
    int bad;          /* a decoded value broke a rule of the model */
};

static void enc_shift(struct coder *c)
{
    if ((uint32_t)c->low < 0xff000000u || (c->low >> 32) != 0) {
        uint8_t carry = (uint8_t)(c->low >> 32), b = c->cache;
        do {
            uint8_t v = (uint8_t)(b + carry);
            obuf_put(c->out, &v, 1);
            b = 0xff;
        } while (--c->cache_size != 0);
        c->cache = (uint8_t)(c->low >> 24);
    }
    c->cache_size++;
    c->low = (c->low & 0x00ffffffu) << 8;
}

static uint8_t dec_byte(struct coder *c)
{
    if (c->p < c->end)
        return *c->p++;
    c->overrun++;
    return 0;
}

static void coder_init_enc(struct coder *c, struct obuf *out)
{
    memset(c, 0, sizeof *c);
    c->range = 0xffffffffu;
    c->cache_size = 1;
    c->out = out;
}

static void coder_init_dec(struct coder *c, const uint8_t *in, size_t len)
{
    memset(c, 0, sizeof *c);
    c->dec = 1;
    c->range = 0xffffffffu;
    c->p = in;
    c->end = in + len;
    for (int i = 0; i < 5; i++)
        c->code = (c->code << 8) | dec_byte(c);
}

static void coder_flush(struct coder *c)
{
    for (int i = 0; i < 5; i++)
        enc_shift(c);
}

static inline void normalize(struct coder *c)
{
    while (c->range < RC_TOP) {
        c->range <<= 8;
        if (c->dec)
            c->code = (c->code << 8) | dec_byte(c);
        else
            enc_shift(c);
    }
}

/* Codes bit with probability *p (of a 0, in 1/2048) and adapts *p; returns the bit. */
static inline int cbit(struct coder *c, uint16_t *p, int bit)
{
    uint32_t bound = (c->range >> PROB_BITS) * *p;
    if (c->dec)
        bit = c->code >= bound;
    if (bit) {
        if (c->dec)
            c->code -= bound;
        else
            c->low += bound;
        c->range -= bound;
        *p = (uint16_t)(*p - (*p >> MOVE_BITS));
    } else {
        c->range = bound;
        *p = (uint16_t)(*p + ((PROB_ONE - *p) >> MOVE_BITS));
    }
    normalize(c);
    return bit;
}

/* Codes the n low bits of v at probability 1/2 each, highest first; returns them. */
static uint64_t cdirect(struct coder *c, uint64_t v, int n)
{
    uint64_t r = 0;
    for (int i = n - 1; i >= 0; i--) {
        c->range >>= 1;
        int b;
        if (c->dec) {
            b = c->code >= c->range;
            if (b)
                c->code -= c->range;
        } else {
            b = (int)((v >> i) & 1);
            if (b)
                c->low += c->range;
        }
        r = (r << 1) | (uint64_t)b;
        normalize(c);
    }
    return r;
}

/* Codes the n-bit value v with the bit tree probs[1 .. 2^n - 1]; returns it. */
static unsigned ctree(struct coder *c, uint16_t *probs, int n, unsigned v)
{
    unsigned m = 1;
    for (int i = n - 1; i >= 0; i--)
        m = (m << 1) | (unsigned)cbit(c, &probs[m], (int)((v >> i) & 1));
    return m - (1u << n);
}

/* A number model: bit length, then the `mant` highest bits below the top one per length. */
#define MANT_MAX 6
struct num {
    int mant;
    uint16_t len[128];
    uint16_t m[65 << MANT_MAX];
};

static uint64_t cnum(struct coder *c, struct num *nm, uint64_t v)
{
    unsigned n = v ? 64u - (unsigned)__builtin_clzll(v) : 0;
    n = ctree(c, nm->len, 7, n);
    if (n > 64) {
        c->bad = 1;
        return 0;
    }
    if (n <= 1)
        return n;
    int mb = (int)n - 1, k = mb < nm->mant ? mb : nm->mant;
    unsigned top = ctree(c, nm->m + (n << nm->mant), k, (unsigned)(v >> (mb - k)) & ((1u << k) - 1));
    uint64_t low = cdirect(c, v, mb - k);
    return (1ull << mb) | ((uint64_t)top << (mb - k)) | low;
}

/* ---- The model ----------------------------------------------------------------------------- */

enum { K_ALLOC, K_FREE, K_OTHER };
enum { SRC_CLASS0, SRC_CLASS1, SRC_END, SRC_AGE, SRC_DELTA16, SRC_DELTA1 };

#define MTF_LEN 16
#define NCLASS 1024  /* size classes of 16 bytes: blocks up to ~16 KiB */
#define RING 1024    /* recent frees remembered for SRC_AGE */
#define FHASH 4096   /* encoder's index of the ring */
#define SIZE_CACHE 1024
#define EXT_REST_MAX 65536u /* bigger annotation payloads go to the description chunk */
#define MAX_SEQ (MS_PACK_MAX_RAW / 4) /* allocations per chunk: each takes >= 5 raw bytes */

struct live_slot {
    uint64_t addr; /* 0: empty */
    uint32_t seq;
};

struct model {
    struct coder c;
    /* probabilities */
    uint16_t is_free[3], same_fn[3], type[256];
    uint16_t src[2][8];
    uint16_t stack_rank[32];
    uint16_t size_same;
    uint16_t free_hit, free_aligned;
    uint16_t bytes[256];
    struct num dt[9], size, rank, age, addr, misc;
    /* history */
    int prev_kind, last_fn;
    uint64_t prev_ns, prev_addr, prev_end, prev_maddr;
    uint32_t mtf[MTF_LEN];
    unsigned nmtf;
    struct { uint32_t id; uint64_t size; } size_cache[SIZE_CACHE];
    uint64_t cls[NCLASS][2];
    uint64_t ring[RING];
    uint64_t nfree;
    struct { uint64_t addr, fseq; } fhash[FHASH]; /* encoder only */
    /* live blocks allocated in this chunk: addr -> allocation number, and back */
    struct live_slot *map;
    size_t map_cap, map_used;
    uint32_t *fen;        /* Fenwick tree over allocation numbers + 1: 1 = live */
    uint64_t *seq_addr, *seq_size;
    uint32_t nseq, nlive;
};

static void num_init(struct num *nm, int mant)
{
    nm->mant = mant;
    for (size_t i = 0; i < sizeof nm->len / 2; i++)
        nm->len[i] = PROB_ONE / 2;
    for (size_t i = 0; i < sizeof nm->m / 2; i++)
        nm->m[i] = PROB_ONE / 2;
}

static void probs_init(uint16_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = PROB_ONE / 2;
}

static void model_free(struct model *m)
{
    if (!m)
        return;
    free(m->map);
    free(m->fen);
    free(m->seq_addr);
    free(m->seq_size);
    free(m);
}

/* Returns a fresh model whose history starts at base_ns, or NULL when memory is short. The
 * per-allocation arrays are calloc'ed at their cap; only the pages a chunk uses are touched. */
static struct model *model_new(uint64_t base_ns)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    probs_init(m->is_free, 3);
    probs_init(m->same_fn, 3);
    probs_init(m->type, 256);
    probs_init(&m->src[0][0], 16);
    probs_init(m->stack_rank, 32);
    probs_init(&m->size_same, 1);
    probs_init(&m->free_hit, 1);
    probs_init(&m->free_aligned, 1);
    probs_init(m->bytes, 256);
    for (int i = 0; i < 9; i++)
        num_init(&m->dt[i], 6);
    num_init(&m->size, 4);
    num_init(&m->rank, 4);
    num_init(&m->age, 4);
    num_init(&m->addr, 3);
    num_init(&m->misc, 2);
    m->prev_kind = K_OTHER;
    m->prev_ns = base_ns;
    m->map_cap = 1024;
    m->map = calloc(m->map_cap, sizeof *m->map);
    m->fen = calloc(MAX_SEQ + 1, sizeof *m->fen);
    m->seq_addr = calloc(MAX_SEQ, sizeof *m->seq_addr);
    m->seq_size = calloc(MAX_SEQ, sizeof *m->seq_size);
    if (!m->map || !m->fen || !m->seq_addr || !m->seq_size) {
        model_free(m);
        return NULL;
    }
    return m;
}

static size_t hash_addr(uint64_t a)
{
    return (size_t)((a >> 4) * 0x9e3779b97f4a7c15ull >> 20);
}

/* Live map: open addressing, linear probing, backward-shift deletion; load <= 1/2. */
static struct live_slot *map_find(struct model *m, uint64_t addr)
{
    size_t mask = m->map_cap - 1;
    for (size_t i = hash_addr(addr) & mask;; i = (i + 1) & mask) {
        if (m->map[i].addr == addr)
            return &m->map[i];
        if (!m->map[i].addr)
            return NULL;
    }
}

static void map_delete(struct model *m, struct live_slot *s)
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

static int map_insert(struct model *m, uint64_t addr, uint32_t seq)
{
    if (2 * (m->map_used + 1) > m->map_cap) {
        size_t cap = m->map_cap * 2;
        struct live_slot *n = calloc(cap, sizeof *n), *old = m->map;
        if (!n)
            return -1;
        size_t oldcap = m->map_cap;
        m->map = n;
        m->map_cap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].addr) {
                size_t j = hash_addr(old[i].addr) & (cap - 1);
                while (n[j].addr)
                    j = (j + 1) & (cap - 1);
                n[j] = old[i];
            }
        free(old);
    }
    size_t mask = m->map_cap - 1, i = hash_addr(addr) & mask;
    while (m->map[i].addr)
        i = (i + 1) & mask;
    m->map[i].addr = addr;
    m->map[i].seq = seq;
    m->map_used++;
    return 0;
}

static void fen_add(struct model *m, uint32_t i, int d)
{
    for (i++; i <= MAX_SEQ; i += i & -i)
        m->fen[i] = (uint32_t)((int64_t)m->fen[i] + d);
}

/* Live blocks with allocation number < i. */
static uint32_t fen_prefix(const struct model *m, uint32_t i)
{
    uint32_t s = 0;
    for (; i; i -= i & -i)
        s += m->fen[i];
    return s;
}

/* The allocation number of the k-th (1-based) oldest live block. */
static uint32_t fen_kth(const struct model *m, uint32_t k)
{
    uint32_t pos = 0;
    for (uint32_t step = 1u << 21; step; step >>= 1) /* 2^21 >= MAX_SEQ */
        if (pos + step <= MAX_SEQ && m->fen[pos + step] < k) {
            pos += step;
            k -= m->fen[pos];
        }
    return pos; /* 0-based number = (1-based index pos + 1) - 1 */
}

static void live_remove(struct model *m, struct live_slot *s)
{
    fen_add(m, s->seq, -1);
    m->nlive--;
    map_delete(m, s);
}

static int live_add(struct model *m, uint64_t addr, uint64_t size)
{
    if (!addr)
        return 0;
    struct live_slot *s = map_find(m, addr);
    if (s) /* freed by another thread meanwhile: forget the old block */
        live_remove(m, s);
    if (m->nseq >= MAX_SEQ || map_insert(m, addr, m->nseq) < 0)
        return -1;
    m->seq_addr[m->nseq] = addr;
    m->seq_size[m->nseq] = size;
    fen_add(m, m->nseq, 1);
    m->nseq++;
    m->nlive++;
    return 0;
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

/* Codes an address as a delta from prev_addr (16-byte units when both are aligned). */
static uint64_t code_delta(struct model *m, int src, uint64_t addr)
{
    struct coder *c = &m->c;
    if (src == SRC_DELTA16) {
        int64_t d = (int64_t)(addr - m->prev_addr) / 16;
        return m->prev_addr + (uint64_t)ms_unzigzag(cnum(c, &m->addr, ms_zigzag(d))) * 16;
    }
    return m->prev_addr + (uint64_t)ms_unzigzag(cnum(c, &m->addr, ms_zigzag((int64_t)(addr - m->prev_addr))));
}

/* Codes the address of a new heap block of `size` bytes; returns it. */
static uint64_t code_alloc_addr(struct model *m, uint64_t addr, uint64_t size)
{
    struct coder *c = &m->c;
    int cl = size_class(size), src = SRC_DELTA1;
    uint64_t *lifo = cl >= 0 ? m->cls[cl] : NULL;
    uint64_t age = 0;
    if (!c->dec) {
        size_t h = hash_addr(addr) & (FHASH - 1);
        if (lifo && addr && lifo[0] == addr)
            src = SRC_CLASS0;
        else if (lifo && addr && lifo[1] == addr)
            src = SRC_CLASS1;
        else if (addr && addr == m->prev_end)
            src = SRC_END;
        else if (addr && m->fhash[h].addr == addr && m->nfree - m->fhash[h].fseq <= RING &&
                 m->ring[m->fhash[h].fseq % RING] == addr) {
            src = SRC_AGE;
            age = m->nfree - m->fhash[h].fseq - 1;
        } else if (((addr | m->prev_addr) & 15) == 0)
            src = SRC_DELTA16;
    }
    src = (int)ctree(c, m->src[lifo && lifo[0]], 3, (unsigned)src);
    switch (src) {
    case SRC_CLASS0:
    case SRC_CLASS1:
        if (!lifo || !lifo[src]) {
            c->bad = 1;
            return 0;
        }
        addr = lifo[src];
        if (src == SRC_CLASS0)
            lifo[0] = lifo[1];
        lifo[1] = 0;
        break;
    case SRC_END:
        addr = m->prev_end;
        break;
    case SRC_AGE:
        age = cnum(c, &m->age, age);
        if (age >= RING || age >= m->nfree) {
            c->bad = 1;
            return 0;
        }
        addr = m->ring[(m->nfree - 1 - age) % RING];
        break;
    case SRC_DELTA16:
    case SRC_DELTA1:
        addr = code_delta(m, src, addr);
        m->prev_addr = addr;
        break;
    default:
        c->bad = 1;
        return 0;
    }
    m->prev_end = chunk_end(addr, size);
    return addr;
}

/* Codes the address of a freed heap block; returns it. */
static uint64_t code_free_addr(struct model *m, uint64_t addr)
{
    struct coder *c = &m->c;
    struct live_slot *s = c->dec ? NULL : map_find(m, addr);
    uint64_t rank = 0;
    if (s)
        rank = m->nlive - fen_prefix(m, s->seq + 1);
    if (!cbit(c, &m->free_hit, s == NULL)) { /* a block this thread allocated */
        rank = cnum(c, &m->rank, rank);
        if (c->dec) {
            if (rank >= m->nlive) {
                c->bad = 1;
                return 0;
            }
            addr = m->seq_addr[fen_kth(m, m->nlive - (uint32_t)rank)];
            s = map_find(m, addr);
            if (!s) {
                c->bad = 1;
                return 0;
            }
        }
        int cl = size_class(m->seq_size[s->seq]);
        if (cl >= 0) {
            m->cls[cl][1] = m->cls[cl][0];
            m->cls[cl][0] = addr;
        }
        live_remove(m, s);
    } else {
        int src = SRC_DELTA1;
        if (!c->dec && ((addr | m->prev_addr) & 15) == 0)
            src = SRC_DELTA16;
        src = cbit(c, &m->free_aligned, src == SRC_DELTA16) ? SRC_DELTA16 : SRC_DELTA1;
        addr = code_delta(m, src, addr);
        m->prev_addr = addr;
    }
    if (!c->dec) {
        size_t h = hash_addr(addr) & (FHASH - 1);
        m->fhash[h].addr = addr;
        m->fhash[h].fseq = m->nfree;
    }
    m->ring[m->nfree % RING] = addr;
    m->nfree++;
    return addr;
}

static uint32_t code_stack(struct model *m, uint32_t id)
{
    struct coder *c = &m->c;
    unsigned r = MTF_LEN;
    if (!c->dec)
        for (unsigned i = 0; i < m->nmtf; i++)
            if (m->mtf[i] == id) {
                r = i;
                break;
            }
    r = ctree(c, m->stack_rank, 5, r);
    if (r < m->nmtf)
        id = m->mtf[r];
    else if (r == MTF_LEN) {
        uint64_t v = cnum(c, &m->misc, id);
        if (v > UINT32_MAX) {
            c->bad = 1;
            return 0;
        }
        id = (uint32_t)v;
        r = m->nmtf < MTF_LEN ? m->nmtf++ : MTF_LEN - 1;
    } else {
        c->bad = 1;
        return 0;
    }
    memmove(m->mtf + 1, m->mtf, r * sizeof *m->mtf);
    m->mtf[0] = id;
    return id;
}

static uint64_t code_size(struct model *m, uint32_t stack, uint64_t size)
{
    struct coder *c = &m->c;
    __typeof__(m->size_cache[0]) *e = &m->size_cache[stack % SIZE_CACHE];
    if (e->id == stack && stack && cbit(c, &m->size_same, e->size != size) == 0)
        return e->size;
    size = cnum(c, &m->size, size);
    e->id = stack;
    e->size = size;
    return size;
}

/* ---- Records ------------------------------------------------------------------------------- */

/* One event record as the packer sees it. */
struct prec {
    int type;           /* the version-1 type byte, without the aligned flag */
    uint64_t ns, addr, size;
    uint32_t stack;
    const uint8_t *rest; /* EXTENSION: the payload after its dts */
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
static int code_record(struct model *m, struct prec *r, uint8_t *scratch)
{
    struct coder *c = &m->c;
    int pk = m->prev_kind;
    int type = r->type;
    if (cbit(c, &m->is_free[pk], type == MS_REC_HEAP_FREE))
        type = MS_REC_HEAP_FREE;
    else if (cbit(c, &m->same_fn[pk], type == MS_REC_HEAP_ALLOC + m->last_fn))
        type = MS_REC_HEAP_ALLOC + m->last_fn;
    else {
        type = (int)ctree(c, m->type, 8, (unsigned)type);
        if (!valid_type(type))
            return -1;
    }
    r->type = type;
    int k = kind_of(type);
    uint64_t dt = r->ns > m->prev_ns ? r->ns - m->prev_ns : 0;
    dt = cnum(c, &m->dt[pk * 3 + k], dt);
    m->prev_ns += dt;
    r->ns = m->prev_ns;
    m->prev_kind = k;
    if (k == K_ALLOC) {
        m->last_fn = type & 0x0f;
        r->stack = code_stack(m, r->stack);
        r->size = code_size(m, r->stack, r->size);
        r->addr = code_alloc_addr(m, r->addr, r->size);
        if (!c->bad && live_add(m, r->addr, r->size) < 0)
            return -1;
    } else if (k == K_FREE) {
        r->addr = code_free_addr(m, r->addr);
    } else if ((type & 0xf8) == MS_REC_MMAP_ALLOC || type == MS_REC_MUNMAP) {
        r->addr = m->prev_maddr + (uint64_t)ms_unzigzag(cnum(c, &m->misc,
                                                      ms_zigzag((int64_t)(r->addr - m->prev_maddr))));
        m->prev_maddr = r->addr;
        r->size = cnum(c, &m->misc, r->size);
        if (type != MS_REC_MUNMAP) {
            uint64_t s = cnum(c, &m->misc, r->stack);
            if (s > UINT32_MAX)
                return -1;
            r->stack = (uint32_t)s;
        }
    } else if (type == MS_REC_LOST) {
        r->size = cnum(c, &m->misc, r->size);
    } else { /* EXTENSION */
        uint64_t n = cnum(c, &m->misc, r->rest_len);
        if (n > EXT_REST_MAX)
            return -1;
        for (uint64_t i = 0; i < n; i++) {
            unsigned b = ctree(c, m->bytes, 8, c->dec ? 0 : r->rest[i]);
            if (c->dec)
                scratch[i] = (uint8_t)b;
        }
        if (c->dec)
            r->rest = scratch;
        r->rest_len = (size_t)n;
    }
    return c->bad ? -1 : 0;
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
    int t = r->type;
    if (t >= MS_REC_EXTENSION) {
        uint64_t d = r->ns > st->prev_ns ? r->ns - st->prev_ns : 0;
        size_t plen = varint_len(d) + r->rest_len;
        size_t n = 1 + varint_len(plen) + plen;
        if (out) {
            *p++ = (uint8_t)t;
            p = ms_put_varint(p, plen);
            p = ms_put_ts(p, st, r->ns);
            memcpy(p, r->rest, r->rest_len);
        } else if (r->ns > st->prev_ns)
            st->prev_ns = r->ns;
        return n;
    }
    if ((t & 0xf0) == MS_REC_HEAP_ALLOC || (t & 0xf8) == MS_REC_MMAP_ALLOC)
        e = ms_enc_alloc(p, st, t, r->ns, r->addr, r->size, r->stack);
    else if (t == MS_REC_HEAP_FREE)
        e = ms_enc_free(p, st, r->ns, r->addr);
    else if (t == MS_REC_MUNMAP)
        e = ms_enc_munmap(p, st, r->ns, r->addr, r->size);
    else
        e = ms_enc_lost(p, st, r->ns, r->size);
    return (size_t)(e - p);
}

/* ---- Decoder ------------------------------------------------------------------------------- */

size_t ms_pack_decode(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out, size_t want,
                      int *damaged)
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
    coder_init_dec(&m->c, in, len);
    struct ms_enc_state st = {base_ns, 0};
    while (n < want) {
        struct prec r = {0};
        /* The coder's final flush is 4 bytes past the last needed one; more is damage. */
        if (code_record(m, &r, scratch) < 0 || m->c.overrun > 4) {
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
    }
    model_free(m);
    free(scratch);
    return n;
}

/* ---- Packer -------------------------------------------------------------------------------- */

/* The output of one thread: description chunks then packed chunks, each with its header. */
struct job {
    const struct ms_trace *t;
    size_t first, end; /* its raw chunks */
    struct obuf out;
    uint64_t events, records, damaged;
    int rc;
};

struct meta {
    struct obuf buf; /* records of the open description chunk */
    struct ms_enc_state st;
};

static void put_chunk_header(struct obuf *o, uint32_t magic, size_t payload, const struct job *j,
                             uint32_t seq, uint32_t used, uint64_t base_ns)
{
    const struct ms_trace_chunk_info *ci = &j->t->chunks[j->first];
    struct ms_trace_chunk_header h = {magic, (uint32_t)(MS_TRACE_CHUNK_HEADER_SIZE + payload),
                                      ci->tid, ci->thread_serial, seq, used, base_ns};
    obuf_put(o, &h, sizeof h);
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
           (r->type == MS_REC_EXTENSION && (r->fn == MS_EXT_PYFRAME || r->fn == MS_EXT_PYSTACK));
}

static void pack_thread(struct job *j)
{
    const struct ms_trace *t = j->t;
    struct obuf packed = {0}, metas = {0};
    struct meta mt = {{0}, {t->chunks[j->first].base_ns, 0}};
    uint64_t meta_base = t->chunks[j->first].base_ns, chunk_base = meta_base;
    struct ms_enc_state st = {chunk_base, 0};
    struct model *m = model_new(chunk_base);
    struct ms_trace_cursor *cur = calloc(1, sizeof *cur);
    uint32_t nmeta = 0, npacked = 0;
    size_t raw = 0;
    struct obuf body = {0};
    if (!m || !cur) {
        j->rc = MS_ENOMEM;
        goto out;
    }
    coder_init_enc(&m->c, &body);
    for (size_t k = j->first; k < j->end; k++) {
        ms_trace_cursor_init(cur, t, k);
        for (;;) {
            const uint8_t *start = cur->p;
            struct ms_record r;
            int rc = ms_trace_cursor_next(cur, &r);
            if (rc < 0)
                j->damaged++;
            if (rc != 1)
                break;
            j->records++;
            size_t n = (size_t)(cur->p - start);
            struct prec pr = {start[0] >= MS_REC_EXTENSION ? start[0] : r.type + r.fn, r.ns,
                              r.addr, r.size, r.stack_id, NULL, 0};
            if (r.type == MS_REC_EXTENSION)
                ext_rest(start, n, &pr.rest, &pr.rest_len);
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
            j->events++;
            struct ms_enc_state probe = st;
            size_t len = emit(NULL, &probe, &pr);
            if (raw + len > MS_PACK_MAX_RAW) { /* close this packed chunk, start the next */
                coder_flush(&m->c);
                put_chunk_header(&packed, MS_TRACE_PACK_MAGIC, body.len, j, npacked++,
                                 (uint32_t)raw, chunk_base);
                obuf_put(&packed, body.p, body.len);
                body.len = 0;
                model_free(m);
                chunk_base = st.prev_ns;
                st = (struct ms_enc_state){chunk_base, 0};
                m = model_new(chunk_base);
                if (!m) {
                    j->rc = MS_ENOMEM;
                    goto out;
                }
                coder_init_enc(&m->c, &body);
                probe = st;
                len = emit(NULL, &probe, &pr);
                raw = 0;
            }
            if (code_record(m, &pr, NULL) < 0) {
                j->rc = MS_ENOMEM; /* the encoder's only failure: the live table is full */
                goto out;
            }
            emit(NULL, &st, &pr);
            raw += len;
        }
    }
    if (raw) {
        coder_flush(&m->c);
        put_chunk_header(&packed, MS_TRACE_PACK_MAGIC, body.len, j, npacked++, (uint32_t)raw,
                         chunk_base);
        obuf_put(&packed, body.p, body.len);
    }
    if (mt.buf.len) {
        put_chunk_header(&metas, MS_TRACE_CHUNK_MAGIC, mt.buf.len, j, nmeta++,
                         (uint32_t)mt.buf.len, meta_base);
        obuf_put(&metas, mt.buf.p, mt.buf.len);
    }
    /* Description chunks first, then the packed ones: renumber the packed chunks after them. */
    for (size_t off = 0; off < packed.len;) {
        struct ms_trace_chunk_header h;
        memcpy(&h, packed.p + off, sizeof h);
        h.seq += nmeta;
        memcpy(packed.p + off, &h, sizeof h);
        off += h.size;
    }
    obuf_put(&j->out, metas.p, metas.len);
    obuf_put(&j->out, packed.p, packed.len);
    if (j->out.oom || packed.oom || metas.oom || body.oom || mt.buf.oom)
        j->rc = MS_ENOMEM;
out:
    model_free(m);
    free(cur);
    free(packed.p);
    free(metas.p);
    free(body.p);
    free(mt.buf.p);
}

struct pool {
    struct job *jobs;
    size_t njobs, next;
    pthread_mutex_t lock;
};

static void *worker(void *arg)
{
    struct pool *pl = arg;
    for (;;) {
        pthread_mutex_lock(&pl->lock);
        size_t i = pl->next++;
        pthread_mutex_unlock(&pl->lock);
        if (i >= pl->njobs)
            return NULL;
        pack_thread(&pl->jobs[i]);
    }
}

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
    size_t njobs = 0;
    for (size_t k = 0; k < t.nchunks; njobs++) {
        size_t e = k + 1;
        while (e < t.nchunks && t.chunks[e].thread_serial == t.chunks[k].thread_serial)
            e++;
        k = e;
    }
    struct pool pl = {calloc(njobs + 1, sizeof *pl.jobs), njobs, 0, PTHREAD_MUTEX_INITIALIZER};
    if (!pl.jobs) {
        ms_trace_release(&t);
        return MS_ENOMEM;
    }
    for (size_t k = 0, i = 0; k < t.nchunks; i++) {
        size_t e = k + 1;
        while (e < t.nchunks && t.chunks[e].thread_serial == t.chunks[k].thread_serial)
            e++;
        pl.jobs[i].t = &t;
        pl.jobs[i].first = k;
        pl.jobs[i].end = e;
        k = e;
    }
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

    struct ms_pack_stats s = {0};
    s.in_bytes = t.size;
    for (size_t i = 0; i < njobs && rc == 0; i++) {
        rc = pl.jobs[i].rc;
        s.events += pl.jobs[i].events;
        s.records += pl.jobs[i].records;
        s.damaged += pl.jobs[i].damaged;
        s.out_bytes += pl.jobs[i].out.len;
    }
    if (rc == 0) {
        uint8_t hdr[MS_TRACE_V2_HEADER_SIZE] = {0};
        struct ms_trace_file_header h = t.hdr;
        h.version = MS_TRACE_PACKED_VERSION;
        h.header_size = MS_TRACE_V2_HEADER_SIZE;
        h.chunk_align = 1;
        h.flags |= MS_TRACE_F_PACKED;
        s.out_bytes += sizeof hdr;
        h.file_end = s.out_bytes;
        memcpy(hdr + 8, (const uint8_t *)&h + 8, sizeof h - 8);
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            rc = -errno;
        else {
            rc = write_all(fd, hdr, sizeof hdr);
            for (size_t i = 0; i < njobs && rc == 0; i++)
                rc = write_all(fd, pl.jobs[i].out.p, pl.jobs[i].out.len);
            /* The magic last, as the agent does: a half-written file is never taken for a trace. */
            if (rc == 0 && pwrite(fd, MS_TRACE_MAGIC, 8, 0) != 8)
                rc = -errno;
            if (close(fd) < 0 && rc == 0)
                rc = -errno;
        }
    }
    for (size_t i = 0; i < njobs; i++)
        free(pl.jobs[i].out.p);
    free(pl.jobs);
    ms_trace_release(&t);
    if (rc == 0 && st)
        *st = s;
    return rc;
}
