/* torch_export.c: a run's pools as a PyTorch memory snapshot (docs/snapshot.md "Export"), the
 * dict torch.cuda.memory._snapshot() returns, pickled (protocol 2: PyTorch's memory_viz reads
 * protocols 2 to 4, Python any):
 *   segments       the pool's reserved regions live at the end of the run (the reserve layer's
 *                  live blocks), each with its blocks tiling it in address order: the pool
 *                  layer's live blocks (active_allocated, or active_pending_free when a
 *                  FREE_REQUESTED row names them) and the gaps between them (inactive);
 *   device_traces  per device, every pool event of the whole run in order: segment_alloc,
 *                  segment_free, alloc, free_requested, free_completed (a free without a
 *                  FREE_REQUESTED row is both, as PyTorch logs it), with time_us and frames.
 * Read from blocks rows (a compact database keeps every block of a pool's layers) and the
 * FREE_REQUESTED events, so it works on every kind of database. Blocks synthesized by a
 * snapshot import for what was live before recording (func pre_trace) are in segments, not in
 * the trace, as in the snapshot they came from.
 *
 * Workload: one pass over the pool layers' blocks (sorted in memory), frames written once per
 * stack (pickle memo). Called by `memscope export --format=torch-snapshot`. */
#include "stack_text.h"
#include "store.h"

#include "common/db_ids.h"
#include "common/ms_error.h"
#include "common/grow.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define MAX_LAYERS 4096

struct pk { /* the pickle being written */
    FILE *f;
    int failed;
    uint32_t next_memo;
};

static void pk_raw(struct pk *p, const void *b, size_t n)
{
    if (n && fwrite(b, 1, n, p->f) != n)
        p->failed = 1;
}

static void pk_op(struct pk *p, int op)
{
    unsigned char c = (unsigned char)op;
    pk_raw(p, &c, 1);
}

static void pk_u32(struct pk *p, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    pk_raw(p, b, 4);
}

static void pk_int(struct pk *p, int64_t v)
{
    if (v >= 0 && v < 256) {
        pk_op(p, 'K'); /* BININT1 */
        pk_op(p, (int)v);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        pk_op(p, 'J'); /* BININT */
        pk_u32(p, (uint32_t)(int32_t)v);
    } else { /* LONG1: little-endian two's complement, as few bytes as keep the sign */
        unsigned char b[8];
        int n = 8;
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)((uint64_t)v >> (8 * i));
        while (n > 1 &&
               ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
            n--;
        pk_op(p, 0x8a);
        pk_op(p, n);
        pk_raw(p, b, (size_t)n);
    }
}

/* A str: BINUNICODE. Bytes that are not UTF-8 become '?' (Python decodes strictly). */
static void pk_str(struct pk *p, const char *s, size_t n)
{
    char small[256];
    char *t = n <= sizeof small ? small : malloc(n);
    if (!t) {
        p->failed = 1;
        return;
    }
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xe0) == 0xc0 ? 2
                     : (c & 0xf0) == 0xe0 ? 3
                     : (c & 0xf8) == 0xf0 ? 4
                                          : 0;
        int ok = len && i + len <= n && !(len == 2 && c < 0xc2);
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xc0) == 0x80;
        if (!ok) {
            t[i++] = '?';
            continue;
        }
        memcpy(t + i, s + i, len);
        i += len;
    }
    pk_op(p, 'X');
    pk_u32(p, (uint32_t)n);
    pk_raw(p, t, n);
    if (t != small)
        free(t);
}

static void pk_cstr(struct pk *p, const char *s)
{
    pk_str(p, s, strlen(s));
}

static void pk_key_int(struct pk *p, const char *k, int64_t v)
{
    pk_cstr(p, k);
    pk_int(p, v);
}

/* ---- what is read from the database ---------------------------------------------------- */

struct frame {
    char *name, *file;
    int64_t line;
};

struct stack { /* frames of one stacks row, written once (memo) */
    int64_t id;
    struct frame *frames;
    size_t n;
    uint32_t memo; /* 0: not written yet */
};

