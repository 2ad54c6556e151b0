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

/* The scan of the MALLOC and FREE rows of the selected layers, in id order. */
struct tscan {
    struct site_stat *v;
    size_t n, cap;
    struct last_alloc *threads;
    size_t nthreads;
    struct ms_imap *bykey; /* (stack or process, layer) -> v index */
    int64_t allocs, temporary, temp_bytes;
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
            x->v[t->stat].temporary++;
            x->v[t->stat].temp_bytes += size;
            x->temporary++;
            x->temp_bytes += size;
        }
        t->alloc_id = 0;
        return 0;
    }
    /* Stack ids are unique over the database; without a stack, key by process (layers are
     * below 4096). */
    int64_t key = stack > 0 ? stack * 4096 + (layer & 4095) : -((proc * 4096 + (layer & 4095)) + 1);
    int isnew;
    size_t *slot = ms__imap_put(x->bykey, key, &isnew);
    if (!slot)
        return MS_ENOMEM;
    if (isnew) {
        if (x->n == x->cap &&
            ms_grow((void **)&x->v, &x->cap, x->n, sizeof *x->v, 256, MS_GROW_MAX) < 0)
            return MS_ENOMEM;
        memset(&x->v[x->n], 0, sizeof x->v[x->n]);
        x->v[x->n].process_id = proc;
        x->v[x->n].layer = layer;
        x->v[x->n].stack = stack > 0 ? stack : 0;
        *slot = x->n++;
    }
    struct site_stat *ss = &x->v[*slot];
    ss->allocs++;
    ss->bytes += size;
    x->allocs++;
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

int ms_analyze_temporary(sqlite3 *db, const struct ms_analyze_opts *o, FILE *out, char *err,
                         size_t errlen)
{
    struct ms_names names;
    int rc = ms__names_load(db, &names, err, errlen);
    if (rc < 0)
        return rc;
    struct ms_sites sites;
    ms__sites_init(&sites, db);
    struct ms_imap bykey;
    ms__imap_init(&bykey, sizeof(size_t));
    struct site_stat *v = NULL;
    size_t n = 0, cap = 0;
    struct last_alloc *threads = NULL;
    int64_t allocs = 0, temporary = 0, temp_bytes = 0;
    sqlite3_stmt *st = NULL;
    char layer_sql[256], sql[512];
    ms__layer_filter(db, o, "e.layer", layer_sql, sizeof layer_sql);
    if (!o->layer && ms__computed(db, "site_stats")) {
        /* the conversion counted them (site_stats, for the default layers) */
        snprintf(sql, sizeof sql,
                 "SELECT process_id, layer, stack_id, allocs, alloc_bytes, temporary, "
                 "temporary_bytes FROM site_stats e WHERE %s",
                 layer_sql);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "temporary: site_stats: %s", sqlite3_errmsg(db));
            rc = MS_EDB;
            goto out;
        }
        while (sqlite3_step(st) == SQLITE_ROW) {
            if (n == cap && ms_grow((void **)&v, &cap, n, sizeof *v, 256, MS_GROW_MAX) < 0)
                goto oom;
            struct site_stat *ss = &v[n++];
            memset(ss, 0, sizeof *ss);
            ss->process_id = sqlite3_column_int64(st, 0);
            ss->layer = sqlite3_column_int64(st, 1);
            ss->stack = sqlite3_column_int64(st, 2);
            ss->allocs = sqlite3_column_int64(st, 3);
            ss->bytes = sqlite3_column_int64(st, 4);
            ss->temporary = sqlite3_column_int64(st, 5);
            ss->temp_bytes = sqlite3_column_int64(st, 6);
            allocs += ss->allocs;
            temporary += ss->temporary;
            temp_bytes += ss->temp_bytes;
        }
        goto sites;
    }
    struct tscan x = {.bykey = &bykey, .layers = {0}};
    if (ms_store_is_compact(db)) { /* one layer: the rows from its traces */
        if ((rc = ms__layer_set_load(db, o, &x.layers)) == 0)
            rc = ms_store_replay(sqlite3_db_filename(db, "main"), on_replayed, &x, err, errlen);
    } else {
        snprintf(sql, sizeof sql,
                 "SELECT kind, layer, process_id, thread_id, allocation_id, stack_id, size "
                 "FROM events e WHERE kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE ") AND %s "
                 "ORDER BY id",
                 layer_sql);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
            snprintf(err, errlen, "temporary: events: %s", sqlite3_errmsg(db));
            rc = MS_EDB;
            goto out;
        }
        int s;
        while ((s = sqlite3_step(st)) == SQLITE_ROW &&
               (rc = on_row(&x, sqlite3_column_int(st, 0), sqlite3_column_int64(st, 1),
                            sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                            sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                            sqlite3_column_int64(st, 6))) == 0)
            ;
        if (rc == 0 && s != SQLITE_DONE) {
            snprintf(err, errlen, "temporary: events: %s", sqlite3_errmsg(db));
            rc = MS_EDB;
        }
    }
    v = x.v;
    n = x.n;
    threads = x.threads;
    allocs = x.allocs;
    temporary = x.temporary;
    temp_bytes = x.temp_bytes;
    if (rc == MS_ELIMIT && !err[0])
        snprintf(err, errlen, "temporary: a thread id out of range");
    if (rc == MS_ENOMEM)
        goto oom;
    if (rc < 0)
        goto out;

