/* leaks_growth.c: the growth rule of `memscope analyze leaks` (docs/analyses.md, leaks part 1):
 * whether a call site's live bytes keep growing. With steps (part c): per process its ended
 * steps, and per stack and per owner a difference array of step ends for the blocks allocated
 * before the last step end and another for those still live at it, merged by call site and
 * judged over the step ends after the warm-up. Without steps (part d): at each (process, layer)
 * peak, its live blocks by call site and owner, by the tenth of the run (by time, and by
 * allocation id) they were allocated in, judged over the tenths. And the verdict over the whole
 * run, which the report and the budgets (ms__leaks_verdict) read.
 *
 * Called by leaks.c. Workload: one stream over the blocks allocated before the last step end
 * (part c), or one rowid-bounded scan of blocks per peak (part d). */
#include "leaks.h"

#include "common/ns.h"
#include "common/ms_error.h"
#include "common/grow.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static struct ggroup *gset_get(struct gset *s, int64_t process_id, int64_t layer, int64_t key,
                               size_t nends)
{
    /* Stack ids are unique over the database; owner ids are shared by processes. Layers and
     * processes are small: pack them into the map key. */
    int64_t k = ((key * 4096 + (process_id & 4095)) * 1024) + (layer & 1023);
    int isnew;
    size_t *slot = ms_u64map_put(&s->map, k, &isnew);
    if (!slot)
        return NULL;
    if (!isnew)
        return &s->g[*slot];
    if (s->cells + 2 * (nends + 1) > MAX_GROWTH_CELLS)
        return NULL;
    if (s->n == s->cap && ms_grow((void **)&s->g, &s->cap, s->n, sizeof *s->g, 64, MS_GROW_MAX) < 0)
        return NULL;
    struct ggroup *g = &s->g[s->n];
    memset(g, 0, sizeof *g);
    g->process_id = process_id;
    g->layer = layer;
    g->key = key;
    g->nends = nends;
    if (!(g->live = calloc(nends + 1, sizeof *g->live)) ||
        !(g->kept = calloc(nends + 1, sizeof *g->kept))) {
        free(g->live);
        g->live = NULL;
        return NULL;
    }
    s->cells += 2 * (nends + 1);
    *slot = s->n++;
    return g;
}

void ms__leaks_gset_release(struct gset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->g[i].live);
        free(s->g[i].kept);
    }
    free(s->g);
    ms_u64map_release(&s->map);
}

/* Step ends with event id < id (binary search). */
static size_t ends_before_event(const struct proc_steps *p, int64_t id)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->ends[mid].event_id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t ends_before_ns(const struct proc_steps *p, int64_t ns)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->ends[mid].ns < ns)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_growth(const void *a, const void *b)
{
    const struct ggroup *x = a, *y = b;
    if (x->process_id != y->process_id)
        return x->process_id < y->process_id ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->per_step != y->per_step)
        return x->per_step > y->per_step ? -1 : 1;
    int64_t lx = x->live[x->nends - 1], ly = y->live[y->nends - 1];
    if (lx != ly)
        return lx > ly ? -1 : 1;
    if (x->site && y->site)
        return strcmp(x->site, y->site);
    return x->key < y->key ? -1 : x->key > y->key;
}

static int cmp_group_site(const void *a, const void *b)
{
    const struct ggroup *x = a, *y = b;
    if (x->process_id != y->process_id)
        return x->process_id < y->process_id ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return strcmp(x->site, y->site);
}

/* The first step end after the warm-up; p->n when none. */
size_t ms__leaks_first_judged_end(const struct proc_steps *p, int warmup)
{
    size_t first = 0;
    while (first < p->n && p->ends[first].step <= warmup)
        first++;
    return first;
}

static void judge_group(struct ggroup *g, const struct proc_steps *p, int warmup)
{
    size_t first = ms__leaks_first_judged_end(p, warmup), last = p->n - 1;
    if (first >= p->n || last - first < MS_LEAK_MIN_JUDGED)
        return;
    g->judged = last - first;
    g->leak = ms_leak_steady_growth(g->kept, first, last, &g->rises);
    g->kept_per_step = (double)(g->kept[last] - g->kept[first]) /
                       (double)(p->ends[last].step - p->ends[first].step);
}

/* Turns differences into live bytes and computes the growth per step from the first step end
 * after the warm-up (or the first, when fewer than two remain) to the last; then the growth
 * rule's verdict. */
