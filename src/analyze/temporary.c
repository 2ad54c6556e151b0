/* temporary.c: `memscope analyze temporary`: allocations freed right after they were made, by
 * call site (heaptrack's "temporary allocations").
 *
 * Definition (heaptrack's AccumulatedTraceData, applied per thread): a block is temporary when
 * its FREE is the next MALLOC or FREE event of the allocating thread after its MALLOC, that is,
 * no other allocation and no other free happened on that thread in between. heaptrack keeps
 * one "last allocation" for the whole process and clears it on every free; memscope keeps one
 * per thread, so another thread's work in between does not hide a temporary. A realloc is a
 * FREE then a MALLOC (docs/database.md), so realloc of a block just allocated makes it
 * temporary, as in heaptrack.
 *
 * Called through ms_analyses[]. Workload: one rowid-order scan of events; per thread the last
 * allocation, per stack a counter. A compact database has the counts already (site_stats, made
 * by the conversion with the same rule over the default layers): one read of that table. */
#include "analyze.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

#define MAX_THREADS (1 << 22)

struct site_stat {
    int64_t process_id, layer, stack;
    const char *site;
    int64_t allocs, bytes, temporary, temp_bytes;
};

struct last_alloc {
    int64_t alloc_id; /* 0: none pending */
    size_t stat;      /* its site_stat index */
};

static int cmp_key(const void *a, const void *b)
{
    const struct site_stat *x = a, *y = b;
    if (x->process_id != y->process_id)
        return x->process_id < y->process_id ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return strcmp(x->site, y->site);
}

static int cmp_temp(const void *a, const void *b)
{
    const struct site_stat *x = a, *y = b;
    if (x->process_id != y->process_id)
        return x->process_id < y->process_id ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    if (x->temporary != y->temporary)
        return x->temporary > y->temporary ? -1 : 1;
    if (x->temp_bytes != y->temp_bytes)
        return x->temp_bytes > y->temp_bytes ? -1 : 1;
    return strcmp(x->site, y->site);
}

/* The result: one row per (process, layer, call site), grouped by (process, layer) and ranked
 * by temporaries within a group; and the totals. */
struct tresult {
    struct site_stat *v;
    size_t n, cap;
    int64_t allocs, temporary, temp_bytes;
};

/* The scan of the MALLOC and FREE rows of the selected layers, in id order. */
struct tscan {
    struct tresult *r;
    struct last_alloc *threads;
    size_t nthreads;
    struct ms_u64map bykey;     /* (stack or process, layer) -> r->v index */
    struct ms_layer_set layers; /* a compact database's replay */
};

static int on_row(struct tscan *x, int kind, int64_t layer, int64_t proc, int64_t tid,
                  int64_t alloc_id, int64_t stack, int64_t size)
{
    if (tid < 0 || tid >= MAX_THREADS)
        return MS_ELIMIT;
    if ((size_t)tid >= x->nthreads) {
        size_t nn = (size_t)tid + 64;
        struct last_alloc *nt = realloc(x->threads, nn * sizeof *nt);
        if (!nt)
            return MS_ENOMEM;
        memset(nt + x->nthreads, 0, (nn - x->nthreads) * sizeof *nt);
        x->threads = nt;
        x->nthreads = nn;
    }
    struct last_alloc *t = &x->threads[tid];
    if (kind == MS_KIND_FREE) {
        if (alloc_id && t->alloc_id == alloc_id) {
            x->r->v[t->stat].temporary++;
            x->r->v[t->stat].temp_bytes += size;
            x->r->temporary++;
            x->r->temp_bytes += size;
        }
        t->alloc_id = 0;
        return 0;
    }
    /* Stack ids are unique over the database; without a stack, key by process (layers are
     * below 4096). */
    int64_t key = stack > 0 ? stack * 4096 + (layer & 4095) : -((proc * 4096 + (layer & 4095)) + 1);
    int isnew;
    size_t *slot = ms_u64map_put(&x->bykey, key, &isnew);
    if (!slot)
        return MS_ENOMEM;
    if (isnew) {
        struct tresult *r = x->r;
        if (r->n == r->cap &&
            ms_grow((void **)&r->v, &r->cap, r->n, sizeof *r->v, 256, MS_GROW_MAX) < 0)
            return MS_ENOMEM;
        memset(&r->v[r->n], 0, sizeof r->v[r->n]);
        r->v[r->n].process_id = proc;
        r->v[r->n].layer = layer;
        r->v[r->n].stack = stack > 0 ? stack : 0;
        *slot = r->n++;
    }
    struct site_stat *ss = &x->r->v[*slot];
    ss->allocs++;
    ss->bytes += size;
    x->r->allocs++;
    t->alloc_id = alloc_id;
    t->stat = *slot;
    return 0;
}

