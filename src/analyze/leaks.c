/* leaks.c: `memscope analyze leaks`: what was still live when each process ended, msMemScope's
 * step-aware leak check, and the growth of live bytes from one step end to the next.
 *
 * Called through ms_analyses[] by `memscope analyze` and `memscope run --analysis=`. Workload:
 * everything comes from the blocks table (one row per block lifetime; the database has no
 * index on it, docs/database.md). The live-at-exit part is one scan that returns only live
 * blocks, grouped by SQLite; the step check is one scan joined with steps by primary key; the
 * growth part streams once over the blocks allocated before the last step end and keeps one
 * difference array of step ends per stack and per owner. Runs that never called
 * memscope_step() skip both step parts (one probe of the steps table). */
#include "analyze.h"

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

/* What the three parts share. */
struct leaks {
    sqlite3 *db;
    const struct ms_analyze_opts *o;
    FILE *out;
    struct ms_json j;
    struct ms_names names;
    struct ms_sites sites;
    char layer_sql[256];
    int has_owner, has_steps;
    char *err;
    size_t errlen;
};

static int db_fail(struct leaks *L, const char *what)
{
    snprintf(L->err, L->errlen, "leaks: %s: %s", what, sqlite3_errmsg(L->db));
    return MS_EDB;
}

static int oom(struct leaks *L)
{
    snprintf(L->err, L->errlen, "leaks: out of memory");
    return MS_ENOMEM;
}

static void proc_label(const struct ms_names *n, int64_t id, char *buf, size_t len)
{
    const struct ms_name_proc *p = ms__names_proc(n, id);
    if (p)
        snprintf(buf, len, "process %lld %s (pid %lld)", (long long)id, p->exe, (long long)p->pid);
    else
        snprintf(buf, len, "process %lld", (long long)id);
}

static void print_owners(struct leaks *L, const struct site_row *r)
{
    if (!r->nowners)
        return;
    fputs(" [", L->out);
    for (int k = 0; k < r->nowners; k++)
        fprintf(L->out, "%s%s", k ? ", " : "", ms__names_owner(&L->names, r->owners[k]));
    fputs(r->more_owners ? ", ...]" : "]", L->out);
}

