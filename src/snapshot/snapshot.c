/* snapshot.c: loads a PyTorch memory snapshot (pickle or JSON) into the flat model of
 * snapshot.h. Called by the CLI and the tests. Workload: one pass over the loaded values;
 * frame dicts and frame lists are interned once per distinct object (their reader objects
 * cache the id) and once per distinct content (hash maps), so a frame list shared by 700,000
 * events costs one lookup per event. */
#include "snapshot.h"

#include "common/grow.h"
#include "common/ms_error.h"
#include "json.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const ms_snap_action_names[MS_SA_COUNT] = {
    "alloc",        "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map",    "segment_unmap",  "snapshot",
    "oom",          "annotate",       "other",
};

const char *const ms_snap_state_names[MS_SB_COUNT] = {"active_allocated", "active_pending_free",
                                                      "inactive", "other"};

/* An open-addressing set of 1-based ids; each slot holds (32-bit hash << 32) | id. Hashes are
 * seeded per reader, and a lookup that probes more than MAX_PROBES slots fails: hostile input
 * cannot turn interning into quadratic work. */
#define MAX_PROBES 4096
struct idmap {
    uint64_t *slots;
    uint64_t cap, n;
};

static int serr(struct ms_snapshot *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int serr(struct ms_snapshot *s, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    return code;
}

void ms_snapshot_init(struct ms_snapshot *s, const struct ms_unpickle_caps *caps)
{
    memset(s, 0, sizeof *s);
    ms_unpickle_init(&s->u, caps);
    if (getrandom(&s->hash_seed, sizeof s->hash_seed, GRND_NONBLOCK) != sizeof s->hash_seed)
        s->hash_seed = (uint64_t)(uintptr_t)s ^ (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    s->root = MS_PV_ABSENT_VALUE;
    s->allocator_settings = MS_PV_ABSENT_VALUE;
}

static void idmap_free(void *p)
{
    struct idmap *m = p;
    if (m) {
        free(m->slots);
        free(m);
    }
}

void ms_snapshot_release(struct ms_snapshot *s)
{
    if (!s)
        return;
    ms_unpickle_release(&s->u);
    free(s->segs);
    free(s->blocks);
    for (uint64_t i = 0; i < s->ntraces; i++)
        free(s->traces[i].events);
    free(s->traces);
    free(s->annotations);
    free(s->frames);
    free(s->frame_rank);
    free(s->stacks);
    free(s->scratch);
    idmap_free(s->frame_map);
    idmap_free(s->stack_map);
    if (s->map)
        munmap(s->map, s->map_len);
    memset(s, 0, sizeof *s);
}

/* --- hashing and interning --- */

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint32_t fold(uint64_t h)
{
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return (uint32_t)h | 1; /* never 0, so a slot is never all zero */
}

static int idmap_grow(struct idmap *m)
{
    uint64_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *slots = calloc((size_t)cap, sizeof *slots);
    if (!slots)
        return MS_ENOMEM;
    for (uint64_t i = 0; i < m->cap; i++) {
        uint64_t v = m->slots[i];
        if (!v)
            continue;
        uint64_t j = (v >> 32) & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = v;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

static int str_same(struct ms_str a, struct ms_str b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

static struct ms_str get_str(const struct ms_unpickle *u, ms_pv v)
{
    struct ms_str r = {"", 0};
    if (ms_pv_type(u, v) == MS_PV_STR)
        r.p = ms_pv_str(u, v, &r.n);
    return r;
}

/* The allocation site of a stack: its innermost Python frame (file ending in .py), else its
 * innermost frame with a known file, else its innermost frame. Each frame's rank for that
 * choice is computed once, when it is interned. */
static uint8_t site_rank(struct ms_str f)
{
    if (f.n >= 3 && !memcmp(f.p + f.n - 3, ".py", 3))
        return 0;
    if (f.n && !(f.n == 2 && !memcmp(f.p, "??", 2)))
        return 1;
    return 2;
}

/* Returns the 1-based id of the frame dict fd (interning it), or 0 with s->err set. */
static uint32_t intern_frame(struct ms_snapshot *s, ms_pv fd)
{
    const struct ms_unpickle *u = &s->u;
    /* Only dicts cache their frame id: a list's word caches its stack id. */
    uint32_t *cache = ms_pv_type(u, fd) == MS_PV_DICT ? ms_pv_user(u, fd) : NULL;
    if (cache && *cache)
        return *cache;
    if (!cache && s->plain_frame)
        return s->plain_frame;
    struct ms_snap_frame f = {{"", 0}, {"", 0}, 0};
    uint64_t n = ms_pv_len(u, fd);
    if (ms_pv_type(u, fd) == MS_PV_DICT) {
        for (uint64_t i = 0; i < n; i++) {
            ms_pv k = ms_pv_dict_key(u, fd, i), v = ms_pv_dict_value(u, fd, i);
            struct ms_str ks = get_str(u, k);
            if (ks.n == 8 && !memcmp(ks.p, "filename", 8))
                f.file = get_str(u, v);
            else if (ks.n == 4 && !memcmp(ks.p, "name", 4))
                f.func = get_str(u, v);
            else if (ks.n == 4 && !memcmp(ks.p, "line", 4) && ms_pv_int(u, v, &f.line))
                f.line = 0;
        }
    }
    uint64_t h = hash_bytes(0xcbf29ce484222325ull ^ s->hash_seed, f.file.p, f.file.n);
    h = hash_bytes(h ^ 0xff, f.func.p, f.func.n);
    h = hash_bytes(h, &f.line, sizeof f.line);
    uint32_t hh = fold(h);
    struct idmap *m = s->frame_map;
    if (m->n * 2 >= m->cap && idmap_grow(m))
        return serr(s, MS_ENOMEM, "out of memory interning frames"), 0;
    uint64_t j = hh & (m->cap - 1);
    uint32_t id = 0;
    for (unsigned probes = 0; m->slots[j]; j = (j + 1) & (m->cap - 1)) {
        if (++probes > MAX_PROBES)
            return serr(s, MS_ELIMIT, "too many hash collisions among frames"), 0;
        uint64_t v = m->slots[j];
        if ((uint32_t)(v >> 32) != hh)
            continue;
        const struct ms_snap_frame *g = &s->frames[(uint32_t)v];
        if (g->line == f.line && str_same(g->file, f.file) && str_same(g->func, f.func)) {
            id = (uint32_t)v;
            break;
        }
    }
    if (!id) {
        if (s->nframes == s->cap_frames || s->nframes == s->cap_rank) {
            if (s->nframes >= UINT32_MAX / 2)
                return serr(s, MS_ELIMIT, "too many distinct frames"), 0;
            if (ms_grow((void **)&s->frames, &s->cap_frames, s->nframes, sizeof *s->frames, 1024,
                        UINT32_MAX / 2) < 0 ||
                ms_grow((void **)&s->frame_rank, &s->cap_rank, s->nframes, 1, 1024,
                        UINT32_MAX / 2) < 0)
                return serr(s, MS_ENOMEM, "out of memory"), 0;
        }
        id = s->nframes++;
        s->frames[id] = f;
        s->frame_rank[id] = site_rank(f.file);
        m->slots[j] = ((uint64_t)hh << 32) | id;
        m->n++;
    }
    if (cache)
        *cache = id;
    else
        s->plain_frame = id;
    return id;
}

/* The frame id of item it of a frame list whose frames were all interned. */
static uint32_t frame_id_of(const struct ms_snapshot *s, ms_pv it)
{
    const struct ms_unpickle *u = &s->u;
    if (ms_pv_type(u, it) == MS_PV_DICT)
        return *ms_pv_user(u, it);
    return s->plain_frame;
}

uint32_t ms_snapshot_stack_frame(const struct ms_snapshot *s, uint32_t stack, uint32_t k)
{
    if (stack == 0 || stack >= s->nstacks || k >= s->stacks[stack].depth)
        return 0;
    return frame_id_of(s, ms_pv_item(&s->u, s->stacks[stack].list, k));
}

static uint32_t pick_site(const struct ms_snapshot *s, const uint32_t *ids, uint32_t depth)
{
    uint32_t best = depth ? ids[0] : 0;
    uint8_t best_rank = depth ? s->frame_rank[ids[0]] : 2;
    for (uint32_t i = 1; i < depth && best_rank; i++)
        if (s->frame_rank[ids[i]] < best_rank) {
            best = ids[i];
            best_rank = s->frame_rank[ids[i]];
        }
    return best;
}

/* Writes the frame ids of the n frames of list fl to ids. intern: intern frames not seen
 * yet (else they must all have been). Returns 0, or -1 with s->err set. */
static int stack_ids(struct ms_snapshot *s, ms_pv fl, uint32_t *ids, uint64_t n, int intern)
{
    /* Dict items' cached ids in one call; 0 for non-dicts and dicts not interned yet. */
    ms_pv_seq_users(&s->u, fl, ids);
    for (uint64_t i = 0; i < n; i++) {
        if (ids[i])
            continue;
        ms_pv it = ms_pv_item(&s->u, fl, i);
        ids[i] = intern ? intern_frame(s, it) : frame_id_of(s, it);
        if (!ids[i])
            return -1;
    }
    return 0;
}

/* Returns the stack id (0: no frames) of the frame list fl, or UINT32_MAX with s->err set.
 * A stack is kept as a reference to the first list object seen with its content (the
 * reader's list, whose items are 32-bit memo slots): its frame ids are not copied, they are
 * read back through the frame dicts' cached ids (ms_snapshot_stack_frame()). */
static uint32_t intern_stack(struct ms_snapshot *s, ms_pv fl)
{
    const struct ms_unpickle *u = &s->u;
    enum ms_pv_type t = ms_pv_type(u, fl);
    if (t != MS_PV_LIST && t != MS_PV_TUPLE)
        return 0;
    uint32_t *cache = ms_pv_user(u, fl);
    if (*cache)
        return *cache;
    uint64_t n = ms_pv_len(u, fl);
    if (n == 0)
        return 0;
    if (n > UINT32_MAX)
        return serr(s, MS_ELIMIT, "frame list too long"), UINT32_MAX;
    /* The frame ids go to a scratch buffer, for hashing, comparing and the site. */
    if (ms_grow((void **)&s->scratch, &s->scratch_cap, (size_t)n - 1, sizeof *s->scratch, 64,
                (size_t)UINT32_MAX + 1) < 0)
        return serr(s, MS_ENOMEM, "out of memory"), UINT32_MAX;
    uint32_t *ids = s->scratch;
    if (stack_ids(s, fl, ids, n, 1))
        return UINT32_MAX;
    uint64_t h = 0xcbf29ce484222325ull ^ s->hash_seed ^ n; /* a word at a time: stacks are long */
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ ids[i]) * 0x100000001b3ull;
    uint32_t hh = fold(h);
    struct idmap *m = s->stack_map;
    if (m->n * 2 >= m->cap && idmap_grow(m))
        return serr(s, MS_ENOMEM, "out of memory"), UINT32_MAX;
    uint64_t j = hh & (m->cap - 1);
    uint32_t id = 0;
    for (unsigned probes = 0; m->slots[j]; j = (j + 1) & (m->cap - 1)) {
        if (++probes > MAX_PROBES)
            return serr(s, MS_ELIMIT, "too many hash collisions among stacks"), UINT32_MAX;
        uint64_t v = m->slots[j];
        if ((uint32_t)(v >> 32) != hh)
            continue;
        const struct ms_snap_stack *g = &s->stacks[(uint32_t)v];
        if (g->depth != n)
            continue;
        uint64_t k = 0;
        while (k < n && frame_id_of(s, ms_pv_item(u, g->list, k)) == ids[k])
            k++;
        if (k == n) { /* equal contents: rare but for true duplicates */
            id = (uint32_t)v;
            break;
        }
    }
    if (!id) {
        if (s->nstacks == s->cap_stacks) {
            if (s->nstacks >= UINT32_MAX / 4)
                return serr(s, MS_ELIMIT, "too many distinct stacks"), UINT32_MAX;
            if (ms_grow((void **)&s->stacks, &s->cap_stacks, s->nstacks, sizeof *s->stacks, 1024,
                        UINT32_MAX / 4) < 0)
                return serr(s, MS_ENOMEM, "out of memory"), UINT32_MAX;
        }
        id = s->nstacks++;
        s->stacks[id].list = fl;
        s->stacks[id].depth = (uint32_t)n;
        s->stacks[id].site = pick_site(s, ids, (uint32_t)n);
        m->slots[j] = ((uint64_t)hh << 32) | id;
        m->n++;
    }
    *cache = id;
    return id;
}

/* --- field access --- */

#define MAX_FIELDS 16

/* The keys one loader looks up, and where they were in the last shaped dict it saw: the
 * event dicts of a trace share one key shape (ms_pv_dict_shape()), so their keys are
 * compared once, not once per event. */
struct fields {
    const char *const *names;
    int n;
    uint8_t lens[MAX_FIELDS];
    uint32_t shape;         /* 0: none cached */
    int32_t at[MAX_FIELDS]; /* pair index of each field in that shape, -1 if missing */
};

static void fields_init(struct fields *fs, const char *const *names, int n)
{
    assert(n <= MAX_FIELDS);
    fs->names = names;
    fs->n = n;
    for (int i = 0; i < n; i++)
        fs->lens[i] = (uint8_t)strlen(names[i]);
    fs->shape = 0;
}

/* Looks up the keys of fs in dict d in one pass over its pairs; out[i] is ABSENT for a
 * missing key. Later duplicates win, as in a Python dict. */
static void get_fields(const struct ms_unpickle *u, ms_pv d, struct fields *fs, ms_pv *out)
{
    int n = fs->n;
    uint32_t shape = ms_pv_dict_shape(u, d);
    if (shape && shape == fs->shape) {
        ms_pv_dict_values(u, d, fs->at, n, out);
        return;
    }
    for (int i = 0; i < n; i++) {
        out[i] = MS_PV_ABSENT_VALUE;
        fs->at[i] = -1;
    }
    uint64_t np = ms_pv_len(u, d);
    for (uint64_t i = 0; i < np; i++) {
        size_t kl;
        ms_pv k = ms_pv_dict_key(u, d, i);
        const char *kp = ms_pv_type(u, k) == MS_PV_STR ? ms_pv_str(u, k, &kl) : NULL;
        if (!kp)
            continue;
        for (int f = 0; f < n; f++)
            if (fs->lens[f] == kl && !memcmp(fs->names[f], kp, kl)) {
                out[f] = ms_pv_dict_value(u, d, i);
                fs->at[f] = (int32_t)i; /* a shape has at most 64 keys */
                break;
            }
    }
    fs->shape = shape;
}

/* Reads an optional integer field. Returns 0 (default kept when absent or None) or
 * MS_EFORMAT with s->err naming the field. */
static int opt_int(struct ms_snapshot *s, ms_pv v, int64_t *out, const char *what, uint64_t i,
                   const char *field)
{
    enum ms_pv_type t = ms_pv_type(&s->u, v);
    if (t == MS_PV_ABSENT || t == MS_PV_NONE)
        return 0;
    if (ms_pv_int(&s->u, v, out))
        return serr(s, MS_EFORMAT, "%s[%llu].%s is not a 64-bit integer", what,
                    (unsigned long long)i, field);
    return 0;
}

static int is_seq(const struct ms_unpickle *u, ms_pv v)
{
    enum ms_pv_type t = ms_pv_type(u, v);
    return t == MS_PV_LIST || t == MS_PV_TUPLE;
}

static enum ms_snap_block_state parse_state(const struct ms_unpickle *u, ms_pv v)
{
    struct ms_str st = get_str(u, v);
    for (int i = 0; i < MS_SB_OTHER; i++)
        if (st.n == strlen(ms_snap_state_names[i]) && !memcmp(st.p, ms_snap_state_names[i], st.n))
            return (enum ms_snap_block_state)i;
    return MS_SB_OTHER;
}

static enum ms_snap_action parse_action(const struct ms_unpickle *u, ms_pv v)
{
    struct ms_str a = get_str(u, v);
    for (int i = 0; i < MS_SA_OTHER; i++)
        if (a.n == strlen(ms_snap_action_names[i]) && !memcmp(a.p, ms_snap_action_names[i], a.n))
            return (enum ms_snap_action)i;
    return MS_SA_OTHER;
}

/* --- segments and blocks --- */

enum {
    SG_DEVICE,
    SG_ADDRESS,
    SG_TOTAL,
    SG_ALLOCATED,
    SG_ACTIVE,
    SG_REQUESTED,
    SG_STREAM,
    SG_TYPE,
    SG_POOL,
    SG_EXPANDABLE,
    SG_FRAMES,
    SG_BLOCKS,
    SG_N
};
static const char *const seg_names[SG_N] = {
    "device", "address",      "total_size",      "allocated_size", "active_size", "requested_size",
    "stream", "segment_type", "segment_pool_id", "is_expandable",  "frames",      "blocks"};
enum { BK_ADDRESS, BK_SIZE, BK_REQUESTED, BK_STATE, BK_FRAMES, BK_HISTORY, BK_N };
static const char *const block_names[BK_N] = {"address", "size",   "requested_size",
                                              "state",   "frames", "history"};

static int load_segments(struct ms_snapshot *s, ms_pv segs)
{
    const struct ms_unpickle *u = &s->u;
    if (!is_seq(u, segs))
        return serr(s, MS_EFORMAT, "`segments` is not a list");
    uint64_t n = ms_pv_len(u, segs), nb = 0;
    for (uint64_t i = 0; i < n; i++) {
        ms_pv b = ms_pv_dict_get(u, ms_pv_item(u, segs, i), "blocks");
        nb += ms_pv_len(u, b);
    }
    s->segs = calloc(n ? (size_t)n : 1, sizeof *s->segs);
    s->blocks = calloc(nb ? (size_t)nb : 1, sizeof *s->blocks);
    if (!s->segs || !s->blocks)
        return serr(s, MS_ENOMEM, "out of memory for %llu segments", (unsigned long long)n);
    struct fields sl, bl;
    fields_init(&sl, seg_names, SG_N);
    fields_init(&bl, block_names, BK_N);
    int rc;
    for (uint64_t i = 0; i < n; i++) {
        ms_pv d = ms_pv_item(u, segs, i), f[SG_N];
        if (ms_pv_type(u, d) != MS_PV_DICT)
            return serr(s, MS_EFORMAT, "segments[%llu] is not a dict", (unsigned long long)i);
        get_fields(u, d, &sl, f);
        struct ms_snap_segment *g = &s->segs[s->nsegs];
        int64_t v[6] = {0, 0, 0, -1, -1, -1}, stream = 0;
        for (int k = SG_DEVICE; k <= SG_REQUESTED; k++)
            if ((rc = opt_int(s, f[k], &v[k], "segments", i, seg_names[k])))
                return rc;
        if ((rc = opt_int(s, f[SG_STREAM], &stream, "segments", i, "stream")))
            return rc;
        if (ms_pv_type(u, f[SG_ADDRESS]) != MS_PV_INT || ms_pv_type(u, f[SG_TOTAL]) != MS_PV_INT)
            return serr(s, MS_EFORMAT, "segments[%llu] lacks an integer address or total_size",
                        (unsigned long long)i);
        g->device = v[SG_DEVICE];
        g->addr = (uint64_t)v[SG_ADDRESS];
        g->total = (uint64_t)v[SG_TOTAL];
        g->stream = stream;
        g->large = !ms_pv_str_eq(u, f[SG_TYPE], "small");
        g->expandable = ms_pv_bool(u, f[SG_EXPANDABLE]) == 1;
        ms_pv pool = f[SG_POOL];
        if (is_seq(u, pool) && ms_pv_len(u, pool) == 2) {
            ms_pv_int(u, ms_pv_item(u, pool, 0), &g->pool[0]);
            ms_pv_int(u, ms_pv_item(u, pool, 1), &g->pool[1]);
        }
        if ((g->stack = intern_stack(s, f[SG_FRAMES])) == UINT32_MAX)
            return MS_ENOMEM;
        /* Blocks tile the segment: a legacy block without `address` starts where the
         * previous one ended. */
        ms_pv bls = f[SG_BLOCKS];
        if (ms_pv_type(u, bls) != MS_PV_ABSENT && !is_seq(u, bls))
            return serr(s, MS_EFORMAT, "segments[%llu].blocks is not a list",
                        (unsigned long long)i);
        uint64_t m = ms_pv_len(u, bls), cursor = g->addr;
        uint64_t sum_alloc = 0, sum_active = 0, sum_req = 0;
        g->first_block = s->nblocks;
        for (uint64_t j = 0; j < m; j++) {
            ms_pv bd = ms_pv_item(u, bls, j), bf[BK_N];
            if (ms_pv_type(u, bd) != MS_PV_DICT)
                return serr(s, MS_EFORMAT, "segments[%llu].blocks[%llu] is not a dict",
                            (unsigned long long)i, (unsigned long long)j);
            get_fields(u, bd, &bl, bf);
            struct ms_snap_block *b = &s->blocks[s->nblocks];
            int64_t addr = (int64_t)cursor, size = 0, req = -1;
            if ((rc = opt_int(s, bf[BK_SIZE], &size, "blocks", j, "size")) ||
                (rc = opt_int(s, bf[BK_REQUESTED], &req, "blocks", j, "requested_size")))
                return rc;
            b->addr_derived = ms_pv_type(u, bf[BK_ADDRESS]) != MS_PV_INT;
            if (!b->addr_derived)
                ms_pv_int(u, bf[BK_ADDRESS], &addr);
            ms_pv frames = bf[BK_FRAMES];
            ms_pv h0 = ms_pv_item(u, bf[BK_HISTORY], 0);
            if (ms_pv_type(u, frames) == MS_PV_ABSENT)
                frames = ms_pv_dict_get(u, h0, "frames");
            if (req < 0) {
                int64_t real;
                if (!ms_pv_int(u, ms_pv_dict_get(u, h0, "real_size"), &real))
                    req = real;
                else
                    req = size;
            }
            b->addr = (uint64_t)addr;
            b->size = (uint64_t)size;
            b->requested = (uint64_t)req;
            b->state = (uint8_t)parse_state(u, bf[BK_STATE]);
            if ((b->stack = intern_stack(s, frames)) == UINT32_MAX)
                return MS_ENOMEM;
            cursor = b->addr + b->size;
            if (b->state == MS_SB_ACTIVE_ALLOCATED) {
                sum_alloc += b->size;
                sum_req += b->requested;
            }
            if (b->state == MS_SB_ACTIVE_ALLOCATED || b->state == MS_SB_ACTIVE_PENDING_FREE)
                sum_active += b->size;
            s->nblocks++;
        }
        g->nblocks = s->nblocks - g->first_block;
        /* Sizes the segment does not state are summed from its blocks. */
        g->allocated = v[SG_ALLOCATED] >= 0 ? (uint64_t)v[SG_ALLOCATED] : sum_alloc;
        g->active = v[SG_ACTIVE] >= 0 ? (uint64_t)v[SG_ACTIVE] : sum_active;
        g->requested = v[SG_REQUESTED] >= 0 ? (uint64_t)v[SG_REQUESTED] : sum_req;
        s->nsegs++;
    }
    return 0;
}

/* --- traces --- */

enum { EV_ACTION, EV_ADDR, EV_SIZE, EV_STREAM, EV_TIME, EV_FRAMES, EV_DEVFREE, EV_N };
static const char *const ev_names[EV_N] = {"action",  "addr",   "size",       "stream",
                                           "time_us", "frames", "device_free"};

static int load_traces(struct ms_snapshot *s, ms_pv traces)
{
    const struct ms_unpickle *u = &s->u;
    if (ms_pv_type(u, traces) == MS_PV_ABSENT || ms_pv_type(u, traces) == MS_PV_NONE)
        return 0;
    if (!is_seq(u, traces))
        return serr(s, MS_EFORMAT, "`device_traces` is not a list");
    uint64_t nd = ms_pv_len(u, traces);
    s->traces = calloc(nd ? (size_t)nd : 1, sizeof *s->traces);
    if (!s->traces)
        return serr(s, MS_ENOMEM, "out of memory");
    struct fields el;
    fields_init(&el, ev_names, EV_N);
    int rc;
    for (uint64_t d = 0; d < nd; d++) {
        struct ms_snap_trace *t = &s->traces[s->ntraces++];
        t->device = (int64_t)d;
        ms_pv list = ms_pv_item(u, traces, d);
        enum ms_pv_type lt = ms_pv_type(u, list);
        if (lt == MS_PV_NONE)
            continue;
        if (!is_seq(u, list))
            return serr(s, MS_EFORMAT, "device_traces[%llu] is not a list", (unsigned long long)d);
        uint64_t n = ms_pv_len(u, list);
        t->events = malloc((n ? (size_t)n : 1) * sizeof *t->events);
        if (!t->events)
            return serr(s, MS_ENOMEM, "out of memory for %llu events", (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            ms_pv e = ms_pv_item(u, list, i), f[EV_N];
            if (ms_pv_type(u, e) != MS_PV_DICT)
                return serr(s, MS_EFORMAT, "device_traces[%llu][%llu] is not a dict",
                            (unsigned long long)d, (unsigned long long)i);
            get_fields(u, e, &el, f);
            struct ms_snap_event *ev = &t->events[i];
            int64_t addr = 0, size = 0, stream = 0, time = MS_SNAP_NO_TIME;
            if ((rc = opt_int(s, f[EV_ADDR], &addr, "trace", i, "addr")) ||
                (rc = opt_int(s, f[EV_SIZE], &size, "trace", i, "size")) ||
                (rc = opt_int(s, f[EV_STREAM], &stream, "trace", i, "stream")) ||
                (rc = opt_int(s, f[EV_TIME], &time, "trace", i, "time_us")))
                return rc;
            ev->action = (uint8_t)parse_action(u, f[EV_ACTION]);
            if (ev->action == MS_SA_OOM && ms_pv_type(u, f[EV_ADDR]) == MS_PV_ABSENT &&
                (rc = opt_int(s, f[EV_DEVFREE], &addr, "trace", i, "device_free")))
                return rc;
            ev->addr = (uint64_t)addr;
            ev->size = (uint64_t)size;
            ev->stream = stream;
            ev->time_us = time;
            if ((ev->stack = intern_stack(s, f[EV_FRAMES])) == UINT32_MAX)
                return MS_ENOMEM;
        }
        t->nevents = n;
    }
    return 0;
}

static int load_annotations(struct ms_snapshot *s, ms_pv list)
{
    const struct ms_unpickle *u = &s->u;
    if (!is_seq(u, list))
        return 0;
    uint64_t n = ms_pv_len(u, list);
    s->annotations = calloc(n ? (size_t)n : 1, sizeof *s->annotations);
    if (!s->annotations)
        return serr(s, MS_ENOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        ms_pv a = ms_pv_item(u, list, i);
        struct ms_snap_annotation *x = &s->annotations[s->nannotations++];
        x->name = get_str(u, ms_pv_dict_get(u, a, "name"));
        x->stage = get_str(u, ms_pv_dict_get(u, a, "stage"));
        x->time_us = MS_SNAP_NO_TIME;
        ms_pv_int(u, ms_pv_dict_get(u, a, "device"), &x->device);
        ms_pv_int(u, ms_pv_dict_get(u, a, "time_us"), &x->time_us);
    }
    return 0;
}

/* The segments, blocks, trace entries and annotations the model would hold must number at
 * most one per byte of input: every item of a list takes at least one byte of a pickle (an
 * opcode) and two of JSON text. Only a list referenced from several places (the memo: one
 * block list in every segment, one trace in every device slot) expands past that, which
 * PyTorch never writes, and which would otherwise cost memory and time quadratic in the
 * file (a 180 KB pickle made 2.5 GB). Counted before anything is allocated. 0, or MS_ELIMIT
 * with the reason in s->err. */
static int check_entries(struct ms_snapshot *s, ms_pv segs, ms_pv traces, ms_pv annotations)
{
    const struct ms_unpickle *u = &s->u;
    uint64_t limit = s->u.len, n = 0, nsegs = is_seq(u, segs) ? ms_pv_len(u, segs) : 0;
    n += nsegs;
    for (uint64_t i = 0; i < nsegs && n <= limit; i++)
        n += ms_pv_len(u, ms_pv_dict_get(u, ms_pv_item(u, segs, i), "blocks"));
    uint64_t nd = is_seq(u, traces) ? ms_pv_len(u, traces) : 0;
    n += nd;
    for (uint64_t d = 0; d < nd && n <= limit; d++) {
        ms_pv t = ms_pv_item(u, traces, d);
        n += is_seq(u, t) ? ms_pv_len(u, t) : 0;
    }
    n += is_seq(u, annotations) ? ms_pv_len(u, annotations) : 0;
    if (n <= limit)
        return 0;
    return serr(s, MS_ELIMIT,
                "its segments, blocks and trace entries come to more than one per byte of its "
                "%llu bytes: lists shared by several segments or devices (memo references), "
                "which PyTorch never writes",
                (unsigned long long)limit);
}

static int build(struct ms_snapshot *s)
{
    const struct ms_unpickle *u = &s->u;
    s->frame_map = calloc(1, sizeof(struct idmap));
    s->stack_map = calloc(1, sizeof(struct idmap));
    s->frames = calloc(1024, sizeof *s->frames);
    s->frame_rank = calloc(1024, 1);
    s->stacks = calloc(1024, sizeof *s->stacks);
    if (!s->frame_map || !s->stack_map || !s->frames || !s->frame_rank || !s->stacks)
        return serr(s, MS_ENOMEM, "out of memory");
    s->cap_frames = s->cap_rank = s->cap_stacks = 1024;
    s->nframes = 1; /* id 0: none */
    s->nstacks = 1; /* id 0: the empty stack */
    ms_pv root = s->root = s->u.root;
    int rc;
    if (is_seq(u, root)) {
        s->bare_list = 1;
        if ((rc = check_entries(s, root, MS_PV_ABSENT_VALUE, MS_PV_ABSENT_VALUE)))
            return rc;
        return load_segments(s, root);
    }
    if (ms_pv_type(u, root) != MS_PV_DICT)
        return serr(s, MS_EFORMAT,
                    "not a memory snapshot: the top level is neither a dict "
                    "nor a list of segments");
    ms_pv segs = ms_pv_dict_get(u, root, "segments");
    if (ms_pv_type(u, segs) == MS_PV_ABSENT)
        return serr(s, MS_EFORMAT, "not a memory snapshot: no `segments` key");
    if ((rc = check_entries(s, segs, ms_pv_dict_get(u, root, "device_traces"),
                            ms_pv_dict_get(u, root, "external_annotations"))) ||
        (rc = load_segments(s, segs)) ||
        (rc = load_traces(s, ms_pv_dict_get(u, root, "device_traces"))) ||
        (rc = load_annotations(s, ms_pv_dict_get(u, root, "external_annotations"))))
        return rc;
    s->allocator_settings = ms_pv_dict_get(u, root, "allocator_settings");
    return 0;
}

int ms_snapshot_load_mem(struct ms_snapshot *s, const void *data, size_t len)
{
    const unsigned char *b = data;
    size_t i = 0;
    while (i < len && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
        i++;
    if (i == len)
        return serr(s, MS_ETRUNC, "empty input");
    s->file_size = len;
    int rc;
    if (b[i] == '{' || b[i] == '[') {
        s->format = MS_SNAP_JSON;
        rc = ms_json_load(&s->u, data, len);
    } else {
        s->format = MS_SNAP_PICKLE;
        rc = ms_unpickle_load(&s->u, data, len);
    }
    s->protocol = s->u.protocol;
    if (rc)
        return serr(s, rc, "%s", s->u.err);
    return build(s);
}

int ms_snapshot_load_file(struct ms_snapshot *s, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return serr(s, -errno, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return serr(s, -e, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        return serr(s, MS_EFORMAT, "%s is not a regular, non-empty file", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return serr(s, -e, "cannot map %s: %s", path, strerror(e));
    madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
    s->map = map;
    s->map_len = (size_t)st.st_size;
    s->u.drop_behind = 1; /* base is page aligned: mmap returned it */
    return ms_snapshot_load_mem(s, map, (size_t)st.st_size);
}

const struct ms_snap_trace *ms__snap_trace(const struct ms_snapshot *s, int64_t device)
{
    /* a trace's device is its index in device_traces (load_traces) */
    if (device < 0 || (uint64_t)device >= s->ntraces)
        return NULL;
    assert(s->traces[device].device == device);
    return &s->traces[device];
}
