/* unpickle.c: the data-only pickle reader (see unpickle.h for the design and the caps).
 *
 * Called by snapshot.c and the fuzz target. Workload: one pass over inputs of up to several
 * gigabytes; the inner loop is one switch per opcode and touches no allocator for the common
 * opcodes (BINGET, ints, short strings). */
#include "unpickle.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Word layout: the low 3 bits are a tag. */
enum {
    TAG_PTR = 0,     /* struct obj * (8-aligned, never NULL for a valid value) */
    TAG_INT = 1,     /* int61 in bits 3..63 */
    TAG_REF = 2,     /* memo slot in bits 3..63 */
    TAG_SPECIAL = 3, /* bits 3..: 0 None, 1 False, 2 True */
    TAG_SSTR = 4,    /* str slice of u->buf: offset bits 3..43, length bits 44..63 */
    TAG_SBYTES = 5,  /* bytes slice, same layout */
    TAG_ABSENT = 7,
};
#define SLICE_MAX_OFF ((uint64_t)1 << 41)
#define SLICE_MAX_LEN ((uint64_t)1 << 20)
#define INT61_MIN (-((int64_t)1 << 60))
#define INT61_MAX (((int64_t)1 << 60) - 1)

/* A heap value, 24 bytes. Sequences keep items as ms_pv words, or (ref32) as 32-bit memo
 * slots when every item is a memo reference. A DICT keeps 2*n words (key, value), or (shaped)
 * only its n values, its keys being those of a shared shape (see "Dict shapes" below): the
 * event dicts of a snapshot all have the same keys, so that halves them. n and cap fit 32 bits
 * because init clamps caps.max_items and caps.max_bytes to UINT32_MAX. */
struct obj {
    uint8_t type; /* enum ms_pv_type */
    uint8_t ref32;
    uint8_t shaped;
    uint8_t pad;
    uint32_t user;
    uint32_t n;   /* items, pairs, or bytes */
    uint32_t cap; /* items or pairs allocated; for a shaped DICT, its shape's index */
    union {
        ms_pv *v;
        uint32_t *r;
        const char *s;
        double f;
        int64_t i;
    } u;
};

/* Dict shapes: the key words (memo references only) of a dict built by one SETITEMS or DICT
 * opcode, interned in an open-addressing table. Keys are memo references, and a memo slot is
 * written once, so equal words mean the same keys. At most SHAPE_MAX shapes of at most
 * SHAPE_MAX_KEYS keys, found within SHAPE_MAX_PROBE probes; other dicts keep their keys
 * inline. Shapes live in the arena (so under caps.max_memory); the table is outside it, at
 * most 1 MiB. */
struct ms_pv_shape {
    uint32_t n;
    uint32_t hash;
    ms_pv keys[];
};
#define SHAPE_MAX ((uint32_t)1 << 16)
#define SHAPE_MAX_KEYS 64
#define SHAPE_MAX_PROBE 32

struct ms_pv_arena_chunk {
    struct ms_pv_arena_chunk *next;
    size_t size;
    unsigned char data[];
};

/* NEEDSWORK: chunks as 2 MiB-aligned mappings advised MADV_HUGEPAGE were tried (one fault per
 * 2 MiB): on the benchmark machine they cost more system time than 4 KiB pages, not less. */
#define CHUNK_SIZE ((size_t)4 << 20)

static const struct ms_unpickle_caps default_caps = {
    .max_depth = 1000,
    .max_stack = (uint64_t)1 << 26,
    .max_bytes = (uint64_t)1 << 30,
    .max_items = (uint64_t)1 << 30,
    .max_memo = (uint64_t)1 << 31,
    .max_memory = (uint64_t)64 << 30,
};

void ms_unpickle_init(struct ms_unpickle *u, const struct ms_unpickle_caps *caps)
{
    memset(u, 0, sizeof *u);
    u->caps = default_caps;
    if (caps) {
        if (caps->max_depth)
            u->caps.max_depth = caps->max_depth;
        if (caps->max_stack)
            u->caps.max_stack = caps->max_stack;
        if (caps->max_bytes)
            u->caps.max_bytes = caps->max_bytes;
        if (caps->max_items)
            u->caps.max_items = caps->max_items;
        if (caps->max_memo)
            u->caps.max_memo = caps->max_memo;
        if (caps->max_memory)
            u->caps.max_memory = caps->max_memory;
    }
    /* Object lengths are 32-bit (struct obj). */
    if (u->caps.max_items > UINT32_MAX)
        u->caps.max_items = UINT32_MAX;
    if (u->caps.max_bytes > UINT32_MAX)
        u->caps.max_bytes = UINT32_MAX;
    u->root = MS_PV_ABSENT_VALUE;
}

void ms_unpickle_release(struct ms_unpickle *u)
{
    if (!u)
        return;
    struct ms_pv_arena_chunk *c = u->chunks;
    while (c) {
        struct ms_pv_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(u->shapes);
    free(u->shape_slots);
    free(u->memo);
    free(u->stack);
    free(u->marks);
    memset(u, 0, sizeof *u);
    u->root = MS_PV_ABSENT_VALUE;
}

void *ms_pv_alloc(struct ms_unpickle *u, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n == 0)
        n = 8;
    if ((size_t)(u->end - u->cur) >= n && u->cur) {
        void *p = u->cur;
        u->cur += n;
        return p;
    }
    /* Big requests get a chunk of their own, so the current chunk keeps its free space. */
    size_t size = n > CHUNK_SIZE / 4 ? n : CHUNK_SIZE;
    if (size > u->caps.max_memory || u->mem_used > u->caps.max_memory - size)
        return NULL;
    struct ms_pv_arena_chunk *c = malloc(sizeof *c + size);
    if (!c)
        return NULL;
    u->mem_used += size;
    c->size = size;
    c->next = u->chunks;
    u->chunks = c;
    if (size == n)
        return c->data;
    u->cur = c->data + n;
    u->end = c->data + size;
    return c->data;
}