struct blk {
    int64_t id, layer, addr, size, requested, stack, alloc_ns, free_ns, alloc_ev, free_ev;
    int64_t trace_size; /* the alloc entry's size: requested, or what an imported trace said */
    int64_t free_size;  /* the free entries' size: the FREE row's (a full database), or that */
    int device;
    int pre_trace, pending; /* synthesized by a snapshot import; FREE_REQUESTED seen */
};

struct tev { /* one device_traces entry */
    int64_t ts, key;
    int64_t addr, size, stack;
    int device;
    const char *action;
};

struct exp {
    sqlite3 *db;
    char *err;
    size_t errlen;
    int64_t pool_layer[MAX_LAYERS], reserve_layer[MAX_LAYERS];
    size_t npools;
    int device_of[MAX_LAYERS]; /* by index into the pools' layers */
    struct blk *blocks;
    size_t nblocks, ablocks;
    struct stack *stacks;
    size_t nstacks, astacks;
    int64_t *pending; /* allocation ids with a FREE_REQUESTED row, sorted */
    size_t npending, apending;
    int64_t *pending_ts, *pending_ev, *pending_size; /* ... and that row's time, id, size */
    size_t apending_ts, apending_ev, apending_size;
    int snapshot_source; /* the database is a snapshot import: frames are the snapshot's */
};

static int fail(struct exp *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct exp *e, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, e->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int db_fail(struct exp *e, const char *what)
{
    return fail(e, MS_EDB, "%s: %s", what, sqlite3_errmsg(e->db));
}

/* Device ordinal of a layer: layers.device when it is a number, else 0 (host pools). */
static int layer_device(struct exp *e, int64_t layer)
{
    sqlite3_stmt *st;
    int dev = 0;
    if (sqlite3_prepare_v2(e->db, "SELECT device FROM layers WHERE id = ?", -1, &st, NULL) !=
        SQLITE_OK)
        return 0;
    sqlite3_bind_int64(st, 1, layer);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
        const char *d = (const char *)sqlite3_column_text(st, 0);
        char *end;
        long v = d ? strtol(d, &end, 10) : 0;
        if (d && *d && !*end && v >= 0 && v < 1024)
            dev = (int)v;
    }
    sqlite3_finalize(st);
    return dev;
}

static int load_pools(struct exp *e)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(e->db, "SELECT layer, reserve_layer FROM pools ORDER BY id", -1, &st,
                           NULL) != SQLITE_OK)
        return db_fail(e, "cannot read the pools");
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW && rc == 0) {
        if (e->npools == MAX_LAYERS) {
            rc = fail(e, MS_ELIMIT, "more than %d pools", MAX_LAYERS);
            break;
        }
        e->pool_layer[e->npools] = sqlite3_column_int64(st, 0);
        e->reserve_layer[e->npools] = sqlite3_column_int64(st, 1);
        e->npools++;
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = db_fail(e, "cannot read the pools");
    sqlite3_finalize(st);
    for (size_t i = 0; i < e->npools && rc == 0; i++)
        e->device_of[i] = layer_device(e, e->pool_layer[i]);
    if (rc == 0 && e->npools == 0)
        rc = fail(e, MS_ENOTFOUND,
                  "the run has no pool (PyTorch's allocator, a pool of "
                  "memscope.h or NVTX): nothing to write as a PyTorch snapshot");
    return rc;
}

static int pool_of(const struct exp *e, int64_t layer, int *reserve)
{
    for (size_t i = 0; i < e->npools; i++)
        if (e->pool_layer[i] == layer || e->reserve_layer[i] == layer) {
            *reserve = e->reserve_layer[i] == layer;
            return (int)i;
        }
    return -1;
}

