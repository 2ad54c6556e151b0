/* peak.c: `memscope analyze peak`: per process and memory layer, the first moment live bytes
 * reached their maximum, and what was live at that moment by call site and by owner.
 *
 * Called through ms_analyses[] by `memscope analyze` and `memscope run --analysis=`. Workload:
 * the converter already found each peak (process_stats.peak_bytes, peak_ns). The fast path
 * takes the first MALLOC of that process and layer at peak_ns (binary search of events by id,
 * which is in time order) and scans the blocks allocated up to it (a rowid range of blocks,
 * numbered in allocation order) with the liveness test in SQL, so only the live set comes back;
 * when those blocks do not add up to peak_bytes (several MALLOCs at that nanosecond, or stats
 * written by something else) it falls back to replaying every MALLOC and FREE in id order with
 * ms__live_apply, which finds the first moment of the maximum itself. Memory: the live set by
 * stack and owner (and, on the slow path, an address map of the live blocks). */
#include "analyze.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"

#include <stdlib.h>
#include <string.h>

/* The peak of one (process, layer). */
struct peak {
    int64_t process_id, layer;
    int64_t bytes, blocks;         /* live at the peak */
    int64_t event_id, ns;          /* the event that reached it first */
    int64_t alloc_id;              /* that MALLOC's allocation_id */
    int64_t stats_bytes;           /* process_stats.peak_bytes, -1 when missing */
    int64_t sum_bytes, sum_blocks; /* the blocks found live at event_id (pass 2) */
    int64_t step;                  /* step current at the peak, 0 when no steps */
};

/* A call site or owner live at a peak. */
struct part {
    size_t peak; /* index into the peaks */
    int64_t key; /* stack id or owner id */
    const char *site;
    int64_t bytes, blocks;
};

/* The call sites or owners live at the peaks, grouped by peak and ranked by bytes. */
struct parts {
    struct ms_u64map map; /* packed key -> index */
    struct part *v;
    size_t n, cap;
};

/* The computation and its result: the peaks and what was live at each. */
struct pctx {
    struct ms_actx *x;
    char *layer_sql; /* ms__layer_filter's, while compute runs */
    struct peak *peaks;
    size_t npeaks;
    struct parts sites, owners;
    int64_t start_ns; /* the run's start, for offsets */
};

static int db_fail(struct pctx *P, const char *what)
{
    return ms__actx_db_fail(P->x, what);
}

static int oom(struct pctx *P)
{
    return ms__actx_oom(P->x);
}

static int cmp_peak(const void *a, const void *b)
{
    const struct peak *x = a, *y = b;
    if (x->process_id != y->process_id)
        return x->process_id < y->process_id ? -1 : 1;
    return x->layer < y->layer ? -1 : x->layer > y->layer;
}

/* Pass 1: replay events, find each (process, layer)'s first maximum. */
static int find_peaks(struct pctx *P)
{
    sqlite3_stmt *st;
    if (ms__prepare(P->x->db, &st,
                    "SELECT id, ts_ns, kind, layer, process_id, addr, size, allocation_id FROM "
                    "events e WHERE kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE
                    ") AND %s ORDER BY id",
                    P->layer_sql) != SQLITE_OK)
        return db_fail(P, "events");
    struct ms_live live;
    ms__live_init(&live);
    int rc = 0, s;
    size_t cap = 0;
    struct peak *last = NULL;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int kind = sqlite3_column_int(st, 2);
        int64_t layer = sqlite3_column_int64(st, 3), proc = sqlite3_column_int64(st, 4);
        struct ms_live_pl *pl =
            ms__live_apply(&live, kind, proc, layer, sqlite3_column_int64(st, 5),
                           sqlite3_column_int64(st, 6), sqlite3_column_type(st, 7) != SQLITE_NULL);
        if (!pl) {
            rc = oom(P);
            break;
        }
        if (kind != MS_KIND_MALLOC)
            continue;
        if (!last || last->process_id != proc || last->layer != layer) {
            last = NULL;
            for (size_t i = 0; i < P->npeaks; i++)
                if (P->peaks[i].process_id == proc && P->peaks[i].layer == layer) {
                    last = &P->peaks[i];
                    break;
                }
            if (!last) {
                if (ms_grow((void **)&P->peaks, &cap, P->npeaks, sizeof *P->peaks, 8, MS_GROW_MAX) <
                    0) {
                    rc = oom(P);
                    break;
                }
                last = &P->peaks[P->npeaks++];
                memset(last, 0, sizeof *last);
                last->process_id = proc;
                last->layer = layer;
                last->stats_bytes = -1;
            }
        }
        if (pl->live > last->bytes) {
            last->bytes = pl->live;
            last->blocks = pl->blocks;
            last->event_id = sqlite3_column_int64(st, 0);
            last->ns = sqlite3_column_int64(st, 1);
            last->alloc_id = sqlite3_column_int64(st, 7);
        }
    }
    if (!rc && s != SQLITE_DONE)
        rc = db_fail(P, "events");
    sqlite3_finalize(st);
    ms__live_release(&live);
    if (rc)
        return rc;
    if (P->npeaks)
        qsort(P->peaks, P->npeaks, sizeof *P->peaks, cmp_peak);
    return 0;
}