/* Part (a): blocks live at exit by call site. */
static int live_at_exit(struct leaks *L)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT b.process_id, b.layer, b.stack_id, %s, count(*), sum(b.size) FROM blocks b "
             "WHERE b.free_ns IS NULL AND %s GROUP BY 1, 2, 3, 4",
             L->has_owner ? "b.owner_id" : "NULL", L->layer_sql);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(L->db, sql, -1, &st, NULL) != SQLITE_OK)
        return db_fail(L, "live blocks");
    struct site_row *rows = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 256;
            struct site_row *nr = realloc(rows, nc * sizeof *nr);
            if (!nr) {
                rc = oom(L);
                goto out;
            }
            rows = nr;
            cap = nc;
        }
        struct site_row *r = &rows[n];
        memset(r, 0, sizeof *r);
        r->process_id = sqlite3_column_int64(st, 0);
        r->layer = sqlite3_column_int64(st, 1);
        if (!(r->site = ms__sites_get(&L->sites, sqlite3_column_int64(st, 2)))) {
            rc = oom(L);
            goto out;
        }
        add_owner(r, sqlite3_column_int64(st, 3));
        r->blocks = sqlite3_column_int64(st, 4);
        r->bytes = sqlite3_column_int64(st, 5);
        n++;
    }
    if (s != SQLITE_DONE) {
        rc = db_fail(L, "live blocks");
        goto out;
    }
    n = merge_sites(rows, n);

    const int top = L->o->top > 0 ? L->o->top : 10;
    if (L->o->json)
        ms_json_begin_array(&L->j, "live_at_exit");
    else
        fprintf(L->out, "leaks: memory live at exit, by call site\n");
    if (!n && !L->o->json)
        fprintf(L->out, "  nothing was live at exit\n");
    for (size_t i = 0; i < n;) {
        size_t e = i;
        int64_t bytes = 0, blocks = 0;
        while (e < n && rows[e].process_id == rows[i].process_id &&
               rows[e].layer == rows[i].layer) {
            bytes += rows[e].bytes;
            blocks += rows[e].blocks;
            e++;
        }
        const struct ms_name_proc *p = ms__names_proc(&L->names, rows[i].process_id);
        const char *layer = ms__names_layer(&L->names, rows[i].layer);
        if (L->o->json) {
            ms_json_begin_object(&L->j, NULL);
            ms_json_int(&L->j, "process_id", rows[i].process_id);
            ms_json_int(&L->j, "pid", p ? p->pid : 0);
            ms_json_str(&L->j, "exe", p ? p->exe : NULL);
            ms_json_str(&L->j, "layer", layer);
            ms_json_int(&L->j, "bytes", bytes);
            ms_json_int(&L->j, "blocks", blocks);
            ms_json_int(&L->j, "sites_total", (long long)(e - i));
            ms_json_begin_array(&L->j, "sites");
            for (size_t k = i; k < e && k < i + (size_t)top; k++) {
                ms_json_begin_object(&L->j, NULL);
                ms_json_str(&L->j, "site", rows[k].site);
                ms_json_int(&L->j, "bytes", rows[k].bytes);
                ms_json_int(&L->j, "blocks", rows[k].blocks);
                ms_json_begin_array(&L->j, "owners");
                for (int q = 0; q < rows[k].nowners; q++)
                    ms_json_str(&L->j, NULL, ms__names_owner(&L->names, rows[k].owners[q]));
                ms_json_end_array(&L->j);
                ms_json_end_object(&L->j);
            }
            ms_json_end_array(&L->j);
            ms_json_end_object(&L->j);
        } else {
            char pl[256], hb[32];
            proc_label(&L->names, rows[i].process_id, pl, sizeof pl);
            ms_human_bytes(hb, sizeof hb, bytes);
            fprintf(L->out, "  %s, %s: %lld bytes (%s) in %lld blocks at %zu call sites\n", pl,
                    layer, (long long)bytes, hb, (long long)blocks, e - i);
            fprintf(L->out, "  %12s %8s  %s\n", "bytes", "blocks", "call site [owners]");
            for (size_t k = i; k < e && k < i + (size_t)top; k++) {
                fprintf(L->out, "  %12lld %8lld  %s", (long long)rows[k].bytes,
                        (long long)rows[k].blocks, rows[k].site);
                print_owners(L, &rows[k]);
                fputc('\n', L->out);
            }
            if (e - i > (size_t)top)
                fprintf(L->out, "  ... %zu more call sites\n", e - i - (size_t)top);
        }
        i = e;
    }
    if (L->o->json)
        ms_json_end_array(&L->j);
out:
    sqlite3_finalize(st);
    free(rows);
    return rc;
}

/* Part (b): msMemScope's step-aware check. A block allocated at step s > warmup that is still
 * live at the end of step s + 1 (the first step end S with S - s >= 1) is flagged, once. */