/* Allocation ids (and times) of the FREE_REQUESTED rows: a snapshot import's only. */
static int load_pending(struct exp *e)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(
            e->db,
            "SELECT allocation_id, ts_ns, id, size FROM events WHERE kind = " MS_SQL_FREE_REQUESTED
            " AND allocation_id IS NOT NULL "
            "ORDER BY allocation_id",
            -1, &st, NULL) != SQLITE_OK)
        return db_fail(e, "cannot read the events");
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)&e->pending, &e->apending, e->npending, sizeof *e->pending, 64,
                    MS_GROW_MAX) ||
            ms_grow((void **)&e->pending_ts, &e->apending_ts, e->npending, sizeof *e->pending_ts,
                    64, MS_GROW_MAX) ||
            ms_grow((void **)&e->pending_ev, &e->apending_ev, e->npending, sizeof *e->pending_ev,
                    64, MS_GROW_MAX) ||
            ms_grow((void **)&e->pending_size, &e->apending_size, e->npending,
                    sizeof *e->pending_size, 64, MS_GROW_MAX)) {
            rc = fail(e, MS_ENOMEM, "out of memory");
            break;
        }
        e->pending[e->npending] = sqlite3_column_int64(st, 0);
        e->pending_ts[e->npending] = sqlite3_column_int64(st, 1);
        e->pending_ev[e->npending] = sqlite3_column_int64(st, 2);
        e->pending_size[e->npending++] = sqlite3_column_int64(st, 3);
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = db_fail(e, "cannot read the events");
    sqlite3_finalize(st);
    return rc;
}

static ssize_t find_pending(const struct exp *e, int64_t id)
{
    size_t lo = 0, hi = e->npending;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->pending[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->npending && e->pending[lo] == id ? (ssize_t)lo : -1;
}

static int load_blocks(struct exp *e)
{
    /* the requested size: PyTorch's blocks (a CUDA run's, a snapshot import's) keep it in the
     * MALLOC row's attr "requested" (not in a compact database, which has no MALLOC rows:
     * there it is the size) */
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(e->db,
                           "SELECT b.allocation_id, b.layer, b.addr, b.size, b.stack_id, "
                           "b.alloc_ns, b.free_ns, b.alloc_event_id, b.free_event_id, "
                           "b.func = 'pre_trace', json_extract(v.attr, '$.requested'), "
                           "(SELECT t.tid FROM threads t WHERE t.id = b.thread_id), "
                           "json_extract(v.attr, '$.trace_size'), "
                           "json_extract(v.attr, '$.state') = 'active_pending_free', "
                           "(SELECT w.size FROM events w WHERE w.id = b.free_event_id) "
                           "FROM blocks b LEFT JOIN events v ON v.id = b.alloc_event_id AND "
                           "json_valid(v.attr) WHERE b.layer IN (SELECT layer "
                           "FROM pools UNION SELECT reserve_layer FROM pools) ORDER BY b.addr, "
                           "b.allocation_id",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(e, "cannot read the blocks");
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)&e->blocks, &e->ablocks, e->nblocks, sizeof *e->blocks, 256,
                    MS_GROW_MAX)) {
            rc = fail(e, MS_ENOMEM, "out of memory");
            break;
        }
        struct blk *b = &e->blocks[e->nblocks++];
        b->id = sqlite3_column_int64(st, 0);
        b->layer = sqlite3_column_int64(st, 1);
        b->addr = sqlite3_column_int64(st, 2);
        b->size = sqlite3_column_int64(st, 3);
        b->stack = sqlite3_column_type(st, 4) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 4);
        b->alloc_ns = sqlite3_column_int64(st, 5);
        b->free_ns =
            sqlite3_column_type(st, 6) == SQLITE_NULL ? INT64_MIN : sqlite3_column_int64(st, 6);
        b->alloc_ev = sqlite3_column_int64(st, 7);
        b->free_ev = sqlite3_column_type(st, 8) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 8);
        b->pre_trace = sqlite3_column_int(st, 9);
        b->requested =
            sqlite3_column_type(st, 10) == SQLITE_NULL ? b->size : sqlite3_column_int64(st, 10);
        if (b->size < 0 || b->requested < 0 || b->requested > b->size)
            b->requested = b->size;
        b->pending = find_pending(e, b->id) >= 0 || sqlite3_column_int(st, 13);
        b->trace_size = sqlite3_column_type(st, 12) == SQLITE_NULL ? b->requested
                                                                   : sqlite3_column_int64(st, 12);
        b->free_size = sqlite3_column_type(st, 14) == SQLITE_NULL ? b->trace_size
                                                                  : sqlite3_column_int64(st, 14);
        /* the device: the pool layer's, or in a snapshot import (whose layers are shared by
         * the devices) the thread's, one per device (docs/database.md) */
        int reserve, pool = pool_of(e, b->layer, &reserve);
        int64_t tid = sqlite3_column_int64(st, 11);
        b->device = e->snapshot_source && tid >= 0 && tid < 1024 ? (int)tid
                    : pool >= 0                                  ? e->device_of[pool]
                                                                 : 0;
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = db_fail(e, "cannot read the blocks");
    sqlite3_finalize(st);
    return rc;
}