/* The first event id >= lo whose ts_ns >= ns, by binary search over ids (events.id is in time
 * order; docs/database.md); max_id + 1 when there is none. */
static int64_t first_event_at(sqlite3_stmt *seek, int64_t ns, int64_t lo, int64_t max_id)
{
    int64_t hi = max_id + 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2, id = hi, ts = INT64_MAX;
        sqlite3_bind_int64(seek, 1, mid);
        if (sqlite3_step(seek) == SQLITE_ROW) {
            id = sqlite3_column_int64(seek, 0);
            ts = sqlite3_column_int64(seek, 1);
        }
        sqlite3_reset(seek);
        if (id >= hi) { /* no event in [mid, hi): the answer is below mid or hi */
            hi = mid;
        } else if (ts < ns) {
            lo = id + 1;
        } else {
            hi = id; /* a candidate; ids in [mid, id) do not exist */
        }
    }
    return lo;
}

/* The fast path: the converter already found each peak (process_stats.peak_bytes, peak_ns);
 * the MALLOC that reached it is process_stats.peak_event_id (databases of memscope before it:
 * the first MALLOC of that process and layer at peak_ns). live_at_peaks() then checks that the
 * blocks live at that event add up to peak_bytes. Returns 1 when every peak was placed, 0 when
 * the caller must replay the events instead (no process_stats rows, a peak without a MALLOC at
 * its time). */
