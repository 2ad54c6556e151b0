/* export_profile.c: the profile every export is made from (export.h): the selection's MALLOC
 * and FREE events read once in id order and summed per (process, layer, stack), with the blocks
 * live at each moment kept by address (as ms__live_apply and the converter match them: a FREE
 * with an allocation_id ends its block, a MALLOC at a live address first ends the old one).
 * Called by `memscope export`; workload: every event of a run (100M), memory bounded by the
 * distinct stacks and the blocks live at once. The stacks' frames and the other formats'
 * frame rule are here too (ms_export_stack_load). */
#include "export.h"

#include "common/grow.h"
#include "common/ms_error.h"
#include "store/store.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* A live block: its entry, size, and whether it was allocated inside the window. */
struct blk {
    uint32_t entry, in_window;
    int64_t size;
};

/* a sink's code: the window is over, nothing more is needed (no MS_E* nor -errno code) */
#define STOP_REPLAY (MS_EBASE - 99)

int ms_export_what_parse(const char *name, enum ms_export_what *what)
{
    static const char *const names[] = {"allocated", "live-at-exit", "peak", "leaked"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) {
            *what = (enum ms_export_what)i;
            return 0;
        }
    return -1;
}

int64_t ms_profile_value(const struct ms_profile_entry *e, enum ms_export_what what, int64_t *count)
{
    int64_t n, b;
    switch (what) {
    case MS_WHAT_LIVE: n = e->inuse, b = e->inuse_bytes; break;
    case MS_WHAT_PEAK: n = e->peak, b = e->peak_bytes; break;
    case MS_WHAT_LEAKED: n = e->leaked, b = e->leaked_bytes; break;
    default: n = e->allocs, b = e->alloc_bytes;
    }
    if (count)
        *count = n;
    return b;
}

static int fail(struct ms_profile *p, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct ms_profile *p, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static int db_fail(struct ms_profile *p, const char *what)
{
    return fail(p, MS_EDB, "%s: %s", what, sqlite3_errmsg(p->db));
}

struct entry_order {
    int64_t process_id, layer, stack_id;
    uint32_t i;
};

static int entry_cmp(const void *x, const void *y)
{
    const struct entry_order *a = x, *b = y;
    if (a->process_id != b->process_id)
        return a->process_id < b->process_id ? -1 : 1;
    if (a->layer != b->layer)
        return a->layer < b->layer ? -1 : 1;
    return a->stack_id < b->stack_id ? -1 : a->stack_id > b->stack_id;
}

uint32_t *ms_profile_sorted(const struct ms_profile *p)
{
    size_t n = p->ne ? p->ne : 1;
    uint32_t *ix = malloc(n * sizeof *ix);
    struct entry_order *v = malloc(n * sizeof *v);
    if (!ix || !v) {
        free(ix), free(v);
        return NULL;
    }
    for (size_t i = 0; i < p->ne; i++)
        v[i] =
            (struct entry_order){p->e[i].process_id, p->e[i].layer, p->e[i].stack_id, (uint32_t)i};
    qsort(v, p->ne, sizeof *v, entry_cmp);
    for (size_t i = 0; i < p->ne; i++)
        ix[i] = v[i].i;
    free(v);
    return ix;
}

const struct ms_profile_pl *ms_profile_pl_of(const struct ms_profile *p,
                                             const struct ms_profile_entry *e)
{
    for (size_t i = 0; i < p->npl; i++)
        if (p->pl[i].process_id == e->process_id && p->pl[i].layer == e->layer)
            return &p->pl[i];
    return NULL;
}

static int in_sorted(const int64_t *v, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] == x)
            return 1;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Reads the int64 column 0 of every row of sql (one ?1 bound to arg) into a sorted array. */
static int load_ids(struct ms_profile *p, const char *sql, const char *arg, int64_t **v, size_t *n)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(p->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(p, "reading the selection");
    sqlite3_bind_text(st, 1, arg, -1, SQLITE_TRANSIENT);
    size_t cap = 0;
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)v, &cap, *n, sizeof **v, 16, MS_GROW_MAX) < 0) {
            rc = fail(p, MS_ENOMEM, "out of memory");
            break;
        }
        (*v)[(*n)++] = sqlite3_column_int64(st, 0);
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = db_fail(p, "reading the selection");
    sqlite3_finalize(st);
    return rc;
}