static int step_check(struct leaks *L)
{
    const int json = L->o->json;
    if (json) {
        ms_json_begin_object(&L->j, "step_check");
        ms_json_bool(&L->j, "steps_recorded", L->has_steps);
        ms_json_begin_array(&L->j, "leaks");
    } else {
        fprintf(L->out,
                "\nleaks: step-aware check (steps <= %d are warm-up; a block allocated "
                "at step s and live at the end of step s+1 is a leak)\n",
                L->o->warmup);
    }
    int64_t total = 0, count = 0;
    int rc = 0;
    sqlite3_stmt *st = NULL;
    if (L->has_steps) {
        char sql[1536];
        snprintf(sql, sizeof sql,
                 "SELECT b.allocation_id, b.process_id, b.layer, b.addr, b.size, b.step, "
                 "b.stack_id, %s, s.step FROM blocks b JOIN steps s "
                 "ON s.process_id = b.process_id AND s.step = b.step + 1 "
                 "WHERE b.step > ? AND s.end_event_id IS NOT NULL AND %s AND "
                 "(b.free_ns IS NULL OR b.free_event_id > s.end_event_id OR "
                 "(b.free_event_id IS NULL AND b.free_ns > s.end_ns)) "
                 "ORDER BY b.process_id, b.allocation_id",
                 L->has_owner ? "b.owner_id" : "NULL", L->layer_sql);
        if (sqlite3_prepare_v2(L->db, sql, -1, &st, NULL) != SQLITE_OK)
            return db_fail(L, "step check");
        sqlite3_bind_int(st, 1, L->o->warmup);
        int s, header = 0;
        int multi = L->names.nprocs > 1;
        while ((s = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t pid = sqlite3_column_int64(st, 1), layer = sqlite3_column_int64(st, 2);
            int64_t size = sqlite3_column_int64(st, 4), step = sqlite3_column_int64(st, 5);
            uint64_t addr = (uint64_t)sqlite3_column_int64(st, 3);
            const struct ms_name_proc *p = ms__names_proc(&L->names, pid);
            const char *lname = ms__names_layer(&L->names, layer);
            total += size;
            count++;
            if (json) {
                char hex[32];
                snprintf(hex, sizeof hex, "0x%016" PRIx64, addr);
                const char *site = ms__sites_get(&L->sites, sqlite3_column_int64(st, 6));
                ms_json_begin_object(&L->j, NULL);
                ms_json_int(&L->j, "process_id", pid);
                ms_json_int(&L->j, "pid", p ? p->pid : 0);
                ms_json_str(&L->j, "layer", lname);
                ms_json_int(&L->j, "allocation_id", sqlite3_column_int64(st, 0));
                ms_json_str(&L->j, "addr", hex);
                ms_json_int(&L->j, "size", size);
                ms_json_int(&L->j, "step", step);
                ms_json_int(&L->j, "flagged_at_step", sqlite3_column_int64(st, 8));
                ms_json_str(&L->j, "site", site ? site : "?");
                ms_json_str(&L->j, "owner",
                            ms__names_owner(&L->names, sqlite3_column_int64(st, 7)));
                ms_json_end_object(&L->j);
            } else {
                if (!header) {
                    fprintf(L->out, "====== ERROR: Detected memory leaks ======\n");
                    header = 1;
                }
                /* msMemScope: "Direct %s leak of %f Mb(s) at 0x%lx in kernel_%lu at step %lu." */
                fprintf(L->out, "Direct %s leak of %f Mb(s) at 0x%" PRIx64 " at step %lld.", lname,
                        size / 1048576.0, addr, (long long)step);
                if (multi && p)
                    fprintf(L->out, " (pid %lld)", (long long)p->pid);
                fputc('\n', L->out);
            }
        }
        if (s != SQLITE_DONE)
            rc = db_fail(L, "step check");
        sqlite3_finalize(st);
        if (rc)
            return rc;
    }
    if (json) {
        ms_json_end_array(&L->j);
        ms_json_int(&L->j, "bytes", total);
        ms_json_int(&L->j, "allocations", count);
        ms_json_end_object(&L->j);
    } else if (!L->has_steps) {
        fprintf(L->out, "  no steps recorded (the program never called memscope_step())\n");
    } else if (count) {
        fprintf(L->out, "====== SUMMARY: %g Mb(s) leaked in %lld allocation(s) ======\n",
                total / 1048576.0, (long long)count);
    } else {
        fprintf(L->out, "  no leaks detected\n");
    }
    return 0;
}

/* ---- Part (c): growth of live bytes per step ---- */

struct step_end {
    int64_t step, event_id, ns;
};

/* One process's ended steps. */
struct proc_steps {
    int64_t process_id;
    struct step_end *ends;
    size_t n;
};

/* A growth group: one stack or owner in one (process, layer); after merging, one call site. */
struct ggroup {
    int64_t process_id, layer, key; /* key: stack id or owner id */
    const char *site;               /* by-site groups, after resolving */
    size_t nends;
    int64_t *live; /* nends + 1 cells: differences, then live bytes */
    double per_step;
};

struct gset {
    struct ms_imap map; /* (key, layer, process) -> index + 1 */
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
    size_t *slot = ms__imap_put(&s->map, k, &isnew);
    if (!slot)
        return NULL;
    if (!isnew)
        return &s->g[*slot];
    if (s->cells + nends + 1 > MAX_GROWTH_CELLS)
        return NULL;
    if (s->n == s->cap && ms_grow((void **)&s->g, &s->cap, s->n, sizeof *s->g, 64, MS_GROW_MAX) < 0)
        return NULL;
    struct ggroup *g = &s->g[s->n];
    memset(g, 0, sizeof *g);
    g->process_id = process_id;
    g->layer = layer;
    g->key = key;
    g->nends = nends;
    if (!(g->live = calloc(nends + 1, sizeof *g->live)))
        return NULL;
    s->cells += nends + 1;
    *slot = s->n++;
    return g;
}

static void gset_release(struct gset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->g[i].live);
    free(s->g);
    ms__imap_release(&s->map);
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

/* Turns differences into live bytes and computes the growth per step from the first step end
 * after the warm-up (or the first, when fewer than two remain) to the last. */
static void finish_group(struct ggroup *g, const struct proc_steps *p, int warmup)
{
    int64_t run = 0;
    for (size_t i = 0; i < g->nends; i++) {
        run += g->live[i];
        g->live[i] = run;
    }
    size_t first = 0;
    while (first < p->n && p->ends[first].step <= warmup)
        first++;
    if (p->n - first < 2)
        first = 0;
    size_t last = p->n - 1;
    if (last > first)
        g->per_step = (double)(g->live[last] - g->live[first]) /
                      (double)(p->ends[last].step - p->ends[first].step);
}

static void write_series(struct leaks *L, const struct ggroup *g, const struct proc_steps *p)
{
    if (L->o->json) {
        ms_json_begin_array(&L->j, "live");
        for (size_t i = 0; i < g->nends; i++)
            ms_json_int(&L->j, NULL, g->live[i]);
        ms_json_end_array(&L->j);
        return;
    }
    if (p->n <= 8) {
        for (size_t i = 0; i < g->nends; i++)
            fprintf(L->out, " %lld", (long long)g->live[i]);
    } else {
        fprintf(L->out, " %lld %lld %lld ... %lld %lld", (long long)g->live[0],
                (long long)g->live[1], (long long)g->live[2], (long long)g->live[g->nends - 2],
                (long long)g->live[g->nends - 1]);
    }
}

/* Prints groups [i, e) of one (process, layer) as "by_site" or "by_owner". */
static void write_groups(struct leaks *L, struct ggroup *g, size_t n, const struct proc_steps *p,
                         int by_owner)
{
    const int top = L->o->top > 0 ? L->o->top : 10;
    if (L->o->json) {
        ms_json_begin_array(&L->j, by_owner ? "by_owner" : "by_site");
        for (size_t i = 0; i < n && i < (size_t)top; i++) {
            ms_json_begin_object(&L->j, NULL);
            if (by_owner)
                ms_json_str(&L->j, "owner", ms__names_owner(&L->names, g[i].key));
            else
                ms_json_str(&L->j, "site", g[i].site);
            ms_json_double(&L->j, "bytes_per_step", g[i].per_step);
            write_series(L, &g[i], p);
            ms_json_end_object(&L->j);
        }
        ms_json_end_array(&L->j);
        return;
    }
    fprintf(L->out, "  by %s:\n  %14s  %-30s  %s\n", by_owner ? "owner" : "call site", "bytes/step",
            "live bytes at step ends", by_owner ? "owner" : "call site");
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < (size_t)top; i++) {
        if (g[i].per_step == 0 && g[i].live[g[i].nends - 1] == 0)
            continue;
        char num[32];
        snprintf(num, sizeof num, "%+.1f", g[i].per_step);
        fprintf(L->out, "  %14s ", num);
        write_series(L, &g[i], p);
        fprintf(L->out, "  %s\n", by_owner ? ms__names_owner(&L->names, g[i].key) : g[i].site);
        shown++;
    }
    if (!shown)
        fprintf(L->out, "  (none)\n");
}

