/* common.c: what every analysis shares: opening and checking the database, human-readable
 * sizes, the options' defaults, names, live-byte replay (call sites: site.c). */
#include "analyze.h"
#include "common/term_text.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"
#include "store/db_explain.h"
#include "store/store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ms_analyze_opts_init(struct ms_analyze_opts *o)
{
    memset(o, 0, sizeof *o);
    o->top = 10;
    o->warmup = 1;
    o->idle_threshold = 3000;
}

const struct ms_analysis *ms_analysis_find(const char *name)
{
    /* oom:K (msMemScope's form): K, the rows per OOM, is the conversion's (ms_oom_k) */
    if (!strncmp(name, "oom:", 4) && ms_oom_k(name) > 0)
        name = "oom";
    for (const struct ms_analysis *a = ms_analyses; a->name; a++)
        if (a->run && !strcmp(a->name, name))
            return a;
    return NULL;
}

unsigned ms_oom_k(const char *item)
{
    if (strncmp(item, "oom", 3))
        return 0;
    if (!item[3])
        return 10;
    unsigned k = 0;
    if (item[3] != ':' || !item[4])
        return 0;
    for (const char *p = item + 4; *p; p++) {
        if (*p < '0' || *p > '9' || k > 1000)
            return 0;
        k = k * 10 + (unsigned)(*p - '0');
    }
    return k >= 1 && k <= 1000 ? k : 0;
}

int ms_analyze_open(const char *path, int writable, sqlite3 **db, char *err, size_t errlen)
{
    *db = NULL;
    if (access(path, R_OK) != 0) {
        return ms_errf(err, errlen, MS_ENOTFOUND, "cannot open '%s': %s", path, strerror(errno));
    }
    int flags = writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
    if (sqlite3_open_v2(path, db, flags, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open '%s': %s", path, sqlite3_errmsg(*db));
        sqlite3_close(*db);
        *db = NULL;
        return MS_EDB;
    }
    /* Another process writing it (Insight, an analysis writing back): wait up to 5 s. */
    sqlite3_busy_timeout(*db, 5000);
    sqlite3_stmt *st = NULL;
    int version = -1, prc = sqlite3_prepare_v2(*db,
                                               "SELECT value FROM meta WHERE key = "
                                               "'format_version'",
                                               -1, &st, NULL);
    int src = prc == SQLITE_OK ? sqlite3_step(st) : prc;
    if (src == SQLITE_ROW)
        version = sqlite3_column_type(st, 0) == SQLITE_INTEGER ||
                          sqlite3_column_type(st, 0) == SQLITE_TEXT
                      ? sqlite3_column_int(st, 0)
                      : -1;
    sqlite3_finalize(st);
    if ((src & 0xff) == SQLITE_BUSY || (src & 0xff) == SQLITE_LOCKED) {
        snprintf(err, errlen,
                 "'%s' is locked by another process (waited 5 s); try again when "
                 "it is done",
                 path);
        sqlite3_close(*db);
        *db = NULL;
        return MS_EDB;
    }
    if (version < 1) {
        sqlite3_close(*db);
        *db = NULL;
        return ms_db_explain(path, err, errlen); /* damaged, truncated, or never one */
    }
    if (version > MS_DB_FORMAT_VERSION) {
        snprintf(err, errlen,
                 "'%s' has database format version %d, newer than this memscope "
                 "reads (%d); upgrade memscope",
                 path, version, MS_DB_FORMAT_VERSION);
        sqlite3_close(*db);
        *db = NULL;
        return MS_EVERSION;
    }
    char why[200];
    int rc = ms_store_check_sizes(*db, why, sizeof why);
    if (rc) {
        snprintf(err, errlen, "'%s': %s", path, why);
        sqlite3_close(*db);
        *db = NULL;
        return rc;
    }
    return 0;
}

void ms_human_bytes(char *out, size_t len, long long b)
{
    long long a = b < 0 ? -b : b;
    if (a < 10 * 1024)
        snprintf(out, len, "%lld B", b);
    else if (a < 10ll * 1024 * 1024)
        snprintf(out, len, "%.1f KiB", b / 1024.0);
    else if (a < 10ll * 1024 * 1024 * 1024)
        snprintf(out, len, "%.1f MiB", b / 1048576.0);
    else
        snprintf(out, len, "%.1f GiB", b / 1073741824.0);
}

/* Helpers shared by compare, inefficient, decompose and fragmentation (analyze.h). */

int ms__prepare(sqlite3 *db, sqlite3_stmt **st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    *st = NULL;
    if (!sql)
        return SQLITE_NOMEM;
    int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);
    sqlite3_free(sql);
    return rc;
}