static void finish_group(struct ggroup *g, const struct proc_steps *p, int warmup)
{
    int64_t run = 0, krun = 0;
    for (size_t i = 0; i < g->nends; i++) {
        run += g->live[i];
        g->live[i] = run;
        krun += g->kept[i];
        g->kept[i] = krun;
    }
    size_t first = ms__leaks_first_judged_end(p, warmup);
    if (p->n - first < 2)
        first = 0;
    size_t last = p->n - 1;
    if (last > first)
        g->per_step = (double)(g->live[last] - g->live[first]) /
                      (double)(p->ends[last].step - p->ends[first].step);
    judge_group(g, p, warmup);
}

int ms__leaks_growth(struct leaks *L)
{
    struct gset *sites = &L->gsites, *owners = &L->gowners;
    sqlite3_stmt *st = NULL;
    int rc = 0, s;
    if (!L->has_steps)
        return 0;
    /* The ended steps of each process, in order. */
    if (sqlite3_prepare_v2(L->x->db,
                           "SELECT process_id, step, end_event_id, end_ns FROM steps "
                           "WHERE end_event_id IS NOT NULL ORDER BY process_id, step",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(L, "steps");
        goto done;
    }
    int64_t max_end = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t pid = sqlite3_column_int64(st, 0);
        if (!L->nps || L->ps[L->nps - 1].process_id != pid) {
            if (ms_grow((void **)&L->ps, &L->aps, L->nps, sizeof *L->ps, 4, MS_GROW_MAX) < 0) {
                rc = oom(L);
                goto done;
            }
            memset(&L->ps[L->nps], 0, sizeof L->ps[L->nps]);
            L->ps[L->nps++].process_id = pid;
        }
        struct proc_steps *p = &L->ps[L->nps - 1];
        if (ms_grow((void **)&p->ends, &p->aends, p->n, sizeof *p->ends, 64, MS_GROW_MAX) < 0) {
            rc = oom(L);
            goto done;
        }
        p->ends[p->n].step = sqlite3_column_int64(st, 1);
        p->ends[p->n].event_id = sqlite3_column_int64(st, 2);
        p->ends[p->n].ns = sqlite3_column_int64(st, 3);
        if (p->ends[p->n].event_id > max_end)
            max_end = p->ends[p->n].event_id;
        p->n++;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!L->nps)
        goto done;

    /* One pass over the blocks allocated before the last step end. */
    if (ms__prepare(L->x->db, &st,
                    "SELECT b.process_id, b.layer, b.size, b.alloc_event_id, b.free_event_id, "
                    "b.free_ns, b.stack_id, %s FROM blocks b WHERE b.alloc_event_id < ? AND %s",
                    L->has_owner ? "b.owner_id" : "NULL", L->layer_sql) != SQLITE_OK) {
        rc = db_fail(L, "blocks");
        goto done;
    }
    sqlite3_bind_int64(st, 1, max_end);
    size_t cur = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t pid = sqlite3_column_int64(st, 0);
        if (cur >= L->nps || L->ps[cur].process_id != pid) {
            for (cur = 0; cur < L->nps && L->ps[cur].process_id != pid; cur++)
                ;
            if (cur == L->nps)
                continue;
        }
        const struct proc_steps *p = &L->ps[cur];
        size_t i0 = ends_before_event(p, sqlite3_column_int64(st, 3));
        size_t i1; /* one past the last step end at which the block is live */
        if (sqlite3_column_type(st, 5) == SQLITE_NULL)
            i1 = p->n;
        else if (sqlite3_column_type(st, 4) != SQLITE_NULL)
            i1 = ends_before_event(p, sqlite3_column_int64(st, 4));
        else
            i1 = ends_before_ns(p, sqlite3_column_int64(st, 5));
        if (i0 >= i1)
            continue;
        int64_t layer = sqlite3_column_int64(st, 1), size = sqlite3_column_int64(st, 2);
        int64_t stack = sqlite3_column_int64(st, 6), owner = sqlite3_column_int64(st, 7);
        struct ggroup *g = gset_get(sites, pid, layer, stack > 0 ? stack : 0, p->n);
        if (!g) {
            rc = oom(L);
            goto done;
        }
        g->live[i0] += size;
        g->live[i1] -= size;
        if (i1 == p->n)
            g->kept[i0] += size;
        if (owner > 0) {
            if (!(g = gset_get(owners, pid, layer, owner, p->n))) {
                rc = oom(L);
                goto done;
            }
            g->live[i0] += size;
            g->live[i1] -= size;
            if (i1 == p->n)
                g->kept[i0] += size;
        }
    }
    if (s != SQLITE_DONE) {
        rc = db_fail(L, "blocks");
        goto done;
    }
    sqlite3_finalize(st);
    st = NULL;

    /* Stacks -> call sites: merge the difference arrays of stacks with the same site. */
    for (size_t i = 0; i < sites->n; i++)
        if (!(sites->g[i].site = ms__sites_get(&L->x->sites, sites->g[i].key))) {
            rc = oom(L);
            goto done;
        }
    if (sites->n) {
        qsort(sites->g, sites->n, sizeof *sites->g, cmp_group_site);
        size_t w = 0;
        for (size_t i = 1; i < sites->n; i++) {
            if (!cmp_group_site(&sites->g[w], &sites->g[i])) {
                for (size_t k = 0; k <= sites->g[w].nends; k++) {
                    sites->g[w].live[k] += sites->g[i].live[k];
                    sites->g[w].kept[k] += sites->g[i].kept[k];
                }
                free(sites->g[i].live);
                free(sites->g[i].kept);
                sites->g[i].live = sites->g[i].kept = NULL;
            } else {
                ++w;
                struct ggroup t = sites->g[w];
                sites->g[w] = sites->g[i];
                sites->g[i] = t;
            }
        }
        for (size_t i = w + 1; i < sites->n; i++) {
            free(sites->g[i].live);
            free(sites->g[i].kept);
        }
        sites->n = w + 1;
    }
    /* The peaks of the (process, layer) pairs, for too_small: process_stats has them. */
    struct ms_peak_at *pk = NULL;
    size_t npk = 0, apk = 0;
    if (sqlite3_prepare_v2(L->x->db, "SELECT process_id, layer, peak_bytes FROM process_stats", -1,
                           &st, NULL) != SQLITE_OK) {
        rc = db_fail(L, "process_stats");
        goto done;
    }
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (ms_grow((void **)&pk, &apk, npk, sizeof *pk, 16, MS_GROW_MAX) < 0) {
            free(pk);
            rc = oom(L);
            goto done;
        }
        memset(&pk[npk], 0, sizeof *pk);
        pk[npk].process_id = sqlite3_column_int64(st, 0);
        pk[npk].layer = sqlite3_column_int64(st, 1);
        pk[npk++].bytes = sqlite3_column_int64(st, 2);
    }
    if (s != SQLITE_DONE) {
        free(pk);
        rc = db_fail(L, "process_stats");
        goto done;
    }
    sqlite3_finalize(st);
    st = NULL;
    struct gset *sets[2] = {sites, owners};
    for (int k = 0; k < 2; k++) {
        struct gset *gs = sets[k];
        for (size_t i = 0; i < gs->n; i++) {
            struct ggroup *g = &gs->g[i];
            size_t pi = 0;
            while (L->ps[pi].process_id != g->process_id)
                pi++;
            finish_group(g, &L->ps[pi], L->x->o->warmup);
            int64_t peak = 0;
            for (size_t q = 0; q < npk; q++)
                if (pk[q].process_id == g->process_id && pk[q].layer == g->layer)
                    peak = pk[q].bytes;
            size_t first = ms__leaks_first_judged_end(&L->ps[pi], L->x->o->warmup);
            if (g->leak)
                ms_leak_too_small(&g->leak, &g->small, g->kept[g->nends - 1] - g->kept[first],
                                  peak);
        }
        if (gs->n)
            qsort(gs->g, gs->n, sizeof *gs->g, cmp_growth);
    }
    free(pk);