static int peaks_from_stats(struct pctx *P)
{
    int have_ids = ms__has_column(P->x->db, "process_stats", "peak_event_id");
    sqlite3_stmt *st = NULL, *ev = NULL, *seek = NULL, *ids = NULL;
    int ok = 1, s = SQLITE_DONE;
    size_t cap = 0;
    if (ms__prepare(P->x->db, &st,
                    "SELECT process_id, layer, peak_bytes, peak_ns, %s FROM process_stats e "
                    "WHERE allocs > 0 AND %s ORDER BY process_id, layer",
                    have_ids ? "peak_event_id, peak_allocation_id" : "NULL, NULL",
                    P->layer_sql) != SQLITE_OK ||
        sqlite3_prepare_v2(P->x->db,
                           "SELECT id, allocation_id FROM events WHERE id >= ?4 AND "
                           "id < ?5 AND process_id = ?1 AND ts_ns = ?2 AND kind = " MS_SQL_MALLOC
                           " AND layer = ?3 ORDER BY id LIMIT 1",
                           -1, &ev, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(P->x->db,
                           "SELECT id, ts_ns FROM events WHERE id >= ? ORDER BY id LIMIT 1", -1,
                           &seek, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(P->x->db,
                           "SELECT (SELECT min(id) FROM events), (SELECT max(id) FROM events)", -1,
                           &ids, NULL) != SQLITE_OK ||
        sqlite3_step(ids) != SQLITE_ROW) {
        ok = 0;
        goto out;
    }
    int64_t min_id = sqlite3_column_int64(ids, 0), max_id = sqlite3_column_int64(ids, 1);
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_type(st, 2) == SQLITE_NULL ||
            sqlite3_column_type(st, 3) == SQLITE_NULL || sqlite3_column_int64(st, 2) <= 0) {
            ok = 0;
            break;
        }
        if (ms_grow((void **)&P->peaks, &cap, P->npeaks, sizeof *P->peaks, 8, MS_GROW_MAX) < 0) {
            ok = 0;
            break;
        }
        struct peak *k = &P->peaks[P->npeaks++];
        memset(k, 0, sizeof *k);
        k->process_id = sqlite3_column_int64(st, 0);
        k->layer = sqlite3_column_int64(st, 1);
        k->bytes = sqlite3_column_int64(st, 2);
        k->ns = sqlite3_column_int64(st, 3);
        k->stats_bytes = k->bytes;
        if (sqlite3_column_type(st, 4) != SQLITE_NULL &&
            sqlite3_column_type(st, 5) != SQLITE_NULL) {
            /* the converter named the MALLOC (the compact database has no MALLOC rows) */
            k->event_id = sqlite3_column_int64(st, 4);
            k->alloc_id = sqlite3_column_int64(st, 5);
            continue;
        }
        /* The events at exactly peak_ns: [first at ns, first after ns). */
        int64_t lo = first_event_at(seek, k->ns, min_id, max_id);
        int64_t hi = k->ns < INT64_MAX ? first_event_at(seek, k->ns + 1, lo, max_id) : max_id + 1;
        sqlite3_bind_int64(ev, 1, k->process_id);
        sqlite3_bind_int64(ev, 2, k->ns);
        sqlite3_bind_int64(ev, 3, k->layer);
        sqlite3_bind_int64(ev, 4, lo);
        sqlite3_bind_int64(ev, 5, hi);
        if (sqlite3_step(ev) != SQLITE_ROW || sqlite3_column_type(ev, 1) == SQLITE_NULL) {
            ok = 0;
            break;
        }
        k->event_id = sqlite3_column_int64(ev, 0);
        k->alloc_id = sqlite3_column_int64(ev, 1);
        sqlite3_reset(ev);
    }
    if (ok && s != SQLITE_DONE)
        ok = 0;
    if (ok && !P->npeaks)
        ok = 0; /* nothing in process_stats: replay to be sure */
out:
    sqlite3_finalize(st);
    sqlite3_finalize(ev);
    sqlite3_finalize(seek);
    sqlite3_finalize(ids);
    if (!ok) {
        free(P->peaks);
        P->peaks = NULL;
        P->npeaks = 0;
    }
    return ok;
}

/* process_stats' value, and the step current at each peak. */
static int peak_details(struct pctx *P)
{
    int has_steps = ms__has_column(P->x->db, "steps", "end_event_id");
    sqlite3_stmt *ps = NULL, *ss = NULL;
    if (sqlite3_prepare_v2(P->x->db,
                           "SELECT peak_bytes FROM process_stats WHERE process_id = ? "
                           "AND layer = ?",
                           -1, &ps, NULL) != SQLITE_OK ||
        (has_steps && sqlite3_prepare_v2(P->x->db,
                                         "SELECT min(step) FROM steps WHERE process_id = ? AND "
                                         "(end_event_id IS NULL OR end_event_id > ?)",
                                         -1, &ss, NULL) != SQLITE_OK)) {
        sqlite3_finalize(ps);
        return db_fail(P, "process_stats");
    }
    for (size_t i = 0; i < P->npeaks; i++) {
        struct peak *k = &P->peaks[i];
        sqlite3_bind_int64(ps, 1, k->process_id);
        sqlite3_bind_int64(ps, 2, k->layer);
        if (sqlite3_step(ps) == SQLITE_ROW && sqlite3_column_type(ps, 0) != SQLITE_NULL)
            k->stats_bytes = sqlite3_column_int64(ps, 0);
        sqlite3_reset(ps);
        if (ss) {
            sqlite3_bind_int64(ss, 1, k->process_id);
            sqlite3_bind_int64(ss, 2, k->event_id);
            if (sqlite3_step(ss) == SQLITE_ROW)
                k->step = sqlite3_column_int64(ss, 0);
            sqlite3_reset(ss);
        }
    }
    sqlite3_finalize(ps);
    sqlite3_finalize(ss);
    return 0;
}

