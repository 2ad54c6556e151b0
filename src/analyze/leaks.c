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
 * site that grows until the peak even when the program frees it all before exiting. */
#include "analyze.h"
#include "leak_rule.h"

#include "common/ns.h"
#include "common/ms_error.h"
#include "common/grow.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OWNERS 4               /* owners listed per call site */
#define MAX_GROWTH_CELLS (1 << 24) /* groups x step ends kept by the growth part */

/* One row of the live-at-exit table: a call site (or, before merging, a stack). */
struct site_row {
    int64_t process_id, layer;
    const char *site;
    int64_t owners[MAX_OWNERS];
    int nowners, more_owners;
    int64_t bytes, blocks;
};

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

/* Part (d), without steps: a call site's or owner's blocks live at a peak, by the slice of the
 * run (NSLICES from the run's start to the peak) they were allocated in; after finishing,
 * live[k] is the bytes of them allocated up to the end of slice k. */
#define NSLICES 10
#define GROW_FROM 4 /* the growth is measured from the end of the fifth tenth ... */
#define GROW_TO 8   /* ... to the end of the ninth */
struct tgroup {
    int64_t key; /* stack id, then (merged by site) kept; owner id */
    const char *site;
    int64_t live[NSLICES];
    double per_slice; /* growth: (live[GROW_TO] - live[GROW_FROM]) / (GROW_TO - GROW_FROM) */
    /* The growth rule without steps: the same blocks by the tenth of the allocations (by
     * allocation id, from the process's first to the peak's) they were allocated in, a
     * running total as live: a count of allocations is not stretched by a slow start-up or a
     * loaded machine as time is. Tenths 2..9 in which held rose; the verdict (small: as in
     * struct ggroup); (held[GROW_TO] - held[0]) / GROW_TO. */
    int64_t held[NSLICES];
    size_t rises;
    int leak, small;
    double held_per_slice;
};

/* The part (d) result of one (process, layer) peak. */
struct tpeak {
    int64_t process_id, layer, peak_bytes, peak_ns, start_ns;
    int64_t first_alloc; /* the first allocation id of the process and layer */
    struct tgroup *sites, *owners;
    size_t nsites, nowners;
};

/* One block of msMemScope's step-aware check. */
struct flagged {
    int64_t allocation_id, process_id, layer, size, step, flagged_at, owner;
    uint64_t addr;
    const char *site;
};

struct step_end {
    int64_t step, event_id, ns;
};

/* One process's ended steps. */
struct proc_steps {
    int64_t process_id;
    struct step_end *ends;
    size_t n, aends;
};

/* A growth group: one stack or owner in one (process, layer); after merging, one call site. */
struct ggroup {
    int64_t process_id, layer, key; /* key: stack id or owner id */
    const char *site;               /* by-site groups, after resolving */
    size_t nends;
    int64_t *live; /* nends + 1 cells: differences, then live bytes */
    int64_t *kept; /* nends + 1 cells: the same for the blocks still live at the last step end:
                      after finishing, kept[k] is the bytes of them allocated by step end k */
    double per_step;
    /* The growth rule's verdict (docs/analyses.md, leaks part 1): over the judged step ends
     * (those after the warm-up), the intervals in which kept rose, of judged; leak when the
     * rule holds; kept_per_step: (kept at the last end - kept at the first judged end) /
     * (steps between). */
    size_t rises, judged;
    int leak, small; /* small: steady growth, but below MS_LEAK_MIN_GROWTH_PCT of the peak */
    double kept_per_step;
};

struct gset {
    struct ms_u64map map; /* (key, layer, process) -> index + 1 */
    struct ggroup *g;
    size_t n, cap, cells;
};

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

static void gset_release(struct gset *s)
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
static size_t first_judged_end(const struct proc_steps *p, int warmup)
{
    size_t first = 0;
    while (first < p->n && p->ends[first].step <= warmup)
        first++;
    return first;
}