/* --- value helpers --- */

static inline unsigned tag_of(ms_pv v)
{
    return (unsigned)(v & 7);
}

static inline ms_pv resolve(const struct ms_unpickle *u, ms_pv v)
{
    if (tag_of(v) == TAG_REF) {
        uint64_t i = v >> 3;
        assert(i < u->memo_len && u->memo[i]);
        return u->memo[i];
    }
    return v;
}

static inline struct obj *obj_of(ms_pv v)
{
    return (struct obj *)(uintptr_t)v;
}

static inline ms_pv int_word(int64_t i)
{
    return ((uint64_t)i << 3) | TAG_INT;
}

static struct obj *new_obj(struct ms_unpickle *u, enum ms_pv_type t)
{
    struct obj *o = ms_pv_alloc(u, sizeof *o);
    if (o) {
        memset(o, 0, sizeof *o);
        o->type = (uint8_t)t;
    }
    return o;
}

ms_pv ms_pv_make_int(struct ms_unpickle *u, int64_t i)
{
    if (i >= INT61_MIN && i <= INT61_MAX)
        return int_word(i);
    struct obj *o = new_obj(u, MS_PV_INT);
    if (!o)
        return MS_PV_ABSENT_VALUE;
    o->u.i = i;
    return (ms_pv)(uintptr_t)o;
}

ms_pv ms_pv_make_float(struct ms_unpickle *u, double f)
{
    struct obj *o = new_obj(u, MS_PV_FLOAT);
    if (!o)
        return MS_PV_ABSENT_VALUE;
    o->u.f = f;
    return (ms_pv)(uintptr_t)o;
}

ms_pv ms_pv_make_special(enum ms_pv_type t, int truth)
{
    if (t == MS_PV_NONE)
        return TAG_SPECIAL;
    return ((uint64_t)(truth ? 2 : 1) << 3) | TAG_SPECIAL;
}

static ms_pv make_slice(struct ms_unpickle *u, enum ms_pv_type t, const char *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    if (u->buf && b >= u->buf && b <= u->buf + u->len) {
        uint64_t off = (uint64_t)(b - u->buf);
        if (off < SLICE_MAX_OFF && n < SLICE_MAX_LEN)
            return (off << 3) | ((uint64_t)n << 44) | (t == MS_PV_STR ? TAG_SSTR : TAG_SBYTES);
    }
    if (n > UINT32_MAX)
        return MS_PV_ABSENT_VALUE;
    struct obj *o = new_obj(u, t);
    if (!o)
        return MS_PV_ABSENT_VALUE;
    o->n = (uint32_t)n;
    o->u.s = p;
    return (ms_pv)(uintptr_t)o;
}

ms_pv ms_pv_make_str(struct ms_unpickle *u, const char *p, size_t n)
{
    return make_slice(u, MS_PV_STR, p, n);
}

/* Grows the item array of sequence o to hold at least want items (or pairs). */
static int seq_reserve(struct ms_unpickle *u, struct obj *o, uint64_t want)
{
    assert(!o->shaped);
    if (want <= o->cap)
        return 0;
    if (want > u->caps.max_items)
        return MS_ELIMIT;
    uint64_t cap = o->cap * 2;
    if (cap < want)
        cap = want;
    if (cap > u->caps.max_items)
        cap = u->caps.max_items;
    size_t per = o->ref32 ? sizeof(uint32_t) : sizeof(ms_pv);
    if (o->type == MS_PV_DICT)
        per = 2 * sizeof(ms_pv);
    void *p = ms_pv_alloc(u, (size_t)(cap * per));
    if (!p)
        return MS_ENOMEM;
    if (o->n)
        memcpy(p, o->u.v, (size_t)(o->n * per));
    o->u.v = p;
    o->cap = (uint32_t)cap;
    return 0;
}

/* Appends k values to sequence o (LIST, TUPLE, SET), keeping the 32-bit form while every item
 * is a memo reference. */
static int seq_append(struct ms_unpickle *u, struct obj *o, const ms_pv *items, uint64_t k)
{
    if (k == 0)
        return 0;
    if (o->n + k > u->caps.max_items)
        return MS_ELIMIT;
    int allref = 1;
    for (uint64_t i = 0; i < k; i++)
        if (tag_of(items[i]) != TAG_REF || (items[i] >> 3) > UINT32_MAX) {
            allref = 0;
            break;
        }
    if (o->n == 0 && o->cap == 0)
        o->ref32 = (uint8_t)allref;
    if (o->ref32 && !allref) {
        /* Widen: copy the 32-bit slots out as reference words. */
        uint64_t cap = o->n + k > o->cap ? o->n + k : o->cap;
        ms_pv *v = ms_pv_alloc(u, (size_t)(cap * sizeof *v));
        if (!v)
            return MS_ENOMEM;
        for (uint64_t i = 0; i < o->n; i++)
            v[i] = ((uint64_t)o->u.r[i] << 3) | TAG_REF;
        o->u.v = v;
        o->cap = (uint32_t)cap;
        o->ref32 = 0;
    }
    int rc = seq_reserve(u, o, o->n + k);
    if (rc)
        return rc;
    if (o->ref32) {
        for (uint64_t i = 0; i < k; i++)
            o->u.r[o->n + i] = (uint32_t)(items[i] >> 3);
    } else {
        memcpy(o->u.v + o->n, items, (size_t)(k * sizeof *items));
    }
    o->n += (uint32_t)k;
    return 0;
}