static int growth(struct leaks *L)
{
    const int json = L->o->json;
    struct proc_steps *ps = NULL;
    size_t nps = 0;
    struct gset sites = {0}, owners = {0};
    ms__imap_init(&sites.map, sizeof(size_t));
    ms__imap_init(&owners.map, sizeof(size_t));
    sqlite3_stmt *st = NULL;
    int rc = 0, s;

    if (json)
        ms_json_begin_array(&L->j, "growth");
    else
        fprintf(L->out, "\nleaks: growth of live bytes per step\n");
    if (!L->has_steps)
        goto done;
    /* The ended steps of each process, in order. */
    if (sqlite3_prepare_v2(L->db,
                           "SELECT process_id, step, end_event_id, end_ns FROM steps "
                           "WHERE end_event_id IS NOT NULL ORDER BY process_id, step",
                           -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(L, "steps");
        goto done;
    }
    int64_t max_end = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t pid = sqlite3_column_int64(st, 0);
        if (!nps || ps[nps - 1].process_id != pid) {
            struct proc_steps *np = realloc(ps, (nps + 1) * sizeof *np);
            if (!np) {
                rc = oom(L);
                goto done;
            }
            ps = np;
            memset(&ps[nps], 0, sizeof ps[nps]);
            ps[nps++].process_id = pid;
        }
        struct proc_steps *p = &ps[nps - 1];
        struct step_end *ne = realloc(p->ends, (p->n + 1) * sizeof *ne);
        if (!ne) {
            rc = oom(L);
            goto done;
        }
        p->ends = ne;
        p->ends[p->n].step = sqlite3_column_int64(st, 1);
        p->ends[p->n].event_id = sqlite3_column_int64(st, 2);
        p->ends[p->n].ns = sqlite3_column_int64(st, 3);
        if (p->ends[p->n].event_id > max_end)
            max_end = p->ends[p->n].event_id;
        p->n++;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (!nps)
        goto done;

    /* One pass over the blocks allocated before the last step end. */
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT b.process_id, b.layer, b.size, b.alloc_event_id, b.free_event_id, "
             "b.free_ns, b.stack_id, %s FROM blocks b WHERE b.alloc_event_id < ? AND %s",
             L->has_owner ? "b.owner_id" : "NULL", L->layer_sql);
    if (sqlite3_prepare_v2(L->db, sql, -1, &st, NULL) != SQLITE_OK) {
        rc = db_fail(L, "blocks");
        goto done;
    }
    sqlite3_bind_int64(st, 1, max_end);
    size_t cur = 0;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t pid = sqlite3_column_int64(st, 0);
        if (cur >= nps || ps[cur].process_id != pid) {
            for (cur = 0; cur < nps && ps[cur].process_id != pid; cur++)
                ;
            if (cur == nps)
                continue;
        }
        const struct proc_steps *p = &ps[cur];
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
        struct ggroup *g = gset_get(&sites, pid, layer, stack > 0 ? stack : 0, p->n);
        if (!g) {
            rc = oom(L);
            goto done;
        }
        g->live[i0] += size;
        g->live[i1] -= size;
        if (owner > 0) {
            if (!(g = gset_get(&owners, pid, layer, owner, p->n))) {
                rc = oom(L);
                goto done;
            }
            g->live[i0] += size;
            g->live[i1] -= size;
        }
    }
    if (s != SQLITE_DONE) {
        rc = db_fail(L, "blocks");
        goto done;
    }
    sqlite3_finalize(st);
    st = NULL;

    /* Stacks -> call sites: merge the difference arrays of stacks with the same site. */
    for (size_t i = 0; i < sites.n; i++)
        if (!(sites.g[i].site = ms__sites_get(&L->sites, sites.g[i].key))) {
            rc = oom(L);
            goto done;
        }
    if (sites.n) {
        qsort(sites.g, sites.n, sizeof *sites.g, cmp_group_site);
        size_t w = 0;
        for (size_t i = 1; i < sites.n; i++) {
            if (!cmp_group_site(&sites.g[w], &sites.g[i])) {
                for (size_t k = 0; k <= sites.g[w].nends; k++)
                    sites.g[w].live[k] += sites.g[i].live[k];
                free(sites.g[i].live);
                sites.g[i].live = NULL;
            } else {
                ++w;
                struct ggroup t = sites.g[w];
                sites.g[w] = sites.g[i];
                sites.g[i] = t;
            }
        }
        for (size_t i = w + 1; i < sites.n; i++)
            free(sites.g[i].live);
        sites.n = w + 1;
    }
    struct gset *sets[2] = {&sites, &owners};
    for (int k = 0; k < 2; k++) {
        struct gset *gs = sets[k];
        for (size_t i = 0; i < gs->n; i++) {
            size_t pi = 0;
            while (ps[pi].process_id != gs->g[i].process_id)
                pi++;
            finish_group(&gs->g[i], &ps[pi], L->o->warmup);
        }
        if (gs->n)
            qsort(gs->g, gs->n, sizeof *gs->g, cmp_growth);
    }

    /* One section per (process, layer) that has call sites live at a step end. */
    size_t oi = 0;
    for (size_t i = 0; i < sites.n;) {
        size_t e = i;
        while (e < sites.n && sites.g[e].process_id == sites.g[i].process_id &&
               sites.g[e].layer == sites.g[i].layer)
            e++;
        size_t pi = 0;
        while (ps[pi].process_id != sites.g[i].process_id)
            pi++;
        const struct proc_steps *p = &ps[pi];
        const struct ms_name_proc *pr = ms__names_proc(&L->names, p->process_id);
        const char *lname = ms__names_layer(&L->names, sites.g[i].layer);
        /* The owners of the same (process, layer) are a contiguous run too. */
        while (oi < owners.n && (owners.g[oi].process_id < sites.g[i].process_id ||
                                 (owners.g[oi].process_id == sites.g[i].process_id &&
                                  owners.g[oi].layer < sites.g[i].layer)))
            oi++;
        size_t oe = oi;
        while (oe < owners.n && owners.g[oe].process_id == sites.g[i].process_id &&
               owners.g[oe].layer == sites.g[i].layer)
            oe++;
        if (json) {
            ms_json_begin_object(&L->j, NULL);
            ms_json_int(&L->j, "process_id", p->process_id);
            ms_json_int(&L->j, "pid", pr ? pr->pid : 0);
            ms_json_str(&L->j, "exe", pr ? pr->exe : NULL);
            ms_json_str(&L->j, "layer", lname);
            ms_json_begin_array(&L->j, "steps");
            for (size_t k = 0; k < p->n; k++)
                ms_json_int(&L->j, NULL, p->ends[k].step);
            ms_json_end_array(&L->j);
        } else {
            char pl[256];
            proc_label(&L->names, p->process_id, pl, sizeof pl);
            fprintf(L->out, "  %s, %s: live bytes at the ends of steps %lld..%lld\n", pl, lname,
                    (long long)p->ends[0].step, (long long)p->ends[p->n - 1].step);
        }
        write_groups(L, &sites.g[i], e - i, p, 0);
        if (oe > oi || json)
            write_groups(L, &owners.g[oi], oe - oi, p, 1);
        if (json)
            ms_json_end_object(&L->j);
        oi = oe;
        i = e;
    }