static struct part *parts_get(struct parts *p, size_t peak, int64_t key)
{
    int64_t k = key * 4096 + (int64_t)peak;
    int isnew;
    size_t *slot = ms_u64map_put(&p->map, k, &isnew);
    if (!slot)
        return NULL;
    if (!isnew)
        return &p->v[*slot];
    if (p->n == p->cap && ms_grow((void **)&p->v, &p->cap, p->n, sizeof *p->v, 64, MS_GROW_MAX) < 0)
        return NULL;
    struct part *r = &p->v[p->n];
    memset(r, 0, sizeof *r);
    r->peak = peak;
    r->key = key;
    *slot = p->n++;
    return r;
}

static void parts_clear(struct parts *p)
{
    p->n = 0;
    ms_u64map_release(&p->map);
    ms_u64map_init(&p->map, sizeof(size_t), MS_U64MAP_MAX);
}

static int cmp_part_site(const void *a, const void *b)
{
    const struct part *x = a, *y = b;
    if (x->peak != y->peak)
        return x->peak < y->peak ? -1 : 1;
    if (x->site && y->site)
        return strcmp(x->site, y->site);
    return x->key < y->key ? -1 : x->key > y->key;
}

static int cmp_part_bytes(const void *a, const void *b)
{
    const struct part *x = a, *y = b;
    if (x->peak != y->peak)
        return x->peak < y->peak ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->blocks != y->blocks)
        return x->blocks > y->blocks ? -1 : 1;
    return cmp_part_site(a, b);
}

/* Pass 2: the blocks live at each peak, by stack and by owner. */
static int live_at_peaks(struct pctx *P, struct parts *sites, struct parts *owners)
{
    int64_t max_alloc = 0;
    for (size_t i = 0; i < P->npeaks; i++)
        if (P->peaks[i].bytes > 0 && P->peaks[i].alloc_id > max_alloc)
            max_alloc = P->peaks[i].alloc_id;
    if (!max_alloc)
        return 0;
    int has_owner = ms__has_column(P->x->db, "blocks", "owner_id");
    /* allocation_id follows allocation order: the range bounds the scan. With a few peaks,
     * one scan per peak with the liveness test in SQL returns only the live blocks (much
     * cheaper than stepping over every row); with many, one scan for all of them. */
    int per_peak = P->npeaks <= 4;
    sqlite3_stmt *st;
    if (ms__prepare(P->x->db, &st,
                    "SELECT process_id, layer, size, alloc_event_id, free_event_id, free_ns, "
                    "stack_id, %s FROM blocks WHERE allocation_id <= ?1%s",
                    has_owner ? "owner_id" : "NULL",
                    per_peak ? " AND +process_id = ?2 AND +layer = ?3 AND alloc_event_id <= ?4 "
                               "AND (free_ns IS NULL OR free_event_id > ?4 OR "
                               "(free_event_id IS NULL AND free_ns > ?5))"
                             : "") != SQLITE_OK)
        return db_fail(P, "blocks");
    int rc = 0, s = SQLITE_DONE;
    size_t cur = 0;
    for (size_t pass = 0; pass < (per_peak ? P->npeaks : 1) && !rc; pass++) {
        if (per_peak) {
            const struct peak *k = &P->peaks[pass];
            if (k->bytes <= 0)
                continue;
            sqlite3_reset(st);
            sqlite3_bind_int64(st, 1, k->alloc_id);
            sqlite3_bind_int64(st, 2, k->process_id);
            sqlite3_bind_int64(st, 3, k->layer);
            sqlite3_bind_int64(st, 4, k->event_id);
            sqlite3_bind_int64(st, 5, k->ns);
        } else {
            sqlite3_bind_int64(st, 1, max_alloc);
        }
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t proc = sqlite3_column_int64(st, 0), layer = sqlite3_column_int64(st, 1);
            if (cur >= P->npeaks || P->peaks[cur].process_id != proc ||
                P->peaks[cur].layer != layer) {
                for (cur = 0; cur < P->npeaks; cur++)
                    if (P->peaks[cur].process_id == proc && P->peaks[cur].layer == layer)
                        break;
                if (cur == P->npeaks)
                    continue;
            }
            const struct peak *k = &P->peaks[cur];
            if (k->bytes <= 0 || sqlite3_column_int64(st, 3) > k->event_id)
                continue;
            /* Live at the peak event: not freed, freed by a later event, or (a replaced block,
             * with no FREE event) replaced after the peak's time. */
            if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
                if (sqlite3_column_type(st, 4) != SQLITE_NULL) {
                    if (sqlite3_column_int64(st, 4) <= k->event_id)
                        continue;
                } else if (sqlite3_column_int64(st, 5) <= k->ns) {
                    continue;
                }
            }
            int64_t size = sqlite3_column_int64(st, 2);
            int64_t stack = sqlite3_column_int64(st, 6), owner = sqlite3_column_int64(st, 7);
            P->peaks[cur].sum_bytes += size;
            P->peaks[cur].sum_blocks++;
            struct part *r = parts_get(sites, cur, stack > 0 ? stack : 0);
            if (!r) {
                rc = oom(P);
                break;
            }
            r->bytes += size;
            r->blocks++;
            if (!(r = parts_get(owners, cur, owner > 0 ? owner : 0))) {
                rc = oom(P);
                break;
            }
            r->bytes += size;
            r->blocks++;
        }
        if (!rc && s != SQLITE_DONE)
            rc = db_fail(P, "blocks");
    }
    sqlite3_finalize(st);
    if (rc)
        return rc;
    /* Stacks -> call sites. */
    for (size_t i = 0; i < sites->n; i++)
        if (!(sites->v[i].site = ms__sites_get(&P->x->sites, sites->v[i].key)))
            return oom(P);
    if (sites->n) {
        qsort(sites->v, sites->n, sizeof *sites->v, cmp_part_site);
        size_t w = 0;
        for (size_t i = 1; i < sites->n; i++) {
            if (!cmp_part_site(&sites->v[w], &sites->v[i])) {
                sites->v[w].bytes += sites->v[i].bytes;
                sites->v[w].blocks += sites->v[i].blocks;
            } else {
                sites->v[++w] = sites->v[i];
            }
        }
        sites->n = w + 1;
        qsort(sites->v, sites->n, sizeof *sites->v, cmp_part_bytes);
    }
    if (owners->n)
        qsort(owners->v, owners->n, sizeof *owners->v, cmp_part_bytes);
    return 0;
}