static int on_replayed(void *ctx, const struct ms_store_row *r)
{
    struct tscan *x = ctx;
    if ((r->kind != MS_KIND_MALLOC && r->kind != MS_KIND_FREE) ||
        !ms__layer_selected(&x->layers, r->layer))
        return 0;
    return on_row(x, r->kind, r->layer, r->process_id, r->thread_id, r->allocation_id, r->stack_id,
                  r->has_size ? r->size : 0);
}

/* The counts a compact database's conversion made (site_stats, for the default layers). */
static int from_site_stats(struct ms_actx *x, const char *layer_sql, struct tresult *r)
{
    sqlite3_stmt *st;
    if (ms__prepare(x->db, &st,
                    "SELECT process_id, layer, stack_id, allocs, alloc_bytes, temporary, "
                    "temporary_bytes FROM site_stats e WHERE %s",
                    layer_sql) != SQLITE_OK)
        return ms__actx_db_fail(x, "site_stats");
    int rc = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (r->n == r->cap &&
            ms_grow((void **)&r->v, &r->cap, r->n, sizeof *r->v, 256, MS_GROW_MAX) < 0) {
            rc = ms__actx_oom(x);
            break;
        }
        struct site_stat *ss = &r->v[r->n++];
        memset(ss, 0, sizeof *ss);
        ss->process_id = sqlite3_column_int64(st, 0);
        ss->layer = sqlite3_column_int64(st, 1);
        ss->stack = sqlite3_column_int64(st, 2);
        ss->allocs = sqlite3_column_int64(st, 3);
        ss->bytes = sqlite3_column_int64(st, 4);
        ss->temporary = sqlite3_column_int64(st, 5);
        ss->temp_bytes = sqlite3_column_int64(st, 6);
        r->allocs += ss->allocs;
        r->temporary += ss->temporary;
        r->temp_bytes += ss->temp_bytes;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The counts from the events: a full database's rows, or a compact one's traces replayed. */
static int from_events(struct ms_actx *x, const char *layer_sql, struct tresult *r)
{
    struct tscan t = {.r = r, .layers = {0}};
    ms_u64map_init(&t.bykey, sizeof(size_t), MS_U64MAP_MAX);
    int rc = 0;
    if (ms_store_is_compact(x->db)) { /* one layer: the rows from its traces */
        if ((rc = ms__layer_set_load(x->db, x->o, &t.layers)) == 0)
            rc = ms_store_replay(sqlite3_db_filename(x->db, "main"), on_replayed, &t, x->err,
                                 x->errlen);
    } else {
        sqlite3_stmt *st;
        if (ms__prepare(x->db, &st,
                        "SELECT kind, layer, process_id, thread_id, allocation_id, stack_id, size "
                        "FROM events e WHERE kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE ") AND %s "
                        "ORDER BY id",
                        layer_sql) != SQLITE_OK) {
            rc = ms__actx_db_fail(x, "events");
            goto out;
        }
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW &&
               (rc = on_row(&t, sqlite3_column_int(st, 0), sqlite3_column_int64(st, 1),
                            sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                            sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                            sqlite3_column_int64(st, 6))) == 0)
            ;
        if (rc == 0 && s != SQLITE_DONE)
            rc = ms__actx_db_fail(x, "events");
        sqlite3_finalize(st);
    }
    if (rc == MS_ELIMIT && !x->err[0])
        snprintf(x->err, x->errlen, "temporary: a thread id out of range");
    if (rc == MS_ENOMEM)
        rc = ms__actx_oom(x);
out:
    free(t.threads);
    ms_u64map_release(&t.bykey);
    ms__layer_set_release(&t.layers);
    return rc;
}

/* Fills r: the counts, stacks turned into call sites and merged, groups ranked. */
static int compute(struct ms_actx *x, struct tresult *r)
{
    char *layer_sql = ms__layer_filter(x->db, x->o, "e.layer");
    if (!layer_sql)
        return ms__actx_oom(x);
    int rc = !x->o->layer && ms__computed(x->db, "site_stats") ? from_site_stats(x, layer_sql, r)
                                                               : from_events(x, layer_sql, r);
    sqlite3_free(layer_sql);
    if (rc < 0)
        return rc;
    struct site_stat *v = r->v;
    for (size_t i = 0; i < r->n; i++)
        if (!(v[i].site = ms__sites_get(&x->sites, v[i].stack)))
            return ms__actx_oom(x);
    if (r->n) {
        qsort(v, r->n, sizeof *v, cmp_key);
        size_t w = 0;
        for (size_t i = 1; i < r->n; i++) {
            if (!cmp_key(&v[w], &v[i])) {
                v[w].allocs += v[i].allocs;
                v[w].bytes += v[i].bytes;
                v[w].temporary += v[i].temporary;
                v[w].temp_bytes += v[i].temp_bytes;
            } else {
                v[++w] = v[i];
            }
        }
        r->n = w + 1;
        qsort(v, r->n, sizeof *v, cmp_temp);
    }
    return 0;
}