static uint32_t shape_hash(const ms_pv *kv, uint64_t pairs)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ pairs;
    for (uint64_t i = 0; i < pairs; i++)
        h = (h ^ kv[2 * i]) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    return (uint32_t)h;
}

/* Finds or adds the shape of the keys of pairs (key, value) at kv. Returns its index, or -1
 * when the keys do not qualify (not all memo references, too many) or the table is full or
 * out of memory: the caller then keeps the keys inline. */
static int64_t shape_of(struct ms_unpickle *u, const ms_pv *kv, uint64_t pairs)
{
    if (pairs > SHAPE_MAX_KEYS)
        return -1;
    for (uint64_t i = 0; i < pairs; i++)
        if (tag_of(kv[2 * i]) != TAG_REF)
            return -1;
    uint32_t h = shape_hash(kv, pairs);
    if (u->nshapes * 2 >= u->shape_slots_cap) {
        if (u->nshapes >= SHAPE_MAX)
            goto lookup_only;
        uint32_t cap = u->shape_slots_cap ? u->shape_slots_cap * 2 : 256;
        uint32_t *slots = calloc(cap, sizeof *slots);
        if (!slots || ms_grow((void **)&u->shapes, &u->shapes_cap, cap / 2 - 1, sizeof *u->shapes,
                              128, MS_GROW_MAX) < 0) {
            free(slots);
            return -1;
        }
        for (uint32_t i = 0; i < u->nshapes; i++) {
            uint32_t j = u->shapes[i]->hash & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = i + 1;
        }
        free(u->shape_slots);
        u->shape_slots = slots;
        u->shape_slots_cap = cap;
    }
lookup_only:;
    /* The keys come from the input, so their hashes can be made to collide: a probe stops
     * after SHAPE_MAX_PROBE slots (the dict then keeps its own keys), which keeps the work
     * per dict bounded. */
    uint32_t mask = u->shape_slots_cap - 1, j = h & mask, probes = 0;
    for (; u->shape_slots[j]; j = (j + 1) & mask) {
        if (++probes > SHAPE_MAX_PROBE)
            return -1;
        const struct ms_pv_shape *sh = u->shapes[u->shape_slots[j] - 1];
        if (sh->hash != h || sh->n != pairs)
            continue;
        uint64_t i = 0;
        while (i < pairs && sh->keys[i] == kv[2 * i])
            i++;
        if (i == pairs)
            return (int64_t)u->shape_slots[j] - 1;
    }
    if (u->nshapes * 2 >= u->shape_slots_cap) /* full: SHAPE_MAX reached */
        return -1;
    struct ms_pv_shape *sh = ms_pv_alloc(u, sizeof *sh + (size_t)pairs * sizeof(ms_pv));
    if (!sh)
        return -1;
    sh->n = (uint32_t)pairs;
    sh->hash = h;
    for (uint64_t i = 0; i < pairs; i++)
        sh->keys[i] = kv[2 * i];
    u->shapes[u->nshapes] = sh;
    u->shape_slots[j] = ++u->nshapes;
    return (int64_t)u->nshapes - 1;
}

/* Turns shaped dict o back into inline (key, value) pairs with room for want pairs. */
static int unshape(struct ms_unpickle *u, struct obj *o, uint64_t want)
{
    const struct ms_pv_shape *sh = u->shapes[o->cap];
    uint64_t cap = want > 2 * (uint64_t)o->n ? want : 2 * (uint64_t)o->n;
    if (cap > u->caps.max_items)
        cap = u->caps.max_items;
    ms_pv *v = ms_pv_alloc(u, (size_t)(cap * 2 * sizeof *v));
    if (!v)
        return MS_ENOMEM;
    for (uint32_t i = 0; i < o->n; i++) {
        v[2 * i] = sh->keys[i];
        v[2 * i + 1] = o->u.v[i];
    }
    o->u.v = v;
    o->cap = (uint32_t)cap;
    o->shaped = 0;
    return 0;
}

static int dict_append(struct ms_unpickle *u, struct obj *o, const ms_pv *kv, uint64_t pairs)
{
    if (pairs == 0)
        return 0;
    if (o->n + pairs > u->caps.max_items)
        return MS_ELIMIT;
    int rc;
    if (o->n == 0 && o->cap == 0 && !o->shaped) {
        /* A fresh dict filled at once (SETITEMS, DICT): share its keys if it can. */
        int64_t sh = shape_of(u, kv, pairs);
        if (sh >= 0) {
            ms_pv *v = ms_pv_alloc(u, (size_t)(pairs * sizeof *v));
            if (!v)
                return MS_ENOMEM;
            for (uint64_t i = 0; i < pairs; i++)
                v[i] = kv[2 * i + 1];
            o->u.v = v;
            o->n = (uint32_t)pairs;
            o->cap = (uint32_t)sh;
            o->shaped = 1;
            return 0;
        }
    }
    if (o->shaped && (rc = unshape(u, o, o->n + pairs)))
        return rc;
    if ((rc = seq_reserve(u, o, o->n + pairs)))
        return rc;
    memcpy(o->u.v + 2 * o->n, kv, (size_t)(2 * pairs * sizeof *kv));
    o->n += (uint32_t)pairs;
    return 0;
}