done:
    sqlite3_finalize(st);
    return rc;
}

/* ---- Part (d): without steps, the peak's blocks by when they were allocated ---- */

/* The group of key in *v (*n of them, capacity *cap), made when new. */
static struct tgroup *tgroup_get(struct tgroup **v, size_t *n, size_t *cap, struct ms_u64map *map,
                                 int64_t key)
{
    int isnew;
    size_t *slot = ms_u64map_put(map, (uint64_t)key, &isnew);
    if (!slot)
        return NULL;
    if (!isnew)
        return &(*v)[*slot];
    if (ms_grow((void **)v, cap, *n, sizeof **v, 64, MS_GROW_MAX) < 0)
        return NULL;
    struct tgroup *g = &(*v)[*n];
    memset(g, 0, sizeof *g);
    g->key = key;
    *slot = (*n)++;
    return g;
}

static int cmp_tgroup_site(const void *a, const void *b)
{
    const struct tgroup *x = a, *y = b;
    return strcmp(x->site, y->site);
}

/* Most growth first, then most bytes at the peak, then by site text or key. */
static int cmp_tgroup(const void *a, const void *b)
{
    const struct tgroup *x = a, *y = b;
    if (x->per_slice != y->per_slice)
        return x->per_slice > y->per_slice ? -1 : 1;
    if (x->live[NSLICES - 1] != y->live[NSLICES - 1])
        return x->live[NSLICES - 1] > y->live[NSLICES - 1] ? -1 : 1;
    if (x->site && y->site)
        return strcmp(x->site, y->site);
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Turns per-slice bytes into running totals and computes the growth per slice over the second
 * half of the run up to the peak, without its last tenth: start-up and imports fill the first
 * tenths and stop, a working set about to be freed fills the last; what still grows in
 * between grows until the peak. */
static void tgroups_finish(struct tgroup *v, size_t n, int64_t peak)
{
    for (size_t i = 0; i < n; i++) {
        for (int k = 1; k < NSLICES; k++)
            v[i].live[k] += v[i].live[k - 1];
        v[i].per_slice =
            (double)(v[i].live[GROW_TO] - v[i].live[GROW_FROM]) / (GROW_TO - GROW_FROM);
        /* The growth rule, with the tenths for steps: the first is the warm-up, the last the
         * working set about to be freed; steady_growth on the tenths between, by allocation
         * order. */
        for (int k = 1; k < NSLICES; k++)
            v[i].held[k] += v[i].held[k - 1];
        v[i].leak = ms_leak_steady_growth(v[i].held, 0, GROW_TO, &v[i].rises);
        v[i].held_per_slice = (double)(v[i].held[GROW_TO] - v[i].held[0]) / GROW_TO;
        ms_leak_too_small(&v[i].leak, &v[i].small, v[i].held[GROW_TO] - v[i].held[0], peak);
    }
    if (n)
        qsort(v, n, sizeof *v, cmp_tgroup);
}

/* The first allocation id of tp's process and layer into tp->first_alloc (rowid order: the
 * scan stops at the first match). */
static int first_alloc(struct leaks *L, struct tpeak *tp)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(L->x->db,
                           "SELECT allocation_id FROM blocks WHERE process_id = ?1 AND layer = ?2 "
                           "ORDER BY allocation_id LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return db_fail(L, "first block");
    sqlite3_bind_int64(st, 1, tp->process_id);
    sqlite3_bind_int64(st, 2, tp->layer);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        tp->first_alloc = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return s == SQLITE_ROW || s == SQLITE_DONE ? 0 : db_fail(L, "first block");
}

/* The blocks live at the peak of one (process, layer) into tp's groups. */
static int peak_slices(struct leaks *L, struct tpeak *tp, int64_t peak_event, int64_t peak_alloc)
{
    int rc0 = first_alloc(L, tp);
    if (rc0)
        return rc0;
    sqlite3_stmt *st;
    if (ms__prepare(L->x->db, &st,
                    "SELECT stack_id, %s, size, alloc_ns, allocation_id FROM blocks WHERE "
                    "allocation_id <= ?1 AND process_id = ?2 AND layer = ?3 AND alloc_event_id <= "
                    "?4 AND (free_ns IS NULL OR free_event_id > ?4 OR (free_event_id IS NULL AND "
                    "free_ns > ?5))",
                    L->has_owner ? "owner_id" : "NULL") != SQLITE_OK)
        return db_fail(L, "blocks at the peak");
    sqlite3_bind_int64(st, 1, peak_alloc);
    sqlite3_bind_int64(st, 2, tp->process_id);
    sqlite3_bind_int64(st, 3, tp->layer);
    sqlite3_bind_int64(st, 4, peak_event);
    sqlite3_bind_int64(st, 5, tp->peak_ns);
    struct ms_u64map bystack, byowner;
    ms_u64map_init(&bystack, sizeof(size_t), MS_U64MAP_MAX);
    ms_u64map_init(&byowner, sizeof(size_t), MS_U64MAP_MAX);
    size_t acap = 0, ocap = 0;
    double span = tp->peak_ns > tp->start_ns ? (double)ms_ns_sub(tp->peak_ns, tp->start_ns) : 1;
    double aspan = (double)(peak_alloc - tp->first_alloc + 1);
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t stack = sqlite3_column_int64(st, 0), owner = sqlite3_column_int64(st, 1);
        int64_t size = sqlite3_column_int64(st, 2), at = sqlite3_column_int64(st, 3);
        double f = (double)ms_ns_sub(at, tp->start_ns) / span;
        int k = f <= 0 ? 0 : f >= 1 ? NSLICES - 1 : (int)(f * NSLICES);
        double fa = (double)(sqlite3_column_int64(st, 4) - tp->first_alloc) / aspan;
        int ka = fa <= 0 ? 0 : fa >= 1 ? NSLICES - 1 : (int)(fa * NSLICES);
        struct tgroup *g =
            tgroup_get(&tp->sites, &tp->nsites, &acap, &bystack, stack > 0 ? stack : 0);
        if (!g) {
            rc = oom(L);
            break;
        }
        g->live[k] += size;
        g->held[ka] += size;
        if (owner > 0) {
            if (!(g = tgroup_get(&tp->owners, &tp->nowners, &ocap, &byowner, owner))) {
                rc = oom(L);
                break;
            }
            g->live[k] += size;
            g->held[ka] += size;
        }
    }
    if (!rc && s != SQLITE_DONE)
        rc = db_fail(L, "blocks at the peak");
    sqlite3_finalize(st);
    ms_u64map_release(&bystack);
    ms_u64map_release(&byowner);
    if (rc)
        return rc;
    /* stacks -> call sites, merged */
    for (size_t i = 0; i < tp->nsites; i++)
        if (!(tp->sites[i].site = ms__sites_get(&L->x->sites, tp->sites[i].key)))
            return oom(L);
    if (tp->nsites) {
        qsort(tp->sites, tp->nsites, sizeof *tp->sites, cmp_tgroup_site);
        size_t w = 0;
        for (size_t i = 1; i < tp->nsites; i++) {
            if (!cmp_tgroup_site(&tp->sites[w], &tp->sites[i])) {
                for (int k = 0; k < NSLICES; k++) {
                    tp->sites[w].live[k] += tp->sites[i].live[k];
                    tp->sites[w].held[k] += tp->sites[i].held[k];
                }
            } else {
                tp->sites[++w] = tp->sites[i];
            }
        }
        tp->nsites = w + 1;
    }
    tgroups_finish(tp->sites, tp->nsites, tp->peak_bytes);
    tgroups_finish(tp->owners, tp->nowners, tp->peak_bytes);
    return 0;
}