static int64_t one_int(sqlite3 *db, const char *sql, int64_t dflt)
{
    sqlite3_stmt *st;
    int64_t v = dflt;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* Resolves the selectors: processes, the layers of a device, the window. */
static int select_load(struct ms_profile *p)
{
    const struct ms_analyze_opts *o = p->o;
    int rc = ms__layer_set_load(p->db, o, &p->layers);
    if (rc < 0)
        return db_fail(p, "reading the layers");
    if (o->pid) {
        char pid[32];
        snprintf(pid, sizeof pid, "%lld", (long long)o->pid);
        if ((rc = load_ids(p, "SELECT id FROM processes WHERE pid = CAST(?1 AS INTEGER) ORDER BY 1",
                           pid, &p->procs, &p->nprocs)) < 0)
            return rc;
        if (!p->nprocs)
            return fail(p, MS_ENOTFOUND, "no process with pid %lld in this run", (long long)o->pid);
    }
    if (o->device) {
        if ((rc = load_ids(p, "SELECT id FROM layers WHERE id > 0 AND device = ?1 ORDER BY 1",
                           o->device, &p->dev_layers, &p->ndev)) < 0)
            return rc;
        if (!p->ndev)
            return fail(p, MS_ENOTFOUND, "no layer of device %s in this run", o->device);
        if (o->layer > 0 && !in_sorted(p->dev_layers, p->ndev, o->layer))
            return fail(p, MS_ENOTFOUND, "the layer selected is not of device %s", o->device);
    }
    int64_t first = one_int(p->db,
                            "SELECT CAST(value AS INTEGER) FROM meta WHERE key = "
                            "'first_event_ns'",
                            -1);
    int64_t last = one_int(p->db,
                           "SELECT CAST(value AS INTEGER) FROM meta WHERE key = "
                           "'last_event_ns'",
                           -1);
    if (first < 0)
        first = one_int(p->db, "SELECT MIN(start_ns) FROM processes", 0);
    if (last < 0)
        last = one_int(p->db, "SELECT MAX(end_ns) FROM processes", first);
    p->from_ns = first, p->to_ns = last;
    p->run_start_ns = ms__run_start_ns(p->db);
    if (o->at_step) {
        if (o->at_ns || o->from_ns || o->to_ns)
            return fail(p, MS_EINVAL, "--step and --at, --from or --to: one window");
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(p->db,
                               "SELECT MIN(start_ns), MAX(end_ns) FROM steps WHERE step = ?1 AND "
                               "(?2 = 0 OR process_id IN (SELECT id FROM processes WHERE pid = "
                               "?2))",
                               -1, &st, NULL) != SQLITE_OK)
            return db_fail(p, "reading the steps");
        sqlite3_bind_int(st, 1, o->at_step);
        sqlite3_bind_int64(st, 2, o->pid);
        int found = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL;
        if (found)
            p->from_ns = sqlite3_column_int64(st, 0), p->to_ns = sqlite3_column_int64(st, 1);
        sqlite3_finalize(st);
        if (!found)
            return fail(p, MS_ENOTFOUND, "no step %d in this run%s", o->at_step,
                        o->pid ? " for that process" : "");
    }
    if (o->at_ns)
        p->to_ns = o->at_ns;
    if (o->from_ns)
        p->from_ns = o->from_ns;
    if (o->to_ns)
        p->to_ns = o->to_ns;
    if (o->at_ns && (o->from_ns || o->to_ns))
        return fail(p, MS_EINVAL, "--at and --from or --to: one window");
    if (p->to_ns < p->from_ns)
        return fail(p, MS_EINVAL, "the window ends (%lld) before it starts (%lld)",
                    (long long)p->to_ns, (long long)p->from_ns);
    return 0;
}

static int selected(const struct ms_profile *p, int64_t process_id, int64_t layer)
{
    if (!ms__layer_selected(&p->layers, layer))
        return 0;
    if (p->ndev && !in_sorted(p->dev_layers, p->ndev, layer))
        return 0;
    return !p->o->pid || in_sorted(p->procs, p->nprocs, process_id);
}

static struct ms_profile_pl *pl_get(struct ms_profile *p, int64_t process_id, int64_t layer)
{
    for (size_t i = p->npl; i-- > 0;)
        if (p->pl[i].process_id == process_id && p->pl[i].layer == layer)
            return &p->pl[i];
    if (ms_grow((void **)&p->pl, &p->apl, p->npl, sizeof *p->pl, 8, 1u << 20) < 0)
        return NULL;
    struct ms_profile_pl *pl = &p->pl[p->npl++];
    memset(pl, 0, sizeof *pl);
    pl->process_id = process_id, pl->layer = layer, pl->first = UINT32_MAX, pl->bucket = -1;
    pl->peak_eid = -1;
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT pid FROM processes WHERE id = %lld", (long long)process_id);
    pl->pid = one_int(p->db, sql, process_id);
    ms_u64map_init(&pl->stack, sizeof(uint32_t), MS_U64MAP_MAX);
    ms_u64map_init(&pl->addrs, sizeof(struct blk), MS_U64MAP_MAX);
    return pl;
}