sites:
    /* Stacks -> call sites. */
    for (size_t i = 0; i < n; i++)
        if (!(v[i].site = ms__sites_get(&sites, v[i].stack)))
            goto oom;
    if (n) {
        qsort(v, n, sizeof *v, cmp_key);
        size_t w = 0;
        for (size_t i = 1; i < n; i++) {
            if (!cmp_key(&v[w], &v[i])) {
                v[w].allocs += v[i].allocs;
                v[w].bytes += v[i].bytes;
                v[w].temporary += v[i].temporary;
                v[w].temp_bytes += v[i].temp_bytes;
            } else {
                v[++w] = v[i];
            }
        }
        n = w + 1;
        qsort(v, n, sizeof *v, cmp_temp);
    }

    const int top = o->top > 0 ? o->top : 10;
    struct ms_json j;
    if (o->json) {
        ms_json_init(&j, out);
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "analysis", "temporary");
        ms_json_int(&j, "allocations", allocs);
        ms_json_int(&j, "temporary", temporary);
        ms_json_int(&j, "temporary_bytes", temp_bytes);
        ms_json_begin_array(&j, "groups");
    } else {
        fprintf(out, "temporary: allocations freed before any other allocation or free on "
                     "their thread\n");
        fprintf(out, "  %lld temporary of %lld allocations (%.1f%%), %lld bytes\n",
                (long long)temporary, (long long)allocs,
                allocs ? 100.0 * (double)temporary / (double)allocs : 0.0, (long long)temp_bytes);
    }
    for (size_t i = 0; i < n;) {
        size_t e = i;
        int64_t gt = 0, ga = 0;
        while (e < n && v[e].process_id == v[i].process_id && v[e].layer == v[i].layer) {
            gt += v[e].temporary;
            ga += v[e].allocs;
            e++;
        }
        if (gt == 0) {
            i = e;
            continue;
        }
        const struct ms_name_proc *p = ms__names_proc(&names, v[i].process_id);
        const char *lname = ms__names_layer(&names, v[i].layer);
        if (o->json) {
            ms_json_begin_object(&j, NULL);
            ms_json_int(&j, "process_id", v[i].process_id);
            ms_json_int(&j, "pid", p ? p->pid : 0);
            ms_json_str(&j, "exe", p ? p->exe : NULL);
            ms_json_str(&j, "layer", lname);
            ms_json_int(&j, "allocations", ga);
            ms_json_int(&j, "temporary", gt);
            ms_json_begin_array(&j, "sites");
        } else {
            fprintf(out, "  process %lld %s (pid %lld), %s: %lld temporary of %lld allocations\n",
                    (long long)v[i].process_id, p ? p->exe : "?", (long long)(p ? p->pid : 0),
                    lname, (long long)gt, (long long)ga);
            fprintf(out, "  %10s %10s %7s %12s  %s\n", "temporary", "allocs", "temp%", "temp bytes",
                    "call site");
        }
        size_t shown = 0;
        for (size_t k = i; k < e && shown < (size_t)top && v[k].temporary > 0; k++, shown++) {
            double pct = 100.0 * (double)v[k].temporary / (double)v[k].allocs;
            if (o->json) {
                ms_json_begin_object(&j, NULL);
                ms_json_str(&j, "site", v[k].site);
                ms_json_int(&j, "temporary", v[k].temporary);
                ms_json_int(&j, "allocations", v[k].allocs);
                ms_json_int(&j, "temporary_bytes", v[k].temp_bytes);
                ms_json_end_object(&j);
            } else {
                fprintf(out, "  %10lld %10lld %6.1f%% %12lld  %s\n", (long long)v[k].temporary,
                        (long long)v[k].allocs, pct, (long long)v[k].temp_bytes, v[k].site);
            }
        }
        if (o->json) {
            ms_json_end_array(&j);
            ms_json_end_object(&j);
        }
        i = e;
    }
    if (o->json) {
        ms_json_end_array(&j);
        ms_json_end_object(&j);
        ms_json_finish(&j);
    }
    goto out;
oom:
    snprintf(err, errlen, "temporary: out of memory");
    rc = MS_ENOMEM;
out:
    sqlite3_finalize(st);
    free(v);
    free(threads);
    ms__imap_release(&bykey);
    ms__sites_release(&sites);
    ms__names_release(&names);
    return rc;
}