int ms__has_column(sqlite3 *db, const char *table, const char *column)
{
    sqlite3_stmt *st;
    int found = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", -1, &st,
                           NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
    found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

char *ms__layer_filter(sqlite3 *db, const struct ms_analyze_opts *o, const char *col)
{
    if (o->layer > 0)
        return sqlite3_mprintf("%s = %d", col, o->layer);
    /* a subquery, not a list: any number of pools (a list cut at a fixed size broke the SQL) */
    if (ms__has_column(db, "pools", "reserve_layer"))
        return sqlite3_mprintf("%s > 0 AND %s NOT IN (SELECT reserve_layer FROM pools WHERE "
                               "reserve_layer IS NOT NULL)",
                               col, col);
    return sqlite3_mprintf("%s > 0", col);
}

int ms__layer_set_load(sqlite3 *db, const struct ms_analyze_opts *o, struct ms_layer_set *s)
{
    memset(s, 0, sizeof *s);
    s->layer = o->layer;
    sqlite3_stmt *st;
    if (o->layer > 0 || !ms__has_column(db, "pools", "reserve_layer"))
        return 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT DISTINCT reserve_layer FROM pools WHERE reserve_layer IS NOT "
                           "NULL ORDER BY 1",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    /* as ms__layer_filter: every pool's */
    size_t cap = 0;
    int rc = 0, step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if ((rc = ms_grow((void **)&s->reserve, &cap, (size_t)s->nreserve, sizeof *s->reserve, 16,
                          MS_GROW_MAX)) < 0)
            break;
        s->reserve[s->nreserve++] = sqlite3_column_int(st, 0);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = MS_EDB;
    sqlite3_finalize(st);
    if (rc < 0)
        ms__layer_set_release(s);
    return rc;
}

void ms__layer_set_release(struct ms_layer_set *s)
{
    free(s->reserve);
    s->reserve = NULL;
    s->nreserve = 0;
}

int ms__layer_selected(const struct ms_layer_set *s, int64_t layer)
{
    if (s->layer > 0)
        return layer == s->layer;
    if (layer <= 0)
        return 0;
    size_t lo = 0, hi = s->nreserve; /* sorted: a binary search */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->reserve[mid] == layer)
            return 0;
        if (s->reserve[mid] < layer)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 1;
}