static void judge_group(struct ggroup *g, const struct proc_steps *p, int warmup)
{
    size_t first = first_judged_end(p, warmup), last = p->n - 1;
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
    size_t first = first_judged_end(p, warmup);
    if (p->n - first < 2)
        first = 0;
    size_t last = p->n - 1;
    if (last > first)
        g->per_step = (double)(g->live[last] - g->live[first]) /
                      (double)(p->ends[last].step - p->ends[first].step);
    judge_group(g, p, warmup);
}

/* The computation and its result, part by part. */
struct leaks {
    struct ms_actx *x;
    char *layer_sql; /* ms__layer_filter's */
    int has_owner, has_steps;
    /* (a) blocks live at exit, by (process, layer, call site) */
    struct site_row *live;
    size_t nlive;
    /* (b) the step-aware check's blocks, by process and allocation */
    struct flagged *flagged;
    size_t nflagged, aflagged;
    int64_t flagged_bytes;
    /* (c) the ended steps of each process, and the growth groups by site and by owner, each
     * sorted by (process, layer) then growth */
    struct proc_steps *ps;
    size_t nps, aps;
    struct gset gsites, gowners;
    /* (d) without steps: each (process, layer) peak's live blocks by allocation time */
    struct tpeak *tpeaks;
    size_t ntpeaks, atpeaks;
};

static int db_fail(struct leaks *L, const char *what)
{
    return ms__actx_db_fail(L->x, what);
}

static int oom(struct leaks *L)
{
    return ms__actx_oom(L->x);
}