/* The frames of stack id, innermost first (PyTorch's order): the native frames, then the
 * Python ones ("file(line): function" lines, ms_stack_text_py); a snapshot import's frames are
 * the snapshot's own (in stack_frames, py_text repeats them). */
static int load_stack(struct exp *e, int64_t id, struct stack **out)
{
    for (size_t i = 0; i < e->nstacks; i++) /* few distinct stacks per pool: linear is fine */
        if (e->stacks[i].id == id) {
            *out = &e->stacks[i];
            return 0;
        }
    if (ms_grow((void **)&e->stacks, &e->astacks, e->nstacks, sizeof *e->stacks, 64, MS_GROW_MAX))
        return fail(e, MS_ENOMEM, "out of memory");
    struct stack *k = &e->stacks[e->nstacks++];
    memset(k, 0, sizeof *k);
    k->id = id;
    *out = k;
    size_t cap = 0;
    sqlite3_stmt *st;
    if (ms_stack_frames_prepare(e->db,
                                "SELECT fn.text, COALESCE(fl.text, m.path), f.line FROM sf "
                                "JOIN frames f ON f.id = sf.frame_id LEFT JOIN strings fn ON "
                                "fn.id = f.function_id LEFT JOIN strings fl ON fl.id = f.file_id "
                                "LEFT JOIN modules m ON m.id = f.module_id ORDER BY sf.position",
                                &st) < 0)
        return db_fail(e, "cannot read the stacks");
    sqlite3_bind_int64(st, 1, id);
    int rc = 0;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        if (ms_grow((void **)&k->frames, &cap, k->n, sizeof *k->frames, 16, MS_GROW_MAX)) {
            rc = fail(e, MS_ENOMEM, "out of memory");
            break;
        }
        const char *fn = (const char *)sqlite3_column_text(st, 0);
        const char *fl = (const char *)sqlite3_column_text(st, 1);
        struct frame *f = &k->frames[k->n++];
        f->name = strdup(fn ? fn : "??");
        f->file = strdup(fl ? fl : "??");
        f->line = sqlite3_column_int64(st, 2);
        if (!f->name || !f->file)
            rc = fail(e, MS_ENOMEM, "out of memory");
    }
    sqlite3_finalize(st);
    if (rc || e->snapshot_source)
        return rc;
    struct ms_stack_text t; /* few stacks per export: a reader each */
    if (ms_stack_text_init(&t, e->db) < 0)
        return db_fail(e, "cannot read the stacks");
    const char *py = ms_stack_text_py(&t, id);
    if (!py)
        rc = fail(e, MS_ENOMEM, "cannot read the stacks");
    while (py && *py && rc == 0) { /* "file(line): function" per line */
        const char *nl = strchr(py, '\n'), *end = nl ? nl : py + strlen(py);
        const char *colon = NULL, *open = NULL;
        for (const char *q = py; q + 2 < end && !colon; q++)
            if (q[0] == ')' && q[1] == ':' && q[2] == ' ')
                colon = q;
        for (const char *q = colon; q && q > py && !open; q--)
            if (*q == '(')
                open = q;
        if (ms_grow((void **)&k->frames, &cap, k->n, sizeof *k->frames, 16, MS_GROW_MAX)) {
            rc = fail(e, MS_ENOMEM, "out of memory");
            break;
        }
        struct frame *f = &k->frames[k->n++];
        if (open && colon) {
            f->file = strndup(py, (size_t)(open - py));
            f->line = strtoll(open + 1, NULL, 10);
            f->name = strndup(colon + 3, (size_t)(end - colon - 3));
        } else {
            f->file = strdup("??");
            f->line = 0;
            f->name = strndup(py, (size_t)(end - py));
        }
        if (!f->file || !f->name)
            rc = fail(e, MS_ENOMEM, "out of memory");
        py = nl ? nl + 1 : end;
    }
    ms_stack_text_release(&t);
    return rc;
}