ms_pv ms_pv_make_seq(struct ms_unpickle *u, enum ms_pv_type t, const ms_pv *items, uint64_t n)
{
    struct obj *o = new_obj(u, t);
    if (!o)
        return MS_PV_ABSENT_VALUE;
    int rc = t == MS_PV_DICT ? dict_append(u, o, items, n / 2) : seq_append(u, o, items, n);
    if (rc)
        return MS_PV_ABSENT_VALUE;
    return (ms_pv)(uintptr_t)o;
}

/* --- reading values --- */

enum ms_pv_type ms_pv_type(const struct ms_unpickle *u, ms_pv v)
{
    v = resolve(u, v);
    switch (tag_of(v)) {
    case TAG_PTR: return v ? (enum ms_pv_type)obj_of(v)->type : MS_PV_ABSENT;
    case TAG_INT: return MS_PV_INT;
    case TAG_SPECIAL: return (v >> 3) == 0 ? MS_PV_NONE : MS_PV_BOOL;
    case TAG_SSTR: return MS_PV_STR;
    case TAG_SBYTES: return MS_PV_BYTES;
    default: return MS_PV_ABSENT;
    }
}

int ms_pv_int(const struct ms_unpickle *u, ms_pv v, int64_t *out)
{
    v = resolve(u, v);
    switch (tag_of(v)) {
    case TAG_INT: *out = (int64_t)v >> 3; return 0;
    case TAG_SPECIAL:
        if ((v >> 3) == 0)
            return -1;
        *out = (v >> 3) == 2;
        return 0;
    case TAG_PTR:
        if (v && obj_of(v)->type == MS_PV_INT) {
            *out = obj_of(v)->u.i;
            return 0;
        }
        return -1;
    default: return -1;
    }
}

int ms_pv_float(const struct ms_unpickle *u, ms_pv v, double *out)
{
    v = resolve(u, v);
    if (tag_of(v) == TAG_PTR && v && obj_of(v)->type == MS_PV_FLOAT) {
        *out = obj_of(v)->u.f;
        return 0;
    }
    int64_t i;
    if (ms_pv_int(u, v, &i))
        return -1;
    *out = (double)i;
    return 0;
}

int ms_pv_bool(const struct ms_unpickle *u, ms_pv v)
{
    int64_t i;
    if (ms_pv_int(u, v, &i))
        return -1;
    return i != 0;
}

const char *ms_pv_str(const struct ms_unpickle *u, ms_pv v, size_t *len)
{
    v = resolve(u, v);
    unsigned t = tag_of(v);
    if (t == TAG_SSTR || t == TAG_SBYTES) {
        *len = (size_t)(v >> 44);
        return (const char *)u->buf + ((v >> 3) & (SLICE_MAX_OFF - 1));
    }
    if (t == TAG_PTR && v) {
        struct obj *o = obj_of(v);
        if (o->type == MS_PV_STR || o->type == MS_PV_BYTES || o->type == MS_PV_BIGINT) {
            *len = (size_t)o->n;
            return o->u.s;
        }
    }
    *len = 0;
    return NULL;
}

int ms_pv_str_eq(const struct ms_unpickle *u, ms_pv v, const char *s)
{
    if (ms_pv_type(u, v) != MS_PV_STR)
        return 0;
    size_t n;
    const char *p = ms_pv_str(u, v, &n);
    return strlen(s) == n && memcmp(p, s, n) == 0;
}

static struct obj *container(const struct ms_unpickle *u, ms_pv v)
{
    v = resolve(u, v);
    if (tag_of(v) != TAG_PTR || !v)
        return NULL;
    struct obj *o = obj_of(v);
    if (o->type == MS_PV_LIST || o->type == MS_PV_TUPLE || o->type == MS_PV_SET ||
        o->type == MS_PV_DICT)
        return o;
    return NULL;
}

uint64_t ms_pv_len(const struct ms_unpickle *u, ms_pv v)
{
    struct obj *o = container(u, v);
    return o ? o->n : 0;
}

ms_pv ms_pv_item(const struct ms_unpickle *u, ms_pv v, uint64_t i)
{
    struct obj *o = container(u, v);
    if (!o || o->type == MS_PV_DICT || i >= o->n)
        return MS_PV_ABSENT_VALUE;
    if (o->ref32)
        return u->memo[o->u.r[i]];
    return resolve(u, o->u.v[i]);
}

static inline ms_pv key_word(const struct ms_unpickle *u, const struct obj *o, uint64_t i)
{
    return o->shaped ? u->shapes[o->cap]->keys[i] : o->u.v[2 * i];
}

static inline ms_pv value_word(const struct obj *o, uint64_t i)
{
    return o->shaped ? o->u.v[i] : o->u.v[2 * i + 1];
}

ms_pv ms_pv_dict_key(const struct ms_unpickle *u, ms_pv v, uint64_t i)
{
    struct obj *o = container(u, v);
    if (!o || o->type != MS_PV_DICT || i >= o->n)
        return MS_PV_ABSENT_VALUE;
    return resolve(u, key_word(u, o, i));
}