static void proc_label(const struct ms_names *n, int64_t id, char *buf, size_t len)
{
    const struct ms_name_proc *p = ms__names_proc(n, id);
    if (p)
        snprintf(buf, len, "process %lld %s (pid %lld)", (long long)id, p->exe, (long long)p->pid);
    else
        snprintf(buf, len, "process %lld", (long long)id);
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

static int growth(struct leaks *L)
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
            size_t first = first_judged_end(&L->ps[pi], L->x->o->warmup);
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
static int growth_without_steps(struct leaks *L)
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

/* The growth groups of one (process, layer): the sites [*i, *e) (from *i on), its owners
 * [*oi, *oe) (from *oi on, a contiguous run too), and its process's step ends. */
static const struct proc_steps *growth_section(const struct leaks *L, size_t *i, size_t *e,
                                               size_t *oi, size_t *oe)
{
    const struct gset *sites = &L->gsites, *owners = &L->gowners;
    const struct ggroup *g = &sites->g[*i];
    *e = *i;
    while (*e < sites->n && sites->g[*e].process_id == g->process_id &&
           sites->g[*e].layer == g->layer)
        (*e)++;
    while (*oi < owners->n &&
           (owners->g[*oi].process_id < g->process_id ||
            (owners->g[*oi].process_id == g->process_id && owners->g[*oi].layer < g->layer)))
        (*oi)++;
    *oe = *oi;
    while (*oe < owners->n && owners->g[*oe].process_id == g->process_id &&
           owners->g[*oe].layer == g->layer)
        (*oe)++;
    size_t pi = 0;
    while (L->ps[pi].process_id != g->process_id)
        pi++;
    return &L->ps[pi];
}

/* ---- Render: text ---- */

static void text_owners(const struct leaks *L, const struct site_row *r)
{
    if (!r->nowners)
        return;
    FILE *out = L->x->out;
    fputs(" [", out);
    for (int k = 0; k < r->nowners; k++)
        fprintf(out, "%s%s", k ? ", " : "", ms__names_owner(&L->x->names, r->owners[k]));
    fputs(r->more_owners ? ", ...]" : "]", out);
}

static void text_live_at_exit(const struct leaks *L)
{
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    const struct site_row *rows = L->live;
    fprintf(out, "leaks: memory live at exit, by call site\n");
    if (!L->nlive)
        fprintf(out, "  nothing was live at exit\n");
    for (size_t i = 0, e; i < L->nlive; i = e) {
        int64_t bytes = 0, blocks = 0;
        for (e = i; e < L->nlive && rows[e].process_id == rows[i].process_id &&
                    rows[e].layer == rows[i].layer;
             e++) {
            bytes += rows[e].bytes;
            blocks += rows[e].blocks;
        }
        char pl[256], hb[32];
        proc_label(&L->x->names, rows[i].process_id, pl, sizeof pl);
        ms_human_bytes(hb, sizeof hb, bytes);
        fprintf(out, "  %s, %s: %lld bytes (%s) in %lld blocks at %zu call sites\n", pl,
                ms__names_layer(&L->x->names, rows[i].layer), (long long)bytes, hb,
                (long long)blocks, e - i);
        fprintf(out, "  %12s %8s  %s\n", "bytes", "blocks", "call site [owners]");
        for (size_t k = i; k < e && k < i + top; k++) {
            fprintf(out, "  %12lld %8lld  %s", (long long)rows[k].bytes, (long long)rows[k].blocks,
                    rows[k].site);
            text_owners(L, &rows[k]);
            fputc('\n', out);
        }
        if (e - i > top)
            fprintf(out, "  ... %zu more call sites\n", e - i - top);
    }
}

static void text_step_check(const struct leaks *L)
{
    FILE *out = L->x->out;
    fprintf(out,
            "\nleaks: step-aware check (steps <= %d are warm-up; a block allocated "
            "at step s and live at the end of step s+1 is a leak)\n",
            L->x->o->warmup);
    if (!L->has_steps) {
        fprintf(out, "  no steps recorded (the program never called memscope_step())\n");
        return;
    }
    if (!L->nflagged) {
        fprintf(out, "  no leaks detected\n");
        return;
    }
    fprintf(out, "====== ERROR: Detected memory leaks ======\n");
    int multi = L->x->names.nprocs > 1;
    for (size_t i = 0; i < L->nflagged; i++) {
        const struct flagged *f = &L->flagged[i];
        const struct ms_name_proc *p = ms__names_proc(&L->x->names, f->process_id);
        /* msMemScope: "Direct %s leak of %f Mb(s) at 0x%lx in kernel_%lu at step %lu." */
        fprintf(out, "Direct %s leak of %f Mb(s) at 0x%" PRIx64 " at step %lld.",
                ms__names_layer(&L->x->names, f->layer), f->size / 1048576.0, f->addr,
                (long long)f->step);
        if (multi && p)
            fprintf(out, " (pid %lld)", (long long)p->pid);
        fputc('\n', out);
    }
    fprintf(out, "====== SUMMARY: %g Mb(s) leaked in %lld allocation(s) ======\n",
            L->flagged_bytes / 1048576.0, (long long)L->nflagged);
}

/* The default rule's view of msMemScope's check: how many blocks it flags, and the first of
 * them with their site, as information (a bounded queue, garbage freed later are among them). */
static void text_step_note(const struct leaks *L)
{
    if (!L->has_steps)
        return;
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    char hb[32];
    ms_human_bytes(hb, sizeof hb, L->flagged_bytes);
    fprintf(out,
            "\nleaks: msMemScope's step check (--rule=msmemscope): %zu blocks (%s) allocated at "
            "a step s > %d were still live at the end of step s+1; not a leak by itself\n",
            L->nflagged, hb, L->x->o->warmup);
    for (size_t i = 0; i < L->nflagged && i < top; i++) {
        const struct flagged *f = &L->flagged[i];
        fprintf(out, "  %12lld bytes at 0x%" PRIx64 " at step %lld: %s\n", (long long)f->size,
                f->addr, (long long)f->step, f->site);
    }
    if (L->nflagged > top)
        fprintf(out, "  ... %zu more\n", L->nflagged - top);
}

static void text_series(FILE *out, const struct ggroup *g, const struct proc_steps *p)
{
    if (p->n <= 8) {
        for (size_t i = 0; i < g->nends; i++)
            fprintf(out, " %lld", (long long)g->live[i]);
    } else {
        fprintf(out, " %lld %lld %lld ... %lld %lld", (long long)g->live[0], (long long)g->live[1],
                (long long)g->live[2], (long long)g->live[g->nends - 2],
                (long long)g->live[g->nends - 1]);
    }
}

/* Groups g[0, n) of one (process, layer), by call site or by owner. */
static void text_groups(const struct leaks *L, const struct ggroup *g, size_t n,
                        const struct proc_steps *p, int by_owner)
{
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    fprintf(out, "  by %s:\n  %14s  %-30s  %s\n", by_owner ? "owner" : "call site", "bytes/step",
            "live bytes at step ends", by_owner ? "owner" : "call site");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (g[i].per_step == 0 && g[i].live[g[i].nends - 1] == 0)
            continue;
        char num[32];
        snprintf(num, sizeof num, "%+.1f", g[i].per_step);
        fprintf(out, "  %14s ", num);
        text_series(out, &g[i], p);
        fprintf(out, "  %s\n", by_owner ? ms__names_owner(&L->x->names, g[i].key) : g[i].site);
        shown++;
    }
    if (!shown)
        fprintf(out, "  (none)\n");
}

