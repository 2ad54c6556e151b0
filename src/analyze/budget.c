/* budget.c: the budgets of one run and the gates between two runs (budget.h, docs/ci.md).
 *
 * Called by `memscope run` after the conversion (one check per budget option) and by `memscope
 * analyze compare` with a gate. Workload: the analyses' own queries: the blocks live at exit
 * (one scan of blocks returning only the live ones, grouped by stack), the peaks from
 * process_stats with the blocks live at each (peak.c), the growth rule's verdict (leaks.c). The
 * suppressions read the frames of each stack with live blocks once. */
#include "budget.h"
#include "analyze.h"

#include "common/db_ids.h"
#include "common/grow.h"
#include "common/ms_error.h"
#include "common/size.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- Budget values ---- */

/* The layer names of a run (docs/database.md, layers): families that take ":N" for a device,
 * and names without. */
static const char *const dev_families[] = {"cuda",     "cuda_pool", "cuda_vmm",   "cuda_va",
                                           "cuda_map", "pta",       "pta_segment"};
static const char *const plain_names[] = {"heap",    "mmap",         "mmap_reserved", "cuda_pinned",
                                          "host",    "mmap_reserve", "hal",           "vmm_reserve",
                                          "vmm_map", "host_pinned",  "pool"};

int ms_budget_layer_known(const char *name)
{
    if (!name || !*name || strlen(name) >= 64)
        return 0;
    for (size_t i = 0; i < sizeof plain_names / sizeof plain_names[0]; i++)
        if (!strcasecmp(name, plain_names[i]))
            return 1;
    if (!strncasecmp(name, "pool:", 5))
        return name[5] != 0;
    for (size_t i = 0; i < sizeof dev_families / sizeof dev_families[0]; i++) {
        size_t n = strlen(dev_families[i]);
        if (strncasecmp(name, dev_families[i], n))
            continue;
        if (!name[n])
            return 1;
        if (name[n] != ':' || !name[n + 1] || strlen(name + n + 1) > 2)
            continue;
        const char *d = name + n + 1;
        while (*d >= '0' && *d <= '9')
            d++;
        if (!*d)
            return 1;
    }
    return 0;
}

int ms_budget_parse(struct ms_budget *b, const char *value, char *err, size_t errlen)
{
    char num[96];
    const char *colon = strchr(value, ':');
    size_t n = colon ? (size_t)(colon - value) : strlen(value);
    if (n >= sizeof num) {
        return ms_errf(err, errlen, MS_EINVAL, "'%.60s...' is not a size", value);
    }
    memcpy(num, value, n);
    num[n] = 0;
    if (ms_size_parse(num, &b->limit) < 0) {
        return ms_errf(
            err, errlen, MS_EINVAL,
            "'%s' is not a size (a number of bytes, or with a unit: KiB, MiB, GiB or KB, "
            "MB, GB, powers of 1024)",
            num);
    }
    b->layer[0] = 0;
    if (colon) {
        if (!ms_budget_layer_known(colon + 1)) {
            return ms_errf(
                err, errlen, MS_EINVAL,
                "unknown layer '%.64s' (heap, mmap, mmap_reserved, cuda_pinned, cuda[:N], "
                "cuda_pool[:N], cuda_vmm[:N], cuda_va[:N], cuda_map[:N], pta[:N], "
                "pta_segment[:N], pool, pool:NAME)",
                colon + 1);
        }
        snprintf(b->layer, sizeof b->layer, "%s", colon + 1);
    }
    return 0;
}

/* ---- Layers of a database ---- */

#define MAX_LAYERS 256
struct layer_sel {
    int64_t id[MAX_LAYERS];
    size_t n;
};

/* The layers of db that name selects ("": heap and mmap): the layer of that name or event type,
 * or with a family name (cuda, pool) every layer "NAME:..." but pools' reserved regions. */