/* Part (d): for a run without steps, every (process, layer) peak of the selected layers (the
 * peaks `analyze peak` reports). */
int ms__leaks_growth_without_steps(struct leaks *L)
{
    if (L->has_steps)
        return 0;
    struct ms_peak_at *pk;
    size_t npk;
    int rc = ms__peaks_find(L->x, &pk, &npk);
    if (rc < 0)
        return rc;
    int64_t start = ms__run_start_ns(L->x->db);
    for (size_t i = 0; rc == 0 && i < npk; i++) {
        if (pk[i].bytes <= 0 || pk[i].event_id <= 0 || pk[i].alloc_id <= 0)
            continue;
        if (ms_grow((void **)&L->tpeaks, &L->atpeaks, L->ntpeaks, sizeof *L->tpeaks, 4,
                    MS_GROW_MAX) < 0) {
            rc = oom(L);
            break;
        }
        struct tpeak *tp = &L->tpeaks[L->ntpeaks++];
        memset(tp, 0, sizeof *tp);
        tp->process_id = pk[i].process_id;
        tp->layer = pk[i].layer;
        tp->peak_bytes = pk[i].bytes;
        tp->peak_ns = pk[i].ns;
        tp->start_ns = start;
        rc = peak_slices(L, tp, pk[i].event_id, pk[i].alloc_id);
    }
    free(pk);
    return rc;
}

struct verdict ms__leaks_verdict_of(const struct leaks *L)
{
    struct verdict v = {0, 0, 0, 0, 0};
    if (L->has_steps) {
        for (size_t i = 0; i < L->nps; i++) {
            const struct proc_steps *p = &L->ps[i];
            size_t first = ms__leaks_first_judged_end(p, L->x->o->warmup);
            if (first < p->n && p->n - 1 - first >= MS_LEAK_MIN_JUDGED)
                v.judged++;
            else
                v.too_few++;
        }
        for (size_t i = 0; i < L->gsites.n; i++) {
            v.small += L->gsites.g[i].small;
            if (L->gsites.g[i].leak) {
                v.leaks++;
                v.per_step += L->gsites.g[i].kept_per_step;
            }
        }
        return v;
    }
    v.judged = L->ntpeaks;
    for (size_t i = 0; i < L->ntpeaks; i++)
        for (size_t k = 0; k < L->tpeaks[i].nsites; k++) {
            v.small += L->tpeaks[i].sites[k].small;
            if (L->tpeaks[i].sites[k].leak) {
                v.leaks++;
                v.per_step += L->tpeaks[i].sites[k].held_per_slice;
            }
        }
    return v;
}