int ms__computed(sqlite3 *db, const char *table)
{
    sqlite3_stmt *st;
    int yes = 0;
    if (ms__prepare(db, &st, "SELECT 1 FROM \"%w\" LIMIT 1", table) == SQLITE_OK)
        yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

int ms__retagged(sqlite3 *db)
{
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM meta WHERE key = 'retagged'", -1, &st, NULL) ==
        SQLITE_OK)
        yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

int64_t ms__run_start_ns(sqlite3 *db)
{
    sqlite3_stmt *st;
    int64_t t = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT COALESCE((SELECT CAST(value AS INTEGER) FROM meta "
                           "WHERE key = 'start_time_ns'), (SELECT MIN(ts_ns) FROM events), 0)",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        t = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return t;
}

/* ---- Helpers shared by leaks, peak, temporary and trend ---- */

static char *dup_text(const unsigned char *t)
{
    return t ? strdup((const char *)t) : NULL;
}

/* Grows *arr of *n pointers to hold index id; new slots are NULL. */
static int grow_ptrs(char ***arr, size_t *n, int64_t id)
{
    if (id < 0 || id > (1 << 24))
        return MS_ELIMIT;
    if ((size_t)id < *n)
        return 0;
    size_t old = *n;
    if (ms_grow((void **)arr, n, (size_t)id, sizeof **arr, 16, (1 << 24) + 1) < 0)
        return MS_ENOMEM;
    memset(*arr + old, 0, (*n - old) * sizeof **arr);
    return 0;
}

int ms__names_load(sqlite3 *db, struct ms_names *n, char *err, size_t errlen)
{
    memset(n, 0, sizeof *n);
    size_t cap = 0;
    sqlite3_stmt *st = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(db, "SELECT id, pid, exe FROM processes ORDER BY id", -1, &st, NULL) !=
        SQLITE_OK)
        goto db_fail;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (ms_grow((void **)&n->procs, &cap, n->nprocs, sizeof *n->procs, 16, MS_GROW_MAX) < 0)
            goto oom;
        struct ms_name_proc *p = &n->procs[n->nprocs++];
        p->id = sqlite3_column_int64(st, 0);
        p->pid = sqlite3_column_int64(st, 1);
        const char *exe = (const char *)sqlite3_column_text(st, 2);
        const char *base = exe ? strrchr(exe, '/') : NULL;
        p->exe = strdup(base ? base + 1 : exe ? exe : "?");
        if (!p->exe)
            goto oom;
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT id, name FROM layers", -1, &st, NULL) != SQLITE_OK)
        goto db_fail;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        if ((rc = grow_ptrs(&n->layers, &n->nlayers, id)) < 0)
            goto fail;
        free(n->layers[id]);
        if (!(n->layers[id] = dup_text(sqlite3_column_text(st, 1))))
            goto oom;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (ms__has_column(db, "owners", "label")) {
        if (sqlite3_prepare_v2(db, "SELECT id, label FROM owners", -1, &st, NULL) != SQLITE_OK)
            goto db_fail;
        while (sqlite3_step(st) == SQLITE_ROW) {
            int64_t id = sqlite3_column_int64(st, 0);
            if ((rc = grow_ptrs(&n->owners, &n->nowners, id)) < 0)
                goto fail;
            free(n->owners[id]);
            if (!(n->owners[id] = dup_text(sqlite3_column_text(st, 1))))
                goto oom;
        }
        sqlite3_finalize(st);
    }
    return 0;
db_fail:
    snprintf(err, errlen, "reading names: %s", sqlite3_errmsg(db));
    rc = MS_EDB;
    goto out;
oom:
    rc = MS_ENOMEM;
fail:
    snprintf(err, errlen, "reading names: %s", ms_strerror(rc));
out:
    sqlite3_finalize(st);
    ms__names_release(n);
    return rc;
}

void ms__names_release(struct ms_names *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->nprocs; i++)
        free(n->procs[i].exe);
    for (size_t i = 0; i < n->nlayers; i++)
        free(n->layers[i]);
    for (size_t i = 0; i < n->nowners; i++)
        free(n->owners[i]);
    free(n->procs);
    free(n->layers);
    free(n->owners);
    memset(n, 0, sizeof *n);
}

const struct ms_name_proc *ms__names_proc(const struct ms_names *n, int64_t id)
{
    for (size_t i = 0; i < n->nprocs; i++)
        if (n->procs[i].id == id)
            return &n->procs[i];
    return NULL;
}

const char *ms__names_layer(const struct ms_names *n, int64_t id)
{
    static char buf[32];
    if (id >= 0 && (size_t)id < n->nlayers && n->layers[id])
        return n->term ? ms_term_text(n->layers[id]) : n->layers[id];
    snprintf(buf, sizeof buf, "layer%lld", (long long)id);
    return buf;
}

const char *ms__names_owner(const struct ms_names *n, int64_t id)
{
    if (id > 0 && (size_t)id < n->nowners && n->owners[id])
        return n->term ? ms_term_text(n->owners[id]) : n->owners[id];
    return NULL;
}

void ms__live_init(struct ms_live *l)
{
    memset(l, 0, sizeof *l);
}

void ms__live_release(struct ms_live *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        ms_u64map_release(&l->pl[i].addrs);
    free(l->pl);
    memset(l, 0, sizeof *l);
}

struct ms_live_pl *ms__live_apply(struct ms_live *l, int kind, int64_t process_id, int64_t layer,
                                  int64_t addr, int64_t size, int has_alloc_id)
{
    struct ms_live_pl *p = l->n ? &l->pl[l->last] : NULL;
    if (!p || p->process_id != process_id || p->layer != layer) {
        p = NULL;
        for (size_t i = 0; i < l->n; i++)
            if (l->pl[i].process_id == process_id && l->pl[i].layer == layer) {
                p = &l->pl[i];
                l->last = i;
                break;
            }
        if (!p) {
            if (l->n == l->cap &&
                ms_grow((void **)&l->pl, &l->cap, l->n, sizeof *l->pl, 8, MS_GROW_MAX) < 0)
                return NULL;
            p = &l->pl[l->n];
            memset(p, 0, sizeof *p);
            p->process_id = process_id;
            p->layer = layer;
            ms_u64map_init(&p->addrs, sizeof(int64_t), MS_U64MAP_MAX);
            l->last = l->n++;
        }
    }
    if (addr == INT64_MIN)
        addr = INT64_MIN + 1; /* the map's empty key; no real address */
    if (kind == MS_KIND_MALLOC) {
        int isnew;
        int64_t *v = ms_u64map_put(&p->addrs, addr, &isnew);
        if (!v)
            return NULL;
        if (!isnew) { /* replaced: the old block ends here */
            p->live -= *v;
            p->blocks--;
        }
        *v = size;
        p->live += size;
        p->blocks++;
    } else if (kind == MS_KIND_FREE && has_alloc_id) {
        int64_t *v = ms_u64map_get(&p->addrs, addr);
        if (v) {
            p->live -= *v;
            p->blocks--;
            ms_u64map_del(&p->addrs, addr, NULL);
        }
    }
    return p;
}

/* ---- Sampling mode ---- */

void ms_sampling_read(sqlite3 *db, struct ms_sampling *s)
{
    static const char *const keys[] = {"sampling_bytes", "heap_allocs_exact",
                                       "heap_alloc_bytes_exact", "heap_frees_exact"};
    uint64_t *v[] = {&s->bytes, &s->allocs, &s->alloc_bytes, &s->frees};
    memset(s, 0, sizeof *s);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?", -1, &st,
                           NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return;
    }
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        sqlite3_bind_text(st, 1, keys[i], -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0)
            *v[i] = (uint64_t)sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
}