static int layers_select(sqlite3 *db, const char *name, struct layer_sel *s, char *err,
                         size_t errlen)
{
    s->n = 0;
    if (!*name) {
        s->id[s->n++] = MS_LAYER_HEAP;
        s->id[s->n++] = MS_LAYER_MMAP;
        return 0;
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT id FROM layers WHERE id > 0 AND (lower(name) = lower(?1) OR "
                           "lower(event_type) = lower(?1) OR (instr(?1, ':') = 0 AND "
                           "lower(name) LIKE lower(?1) || ':%' AND name NOT LIKE '%:reserved')) "
                           "ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK) {
        return ms_errf(err, errlen, MS_EDB, "layers: %s", sqlite3_errmsg(db));
    }
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    while (sqlite3_step(st) == SQLITE_ROW && s->n < MAX_LAYERS)
        s->id[s->n++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return 0;
}

static int layer_in(const struct layer_sel *s, int64_t layer)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->id[i] == layer)
            return 1;
    return 0;
}

/* "process 1 prog (pid 12), heap" */
static void where_of(const struct ms_actx *x, int64_t process_id, int64_t layer, char *out,
                     size_t len)
{
    const struct ms_name_proc *p = ms__names_proc(&x->names, process_id);
    if (p)
        snprintf(out, len, "process %lld %s (pid %lld), %s", (long long)process_id, p->exe,
                 (long long)p->pid, ms__names_layer(&x->names, layer));
    else
        snprintf(out, len, "process %lld, %s", (long long)process_id,
                 ms__names_layer(&x->names, layer));
}

/* ---- Live at exit, by call site, after suppressions ---- */

struct site_sum {
    const char *site; /* interned by x->sites */
    int64_t bytes, blocks;
};
struct live_sites {
    struct site_sum *v;
    size_t n, cap;
    int64_t bytes, blocks;
    int64_t suppressed_bytes, suppressed_blocks;
};

static int cmp_sum_site(const void *a, const void *b)
{
    const struct site_sum *x = a, *y = b;
    return x->site < y->site ? -1 : x->site > y->site;
}

static int cmp_sum_bytes(const void *a, const void *b)
{
    const struct site_sum *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->blocks != y->blocks)
        return x->blocks > y->blocks ? -1 : 1;
    return strcmp(x->site, y->site);
}

/* Whether a suppression matches a frame of stack id; the first that does, or NULL. */
static struct ms_suppression *suppressed(struct ms_stack_text *t, struct ms_stack_frames *fr,
                                         struct ms_suppressions *sup, int64_t id, int *rc)
{
    *rc = 0;
    if (!sup || !sup->n || id <= 0)
        return NULL;
    if ((*rc = ms_stack_frames_load(t, id, fr)) < 0)
        return NULL;
    for (size_t k = 0; k < sup->n; k++) {
        const char *p = sup->v[k].pattern;
        for (size_t i = 0; i < fr->n; i++) {
            const struct ms_frame_info *f = &fr->f[i];
            if (ms_suppression_match(p, f->function) || ms_suppression_match(p, f->file) ||
                ms_suppression_match(p, f->module))
                return &sup->v[k];
        }
    }
    const char *py = ms_stack_text_py(t, id);
    if (!py) {
        *rc = MS_ENOMEM;
        return NULL;
    }
    /* Python frames: "file(line): function", one a line */
    for (const char *l = py; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[1024];
        if (len < sizeof line) {
            memcpy(line, l, len);
            line[len] = 0;
            char *paren = strrchr(line, '('), *colon = strstr(line, "): ");
            const char *func = colon ? colon + 3 : NULL;
            if (paren)
                *paren = 0;
            for (size_t k = 0; k < sup->n; k++)
                if (ms_suppression_match(sup->v[k].pattern, line) ||
                    ms_suppression_match(sup->v[k].pattern, func))
                    return &sup->v[k];
        }
        l += len + (e != NULL);
    }
    return NULL;
}