static long entry_get(struct ms_profile *p, struct ms_profile_pl *pl, int64_t stack_id)
{
    uint32_t i;
    if (ms_u64map_get32(&pl->stack, (uint64_t)stack_id, &i))
        return i;
    if (p->ne >= UINT32_MAX - 1 ||
        ms_grow((void **)&p->e, &p->ae, p->ne, sizeof *p->e, 1024, MS_GROW_MAX) < 0 ||
        ms_u64map_set32(&pl->stack, (uint64_t)stack_id, (uint32_t)p->ne) < 0)
        return -1;
    struct ms_profile_entry *e = &p->e[p->ne];
    memset(e, 0, sizeof *e);
    e->process_id = pl->process_id, e->layer = pl->layer, e->stack_id = stack_id;
    e->next = pl->first;
    pl->first = (uint32_t)p->ne;
    return (long)p->ne++;
}

/* The counter's point of the bucket that ends, when the timeline is kept. */
static int tl_flush(struct ms_profile_pl *pl, const struct ms_profile *p)
{
    if (pl->bucket < 0)
        return 0;
    if (ms_grow((void **)&pl->pts, &pl->apts, pl->npts, sizeof *pl->pts, 64,
                MS_PROFILE_BUCKETS + 4) < 0)
        return MS_ENOMEM;
    double w = ((double)p->to_ns - (double)p->from_ns + 1) / MS_PROFILE_BUCKETS;
    int64_t ts = p->from_ns + (int64_t)((double)pl->bucket * w);
    if (pl->npts && pl->pts[pl->npts - 1].ts_ns >= ts)
        ts = pl->pts[pl->npts - 1].ts_ns + 1;
    pl->pts[pl->npts++] = (struct ms_profile_point){ts, pl->bucket_max};
    return 0;
}

static int tl_event(struct ms_profile *p, struct ms_profile_pl *pl, int64_t ts, int64_t before)
{
    double w = ((double)p->to_ns - (double)p->from_ns + 1) / MS_PROFILE_BUCKETS;
    int64_t b = (int64_t)(((double)ts - (double)p->from_ns) / w);
    if (b >= MS_PROFILE_BUCKETS)
        b = MS_PROFILE_BUCKETS - 1;
    if (b != pl->bucket) {
        if (pl->bucket < 0 && b > 0) { /* what was live as the window opened */
            pl->bucket = 0, pl->bucket_max = before;
        }
        if (tl_flush(pl, p) < 0)
            return MS_ENOMEM;
        pl->bucket = b, pl->bucket_max = before;
    }
    if (pl->live > pl->bucket_max)
        pl->bucket_max = pl->live;
    return 0;
}

/* A live block ends: its entry's and its (process, layer)'s counts go down. */
static void blk_end(struct ms_profile *p, struct ms_profile_pl *pl, const struct blk *b)
{
    struct ms_profile_entry *e = &p->e[b->entry];
    e->live--, e->live_bytes -= b->size;
    pl->live -= b->size, pl->blocks--;
}

/* The window is over: what is live now is the entries' in-use figure. */
static void window_end(struct ms_profile *p)
{
    if (p->past_to)
        return;
    p->past_to = 1;
    for (size_t i = 0; i < p->ne; i++)
        p->e[i].inuse = p->e[i].live, p->e[i].inuse_bytes = p->e[i].live_bytes;
}