/* The frames list of a stack, memoized: the first use writes it, later ones refer to it. */
static int write_frames(struct exp *e, struct pk *p, int64_t stack)
{
    struct stack *k = NULL;
    int rc;
    if (!stack) {
        pk_op(p, ']');
        return 0;
    }
    if ((rc = load_stack(e, stack, &k)))
        return rc;
    if (k->memo) {
        pk_op(p, 'j'); /* LONG_BINGET */
        pk_u32(p, k->memo);
        return 0;
    }
    pk_op(p, ']');
    pk_op(p, 'r'); /* LONG_BINPUT */
    k->memo = ++p->next_memo;
    pk_u32(p, k->memo);
    if (k->n) {
        pk_op(p, '(');
        for (size_t i = 0; i < k->n; i++) {
            pk_op(p, '}');
            pk_op(p, '(');
            pk_cstr(p, "filename");
            pk_cstr(p, k->frames[i].file);
            pk_key_int(p, "line", k->frames[i].line);
            pk_cstr(p, "name");
            pk_cstr(p, k->frames[i].name);
            pk_op(p, 'u');
        }
        pk_op(p, 'e');
    }
    return 0;
}

static void write_block(struct pk *p, struct exp *e, int64_t addr, int64_t size, int64_t requested,
                        const char *state, int64_t stack, int *rc)
{
    pk_op(p, '}');
    pk_op(p, '(');
    pk_key_int(p, "address", addr);
    pk_key_int(p, "size", size);
    pk_key_int(p, "requested_size", requested);
    pk_cstr(p, "state");
    pk_cstr(p, state);
    pk_cstr(p, "frames");
    if (*rc == 0)
        *rc = write_frames(e, p, stack);
    pk_op(p, 'u');
}