/* The blocks live at exit in layers s by call site (unsuppressed), most bytes first. */
static int live_sites(struct ms_actx *x, const struct layer_sel *s, struct ms_suppressions *sup,
                      struct live_sites *L)
{
    memset(L, 0, sizeof *L);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(x->db,
                           "SELECT layer, stack_id, count(*), sum(size) FROM blocks "
                           "WHERE free_ns IS NULL GROUP BY 1, 2",
                           -1, &st, NULL) != SQLITE_OK)
        return ms__actx_db_fail(x, "live blocks");
    struct ms_stack_text t;
    int t_ok = sup && sup->n && ms_stack_text_init(&t, x->db) == 0;
    struct ms_stack_frames fr;
    ms_stack_frames_init(&fr);
    int rc = 0, r;
    while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW) {
        if (!layer_in(s, sqlite3_column_int64(st, 0)))
            continue;
        int64_t stack = sqlite3_column_int64(st, 1), blocks = sqlite3_column_int64(st, 2),
                bytes = sqlite3_column_int64(st, 3);
        struct ms_suppression *hit = t_ok ? suppressed(&t, &fr, sup, stack, &rc) : NULL;
        if (rc)
            break;
        if (hit) {
            hit->bytes += bytes;
            hit->blocks += blocks;
            L->suppressed_bytes += bytes;
            L->suppressed_blocks += blocks;
            continue;
        }
        const char *site = ms__sites_get(&x->sites, stack);
        if (!site || ms_grow((void **)&L->v, &L->cap, L->n, sizeof *L->v, 64, MS_GROW_MAX) < 0) {
            rc = ms__actx_oom(x);
            break;
        }
        L->v[L->n++] = (struct site_sum){site, bytes, blocks};
        L->bytes += bytes;
        L->blocks += blocks;
    }
    if (!rc && r != SQLITE_DONE)
        rc = ms__actx_db_fail(x, "live blocks");
    else if (rc == MS_ENOMEM)
        rc = ms__actx_oom(x);
    else if (rc < 0)
        rc = ms__actx_db_fail(x, "stacks");
    sqlite3_finalize(st);
    ms_stack_frames_release(&fr);
    if (t_ok)
        ms_stack_text_release(&t);
    if (rc) { /* nothing is left to the caller */
        free(L->v);
        memset(L, 0, sizeof *L);
        return rc;
    }
    if (!L->n)
        return 0;
    qsort(L->v, L->n, sizeof *L->v, cmp_sum_site);
    size_t w = 0;
    for (size_t i = 1; i < L->n; i++) {
        if (L->v[i].site == L->v[w].site) {
            L->v[w].bytes += L->v[i].bytes;
            L->v[w].blocks += L->v[i].blocks;
        } else {
            L->v[++w] = L->v[i];
        }
    }
    L->n = w + 1;
    qsort(L->v, L->n, sizeof *L->v, cmp_sum_bytes);
    return 0;
}

/* ---- One run ---- */

static void add_site(struct ms_budget_site *v, size_t *n, size_t *more, const char *site,
                     int64_t bytes, int64_t blocks, double per_step)
{
    if (*n >= MS_BUDGET_SITES) {
        (*more)++;
        return;
    }
    struct ms_budget_site *s = &v[(*n)++];
    snprintf(s->site, sizeof s->site, "%s", site);
    s->bytes = bytes;
    s->blocks = blocks;
    s->per_step = per_step;
}

static int check_leak(struct ms_actx *x, const struct ms_budget *b, struct ms_suppressions *sup,
                      struct ms_budget_result *r)
{
    struct layer_sel s;
    int rc = layers_select(x->db, b->layer, &s, x->err, x->errlen);
    struct live_sites L;
    if (rc || (rc = live_sites(x, &s, sup, &L)) < 0)
        return rc;
    r->measured = L.bytes;
    r->failed = L.bytes > (int64_t)b->limit;
    r->suppressed_bytes = L.suppressed_bytes;
    r->suppressed_blocks = L.suppressed_blocks;
    for (size_t i = 0; i < L.n; i++)
        add_site(r->sites, &r->nsites, &r->more_sites, L.v[i].site, L.v[i].bytes, L.v[i].blocks, 0);
    free(L.v);
    return 0;
}

static int check_step_leak(struct ms_actx *x, struct ms_budget_result *r)
{
    struct ms_leak_verdict v;
    int rc = ms__leaks_verdict(x, &v);
    if (rc < 0)
        return rc;
    r->failed = v.n > 0;
    r->on_steps = v.on_steps;
    r->judged = v.judged;
    r->measured = (int64_t)v.per_step;
    for (size_t i = 0; i < v.n; i++) {
        add_site(r->sites, &r->nsites, &r->more_sites, v.sites[i].site, v.sites[i].held_bytes, -1,
                 v.sites[i].per_step);
        if (i == 0)
            where_of(x, v.sites[i].process_id, v.sites[i].layer, r->where, sizeof r->where);
    }
    free(v.sites);
    return 0;
}

/* ---- The default peak: heap and mmap together, per process ---- */