static void text_growth(const struct leaks *L)
{
    FILE *out = L->x->out;
    fprintf(out, "\nleaks: growth of live bytes per step\n");
    if (!L->has_steps || !L->nps) {
        fprintf(out, "  no step ended (the program never called memscope_step())\n");
        return;
    }
    for (size_t i = 0, e, oi = 0, oe; i < L->gsites.n; i = e, oi = oe) {
        const struct proc_steps *p = growth_section(L, &i, &e, &oi, &oe);
        char pl[256];
        proc_label(&L->x->names, p->process_id, pl, sizeof pl);
        fprintf(out, "  %s, %s: live bytes at the ends of steps %lld..%lld\n", pl,
                ms__names_layer(&L->x->names, L->gsites.g[i].layer), (long long)p->ends[0].step,
                (long long)p->ends[p->n - 1].step);
        text_groups(L, &L->gsites.g[i], e - i, p, 0);
        if (oe > oi)
            text_groups(L, &L->gowners.g[oi], oe - oi, p, 1);
    }
}

/* Groups g[0, n) of one peak, by call site or by owner: those that grew, most first. */
static void text_tgroups(const struct leaks *L, const struct tgroup *g, size_t n, int by_owner)
{
    FILE *out = L->x->out;
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    fprintf(out, "  by %s:\n  %14s  %-34s  %s\n", by_owner ? "owner" : "call site", "bytes/tenth",
            "live at the peak, allocated by", by_owner ? "owner" : "call site");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < top; i++) {
        if (g[i].per_slice <= 0)
            continue;
        char num[32];
        snprintf(num, sizeof num, "%+.1f", g[i].per_slice);
        fprintf(out, "  %14s  %lld %lld %lld ... %lld %lld", num, (long long)g[i].live[0],
                (long long)g[i].live[1], (long long)g[i].live[2], (long long)g[i].live[NSLICES - 2],
                (long long)g[i].live[NSLICES - 1]);
        fprintf(out, "  %s\n", by_owner ? ms__names_owner(&L->x->names, g[i].key) : g[i].site);
        shown++;
    }
    if (!shown)
        fprintf(out, "  (none grew)\n");
}

static void text_growth_without_steps(const struct leaks *L)
{
    if (L->has_steps || !L->ntpeaks)
        return;
    FILE *out = L->x->out;
    fprintf(out, "\nleaks: growth without steps: the blocks live at each peak, by the tenth of "
                 "the run (up to the peak) they were allocated in\n");
    for (size_t i = 0; i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        char pl[256], hb[32];
        proc_label(&L->x->names, tp->process_id, pl, sizeof pl);
        ms_human_bytes(hb, sizeof hb, tp->peak_bytes);
        fprintf(out, "  %s, %s: peak %lld bytes (%s) at +%.3f ms\n", pl,
                ms__names_layer(&L->x->names, tp->layer), (long long)tp->peak_bytes, hb,
                (double)(tp->peak_ns - tp->start_ns) / 1e6);
        text_tgroups(L, tp->sites, tp->nsites, 0);
        if (tp->nowners)
            text_tgroups(L, tp->owners, tp->nowners, 1);
    }
}

/* The growth rule's findings over the whole run: leaking sites, their growth in bytes per
 * step (or per tenth without steps), and the processes judged. */
struct verdict {
    size_t leaks, small, judged, too_few;
    double per_step;
};