/* The segments live at the end, each with its blocks (live pool blocks and the gaps). */
static int write_segments(struct exp *e, struct pk *p)
{
    int rc = 0;
    pk_cstr(p, "segments");
    pk_op(p, ']');
    pk_op(p, '(');
    for (size_t si = 0; si < e->nblocks && rc == 0; si++) {
        const struct blk *g = &e->blocks[si];
        int reserve, pool = pool_of(e, g->layer, &reserve);
        if (pool < 0 || !reserve || g->free_ns != INT64_MIN)
            continue;
        /* its blocks: live blocks of the pool's layer inside it (blocks are sorted by addr) */
        int64_t end = g->addr + g->size, at = g->addr, allocated = 0, active = 0, requested = 0;
        size_t first = 0, hi = e->nblocks;
        while (first < hi) {
            size_t mid = (first + hi) / 2;
            if (e->blocks[mid].addr < g->addr)
                first = mid + 1;
            else
                hi = mid;
        }
        for (size_t i = first; i < e->nblocks && e->blocks[i].addr < end; i++) {
            const struct blk *b = &e->blocks[i];
            if (b->layer == e->pool_layer[pool] && b->free_ns == INT64_MIN) {
                active += b->size;
                allocated += b->pending ? 0 : b->size;
                requested += b->requested;
            }
        }
        pk_op(p, '}');
        pk_op(p, '(');
        pk_key_int(p, "device", g->device);
        pk_key_int(p, "address", g->addr);
        pk_key_int(p, "total_size", g->size);
        pk_key_int(p, "allocated_size", allocated);
        pk_key_int(p, "active_size", active);
        pk_key_int(p, "requested_size", requested);
        pk_key_int(p, "stream", 0);
        pk_cstr(p, "segment_type");
        pk_cstr(p, g->size <= (2 << 20) ? "small" : "large"); /* PyTorch's small segments: 2 MiB */
        pk_cstr(p, "segment_pool_id");
        pk_int(p, 0);
        pk_int(p, 0);
        pk_op(p, 0x86); /* TUPLE2 */
        pk_cstr(p, "is_expandable");
        pk_op(p, 0x89); /* NEWFALSE */
        pk_cstr(p, "frames");
        rc = write_frames(e, p, g->stack);
        pk_cstr(p, "blocks");
        pk_op(p, ']');
        pk_op(p, '(');
        for (size_t i = first; i < e->nblocks && e->blocks[i].addr < end && rc == 0; i++) {
            const struct blk *b = &e->blocks[i];
            if (b->layer != e->pool_layer[pool] || b->free_ns != INT64_MIN || b->addr < at)
                continue; /* (a block overlapping the one before it is left out) */
            if (b->addr > at)
                write_block(p, e, at, b->addr - at, 0, "inactive", 0, &rc);
            int64_t size = b->size < end - b->addr ? b->size : end - b->addr;
            write_block(p, e, b->addr, size, b->requested < size ? b->requested : size,
                        b->pending ? "active_pending_free" : "active_allocated", b->stack, &rc);
            at = b->addr + size;
        }
        if (at < end)
            write_block(p, e, at, end - at, 0, "inactive", 0, &rc);
        pk_op(p, 'e');
        pk_op(p, 'u');
    }
    pk_op(p, 'e');
    return rc;
}

static int cmp_tev(const void *a, const void *b)
{
    const struct tev *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Every pool event of the run, per device, in order. */
static int write_traces(struct exp *e, struct pk *p)
{
    struct tev *t = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, ndev = 1;
#define ADD(ts_, key_, addr_, size_, stack_, dev_, action_)                                  \
    do {                                                                                     \
        if (ms_grow((void **)&t, &cap, n, sizeof *t, 1024, MS_GROW_MAX)) {                   \
            rc = fail(e, MS_ENOMEM, "out of memory");                                        \
            goto out;                                                                        \
        }                                                                                    \
        t[n++] = (struct tev){(ts_), (key_), (addr_), (size_), (stack_), (dev_), (action_)}; \
    } while (0)
    for (size_t i = 0; i < e->nblocks; i++) {
        const struct blk *b = &e->blocks[i];
        int reserve, pool = pool_of(e, b->layer, &reserve);
        if (pool < 0)
            continue;
        int dev = b->device;
        if (dev + 1 > ndev)
            ndev = dev + 1;
        /* the key orders equal times: event ids; a block replaced without a free event ends
         * just before what replaced it. pre_trace: allocated before recording (its free, if
         * any, is in the trace) */
        if (!b->pre_trace)
            ADD(b->alloc_ns, 2 * b->alloc_ev, b->addr, reserve ? b->size : b->trace_size, b->stack,
                dev, reserve ? "segment_alloc" : "alloc");
        if (b->free_ns == INT64_MIN)
            continue;
        int64_t key = b->free_ev ? 2 * b->free_ev : 0;
        if (reserve) {
            ADD(b->free_ns, key, b->addr, b->size, 0, dev, "segment_free");
            continue;
        }
        ssize_t k = find_pending(e, b->id);
        if (k < 0) /* PyTorch logs both for every free */
            ADD(b->free_ns, key - 1, b->addr, b->free_size, 0, dev, "free_requested");
        ADD(b->free_ns, key, b->addr, b->free_size, 0, dev, "free_completed");
    }
    for (size_t i = 0; i < e->nblocks; i++) { /* the FREE_REQUESTED rows of an import */
        const struct blk *b = &e->blocks[i];
        int reserve, pool = pool_of(e, b->layer, &reserve);
        ssize_t k = pool < 0 || reserve ? -1 : find_pending(e, b->id);
        if (k >= 0)
            ADD(e->pending_ts[k], 2 * e->pending_ev[k], b->addr, e->pending_size[k], 0, b->device,
                "free_requested");
    }
#undef ADD
    if (n)
        qsort(t, n, sizeof *t, cmp_tev);
    pk_cstr(p, "device_traces");
    pk_op(p, ']');
    pk_op(p, '(');
    for (int d = 0; d < ndev && rc == 0; d++) {
        pk_op(p, ']');
        int open = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (t[i].device != d)
                continue;
            if (!open) {
                pk_op(p, '(');
                open = 1;
            }
            pk_op(p, '}');
            pk_op(p, '(');
            pk_cstr(p, "action");
            pk_cstr(p, t[i].action);
            pk_key_int(p, "addr", t[i].addr);
            pk_key_int(p, "size", t[i].size);
            pk_key_int(p, "stream", 0);
            pk_key_int(p, "time_us", t[i].ts / 1000);
            pk_cstr(p, "frames");
            rc = write_frames(e, p, t[i].stack);
            pk_op(p, 'u');
        }
        if (open)
            pk_op(p, 'e');
    }
    pk_op(p, 'e');
out:
    free(t);
    return rc;
}