done:
    if (!rc) {
        if (json)
            ms_json_end_array(&L->j);
        else if (!L->has_steps || !nps)
            fprintf(L->out, "  no step ended (the program never called memscope_step())\n");
    }
    sqlite3_finalize(st);
    for (size_t i = 0; i < nps; i++)
        free(ps[i].ends);
    free(ps);
    gset_release(&sites);
    gset_release(&owners);
    return rc;
}

int ms_analyze_leaks(sqlite3 *db, const struct ms_analyze_opts *o, FILE *out, char *err,
                     size_t errlen)
{
    struct leaks L;
    memset(&L, 0, sizeof L);
    L.db = db;
    L.o = o;
    L.out = out;
    L.err = err;
    L.errlen = errlen;
    int rc = ms__names_load(db, &L.names, err, errlen);
    if (rc < 0)
        return rc;
    ms__sites_init(&L.sites, db);
    ms__layer_filter(db, o, "b.layer", L.layer_sql, sizeof L.layer_sql);
    L.has_owner = ms__has_column(db, "blocks", "owner_id");
    L.has_steps =
        ms__has_column(db, "blocks", "step") && ms__has_column(db, "steps", "end_event_id");
    if (L.has_steps) { /* the table exists in every database; rows only when steps ended */
        sqlite3_stmt *st;
        L.has_steps =
            sqlite3_prepare_v2(db, "SELECT 1 FROM steps LIMIT 1", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    if (o->json) {
        ms_json_init(&L.j, out);
        ms_json_begin_object(&L.j, NULL);
        ms_json_str(&L.j, "analysis", "leaks");
        ms_json_int(&L.j, "warmup", o->warmup);
    }
    if ((rc = live_at_exit(&L)) == 0 && (rc = step_check(&L)) == 0)
        rc = growth(&L);
    if (o->json && rc == 0) {
        ms_json_end_object(&L.j);
        ms_json_finish(&L.j);
    }
    ms__sites_release(&L.sites);
    ms__names_release(&L.names);
    return rc;
}