/* Fills P: each peak, its details, and what was live at it (P->layer_sql set). */
static int compute_with_filter(struct pctx *P)
{
    sqlite3 *db = P->x->db;
    int rc;
    int fast = ms__has_column(db, "process_stats", "peak_ns") && peaks_from_stats(P);
    if (fast) {
        if ((rc = live_at_peaks(P, &P->sites, &P->owners)) < 0)
            return rc;
        for (size_t i = 0; i < P->npeaks; i++)
            if (P->peaks[i].sum_bytes != P->peaks[i].bytes)
                fast = 0; /* several MALLOCs at peak_ns, or stats from elsewhere: replay */
        if (fast) {
            for (size_t i = 0; i < P->npeaks; i++)
                P->peaks[i].blocks = P->peaks[i].sum_blocks;
        } else {
            free(P->peaks);
            P->peaks = NULL;
            P->npeaks = 0;
            parts_clear(&P->sites);
            parts_clear(&P->owners);
        }
    }
    if (!fast && ((rc = find_peaks(P)) < 0 || (rc = live_at_peaks(P, &P->sites, &P->owners)) < 0))
        return rc;
    if ((rc = peak_details(P)) < 0)
        return rc;
    P->start_ns = ms__run_start_ns(db);
    return 0;
}

/* Fills P: each peak, its details, and what was live at it. */
static int compute(struct pctx *P)
{
    if (!(P->layer_sql = ms__layer_filter(P->x->db, P->x->o, "e.layer")))
        return oom(P);
    int rc = compute_with_filter(P);
    sqlite3_free(P->layer_sql);
    P->layer_sql = NULL;
    return rc;
}

