/* leaks.c: `memscope analyze leaks`: which call sites leak (by default, those whose live bytes
 * keep growing from step to step: the growth rule, docs/analyses.md), what was still live when
 * each process ended, msMemScope's step-aware leak check (its rule and console lines under
 * --rule=msmemscope and a run's --analysis=leaks), and the growth of live bytes from one step
 * end to the next.
 *
 * Called through ms_analyses[] by `memscope analyze` and `memscope run --analysis=`. Workload:
 * everything comes from the blocks table (one row per block lifetime; the database has no
 * index on it, docs/database.md). The live-at-exit part is one scan that returns only live
 * blocks, grouped by SQLite; the step check is one scan joined with steps by primary key; the
 * growth part streams once over the blocks allocated before the last step end and keeps one
 * difference array of step ends per stack and per owner, and one more for the blocks still
 * live at the last step end, from which the growth rule judges each site. Runs that never called
 * memscope_step() skip both step parts (one probe of the steps table) and get the fourth
 * instead: the blocks live at each (process, layer) peak by call site and by the tenth of the
 * run, up to the peak, they were allocated in (one rowid-bounded scan per peak), which names a
 * site that grows until the peak even when the program frees it all before exiting.
 *
 * This file holds the entry points (ms_analyze_leaks, ms__leaks_verdict), the result's life and
 * the first two parts (live at exit, the step check); the growth parts are in leaks_growth.c and
 * the report in leaks_render.c (leaks.h: the result they share). */
#include "leaks.h"

#include "common/ns.h"
#include "common/ms_error.h"
#include "common/grow.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static int cmp_site_key(const void *a, const void *b)
{
    const struct site_row *x = a, *y = b;
    if (x->process_id != y->process_id)
        return x->process_id < y->process_id ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return strcmp(x->site, y->site);
}

/* Within one (process, layer): most bytes first, then most blocks, then by site text. */
static int cmp_site_bytes(const void *a, const void *b)
{
    const struct site_row *x = a, *y = b;
    if (x->process_id != y->process_id)
        return x->process_id < y->process_id ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->blocks != y->blocks)
        return x->blocks > y->blocks ? -1 : 1;
    return strcmp(x->site, y->site);
}

static void add_owner(struct site_row *r, int64_t owner)
{
    if (owner <= 0)
        return;
    for (int i = 0; i < r->nowners; i++)
        if (r->owners[i] == owner)
            return;
    if (r->nowners < MAX_OWNERS)
        r->owners[r->nowners++] = owner;
    else
        r->more_owners = 1;
}

/* Merges rows with the same (process, layer, site); returns the new count. */
static size_t merge_sites(struct site_row *rows, size_t n)
{
    if (n == 0)
        return 0;
    qsort(rows, n, sizeof *rows, cmp_site_key);
    size_t w = 0;
    for (size_t i = 1; i < n; i++) {
        if (!cmp_site_key(&rows[w], &rows[i])) {
            rows[w].bytes += rows[i].bytes;
            rows[w].blocks += rows[i].blocks;
            for (int k = 0; k < rows[i].nowners; k++)
                add_owner(&rows[w], rows[i].owners[k]);
            rows[w].more_owners |= rows[i].more_owners;
        } else {
            rows[++w] = rows[i];
        }
    }
    n = w + 1;
    qsort(rows, n, sizeof *rows, cmp_site_bytes);
    return n;
}

/* ---- Compute ---- */

/* Part (a): blocks live at exit by call site. */
static int live_at_exit(struct leaks *L)
{
    sqlite3_stmt *st;
    if (ms__prepare(L->x->db, &st,
                    "SELECT b.process_id, b.layer, b.stack_id, %s, count(*), sum(b.size) FROM "
                    "blocks b WHERE b.free_ns IS NULL AND %s GROUP BY 1, 2, 3, 4",
                    L->has_owner ? "b.owner_id" : "NULL", L->layer_sql) != SQLITE_OK)
        return db_fail(L, "live blocks");
    size_t cap = 0;
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)&L->live, &cap, L->nlive, sizeof *L->live, 256, MS_GROW_MAX) < 0) {
            rc = oom(L);
            goto out;
        }
        struct site_row *r = &L->live[L->nlive];
        memset(r, 0, sizeof *r);
        r->process_id = sqlite3_column_int64(st, 0);
        r->layer = sqlite3_column_int64(st, 1);
        if (!(r->site = ms__sites_get(&L->x->sites, sqlite3_column_int64(st, 2)))) {
            rc = oom(L);
            goto out;
        }
        add_owner(r, sqlite3_column_int64(st, 3));
        r->blocks = sqlite3_column_int64(st, 4);
        r->bytes = sqlite3_column_int64(st, 5);
        L->nlive++;
    }
    if (s != SQLITE_DONE) {
        rc = db_fail(L, "live blocks");
        goto out;
    }
    L->nlive = merge_sites(L->live, L->nlive);
out:
    sqlite3_finalize(st);
    return rc;
}

/* Part (b): msMemScope's step-aware check. A block allocated at step s > warmup that is still
 * live at the end of step s + 1 (the first step end S with S - s >= 1) is flagged, once. */