ms_pv ms_pv_dict_value(const struct ms_unpickle *u, ms_pv v, uint64_t i)
{
    struct obj *o = container(u, v);
    if (!o || o->type != MS_PV_DICT || i >= o->n)
        return MS_PV_ABSENT_VALUE;
    return resolve(u, value_word(o, i));
}

ms_pv ms_pv_dict_get(const struct ms_unpickle *u, ms_pv v, const char *key)
{
    struct obj *o = container(u, v);
    if (!o || o->type != MS_PV_DICT)
        return MS_PV_ABSENT_VALUE;
    size_t kl = strlen(key);
    for (uint64_t i = o->n; i-- > 0;) {
        size_t n;
        ms_pv k = resolve(u, key_word(u, o, i));
        if (ms_pv_type(u, k) != MS_PV_STR)
            continue;
        const char *p = ms_pv_str(u, k, &n);
        if (n == kl && memcmp(p, key, n) == 0)
            return resolve(u, value_word(o, i));
    }
    return MS_PV_ABSENT_VALUE;
}

uint32_t *ms_pv_user(const struct ms_unpickle *u, ms_pv v)
{
    struct obj *o = container(u, v);
    return o ? &o->user : NULL;
}

void ms_pv_dict_values(const struct ms_unpickle *u, ms_pv v, const int32_t *at, int n, ms_pv *out)
{
    struct obj *o = container(u, v);
    for (int i = 0; i < n; i++)
        out[i] = o && o->type == MS_PV_DICT && at[i] >= 0 && (uint32_t)at[i] < o->n
                     ? resolve(u, value_word(o, (uint64_t)at[i]))
                     : MS_PV_ABSENT_VALUE;
}

uint32_t ms_pv_dict_shape(const struct ms_unpickle *u, ms_pv v)
{
    struct obj *o = container(u, v);
    return o && o->type == MS_PV_DICT && o->shaped ? o->cap + 1 : 0;
}

void ms_pv_seq_users(const struct ms_unpickle *u, ms_pv v, uint32_t *out)
{
    struct obj *o = container(u, v);
    if (!o || o->type == MS_PV_DICT)
        return;
    for (uint32_t i = 0; i < o->n; i++) {
        ms_pv w = o->ref32 ? u->memo[o->u.r[i]] : resolve(u, o->u.v[i]);
        out[i] = tag_of(w) == TAG_PTR && w && obj_of(w)->type == MS_PV_DICT ? obj_of(w)->user : 0;
    }
}

uintptr_t ms_pv_identity(const struct ms_unpickle *u, ms_pv v)
{
    return (uintptr_t)container(u, v);
}

/* --- the loader --- */

static int fail(struct ms_unpickle *u, int code, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(struct ms_unpickle *u, int code, uint64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(u->err, sizeof u->err, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof u->err)
        snprintf(u->err + n, sizeof u->err - (size_t)n, " at byte offset %llu",
                 (unsigned long long)off);
    u->err_offset = off;
    return code;
}

/* Names of the opcodes we refuse (they import or call) and of the ones we do not implement. */
static const char *refused_name(unsigned op)
{
    switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    default: return NULL;
    }
}