static struct verdict verdict_of(const struct leaks *L)
{
    struct verdict v = {0, 0, 0, 0, 0};
    if (L->has_steps) {
        for (size_t i = 0; i < L->nps; i++) {
            const struct proc_steps *p = &L->ps[i];
            size_t first = first_judged_end(p, L->x->o->warmup);
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

/* The growth rule's report (the default): one verdict line, then per process the judged steps
 * and one line per leaking call site. */
static void text_verdict(const struct leaks *L)
{
    FILE *out = L->x->out;
    struct verdict v = verdict_of(L);
    const char *unit = L->has_steps ? "step" : "tenth of the allocations";
    if (v.leaks)
        fprintf(out, "leaks: LEAK: %zu call site%s keep%s growing, by %.1f bytes per %s in all\n",
                v.leaks, v.leaks == 1 ? "" : "s", v.leaks == 1 ? "s" : "", v.per_step, unit);
    else if (!v.judged)
        fprintf(out,
                "leaks: no leak found: too few steps to judge (%d step ends after the warm-up "
                "needed)\n",
                MS_LEAK_MIN_JUDGED + 1);
    else
        fprintf(out, "leaks: no leak: no call site's live bytes keep growing %s\n",
                L->has_steps ? "from step to step" : "over the run");
    if (v.small)
        fprintf(out,
                "  %zu call site%s grew steadily by less than %d%% of the peak: not called "
                "a leak\n",
                v.small, v.small == 1 ? "" : "s", MS_LEAK_MIN_GROWTH_PCT);
    if (L->has_steps) {
        fprintf(out,
                "  rule: a call site leaks when the bytes it still holds at the last step "
                "end were allocated all along: in at least a third of the steps of each "
                "half of the judged steps (steps <= %d are warm-up)\n",
                L->x->o->warmup);
        for (size_t i = 0; i < L->nps; i++) {
            const struct proc_steps *p = &L->ps[i];
            size_t first = first_judged_end(p, L->x->o->warmup);
            char pl[256];
            proc_label(&L->x->names, p->process_id, pl, sizeof pl);
            if (first >= p->n || p->n - 1 - first < MS_LEAK_MIN_JUDGED) {
                fprintf(out, "  %s: %zu step end%s after the warm-up: too few to judge\n", pl,
                        first < p->n ? p->n - first : 0, p->n - first == 1 ? "" : "s");
                continue;
            }
            size_t n = 0;
            for (size_t k = 0; k < L->gsites.n; k++)
                n += L->gsites.g[k].leak && L->gsites.g[k].process_id == p->process_id;
            fprintf(out, "  %s: steps %lld..%lld judged: %s\n", pl, (long long)p->ends[first].step,
                    (long long)p->ends[p->n - 1].step, n ? "leaks" : "no leak");
            if (!n)
                continue;
            fprintf(out, "  %14s  %9s  %16s  %-8s  %s\n", "bytes/step", "grew in",
                    "held at last end", "layer", "call site");
            for (size_t k = 0; k < L->gsites.n; k++) {
                const struct ggroup *g = &L->gsites.g[k];
                if (!g->leak || g->process_id != p->process_id)
                    continue;
                char num[32], grew[32];
                snprintf(num, sizeof num, "%+.1f", g->kept_per_step);
                snprintf(grew, sizeof grew, "%zu/%zu", g->rises, g->judged);
                fprintf(out, "  %14s  %9s  %16lld  %-8s  %s\n", num, grew,
                        (long long)g->kept[g->nends - 1], ms__names_layer(&L->x->names, g->layer),
                        g->site);
            }
        }
        return;
    }
    fprintf(out, "  rule: no steps recorded: a call site leaks when the bytes it holds at a peak "
                 "were allocated all along: in at least two of the tenths 2..5 and two of the "
                 "tenths 6..9 of the allocations up to that peak\n");
    for (size_t i = 0; i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        char pl[256];
        proc_label(&L->x->names, tp->process_id, pl, sizeof pl);
        size_t n = 0;
        for (size_t k = 0; k < tp->nsites; k++)
            n += tp->sites[k].leak;
        fprintf(out, "  %s, %s: peak %lld bytes: %s\n", pl,
                ms__names_layer(&L->x->names, tp->layer), (long long)tp->peak_bytes,
                n ? "leaks" : "no leak");
        if (!n)
            continue;
        fprintf(out, "  %14s  %9s  %16s  %s\n", "bytes/tenth", "grew in", "held at the peak",
                "call site");
        for (size_t k = 0; k < tp->nsites; k++) {
            const struct tgroup *g = &tp->sites[k];
            if (!g->leak)
                continue;
            char num[32], grew[32];
            snprintf(num, sizeof num, "%+.1f", g->held_per_slice);
            snprintf(grew, sizeof grew, "%zu/%d", g->rises, GROW_TO);
            fprintf(out, "  %14s  %9s  %16lld  %s\n", num, grew, (long long)g->live[NSLICES - 1],
                    g->site);
        }
    }
}

static void render_text(const struct leaks *L)
{
    if (L->x->o->leak_rule == MS_LEAKS_MSMEMSCOPE) {
        text_live_at_exit(L);
        text_step_check(L);
    } else {
        text_verdict(L);
        fputc('\n', L->x->out);
        text_live_at_exit(L);
        text_step_note(L);
    }
    text_growth(L);
    text_growth_without_steps(L);
}

/* ---- Render: JSON ---- */

static void json_live_at_exit(const struct leaks *L, struct ms_json *j)
{
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    const struct ms_names *names = &L->x->names;
    const struct site_row *rows = L->live;
    ms_json_begin_array(j, "live_at_exit");
    for (size_t i = 0, e; i < L->nlive; i = e) {
        int64_t bytes = 0, blocks = 0;
        for (e = i; e < L->nlive && rows[e].process_id == rows[i].process_id &&
                    rows[e].layer == rows[i].layer;
             e++) {
            bytes += rows[e].bytes;
            blocks += rows[e].blocks;
        }
        const struct ms_name_proc *p = ms__names_proc(names, rows[i].process_id);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", rows[i].process_id);
        ms_json_int(j, "pid", p ? p->pid : 0);
        ms_json_str(j, "exe", p ? p->exe : NULL);
        ms_json_str(j, "layer", ms__names_layer(names, rows[i].layer));
        ms_json_int(j, "bytes", bytes);
        ms_json_int(j, "blocks", blocks);
        ms_json_int(j, "sites_total", (long long)(e - i));
        ms_json_begin_array(j, "sites");
        for (size_t k = i; k < e && k < i + top; k++) {
            ms_json_begin_object(j, NULL);
            ms_json_str(j, "site", rows[k].site);
            ms_json_int(j, "bytes", rows[k].bytes);
            ms_json_int(j, "blocks", rows[k].blocks);
            ms_json_begin_array(j, "owners");
            for (int q = 0; q < rows[k].nowners; q++)
                ms_json_str(j, NULL, ms__names_owner(names, rows[k].owners[q]));
            ms_json_end_array(j);
            ms_json_end_object(j);
        }
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_step_check(const struct leaks *L, struct ms_json *j)
{
    const struct ms_names *names = &L->x->names;
    ms_json_begin_object(j, "step_check");
    ms_json_bool(j, "steps_recorded", L->has_steps);
    ms_json_begin_array(j, "leaks");
    for (size_t i = 0; i < L->nflagged; i++) {
        const struct flagged *f = &L->flagged[i];
        const struct ms_name_proc *p = ms__names_proc(names, f->process_id);
        char hex[32];
        snprintf(hex, sizeof hex, "0x%016" PRIx64, f->addr);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", f->process_id);
        ms_json_int(j, "pid", p ? p->pid : 0);
        ms_json_str(j, "layer", ms__names_layer(names, f->layer));
        ms_json_int(j, "allocation_id", f->allocation_id);
        ms_json_str(j, "addr", hex);
        ms_json_int(j, "size", f->size);
        ms_json_int(j, "step", f->step);
        ms_json_int(j, "flagged_at_step", f->flagged_at);
        ms_json_str(j, "site", f->site);
        ms_json_str(j, "owner", ms__names_owner(names, f->owner));
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_int(j, "bytes", L->flagged_bytes);
    ms_json_int(j, "allocations", (long long)L->nflagged);
    ms_json_end_object(j);
}

static void json_groups(const struct leaks *L, struct ms_json *j, const struct ggroup *g, size_t n,
                        int by_owner)
{
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    ms_json_begin_array(j, by_owner ? "by_owner" : "by_site");
    for (size_t i = 0; i < n && i < top; i++) {
        ms_json_begin_object(j, NULL);
        if (by_owner)
            ms_json_str(j, "owner", ms__names_owner(&L->x->names, g[i].key));
        else
            ms_json_str(j, "site", g[i].site);
        ms_json_double(j, "bytes_per_step", g[i].per_step);
        ms_json_begin_array(j, "live");
        for (size_t k = 0; k < g[i].nends; k++)
            ms_json_int(j, NULL, g[i].live[k]);
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_growth(const struct leaks *L, struct ms_json *j)
{
    ms_json_begin_array(j, "growth");
    for (size_t i = 0, e, oi = 0, oe; L->nps && i < L->gsites.n; i = e, oi = oe) {
        const struct proc_steps *p = growth_section(L, &i, &e, &oi, &oe);
        const struct ms_name_proc *pr = ms__names_proc(&L->x->names, p->process_id);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", p->process_id);
        ms_json_int(j, "pid", pr ? pr->pid : 0);
        ms_json_str(j, "exe", pr ? pr->exe : NULL);
        ms_json_str(j, "layer", ms__names_layer(&L->x->names, L->gsites.g[i].layer));
        ms_json_begin_array(j, "steps");
        for (size_t k = 0; k < p->n; k++)
            ms_json_int(j, NULL, p->ends[k].step);
        ms_json_end_array(j);
        json_groups(L, j, &L->gsites.g[i], e - i, 0);
        json_groups(L, j, &L->gowners.g[oi], oe - oi, 1);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_tgroups(const struct leaks *L, struct ms_json *j, const struct tgroup *g, size_t n,
                         int by_owner)
{
    const size_t top = (size_t)(L->x->o->top > 0 ? L->x->o->top : 10);
    ms_json_begin_array(j, by_owner ? "by_owner" : "by_site");
    for (size_t i = 0; i < n && i < top; i++) {
        ms_json_begin_object(j, NULL);
        if (by_owner)
            ms_json_str(j, "owner", ms__names_owner(&L->x->names, g[i].key));
        else
            ms_json_str(j, "site", g[i].site);
        ms_json_double(j, "bytes_per_tenth", g[i].per_slice);
        ms_json_begin_array(j, "live");
        for (int k = 0; k < NSLICES; k++)
            ms_json_int(j, NULL, g[i].live[k]);
        ms_json_end_array(j);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_growth_without_steps(const struct leaks *L, struct ms_json *j)
{
    ms_json_begin_array(j, "growth_without_steps");
    for (size_t i = 0; !L->has_steps && i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        const struct ms_name_proc *pr = ms__names_proc(&L->x->names, tp->process_id);
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", tp->process_id);
        ms_json_int(j, "pid", pr ? pr->pid : 0);
        ms_json_str(j, "exe", pr ? pr->exe : NULL);
        ms_json_str(j, "layer", ms__names_layer(&L->x->names, tp->layer));
        ms_json_int(j, "peak_bytes", tp->peak_bytes);
        ms_json_int(j, "peak_ns", tp->peak_ns);
        ms_json_int(j, "start_ns", tp->start_ns);
        json_tgroups(L, j, tp->sites, tp->nsites, 0);
        json_tgroups(L, j, tp->owners, tp->nowners, 1);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

/* The growth rule's verdict (msMemScope's rule: whether the step check flagged a block). */
static void json_verdict(const struct leaks *L, struct ms_json *j)
{
    const struct ms_names *names = &L->x->names;
    struct verdict v = verdict_of(L);
    int ms = L->x->o->leak_rule == MS_LEAKS_MSMEMSCOPE;
    ms_json_begin_object(j, "verdict");
    ms_json_str(j, "rule", ms ? "msmemscope" : "growth");
    ms_json_bool(j, "leak", ms ? L->nflagged > 0 : v.leaks > 0);
    ms_json_str(j, "judged_on", L->has_steps ? "steps" : "tenths");
    ms_json_int(j, "processes_judged", (long long)v.judged);
    ms_json_int(j, "processes_too_few_steps", (long long)v.too_few);
    ms_json_double(j, "bytes_per_step", v.per_step);
    ms_json_int(j, "small_sites", (long long)v.small);
    ms_json_begin_array(j, "sites");
    for (size_t i = 0; L->has_steps && i < L->gsites.n; i++) {
        const struct ggroup *g = &L->gsites.g[i];
        if (!g->leak)
            continue;
        const struct ms_name_proc *p = ms__names_proc(names, g->process_id);
        size_t pi = 0;
        while (L->ps[pi].process_id != g->process_id)
            pi++;
        const struct proc_steps *ps = &L->ps[pi];
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", g->process_id);
        ms_json_int(j, "pid", p ? p->pid : 0);
        ms_json_str(j, "layer", ms__names_layer(names, g->layer));
        ms_json_str(j, "site", g->site);
        ms_json_double(j, "bytes_per_step", g->kept_per_step);
        ms_json_int(j, "steps_grown", (long long)g->rises);
        ms_json_int(j, "steps_judged", (long long)g->judged);
        ms_json_int(j, "first_step", ps->ends[first_judged_end(ps, L->x->o->warmup)].step);
        ms_json_int(j, "last_step", ps->ends[ps->n - 1].step);
        ms_json_int(j, "held_bytes", g->kept[g->nends - 1]);
        ms_json_int(j, "live_bytes", g->live[g->nends - 1]);
        ms_json_end_object(j);
    }
    for (size_t i = 0; !L->has_steps && i < L->ntpeaks; i++) {
        const struct tpeak *tp = &L->tpeaks[i];
        const struct ms_name_proc *p = ms__names_proc(names, tp->process_id);
        for (size_t k = 0; k < tp->nsites; k++) {
            const struct tgroup *g = &tp->sites[k];
            if (!g->leak)
                continue;
            ms_json_begin_object(j, NULL);
            ms_json_int(j, "process_id", tp->process_id);
            ms_json_int(j, "pid", p ? p->pid : 0);
            ms_json_str(j, "layer", ms__names_layer(names, tp->layer));
            ms_json_str(j, "site", g->site);
            ms_json_double(j, "bytes_per_step", g->held_per_slice);
            ms_json_int(j, "steps_grown", (long long)g->rises);
            ms_json_int(j, "steps_judged", GROW_TO);
            ms_json_int(j, "first_step", 1); /* tenths: the ends of tenths 1..9 */
            ms_json_int(j, "last_step", GROW_TO + 1);
            ms_json_int(j, "held_bytes", g->live[NSLICES - 1]);
            ms_json_int(j, "live_bytes", g->live[NSLICES - 1]);
            ms_json_end_object(j);
        }
    }
    ms_json_end_array(j);
    ms_json_end_object(j);
}

static void render_json(const struct leaks *L)
{
    struct ms_json j;
    ms_json_init(&j, L->x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "leaks");
    ms_json_int(&j, "warmup", L->x->o->warmup);
    json_verdict(L, &j);
    json_live_at_exit(L, &j);
    json_step_check(L, &j);
    json_growth(L, &j);
    json_growth_without_steps(L, &j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
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
    gset_release(&L->gsites);
    gset_release(&L->gowners);
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
        (rc = growth(&L)) == 0 && (rc = growth_without_steps(&L)) == 0)
        (x->o->json ? render_json : render_text)(&L);
    leaks_release(&L);
    return rc;
}

int ms__leaks_verdict(struct ms_actx *x, struct ms_leak_verdict *v)
{
    struct leaks L;
    int rc = leaks_init(&L, x);
    memset(v, 0, sizeof *v);
    if (!rc && (rc = growth(&L)) == 0 && (rc = growth_without_steps(&L)) == 0) {
        struct verdict w = verdict_of(&L);
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