static int on_row(void *ctx, const struct ms_store_row *r)
{
    struct ms_profile *p = ctx;
    if ((r->kind != 1 && r->kind != 2) || !selected(p, r->process_id, r->layer))
        return 0;
    if (r->ts_ns > p->to_ns) {
        /* pass 2 reads on only for the leaked figure: blocks allocated in the window and
         * never freed need the rest of the run */
        if (p->pass == 1)
            return STOP_REPLAY;
        window_end(p);
        if (!p->to_end)
            return STOP_REPLAY;
    }
    int inside = !p->past_to && r->ts_ns >= p->from_ns;
    struct ms_profile_pl *pl = pl_get(p, r->process_id, r->layer);
    if (!pl)
        return MS_ENOMEM;
    int64_t before = pl->live;
    struct blk b;
    if (r->kind == 2) {
        if (r->allocation_id > 0 && r->has_addr &&
            ms_u64map_del(&pl->addrs, (uint64_t)r->addr, &b)) {
            if (p->pass == 2)
                blk_end(p, pl, &b);
            else
                pl->live -= b.size, pl->blocks--;
        }
    } else {
        struct blk *old = ms_u64map_get(&pl->addrs, (uint64_t)r->addr);
        if (old) { /* a block replaced without a free */
            b = *old;
            if (p->pass == 2)
                blk_end(p, pl, &b);
            else
                pl->live -= b.size, pl->blocks--;
            ms_u64map_del(&pl->addrs, (uint64_t)r->addr, NULL);
        }
        int64_t size = r->has_size && r->size > 0 ? r->size : 0;
        uint32_t entry = 0;
        if (p->pass == 2) {
            long k = entry_get(p, pl, r->stack_id > 0 ? r->stack_id : 0);
            if (k < 0)
                return MS_ENOMEM;
            entry = (uint32_t)k;
            struct ms_profile_entry *e = &p->e[k];
            e->live++, e->live_bytes += size;
            if (inside)
                e->allocs++, e->alloc_bytes += size;
        }
        struct blk *nb = ms_u64map_put(&pl->addrs, (uint64_t)r->addr, NULL);
        if (!nb)
            return MS_ENOMEM;
        *nb = (struct blk){entry, (uint32_t)inside, size};
        pl->live += size, pl->blocks++;
    }
    if (p->pass == 1) {
        if (inside && r->kind == 1 && pl->live > pl->max)
            pl->max = pl->live, pl->peak_eid = r->id;
        return 0;
    }
    if (inside) {
        p->matched++;
        if (p->timeline && tl_event(p, pl, r->ts_ns, before) < 0)
            return MS_ENOMEM;
    }
    if (r->kind == 1 && r->id == pl->peak_eid) /* its peak: what is live now */
        for (uint32_t i = pl->first; i != UINT32_MAX; i = p->e[i].next)
            p->e[i].peak = p->e[i].live, p->e[i].peak_bytes = p->e[i].live_bytes;
    return 0;
}

/* Every MALLOC and FREE row of a full database, in id order, to sink. */
static int scan_full(struct ms_profile *p, int (*sink)(void *, const struct ms_store_row *))
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(p->db,
                           "SELECT id, ts_ns, kind, layer, process_id, addr, size, stack_id, "
                           "allocation_id FROM events WHERE kind IN (1, 2) ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(p, "reading the events");
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        struct ms_store_row r = {0};
        r.id = sqlite3_column_int64(st, 0);
        r.ts_ns = sqlite3_column_int64(st, 1);
        r.kind = sqlite3_column_int(st, 2);
        r.layer = sqlite3_column_int(st, 3);
        r.process_id = sqlite3_column_int64(st, 4);
        r.has_addr = sqlite3_column_type(st, 5) != SQLITE_NULL;
        r.addr = sqlite3_column_int64(st, 5);
        r.has_size = sqlite3_column_type(st, 6) != SQLITE_NULL;
        r.size = sqlite3_column_int64(st, 6);
        r.stack_id = sqlite3_column_int64(st, 7);
        r.allocation_id = sqlite3_column_int64(st, 8);
        if ((rc = sink(p, &r)) < 0)
            break;
    }
    if (rc == 0 && s != SQLITE_DONE)
        rc = db_fail(p, "reading the events");
    sqlite3_finalize(st);
    return rc;
}

static int run_pass(struct ms_profile *p, const char *db_path, int compact)
{
    int (*sink)(void *, const struct ms_store_row *) = on_row;
    int rc;
    if (compact) {
        char err[512] = "";
        rc = ms_store_replay(db_path, sink, p, err, sizeof err);
        if (rc < 0 && rc != STOP_REPLAY && !p->err[0])
            fail(p, rc, "%s", err[0] ? err : ms_strerror(rc));
    } else
        rc = scan_full(p, sink);
    if (rc == STOP_REPLAY)
        rc = 0;
    if (rc == MS_ENOMEM && !p->err[0])
        fail(p, rc, "out of memory");
    return rc;
}