/* One process's peak of heap + mmap live bytes: the first event that reached it. */
struct host_peak {
    int64_t process_id, bytes, event_id, ns;
    int64_t heap, mmap; /* live now, during the replay */
};

/* Replays the MALLOC and FREE events of heap and mmap of the full database db in id order (as
 * peak.c's replay counts them: ms__live_apply) and fills p[0..n) (their process ids set by the
 * caller) with each process's first maximum of the two layers' sum. */
static int host_peaks_replay(struct ms_actx *x, struct host_peak *p, size_t n)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(x->db,
                           "SELECT id, ts_ns, kind, layer, process_id, addr, size, allocation_id "
                           "FROM events WHERE kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE ") AND "
                           "layer IN (1, 2) ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK)
        return ms__actx_db_fail(x, "events");
    struct ms_live live;
    ms__live_init(&live);
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int kind = sqlite3_column_int(st, 2);
        int64_t layer = sqlite3_column_int64(st, 3), proc = sqlite3_column_int64(st, 4);
        struct ms_live_pl *pl =
            ms__live_apply(&live, kind, proc, layer, sqlite3_column_int64(st, 5),
                           sqlite3_column_int64(st, 6), sqlite3_column_type(st, 7) != SQLITE_NULL);
        if (!pl) {
            rc = ms__actx_oom(x);
            break;
        }
        struct host_peak *h = NULL;
        for (size_t i = 0; i < n && !h; i++)
            if (p[i].process_id == proc)
                h = &p[i];
        if (!h)
            continue;
        *(layer == MS_LAYER_HEAP ? &h->heap : &h->mmap) = pl->live;
        if (kind == MS_KIND_MALLOC && h->heap + h->mmap > h->bytes) {
            h->bytes = h->heap + h->mmap;
            h->event_id = sqlite3_column_int64(st, 0);
            h->ns = sqlite3_column_int64(st, 1);
        }
    }
    if (!rc && s != SQLITE_DONE)
        rc = ms__actx_db_fail(x, "events");
    sqlite3_finalize(st);
    ms__live_release(&live);
    return rc;
}

/* The blocks of heap and mmap live at h's peak event, by call site, into r. */
static int host_peak_sites(struct ms_actx *x, const struct host_peak *h, struct ms_budget_result *r)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(x->db,
                           "SELECT stack_id, count(*), sum(size) FROM blocks WHERE process_id = ?1 "
                           "AND layer IN (1, 2) AND alloc_event_id <= ?2 AND (free_ns IS NULL OR "
                           "free_event_id > ?2 OR (free_event_id IS NULL AND free_ns > ?3)) "
                           "GROUP BY stack_id",
                           -1, &st, NULL) != SQLITE_OK)
        return ms__actx_db_fail(x, "blocks");
    sqlite3_bind_int64(st, 1, h->process_id);
    sqlite3_bind_int64(st, 2, h->event_id);
    sqlite3_bind_int64(st, 3, h->ns);
    struct live_sites L;
    memset(&L, 0, sizeof L);
    int rc = 0, s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *site = ms__sites_get(&x->sites, sqlite3_column_int64(st, 0));
        if (!site || ms_grow((void **)&L.v, &L.cap, L.n, sizeof *L.v, 64, MS_GROW_MAX) < 0) {
            rc = ms__actx_oom(x);
            break;
        }
        L.v[L.n++] =
            (struct site_sum){site, sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 1)};
    }
    if (!rc && s != SQLITE_DONE)
        rc = ms__actx_db_fail(x, "blocks");
    sqlite3_finalize(st);
    if (!rc && L.n) {
        qsort(L.v, L.n, sizeof *L.v, cmp_sum_site);
        size_t w = 0;
        for (size_t i = 1; i < L.n; i++) {
            if (L.v[i].site == L.v[w].site) {
                L.v[w].bytes += L.v[i].bytes;
                L.v[w].blocks += L.v[i].blocks;
            } else {
                L.v[++w] = L.v[i];
            }
        }
        L.n = w + 1;
        qsort(L.v, L.n, sizeof *L.v, cmp_sum_bytes);
        for (size_t i = 0; i < L.n; i++)
            add_site(r->sites, &r->nsites, &r->more_sites, L.v[i].site, L.v[i].bytes, L.v[i].blocks,
                     0);
    }
    free(L.v);
    return rc;
}