static int step_check(struct leaks *L)
{
    if (!L->has_steps)
        return 0;
    sqlite3_stmt *st;
    if (ms__prepare(L->x->db, &st,
                    "SELECT b.allocation_id, b.process_id, b.layer, b.addr, b.size, b.step, "
                    "b.stack_id, %s, s.step FROM blocks b JOIN steps s "
                    "ON s.process_id = b.process_id AND s.step = b.step + 1 "
                    "WHERE b.step > ? AND s.end_event_id IS NOT NULL AND %s AND "
                    "(b.free_ns IS NULL OR b.free_event_id > s.end_event_id OR "
                    "(b.free_event_id IS NULL AND b.free_ns > s.end_ns)) "
                    "ORDER BY b.process_id, b.allocation_id",
                    L->has_owner ? "b.owner_id" : "NULL", L->layer_sql) != SQLITE_OK)
        return db_fail(L, "step check");
    sqlite3_bind_int(st, 1, L->x->o->warmup);
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)&L->flagged, &L->aflagged, L->nflagged, sizeof *L->flagged, 256,
                    MS_GROW_MAX) < 0) {
            rc = oom(L);
            break;
        }
        struct flagged *f = &L->flagged[L->nflagged++];
        f->allocation_id = sqlite3_column_int64(st, 0);
        f->process_id = sqlite3_column_int64(st, 1);
        f->layer = sqlite3_column_int64(st, 2);
        f->addr = (uint64_t)sqlite3_column_int64(st, 3);
        f->size = sqlite3_column_int64(st, 4);
        f->step = sqlite3_column_int64(st, 5);
        f->owner = sqlite3_column_int64(st, 7);
        f->flagged_at = sqlite3_column_int64(st, 8);
        if (!(f->site = ms__sites_get(&L->x->sites, sqlite3_column_int64(st, 6)))) {
            rc = oom(L);
            break;
        }
        L->flagged_bytes += f->size;
    }
    if (!rc && s != SQLITE_DONE)
        rc = db_fail(L, "step check");
    sqlite3_finalize(st);
    return rc;
}

/* Starts L on x: the layer filter, and whether the database has owners and ended steps. 0, or
 * MS_ENOMEM (L is then ready for leaks_release all the same). */
static int leaks_init(struct leaks *L, struct ms_actx *x)
{
    sqlite3 *db = x->db;
    memset(L, 0, sizeof *L);
    L->x = x;
    ms_u64map_init(&L->gsites.map, sizeof(size_t), MS_U64MAP_MAX);
    ms_u64map_init(&L->gowners.map, sizeof(size_t), MS_U64MAP_MAX);
    if (!(L->layer_sql = ms__layer_filter(db, x->o, "b.layer")))
        return oom(L);
    L->has_owner = ms__has_column(db, "blocks", "owner_id");
    L->has_steps =
        ms__has_column(db, "blocks", "step") && ms__has_column(db, "steps", "end_event_id");
    if (L->has_steps) { /* the table exists in every database; rows only when steps ended */
        sqlite3_stmt *st;
        L->has_steps =
            sqlite3_prepare_v2(db, "SELECT 1 FROM steps LIMIT 1", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    return 0;
}

static void leaks_release(struct leaks *L)
{
    free(L->live);
    free(L->flagged);
    for (size_t i = 0; i < L->nps; i++)
        free(L->ps[i].ends);
    free(L->ps);
    ms__leaks_gset_release(&L->gsites);
    ms__leaks_gset_release(&L->gowners);
    for (size_t i = 0; i < L->ntpeaks; i++) {
        free(L->tpeaks[i].sites);
        free(L->tpeaks[i].owners);
    }
    free(L->tpeaks);
    sqlite3_free(L->layer_sql);
}

int ms_analyze_leaks(struct ms_actx *x)
{
    struct leaks L;
    int rc = leaks_init(&L, x);
    if (!rc && (rc = live_at_exit(&L)) == 0 && (rc = step_check(&L)) == 0 &&
        (rc = ms__leaks_growth(&L)) == 0 && (rc = ms__leaks_growth_without_steps(&L)) == 0)
        (x->o->json ? ms__leaks_render_json : ms__leaks_render_text)(&L);
    leaks_release(&L);
    return rc;
}

int ms__leaks_verdict(struct ms_actx *x, struct ms_leak_verdict *v)
{
    struct leaks L;
    int rc = leaks_init(&L, x);
    memset(v, 0, sizeof *v);
    if (!rc && (rc = ms__leaks_growth(&L)) == 0 && (rc = ms__leaks_growth_without_steps(&L)) == 0) {
        struct verdict w = ms__leaks_verdict_of(&L);
        v->on_steps = L.has_steps;
        v->judged = w.judged;
        v->per_step = w.per_step;
        if (w.leaks && !(v->sites = calloc(w.leaks, sizeof *v->sites)))
            rc = oom(&L);
        for (size_t i = 0; !rc && L.has_steps && i < L.gsites.n; i++) {
            const struct ggroup *g = &L.gsites.g[i];
            if (g->leak)
                v->sites[v->n++] = (struct ms_leak_site){g->process_id, g->layer, g->site,
                                                         g->kept_per_step, g->kept[g->nends - 1]};
        }
        for (size_t i = 0; !rc && !L.has_steps && i < L.ntpeaks; i++)
            for (size_t k = 0; k < L.tpeaks[i].nsites; k++) {
                const struct tgroup *g = &L.tpeaks[i].sites[k];
                if (g->leak)
                    v->sites[v->n++] =
                        (struct ms_leak_site){L.tpeaks[i].process_id, L.tpeaks[i].layer, g->site,
                                              g->held_per_slice, g->live[NSLICES - 1]};
            }
    }
    leaks_release(&L);
    return rc;
}