/* The run [*i, *e) of ps that belongs to peak. */
static void parts_of(const struct parts *ps, size_t peak, size_t *i, size_t *e)
{
    *i = 0;
    while (*i < ps->n && ps->v[*i].peak < peak)
        (*i)++;
    *e = *i;
    while (*e < ps->n && ps->v[*e].peak == peak)
        (*e)++;
}

static void text_parts(const struct pctx *P, const struct parts *ps, size_t peak, int by_owner)
{
    const struct ms_actx *x = P->x;
    const size_t top = (size_t)(x->o->top > 0 ? x->o->top : 10);
    size_t i, e;
    parts_of(ps, peak, &i, &e);
    size_t total = e - i, shown = 0;
    if (by_owner && (total == 0 || (total == 1 && ps->v[i].key == 0)))
        return; /* no owners recorded: say nothing */
    fprintf(x->out, "  by %s:\n  %12s %8s  %s\n", by_owner ? "owner" : "call site", "bytes",
            "blocks", by_owner ? "owner" : "call site");
    for (; i < e && shown < top; i++, shown++) {
        const char *name = by_owner ? ms__names_owner(&x->names, ps->v[i].key) : ps->v[i].site;
        fprintf(x->out, "  %12lld %8lld  %s\n", (long long)ps->v[i].bytes,
                (long long)ps->v[i].blocks, name ? name : "(no owner)");
    }
    if (total > shown)
        fprintf(x->out, "  ... %zu more\n", total - shown);
}

static void render_text(const struct pctx *P)
{
    const struct ms_actx *x = P->x;
    FILE *out = x->out;
    fprintf(out, "peak: the first moment of maximum live bytes, per process and layer\n");
    if (!P->npeaks)
        fprintf(out, "  no allocations recorded\n");
    for (size_t i = 0; i < P->npeaks; i++) {
        const struct peak *k = &P->peaks[i];
        const struct ms_name_proc *p = ms__names_proc(&x->names, k->process_id);
        char hb[32], when[64] = "";
        ms_human_bytes(hb, sizeof hb, k->bytes);
        if (k->step > 0)
            snprintf(when, sizeof when, ", during step %lld", (long long)k->step);
        fprintf(out,
                "  process %lld %s (pid %lld), %s: peak %lld bytes (%s) in %lld blocks "
                "at +%.3f ms (event %lld%s)\n",
                (long long)k->process_id, p ? p->exe : "?", (long long)(p ? p->pid : 0),
                ms__names_layer(&x->names, k->layer), (long long)k->bytes, hb, (long long)k->blocks,
                (k->ns - P->start_ns) / 1e6, (long long)k->event_id, when);
        if (k->stats_bytes >= 0 && k->stats_bytes != k->bytes)
            fprintf(out, "  note: process_stats says %lld bytes\n", (long long)k->stats_bytes);
        text_parts(P, &P->sites, i, 0);
        text_parts(P, &P->owners, i, 1);
    }
}