static const char *unsupported_name(unsigned op)
{
    switch (op) {
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'p': return "PUT";
    case 'g': return "GET";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

/* Checks UTF-8 as Python's decoder with 'surrogatepass' does. Returns 0 or -1. */
int ms__utf8_check(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* ASCII fast path, 8 bytes at a time. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else {
            return -1;
        }
        if (n - i - 1 < need)
            return -1;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return -1;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return -1;
        i += need + 1;
    }
    return 0;
}

static inline uint64_t rd_le(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int push_slow(struct ms_unpickle *u, ms_pv v)
{
    if (u->stack_len >= u->caps.max_stack)
        return MS_ELIMIT;
    if (ms_grow((void **)&u->stack, &u->stack_cap, u->stack_len, sizeof *u->stack, 1024,
                u->caps.max_stack) < 0)
        return MS_ENOMEM;
    u->stack[u->stack_len++] = v;
    return 0;
}

static inline int push(struct ms_unpickle *u, ms_pv v)
{
    if (__builtin_expect(u->stack_len < u->stack_cap, 1)) {
        u->stack[u->stack_len++] = v;
        return 0;
    }
    return push_slow(u, v);
}

static int memo_put(struct ms_unpickle *u, uint64_t idx, ms_pv v, uint64_t off)
{
    uint64_t limit = u->caps.max_memo < u->len ? u->caps.max_memo : u->len;
    if (idx >= limit)
        return fail(u, MS_ELIMIT, off, "memo slot %llu over the cap of %llu",
                    (unsigned long long)idx, (unsigned long long)limit);
    if (idx >= u->memo_cap) {
        size_t old = u->memo_cap;
        if (ms_grow((void **)&u->memo, &u->memo_cap, idx, sizeof *u->memo, 1024, limit) < 0)
            return fail(u, MS_ENOMEM, off, "out of memory growing the memo");
        memset(u->memo + old, 0, (u->memo_cap - old) * sizeof *u->memo);
    }
    if (u->memo[idx])
        return fail(u, MS_EFORMAT, off, "memo slot %llu written twice", (unsigned long long)idx);
    u->memo[idx] = resolve(u, v);
    if (idx >= u->memo_len)
        u->memo_len = idx + 1;
    return 0;
}

/* Values available above the innermost mark. */
static inline uint64_t avail(const struct ms_unpickle *u)
{
    return u->stack_len - (u->marks_len ? u->marks[u->marks_len - 1] : 0);
}

static struct obj *target(struct ms_unpickle *u, ms_pv v, enum ms_pv_type t)
{
    v = resolve(u, v);
    if (tag_of(v) != TAG_PTR || !v || obj_of(v)->type != t)
        return NULL;
    return obj_of(v);
}

static const char *type_name(enum ms_pv_type t)
{
    static const char *const names[] = {"absent", "None",  "bool", "int",   "int",  "float",
                                        "str",    "bytes", "list", "tuple", "dict", "set"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

int ms_unpickle_load(struct ms_unpickle *u, const void *data, size_t len)
{
    const unsigned char *const base = data;
    const unsigned char *p = base, *const end = base + len;
    uint64_t memo_next = 0; /* next MEMOIZE slot (Python: len(memo)) */
    int rc;

    u->buf = base;
    u->len = len;
    u->err[0] = 0;
    u->root = MS_PV_ABSENT_VALUE;

#define OFF ((uint64_t)(op_at - base))
#define NEED(n)                                                                    \
    do {                                                                           \
        if ((uint64_t)(end - p) < (uint64_t)(n))                                   \
            return fail(u, MS_ETRUNC, OFF, "input ends inside opcode 0x%02x", op); \
    } while (0)
#define PUSH(v)                                                                    \
    do {                                                                           \
        ms_pv v_ = (v);                                                            \
        if (v_ == MS_PV_ABSENT_VALUE)                                              \
            return fail(u, MS_ENOMEM, OFF, "out of memory (arena cap %llu bytes)", \
                        (unsigned long long)u->caps.max_memory);                   \
        if ((rc = push(u, v_)))                                                    \
            return fail(u, rc, OFF, "value stack over its cap of %llu",            \
                        (unsigned long long)u->caps.max_stack);                    \
    } while (0)
#define AVAIL(n)                                                                     \
    do {                                                                             \
        if (avail(u) < (uint64_t)(n))                                                \
            return fail(u, MS_EFORMAT, OFF, "stack underflow at opcode 0x%02x", op); \
    } while (0)
#define POPMARK(m)                                                            \
    do {                                                                      \
        if (!u->marks_len)                                                    \
            return fail(u, MS_EFORMAT, OFF, "no MARK for opcode 0x%02x", op); \
        (m) = u->marks[--u->marks_len];                                       \
    } while (0)
#define CHECK(expr, what)                                             \
    do {                                                              \
        if ((rc = (expr)))                                            \
            return fail(u, rc, OFF, "%s: %s", what, ms_strerror(rc)); \
    } while (0)

    /* Drop-behind: every DROP_STEP bytes, release the pages more than DROP_STEP behind. */
#define DROP_STEP ((size_t)16 << 20)
    const unsigned char *drop_at =
        u->drop_behind && len > 2 * DROP_STEP ? base + 2 * DROP_STEP : end;
    const unsigned char *dropped = base;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    while (p < end) {
        if (p >= drop_at) {
            uintptr_t upto = ((uintptr_t)(p - DROP_STEP)) & ~(uintptr_t)(page - 1);
            if ((const unsigned char *)upto > dropped) {
                madvise((void *)dropped, (size_t)((const unsigned char *)upto - dropped),
                        MADV_DONTNEED);
                dropped = (const unsigned char *)upto;
            }
            drop_at = p + DROP_STEP < end ? p + DROP_STEP : end;
        }
        const unsigned char *op_at = p;
        unsigned op = *p++;
        switch (op) {
        case 0x80: { /* PROTO */
            NEED(1);
            unsigned v = *p++;
            if (v > 5)
                return fail(u, MS_EVERSION, OFF, "unsupported pickle protocol %u", v);
            u->protocol = (int)v;
            break;
        }
        case 0x95: { /* FRAME: a hint for buffered readers; we only check its length. */
            NEED(8);
            uint64_t n = rd_le(p, 8);
            p += 8;
            if (n > (uint64_t)(end - p))
                return fail(u, MS_ETRUNC, OFF, "FRAME of %llu bytes runs past the end",
                            (unsigned long long)n);
            break;
        }
        case '.': { /* STOP */
            AVAIL(1);
            u->root = resolve(u, u->stack[--u->stack_len]);
            return 0;
        }
        case '(': /* MARK */
            if (u->marks_len >= u->caps.max_depth)
                return fail(u, MS_ELIMIT, OFF, "nesting deeper than %u", u->caps.max_depth);
            if (ms_grow((void **)&u->marks, &u->marks_cap, u->marks_len, sizeof *u->marks, 64,
                        MS_GROW_MAX) < 0)
                return fail(u, MS_ENOMEM, OFF, "out of memory");
            u->marks[u->marks_len++] = u->stack_len;
            break;
        case '0': /* POP: a value, or the mark when nothing is above it (as Python does) */
            if (avail(u)) {
                u->stack_len--;
            } else {
                uint64_t m;
                POPMARK(m);
                (void)m;
            }
            break;
        case '1': { /* POP_MARK */
            uint64_t m;
            POPMARK(m);
            u->stack_len = m;
            break;
        }
        case '2': /* DUP */
            AVAIL(1);
            PUSH(u->stack[u->stack_len - 1]);
            break;
        case 'N': PUSH(ms_pv_make_special(MS_PV_NONE, 0)); break;
        case 0x88: PUSH(ms_pv_make_special(MS_PV_BOOL, 1)); break;
        case 0x89: PUSH(ms_pv_make_special(MS_PV_BOOL, 0)); break;
        case 'J': /* BININT */
            NEED(4);
            PUSH(int_word((int32_t)(uint32_t)rd_le(p, 4)));
            p += 4;
            break;
        case 'K': /* BININT1 */
            NEED(1);
            PUSH(int_word(*p));
            p += 1;
            break;
        case 'M': /* BININT2 */
            NEED(2);
            PUSH(int_word((int64_t)rd_le(p, 2)));
            p += 2;
            break;
        case 0x8a:   /* LONG1 */
        case 0x8b: { /* LONG4 */
            uint64_t n;
            if (op == 0x8a) {
                NEED(1);
                n = *p++;
            } else {
                NEED(4);
                int32_t n4 = (int32_t)(uint32_t)rd_le(p, 4);
                p += 4;
                if (n4 < 0)
                    return fail(u, MS_EFORMAT, OFF, "LONG4 with negative length");
                n = (uint64_t)n4;
                if (n > u->caps.max_bytes)
                    return fail(u, MS_ELIMIT, OFF, "int of %llu bytes over the cap",
                                (unsigned long long)n);
            }
            NEED(n);
            /* Drop redundant sign bytes, then decode if it fits int64. */
            uint64_t m = n;
            while (m > 1 && ((p[m - 1] == 0 && !(p[m - 2] & 0x80)) ||
                             (p[m - 1] == 0xff && (p[m - 2] & 0x80))))
                m--;
            if (m <= 8) {
                uint64_t v = m ? rd_le(p, (unsigned)m) : 0;
                if (m && m < 8 && (p[m - 1] & 0x80))
                    v |= ~(uint64_t)0 << (8 * m);
                PUSH(ms_pv_make_int(u, (int64_t)v));
            } else {
                struct obj *o = new_obj(u, MS_PV_BIGINT);
                if (!o)
                    return fail(u, MS_ENOMEM, OFF, "out of memory");
                o->n = (uint32_t)n;
                o->u.s = (const char *)p;
                PUSH((ms_pv)(uintptr_t)o);
            }
            p += n;
            break;
        }
        case 'G': { /* BINFLOAT, big-endian */
            NEED(8);
            uint64_t b = 0;
            for (int i = 0; i < 8; i++)
                b = (b << 8) | p[i];
            double f;
            memcpy(&f, &b, 8);
            p += 8;
            PUSH(ms_pv_make_float(u, f));
            break;
        }
        case 'X':    /* BINUNICODE */
        case 0x8c:   /* SHORT_BINUNICODE */
        case 0x8d:   /* BINUNICODE8 */
        case 'T':    /* BINSTRING (Python 2 str, read as text) */
        case 'U':    /* SHORT_BINSTRING */
        case 'B':    /* BINBYTES */
        case 'C':    /* SHORT_BINBYTES */
        case 0x8e:   /* BINBYTES8 */
        case 0x96: { /* BYTEARRAY8 */
            unsigned w = (op == 0x8c || op == 'U' || op == 'C')     ? 1
                         : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                                    : 4;
            NEED(w);
            uint64_t n = rd_le(p, w);
            p += w;
            if (op == 'T' && (int32_t)n < 0)
                return fail(u, MS_EFORMAT, OFF, "BINSTRING with negative length");
            if (n > u->caps.max_bytes)
                return fail(u, MS_ELIMIT, OFF, "string of %llu bytes over the cap of %llu",
                            (unsigned long long)n, (unsigned long long)u->caps.max_bytes);
            NEED(n);
            int text = op == 'X' || op == 0x8c || op == 0x8d || op == 'T' || op == 'U';
            if (text && ms__utf8_check(p, (size_t)n))
                return fail(u, MS_EFORMAT, OFF, "string is not valid UTF-8");
            PUSH(make_slice(u, text ? MS_PV_STR : MS_PV_BYTES, (const char *)p, (size_t)n));
            p += n;
            break;
        }
        case ']': { /* EMPTY_LIST */
            struct obj *o = new_obj(u, MS_PV_LIST);
            PUSH(o ? (ms_pv)(uintptr_t)o : MS_PV_ABSENT_VALUE);
            break;
        }
        case '}': { /* EMPTY_DICT */
            struct obj *o = new_obj(u, MS_PV_DICT);
            PUSH(o ? (ms_pv)(uintptr_t)o : MS_PV_ABSENT_VALUE);
            break;
        }
        case 0x8f: { /* EMPTY_SET */
            struct obj *o = new_obj(u, MS_PV_SET);
            PUSH(o ? (ms_pv)(uintptr_t)o : MS_PV_ABSENT_VALUE);
            break;
        }
        case ')': { /* EMPTY_TUPLE */
            struct obj *o = new_obj(u, MS_PV_TUPLE);
            PUSH(o ? (ms_pv)(uintptr_t)o : MS_PV_ABSENT_VALUE);
            break;
        }
        case 0x85:   /* TUPLE1 */
        case 0x86:   /* TUPLE2 */
        case 0x87: { /* TUPLE3 */
            uint64_t n = op - 0x84u;
            AVAIL(n);
            ms_pv t = ms_pv_make_seq(u, MS_PV_TUPLE, u->stack + u->stack_len - n, n);
            u->stack_len -= n;
            PUSH(t);
            break;
        }
        case 't':    /* TUPLE */
        case 'l':    /* LIST */
        case 'd':    /* DICT */
        case 0x91: { /* FROZENSET */
            uint64_t m;
            POPMARK(m);
            uint64_t n = u->stack_len - m;
            enum ms_pv_type t = op == 't'   ? MS_PV_TUPLE
                                : op == 'l' ? MS_PV_LIST
                                : op == 'd' ? MS_PV_DICT
                                            : MS_PV_SET;
            if (t == MS_PV_DICT && (n & 1))
                return fail(u, MS_EFORMAT, OFF, "DICT with an odd number of items");
            if ((t == MS_PV_DICT ? n / 2 : n) > u->caps.max_items)
                return fail(u, MS_ELIMIT, OFF, "container over the cap of %llu items",
                            (unsigned long long)u->caps.max_items);
            ms_pv v = ms_pv_make_seq(u, t, u->stack + m, n);
            u->stack_len = m;
            PUSH(v);
            break;
        }
        case 'a': { /* APPEND */
            AVAIL(2);
            struct obj *o = target(u, u->stack[u->stack_len - 2], MS_PV_LIST);
            if (!o)
                return fail(u, MS_EFORMAT, OFF, "APPEND to a %s",
                            type_name(ms_pv_type(u, u->stack[u->stack_len - 2])));
            CHECK(seq_append(u, o, u->stack + u->stack_len - 1, 1), "APPEND");
            u->stack_len--;
            break;
        }
        case 'e':    /* APPENDS */
        case 0x90: { /* ADDITEMS */
            uint64_t m;
            POPMARK(m);
            uint64_t below = u->marks_len ? u->marks[u->marks_len - 1] : 0;
            if (m <= below)
                return fail(u, MS_EFORMAT, OFF, "stack underflow at opcode 0x%02x", op);
            enum ms_pv_type want = op == 'e' ? MS_PV_LIST : MS_PV_SET;
            struct obj *o = target(u, u->stack[m - 1], want);
            if (!o)
                return fail(u, MS_EFORMAT, OFF, "%s to a %s", op == 'e' ? "APPENDS" : "ADDITEMS",
                            type_name(ms_pv_type(u, u->stack[m - 1])));
            CHECK(seq_append(u, o, u->stack + m, u->stack_len - m), "APPENDS");
            u->stack_len = m;
            break;
        }
        case 's': { /* SETITEM */
            AVAIL(3);
            struct obj *o = target(u, u->stack[u->stack_len - 3], MS_PV_DICT);
            if (!o)
                return fail(u, MS_EFORMAT, OFF, "SETITEM on a %s",
                            type_name(ms_pv_type(u, u->stack[u->stack_len - 3])));
            CHECK(dict_append(u, o, u->stack + u->stack_len - 2, 1), "SETITEM");
            u->stack_len -= 2;
            break;
        }
        case 'u': { /* SETITEMS */
            uint64_t m;
            POPMARK(m);
            uint64_t below = u->marks_len ? u->marks[u->marks_len - 1] : 0;
            if (m <= below)
                return fail(u, MS_EFORMAT, OFF, "stack underflow at opcode 0x%02x", op);
            struct obj *o = target(u, u->stack[m - 1], MS_PV_DICT);
            if (!o)
                return fail(u, MS_EFORMAT, OFF, "SETITEMS on a %s",
                            type_name(ms_pv_type(u, u->stack[m - 1])));
            if ((u->stack_len - m) & 1)
                return fail(u, MS_EFORMAT, OFF, "SETITEMS with an odd number of items");
            CHECK(dict_append(u, o, u->stack + m, (u->stack_len - m) / 2), "SETITEMS");
            u->stack_len = m;
            break;
        }
        case 'q':   /* BINPUT */
        case 'r': { /* LONG_BINPUT */
            unsigned w = op == 'q' ? 1 : 4;
            NEED(w);
            uint64_t idx = rd_le(p, w);
            p += w;
            AVAIL(1);
            if ((rc = memo_put(u, idx, u->stack[u->stack_len - 1], OFF)))
                return rc;
            break;
        }
        case 0x94: /* MEMOIZE */
            AVAIL(1);
            if ((rc = memo_put(u, memo_next, u->stack[u->stack_len - 1], OFF)))
                return rc;
            memo_next++;
            break;
        case 'h':   /* BINGET */
        case 'j': { /* LONG_BINGET */
            unsigned w = op == 'h' ? 1 : 4;
            NEED(w);
            uint64_t idx = rd_le(p, w);
            p += w;
            if (idx >= u->memo_len || !u->memo[idx])
                return fail(u, MS_EFORMAT, OFF, "memo slot %llu is empty", (unsigned long long)idx);
            PUSH((idx << 3) | TAG_REF);
            break;
        }
        default: {
            const char *name = refused_name(op);
            if (name)
                return fail(u, MS_EREFUSED, OFF,
                            "refused opcode %s (0x%02x): it would import or call code", name, op);
            name = unsupported_name(op);
            if (name)
                return fail(u, MS_EFORMAT, OFF, "unsupported opcode %s (0x%02x)", name, op);
            return fail(u, MS_EFORMAT, OFF, "unknown opcode 0x%02x", op);
        }
        }
    }
    return fail(u, MS_ETRUNC, (uint64_t)len, "input ends before STOP");
#undef OFF
#undef NEED
#undef PUSH
#undef AVAIL
#undef POPMARK
#undef CHECK
#undef DROP_STEP
}