/* Fills p[0..n) (their process ids set by the caller) from table host_peaks, which the
 * conversion writes (the same first maximum as host_peaks_replay's). Returns 1 when every one
 * has its row, 0 when not (a database of an older memscope: replayed), or a negative code. */
static int host_peaks_table(struct ms_actx *x, struct host_peak *p, size_t n)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(x->db,
                           "SELECT peak_bytes, coalesce(peak_event_id, 0), coalesce(peak_ns, 0) "
                           "FROM host_peaks WHERE process_id = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return 0; /* no such table */
    int rc = 1;
    for (size_t i = 0; i < n && rc == 1; i++) {
        sqlite3_bind_int64(st, 1, p[i].process_id);
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) {
            p[i].bytes = sqlite3_column_int64(st, 0);
            p[i].event_id = sqlite3_column_int64(st, 1);
            p[i].ns = sqlite3_column_int64(st, 2);
        } else {
            rc = s == SQLITE_DONE ? 0 : ms__actx_db_fail(x, "host_peaks");
        }
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    return rc;
}

/* The default budget of --max-peak: each process's peak of heap and mmap together. A process
 * that used one of the two has that layer's peak (analyze peak's, exact and cheap); one that
 * used both has it in host_peaks, computed by the conversion, and the blocks live at it in
 * blocks (a compact database keeps them). A database without those rows (an older memscope's)
 * is replayed from the events of its full database (a compact one is expanded into a private
 * temporary directory first: ms_store_full_open). */
static int check_host_peak(struct ms_actx *x, const char *db_path, const struct ms_budget *b,
                           const struct ms_peak_top *p, size_t n, struct ms_budget_result *r)
{
    struct host_peak both[64];
    size_t nboth = 0;
    const struct ms_peak_top *worst = NULL; /* among processes with one layer */
    int64_t worst_bytes = -1;
    for (size_t i = 0; i < n; i++) {
        if (p[i].layer != MS_LAYER_HEAP && p[i].layer != MS_LAYER_MMAP)
            continue;
        const struct ms_peak_top *other = NULL;
        for (size_t k = 0; k < n; k++)
            if (k != i && p[k].process_id == p[i].process_id &&
                (p[k].layer == MS_LAYER_HEAP || p[k].layer == MS_LAYER_MMAP) && p[k].bytes > 0)
                other = &p[k];
        if (other && p[i].bytes > 0) { /* both layers: replayed below (once per process) */
            if (p[i].layer == MS_LAYER_HEAP && nboth < sizeof both / sizeof both[0])
                both[nboth++] = (struct host_peak){.process_id = p[i].process_id};
            continue;
        }
        r->exceeded += p[i].bytes > (int64_t)b->limit;
        if (p[i].bytes > worst_bytes) {
            worst = &p[i];
            worst_bytes = p[i].bytes;
        }
    }
    int rc = 0;
    struct ms_store_full full = {{0}, {0}};
    sqlite3 *fdb = NULL;
    struct ms_actx fx;
    int fx_ok = 0;
    const struct host_peak *hw = NULL;
    int from_table = 0;
    if (nboth && (from_table = host_peaks_table(x, both, nboth)) < 0)
        return from_table;
    if (nboth && from_table) {
        for (size_t i = 0; i < nboth; i++) {
            r->exceeded += both[i].bytes > (int64_t)b->limit;
            if (both[i].bytes > worst_bytes) {
                hw = &both[i];
                worst_bytes = both[i].bytes;
            }
        }
    } else if (nboth) {
        if ((rc = ms_store_full_open(&full, db_path, x->err, x->errlen)) < 0)
            return rc;
        if ((rc = ms_analyze_open(full.path, 0, &fdb, x->err, x->errlen)) == 0 &&
            (rc = ms__actx_init(&fx, "budget", fdb, x->o, NULL, x->err, x->errlen)) == 0) {
            fx_ok = 1;
            rc = host_peaks_replay(&fx, both, nboth);
        }
        for (size_t i = 0; !rc && i < nboth; i++) {
            r->exceeded += both[i].bytes > (int64_t)b->limit;
            if (both[i].bytes > worst_bytes) {
                hw = &both[i];
                worst_bytes = both[i].bytes;
            }
        }
    }
    if (!rc && hw) {
        r->measured = hw->bytes;
        where_of(x, hw->process_id, MS_LAYER_HEAP, r->where, sizeof r->where);
        snprintf(r->where + strlen(r->where), sizeof r->where - strlen(r->where), "+mmap");
        rc = host_peak_sites(fx_ok ? &fx : x, hw, r);
    } else if (!rc && worst) {
        r->measured = worst->bytes;
        where_of(x, worst->process_id, worst->layer, r->where, sizeof r->where);
        for (size_t i = 0; i < worst->ntop; i++)
            add_site(r->sites, &r->nsites, &r->more_sites, worst->top[i].site, worst->top[i].bytes,
                     worst->top[i].blocks, 0);
        r->more_sites += worst->nsites - worst->ntop;
    }
    r->failed = r->exceeded > 0;
    if (fx_ok)
        ms__actx_release(&fx);
    if (fdb)
        sqlite3_close(fdb);
    if (nboth && !from_table)
        ms_store_full_close(&full);
    return rc;
}