int ms_profile_collect(struct ms_profile *p, sqlite3 *db, const char *db_path,
                       const struct ms_analyze_opts *o, unsigned flags, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->db = db, p->o = o, p->err = err, p->errlen = errlen;
    p->timeline = !!(flags & MS_PROFILE_TIMELINE), p->to_end = !!(flags & MS_PROFILE_LEAKED);
    int want_peak = !!(flags & MS_PROFILE_PEAK), timeline = p->timeline;
    err[0] = 0;
    int rc = select_load(p);
    if (rc < 0)
        return rc;
    int compact = ms_store_is_compact(db);
    if (want_peak) {
        /* the peaks of the window: the first MALLOC that reached each maximum */
        p->pass = 1;
        if ((rc = run_pass(p, db_path, compact)) < 0)
            return rc;
        for (size_t i = 0; i < p->npl; i++) {
            ms_u64map_clear(&p->pl[i].addrs);
            p->pl[i].live = p->pl[i].blocks = 0;
        }
    }
    p->pass = 2;
    if ((rc = run_pass(p, db_path, compact)) < 0)
        return rc;
    window_end(p);
    if (!p->matched)
        return fail(p, MS_ENOTFOUND,
                    "nothing matches the selection (no allocation or "
                    "free of the selected processes and layers in the window)");
    for (size_t i = 0; i < p->npl; i++) {
        struct ms_profile_pl *pl = &p->pl[i];
        size_t pos = 0;
        uint64_t key;
        void *v;
        while (ms_u64map_next(&pl->addrs, &pos, &key, &v)) {
            const struct blk *b = v;
            if (b->in_window)
                p->e[b->entry].leaked++, p->e[b->entry].leaked_bytes += b->size;
        }
        if (timeline) { /* the last bucket, and the value at the window's end */
            if (tl_flush(pl, p) < 0 || ms_grow((void **)&pl->pts, &pl->apts, pl->npts,
                                               sizeof *pl->pts, 64, MS_PROFILE_BUCKETS + 4) < 0)
                return fail(p, MS_ENOMEM, "out of memory");
            int64_t end_live = 0;
            for (uint32_t k = pl->first; k != UINT32_MAX; k = p->e[k].next)
                end_live += p->e[k].inuse_bytes;
            int64_t ts = p->to_ns;
            if (pl->npts && pl->pts[pl->npts - 1].ts_ns >= ts)
                ts = pl->pts[pl->npts - 1].ts_ns + 1;
            pl->pts[pl->npts++] = (struct ms_profile_point){ts, end_live};
        }
        ms_u64map_release(&pl->addrs);
    }
    return 0;
}

void ms_profile_release(struct ms_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->npl; i++) {
        ms_u64map_release(&p->pl[i].stack);
        ms_u64map_release(&p->pl[i].addrs);
        free(p->pl[i].pts);
    }
    free(p->pl);
    free(p->e);
    free(p->procs);
    free(p->dev_layers);
    ms__layer_set_release(&p->layers);
    memset(p, 0, sizeof *p);
}

int ms_export_stacks_init(struct ms_export_stacks *s, sqlite3 *db)
{
    memset(s, 0, sizeof *s);
    if (ms_stack_text_init(&s->t, db) < 0)
        return MS_EDB;
    s->t_ok = 1;
    return 0;
}

void ms_export_stacks_release(struct ms_export_stacks *s)
{
    if (!s)
        return;
    if (s->t_ok)
        ms_stack_text_release(&s->t);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int push(struct ms_export_stacks *s, const struct ms_stack_frame *f, int python)
{
    if (ms_grow((void **)&s->v, &s->a, s->n, sizeof *s->v, 64, 2 * MS_STACK_MAX_FRAMES + 2) < 0)
        return MS_ENOMEM;
    s->v[s->n++] = (struct ms_export_frame){*f, python};
    return 0;
}

int ms_export_stack_load(struct ms_export_stacks *s, int64_t stack_id)
{
    s->n = 0;
    if (stack_id <= 0)
        return 0;
    const struct ms_stack_frame *f;
    size_t n;
    /* the Python frames first (outermost first), copied: the native read reuses the array */
    int rc = ms_stack_text_py_frames(&s->t, stack_id, &f, &n);
    for (size_t i = n; rc == 0 && i-- > 0;)
        if (!ms_py_frame_own(f[i].text, strlen(f[i].text)))
            rc = push(s, &f[i], 1);
    if (rc < 0)
        return rc;
    size_t npy = s->n;
    if ((rc = ms_stack_text_frames(&s->t, stack_id, &f, &n)) < 0)
        return rc;
    size_t cut = n; /* native frames [0, cut) are inside the innermost interpreter frame */
    if (npy)
        for (size_t i = 0; i < n; i++) {
            const char *fn = f[i].function ? f[i].function : "";
            if (ms_py_interpreter_frame(fn, strlen(fn))) {
                cut = i;
                break;
            }
        }
    for (size_t i = cut; rc == 0 && i-- > 0;)
        rc = push(s, &f[i], 0);
    return rc;
}