static void json_parts(const struct pctx *P, struct ms_json *j, const struct parts *ps, size_t peak,
                       int by_owner)
{
    const size_t top = (size_t)(P->x->o->top > 0 ? P->x->o->top : 10);
    size_t i, e;
    parts_of(ps, peak, &i, &e);
    ms_json_begin_array(j, by_owner ? "by_owner" : "by_site");
    for (size_t shown = 0; i < e && shown < top; i++, shown++) {
        ms_json_begin_object(j, NULL);
        if (by_owner)
            ms_json_str(j, "owner", ms__names_owner(&P->x->names, ps->v[i].key));
        else
            ms_json_str(j, "site", ps->v[i].site);
        ms_json_int(j, "bytes", ps->v[i].bytes);
        ms_json_int(j, "blocks", ps->v[i].blocks);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void render_json(const struct pctx *P)
{
    const struct ms_actx *x = P->x;
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "peak");
    ms_json_begin_array(&j, "peaks");
    for (size_t i = 0; i < P->npeaks; i++) {
        const struct peak *k = &P->peaks[i];
        const struct ms_name_proc *p = ms__names_proc(&x->names, k->process_id);
        ms_json_begin_object(&j, NULL);
        ms_json_int(&j, "process_id", k->process_id);
        ms_json_int(&j, "pid", p ? p->pid : 0);
        ms_json_str(&j, "exe", p ? p->exe : NULL);
        ms_json_str(&j, "layer", ms__names_layer(&x->names, k->layer));
        ms_json_int(&j, "peak_bytes", k->bytes);
        ms_json_int(&j, "peak_blocks", k->blocks);
        ms_json_int(&j, "peak_ns", k->ns);
        ms_json_int(&j, "offset_ns", k->ns - P->start_ns);
        ms_json_int(&j, "event_id", k->event_id);
        if (k->step > 0)
            ms_json_int(&j, "step", k->step);
        else
            ms_json_null(&j, "step");
        if (k->stats_bytes >= 0)
            ms_json_int(&j, "process_stats_peak_bytes", k->stats_bytes);
        else
            ms_json_null(&j, "process_stats_peak_bytes");
        json_parts(P, &j, &P->sites, i, 0);
        json_parts(P, &j, &P->owners, i, 1);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

int ms_analyze_peak(struct ms_actx *x)
{
    struct pctx P;
    memset(&P, 0, sizeof P);
    P.x = x;
    ms_u64map_init(&P.sites.map, sizeof(size_t), MS_U64MAP_MAX);
    ms_u64map_init(&P.owners.map, sizeof(size_t), MS_U64MAP_MAX);
    int rc = compute(&P);
    if (rc == 0)
        (x->o->json ? render_json : render_text)(&P);
    free(P.peaks);
    free(P.sites.v);
    free(P.owners.v);
    ms_u64map_release(&P.sites.map);
    ms_u64map_release(&P.owners.map);
    return rc;
}

int ms__peaks_find(struct ms_actx *x, struct ms_peak_at **out, size_t *n)
{
    struct pctx P;
    memset(&P, 0, sizeof P);
    P.x = x;
    ms_u64map_init(&P.sites.map, sizeof(size_t), MS_U64MAP_MAX);
    ms_u64map_init(&P.owners.map, sizeof(size_t), MS_U64MAP_MAX);
    *out = NULL;
    *n = 0;
    int rc = compute(&P);
    if (rc == 0 && P.npeaks && !(*out = calloc(P.npeaks, sizeof **out)))
        rc = oom(&P);
    for (size_t i = 0; rc == 0 && i < P.npeaks; i++) {
        const struct peak *k = &P.peaks[i];
        (*out)[i] =
            (struct ms_peak_at){k->process_id, k->layer, k->bytes, k->ns, k->event_id, k->alloc_id};
        *n = i + 1;
    }
    free(P.peaks);
    free(P.sites.v);
    free(P.owners.v);
    ms_u64map_release(&P.sites.map);
    ms_u64map_release(&P.owners.map);
    return rc;
}

int ms__peaks_top(struct ms_actx *x, struct ms_peak_top **out, size_t *n)
{
    struct pctx P;
    memset(&P, 0, sizeof P);
    P.x = x;
    ms_u64map_init(&P.sites.map, sizeof(size_t), MS_U64MAP_MAX);
    ms_u64map_init(&P.owners.map, sizeof(size_t), MS_U64MAP_MAX);
    *out = NULL;
    *n = 0;
    int rc = compute(&P);
    if (rc == 0 && P.npeaks && !(*out = calloc(P.npeaks, sizeof **out)))
        rc = oom(&P);
    for (size_t i = 0; rc == 0 && i < P.npeaks; i++) {
        const struct peak *k = &P.peaks[i];
        struct ms_peak_top *t = &(*out)[i];
        t->process_id = k->process_id;
        t->layer = k->layer;
        t->bytes = k->bytes;
        t->blocks = k->blocks;
        size_t a, e;
        parts_of(&P.sites, i, &a, &e);
        t->nsites = e - a;
        for (; a < e && t->ntop < MS_PEAK_TOP && t->ntop < (size_t)x->o->top; a++)
            t->top[t->ntop++] =
                (struct ms_peak_site){P.sites.v[a].site, P.sites.v[a].bytes, P.sites.v[a].blocks};
        *n = i + 1;
    }
    free(P.peaks);
    free(P.sites.v);
    free(P.owners.v);
    ms_u64map_release(&P.sites.map);
    ms_u64map_release(&P.owners.map);
    return rc;
}