static int check_peak(struct ms_actx *x, const char *db_path, const struct ms_budget *b,
                      struct ms_budget_result *r)
{
    struct layer_sel s;
    int rc = layers_select(x->db, b->layer, &s, x->err, x->errlen);
    if (rc)
        return rc;
    struct ms_peak_top *p;
    size_t n;
    if ((rc = ms__peaks_top(x, &p, &n)) < 0)
        return rc;
    if (!b->layer[0]) {
        rc = check_host_peak(x, db_path, b, p, n, r);
        free(p);
        return rc;
    }
    const struct ms_peak_top *worst = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!layer_in(&s, p[i].layer))
            continue;
        r->exceeded += p[i].bytes > (int64_t)b->limit;
        if (!worst || p[i].bytes > worst->bytes)
            worst = &p[i];
    }
    if (worst) {
        r->measured = worst->bytes;
        r->failed = r->exceeded > 0;
        where_of(x, worst->process_id, worst->layer, r->where, sizeof r->where);
        for (size_t i = 0; i < worst->ntop; i++)
            add_site(r->sites, &r->nsites, &r->more_sites, worst->top[i].site, worst->top[i].bytes,
                     worst->top[i].blocks, 0);
        r->more_sites += worst->nsites - worst->ntop;
    }
    free(p);
    return 0;
}

int ms_budget_check(const char *db_path, const struct ms_budget *b, struct ms_suppressions *sup,
                    struct ms_budget_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    sqlite3 *db;
    int rc = ms_analyze_open(db_path, 0, &db, err, errlen);
    if (rc < 0)
        return rc;
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    o.top = MS_BUDGET_SITES;
    struct ms_actx x;
    rc = ms__actx_init(&x, "budget", db, &o, NULL, err, errlen);
    if (rc == 0) {
        switch (b->kind) {
        case MS_BUDGET_LEAK: rc = check_leak(&x, b, sup, r); break;
        case MS_BUDGET_STEP_LEAK: rc = check_step_leak(&x, r); break;
        case MS_BUDGET_PEAK: rc = check_peak(&x, db_path, b, r); break;
        }
    }
    ms__actx_release(&x);
    sqlite3_close(db);
    return rc;
}

/* ---- Gates between two runs ---- */

int ms_gate_parse(struct ms_gate *g, int is_peak, const char *value, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->is_peak = is_peak;
    size_t n = strlen(value);
    if (n && value[n - 1] == '%') {
        char num[64];
        char *end;
        if (n - 1 >= sizeof num || n == 1)
            goto bad;
        memcpy(num, value, n - 1);
        num[n - 1] = 0;
        if (num[0] < '0' || num[0] > '9')
            goto bad;
        g->threshold = strtod(num, &end);
        if (*end || g->threshold < 0 || g->threshold > 1e9)
            goto bad;
        g->pct = 1;
        return 0;
    }
    uint64_t v;
    if (ms_size_parse(value, &v) < 0)
        goto bad;
    g->threshold = (double)v;
    return 0;
bad:
    return ms_errf(err, errlen, MS_EINVAL,
                   "--fail-if-%s-grows: expected a percentage (10%%) or a size (1 MiB, 4096), not "
                   "'%s'",
                   is_peak ? "peak" : "leak", value);
}

/* One side of a gate: the measure and its sites. */
struct side {
    int64_t value;
    struct site_sum *v; /* site strings copied (the two databases' interned strings differ) */
    size_t n;
};