void ms_sampling_note(const struct ms_sampling *s, char *out, size_t len)
{
    /* The size as --sampling takes it: 512 KiB, 2 MiB, 65537 B (exact, not rounded). */
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    uint64_t v = s->bytes;
    int u = 0;
    while (v && v % 1024 == 0 && u < 4)
        v /= 1024, u++;
    snprintf(out, len, "sampled at %llu %s: figures per site are estimates (weighted bytes)",
             (unsigned long long)v, units[u]);
}

/* ---- The context of one analysis run ---- */

int ms__actx_init(struct ms_actx *x, const char *name, sqlite3 *db, const struct ms_analyze_opts *o,
                  FILE *out, char *err, size_t errlen)
{
    memset(x, 0, sizeof *x);
    x->db = db;
    x->o = o;
    x->out = out;
    x->name = name;
    x->err = err;
    x->errlen = errlen;
    ms__sites_init(&x->sites, db);
    x->sites.term = !o->json;
    int rc = ms__names_load(db, &x->names, err, errlen);
    if (rc < 0 || o->json)
        return rc;
    /* A text report: what the program named is escaped for a terminal (term_text.h). */
    x->names.term = 1;
    for (size_t i = 0; i < x->names.nprocs; i++) {
        const char *safe = ms_term_text(x->names.procs[i].exe);
        if (safe == x->names.procs[i].exe)
            continue;
        char *copy = strdup(safe);
        if (!copy)
            return ms__actx_oom(x);
        free(x->names.procs[i].exe);
        x->names.procs[i].exe = copy;
    }
    return 0;
}

void ms__actx_release(struct ms_actx *x)
{
    ms__sites_release(&x->sites);
    ms__names_release(&x->names);
}

int ms__actx_db_fail(struct ms_actx *x, const char *what)
{
    return ms_errf(x->err, x->errlen, MS_EDB, "%s: %s: %s", x->name, what, sqlite3_errmsg(x->db));
}

int ms__actx_oom(struct ms_actx *x)
{
    return ms_errf(x->err, x->errlen, MS_ENOMEM, "%s: out of memory", x->name);
}

int ms__actx_computed(struct ms_actx *x, int rc)
{
    return rc == 0 && ms_oom_seen() ? ms__actx_oom(x) : rc;
}