int ms_store_export_torch(const char *db_path, FILE *out, char *err, size_t errlen)
{
    struct exp *e = calloc(1, sizeof *e);
    if (!e) {
        return ms_errf(err, errlen, MS_ENOMEM, "out of memory");
    }
    e->err = err;
    e->errlen = errlen;
    int rc = 0;
    if (sqlite3_open_v2(db_path, &e->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        rc = fail(e, MS_EIO, "cannot open %s: %s", db_path, sqlite3_errmsg(e->db));
    if (rc == 0 && (rc = ms_store_check_version(e->db, err, errlen)) == 0 &&
        (rc = ms_store_check_sizes(e->db, err, errlen)) == 0) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(e->db,
                               "SELECT 1 FROM meta WHERE key = 'source' AND value = "
                               "'pytorch_snapshot'",
                               -1, &st, NULL) == SQLITE_OK) {
            e->snapshot_source = sqlite3_step(st) == SQLITE_ROW;
            sqlite3_finalize(st);
        }
    }
    if (rc == 0)
        rc = load_pools(e);
    if (rc == 0)
        rc = load_pending(e);
    if (rc == 0)
        rc = load_blocks(e);
    struct pk p = {.f = out};
    if (rc == 0) {
        pk_op(&p, 0x80); /* PROTO 2 */
        pk_op(&p, 2);
        pk_op(&p, '}');
        pk_op(&p, '(');
        rc = write_segments(e, &p);
    }
    if (rc == 0)
        rc = write_traces(e, &p);
    if (rc == 0) {
        pk_op(&p, 'u');
        pk_op(&p, '.'); /* STOP */
        if (fflush(out) != 0 || p.failed)
            rc = fail(e, MS_EIO, "cannot write the snapshot");
    }
    for (size_t i = 0; i < e->nstacks; i++) {
        for (size_t k = 0; k < e->stacks[i].n; k++) {
            free(e->stacks[i].frames[k].name);
            free(e->stacks[i].frames[k].file);
        }
        free(e->stacks[i].frames);
    }
    free(e->stacks);
    free(e->blocks);
    free(e->pending);
    free(e->pending_ts);
    free(e->pending_ev);
    free(e->pending_size);
    sqlite3_close(e->db);
    free(e);
    return rc;
}