static void side_release(struct side *s)
{
    for (size_t i = 0; i < s->n; i++)
        free((char *)s->v[i].site);
    free(s->v);
}

static int side_measure(const char *path, const struct ms_gate *g, const char *layer,
                        struct side *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    sqlite3 *db;
    int rc = ms_analyze_open(path, 0, &db, err, errlen);
    if (rc < 0)
        return rc;
    struct ms_analyze_opts o;
    ms_analyze_opts_init(&o);
    o.top = MS_PEAK_TOP;
    struct ms_actx x;
    struct layer_sel s;
    struct ms_budget_result r; /* the peak's sites point into it until copied */
    struct site_sum *v = NULL;
    size_t n = 0;
    if ((rc = ms__actx_init(&x, "compare", db, &o, NULL, err, errlen)) == 0 &&
        (rc = layers_select(db, layer, &s, err, errlen)) == 0) {
        if (g->is_peak) { /* the budgets' peak: heap and mmap together, or the layers */
            struct ms_budget b = {.kind = MS_BUDGET_PEAK, .limit = UINT64_MAX >> 1};
            snprintf(b.layer, sizeof b.layer, "%s", layer);
            memset(&r, 0, sizeof r);
            if ((rc = check_peak(&x, path, &b, &r)) == 0) {
                out->value = r.measured;
                if (!(v = calloc(r.nsites ? r.nsites : 1, sizeof *v)))
                    rc = ms__actx_oom(&x);
                for (size_t i = 0; !rc && i < r.nsites; i++)
                    v[n++] =
                        (struct site_sum){r.sites[i].site, r.sites[i].bytes, r.sites[i].blocks};
            }
        } else {
            struct live_sites L;
            if ((rc = live_sites(&x, &s, NULL, &L)) == 0) {
                out->value = L.bytes;
                v = L.v;
                n = L.n;
            }
        }
    }
    /* copy the site strings out of x's interning */
    if (!rc && n && !(out->v = calloc(n, sizeof *out->v)))
        rc = ms__actx_oom(&x);
    for (size_t i = 0; !rc && i < n; i++) {
        out->v[i] = v[i];
        if (!(out->v[i].site = strdup(v[i].site)))
            rc = ms__actx_oom(&x);
        else
            out->n++;
    }
    free(v);
    ms__actx_release(&x);
    sqlite3_close(db);
    if (rc)
        side_release(out);
    return rc;
}

static int cmp_growth(const void *a, const void *b)
{
    const struct site_sum *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->site, y->site);
}

int ms_gate_check(const char *base, const char *new_db, const struct ms_gate *g, const char *layer,
                  struct ms_gate_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    struct side a, b;
    int rc = side_measure(base, g, layer, &a, err, errlen);
    if (rc < 0)
        return rc;
    if ((rc = side_measure(new_db, g, layer, &b, err, errlen)) < 0) {
        side_release(&a);
        return rc;
    }
    r->base = a.value;
    r->now = b.value;
    double grown = (double)(b.value - a.value);
    if (g->pct)
        r->failed = a.value > 0 ? grown * 100.0 / (double)a.value > g->threshold : b.value > 0;
    else
        r->failed = grown > g->threshold;
    /* the sites that grew: NEW's bytes minus BASE's for the same site text */
    struct site_sum *gr = b.n ? calloc(b.n, sizeof *gr) : NULL;
    size_t ng = 0;
    if (b.n && !gr) {
        snprintf(err, errlen, "compare: out of memory");
        rc = MS_ENOMEM;
    }
    for (size_t i = 0; !rc && i < b.n; i++) {
        int64_t was = 0;
        for (size_t k = 0; k < a.n; k++)
            if (!strcmp(a.v[k].site, b.v[i].site))
                was = a.v[k].bytes;
        if (b.v[i].bytes > was)
            gr[ng++] = (struct site_sum){b.v[i].site, b.v[i].bytes - was, b.v[i].blocks};
    }
    if (ng)
        qsort(gr, ng, sizeof *gr, cmp_growth);
    for (size_t i = 0; i < ng; i++)
        add_site(r->sites, &r->nsites, &r->more_sites, gr[i].site, gr[i].bytes, gr[i].blocks, 0);
    free(gr);
    side_release(&a);
    side_release(&b);
    return rc;
}