/* The end of the (process, layer) group starting at i, with its temporaries and allocations. */
static size_t group_end(const struct tresult *r, size_t i, int64_t *temporary, int64_t *allocs)
{
    size_t e = i;
    *temporary = *allocs = 0;
    while (e < r->n && r->v[e].process_id == r->v[i].process_id && r->v[e].layer == r->v[i].layer) {
        *temporary += r->v[e].temporary;
        *allocs += r->v[e].allocs;
        e++;
    }
    return e;
}

static void render_text(struct ms_actx *x, const struct tresult *r)
{
    FILE *out = x->out;
    const size_t top = (size_t)(x->o->top > 0 ? x->o->top : 10);
    fprintf(out, "temporary: allocations freed before any other allocation or free on "
                 "their thread\n");
    fprintf(out, "  %lld temporary of %lld allocations (%.1f%%), %lld bytes\n",
            (long long)r->temporary, (long long)r->allocs,
            r->allocs ? 100.0 * (double)r->temporary / (double)r->allocs : 0.0,
            (long long)r->temp_bytes);
    int64_t gt, ga;
    for (size_t i = 0, e; i < r->n; i = e) {
        e = group_end(r, i, &gt, &ga);
        if (gt == 0)
            continue;
        const struct site_stat *v = r->v;
        const struct ms_name_proc *p = ms__names_proc(&x->names, v[i].process_id);
        fprintf(out, "  process %lld %s (pid %lld), %s: %lld temporary of %lld allocations\n",
                (long long)v[i].process_id, p ? p->exe : "?", (long long)(p ? p->pid : 0),
                ms__names_layer(&x->names, v[i].layer), (long long)gt, (long long)ga);
        fprintf(out, "  %10s %10s %7s %12s  %s\n", "temporary", "allocs", "temp%", "temp bytes",
                "call site");
        for (size_t k = i; k < e && k - i < top && v[k].temporary > 0; k++)
            fprintf(out, "  %10lld %10lld %6.1f%% %12lld  %s\n", (long long)v[k].temporary,
                    (long long)v[k].allocs, 100.0 * (double)v[k].temporary / (double)v[k].allocs,
                    (long long)v[k].temp_bytes, v[k].site);
    }
}

static void render_json(struct ms_actx *x, const struct tresult *r)
{
    const size_t top = (size_t)(x->o->top > 0 ? x->o->top : 10);
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "temporary");
    ms_json_int(&j, "allocations", r->allocs);
    ms_json_int(&j, "temporary", r->temporary);
    ms_json_int(&j, "temporary_bytes", r->temp_bytes);
    ms_json_begin_array(&j, "groups");
    int64_t gt, ga;
    for (size_t i = 0, e; i < r->n; i = e) {
        e = group_end(r, i, &gt, &ga);
        if (gt == 0)
            continue;
        const struct site_stat *v = r->v;
        const struct ms_name_proc *p = ms__names_proc(&x->names, v[i].process_id);
        ms_json_begin_object(&j, NULL);
        ms_json_int(&j, "process_id", v[i].process_id);
        ms_json_int(&j, "pid", p ? p->pid : 0);
        ms_json_str(&j, "exe", p ? p->exe : NULL);
        ms_json_str(&j, "layer", ms__names_layer(&x->names, v[i].layer));
        ms_json_int(&j, "allocations", ga);
        ms_json_int(&j, "temporary", gt);
        ms_json_begin_array(&j, "sites");
        for (size_t k = i; k < e && k - i < top && v[k].temporary > 0; k++) {
            ms_json_begin_object(&j, NULL);
            ms_json_str(&j, "site", v[k].site);
            ms_json_int(&j, "temporary", v[k].temporary);
            ms_json_int(&j, "allocations", v[k].allocs);
            ms_json_int(&j, "temporary_bytes", v[k].temp_bytes);
            ms_json_end_object(&j);
        }
        ms_json_end_array(&j);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

int ms_analyze_temporary(struct ms_actx *x)
{
    struct tresult r = {0};
    int rc = compute(x, &r);
    if (rc == 0)
        (x->o->json ? render_json : render_text)(x, &r);
    free(r.v);
    return rc;
}
