/* common.c: what every analysis shares: opening and checking the database, describing a call
 * site, human-readable sizes, the options' defaults, and the table of analyses. */
#include "analyze.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"
#include "store/db_explain.h"
#include "store/store.h"

#include <errno.h>
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
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return MS_ENOTFOUND;
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

static int runtime_module(const char *path)
{
    static const char *const names[] = {"libc.so", "ld-linux", "libstdc++.so", "libgcc_s.so",
                                        "libmemscope.so"};
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (!base)
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(base, names[i], strlen(names[i])))
            return 1;
    return 0;
}

int ms_site_innermost; /* --site=innermost: the innermost Python frame, library or not */

/* A Python frame's file as the site chooser sees it: 2 memscope's own (never a site), 1 a
 * library (the standard library, site-packages or dist-packages, frozen modules), 0 the
 * program's own code. */
static int py_file_kind(const char *f, size_t n)
{
    static const char *const own[] = {
        "/memscope/torch/",      "/memscope/__init__.py",        "/memscope/_config.py",
        "/memscope/describe.py", "/memscope/record_function.py", "/memscope/snapshot.py",
        "/memscope/tracer.py",   "/memscope/watcher.py",         "/sitecustomize.py"};
    char buf[1024];
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    memcpy(buf, f, n);
    buf[n] = 0;
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strstr(buf, own[i]))
            return 2;
    if (buf[0] == '<' || strstr(buf, "/site-packages/") || strstr(buf, "/dist-packages/"))
        return 1;
    const char *lib = strstr(buf, "/lib/python"); /* /usr/lib/python3.11/json/... */
    if (lib && (lib[11] >= '0' && lib[11] <= '9'))
        return 1;
    return 0;
}

int ms_py_frame_own(const char *line, size_t len)
{
    const char *colon = NULL; /* the first "): ": the file ends at the '(' before it */
    for (size_t i = 0; !colon && i + 3 <= len; i++)
        if (!memcmp(line + i, "): ", 3))
            colon = line + i;
    const char *open = colon;
    while (open && open > line && *open != '(')
        open--;
    return open && open > line && *open == '(' && py_file_kind(line, (size_t)(open - line)) == 2;
}

void ms_stack_site(sqlite3 *db, int64_t stack_id, char *out, size_t len)
{
    snprintf(out, len, "(no stack)");
    if (stack_id <= 0)
        return;
    sqlite3_stmt *st;
    /* A Python program's call site is its innermost Python frame with a file and a line
     * ("file(line): function" lines in py_text; C++ frames of snapshots read "??(0): ..."). */
    if (sqlite3_prepare_v2(db, "SELECT py_text FROM stacks WHERE id = ?", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_int64(st, 1, stack_id);
        const char *py =
            sqlite3_step(st) == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
        /* The innermost frame of the program's own code wins; else the innermost of a library;
         * memscope's own frames never (--site=innermost: the innermost frame but memscope's). */
        int best = 3;
        for (const char *line = py; line && *line && best > 0;) {
            const char *nl = strchr(line, '\n');
            const char *end = nl ? nl : line + strlen(line);
            const char *colon = strstr(line, "): ");
            const char *open = colon ? colon : NULL;
            while (open && open > line && *open != '(')
                open--;
            if (colon && colon < end && open > line && *open == '(' &&
                !(open - line == 2 && !memcmp(line, "??", 2)) && strtol(open + 1, NULL, 10) > 0) {
                int kind = py_file_kind(line, (size_t)(open - line));
                if (kind == 1 && ms_site_innermost)
                    kind = 0;
                if (kind < 2 && kind < best) {
                    best = kind;
                    snprintf(out, len, "%.*s (%.*s:%.*s)", (int)(end - colon - 3), colon + 3,
                             (int)(open - line), line, (int)(colon - open - 1), open + 1);
                }
            }
            line = nl ? nl + 1 : NULL;
        }
        sqlite3_finalize(st);
        if (best < 3)
            return;
    }
    const char *q = "SELECT fn.text, fl.text, f.line, m.path, f.pc - COALESCE(m.bias, 0) "
                    "FROM stack_frames sf JOIN frames f ON f.id = sf.frame_id "
                    "LEFT JOIN modules m ON m.id = f.module_id "
                    "LEFT JOIN strings fn ON fn.id = f.function_id "
                    "LEFT JOIN strings fl ON fl.id = f.file_id "
                    "WHERE sf.stack_id = ? ORDER BY sf.position";
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, stack_id);
    /* The first frame is the fallback; a later frame with source information (a file and a
     * line) that is not in a runtime library or the annotation header's inline wrappers wins. */
    int first = 1;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *fn = (const char *)sqlite3_column_text(st, 0);
        const char *file = (const char *)sqlite3_column_text(st, 1);
        const char *mod = (const char *)sqlite3_column_text(st, 3);
        size_t fl = file ? strlen(file) : 0;
        int weak = runtime_module(mod) || (fl >= 11 && !strcmp(file + fl - 11, "/memscope.h")) ||
                   !file || !strcmp(file, "??") || sqlite3_column_int(st, 2) == 0;
        if (!first && weak)
            continue;
        if (file)
            snprintf(out, len, "%s (%s:%d)", fn ? fn : "??", file, sqlite3_column_int(st, 2));
        else if (mod)
            snprintf(out, len, "%s (%s+0x%llx)", fn ? fn : "??", mod,
                     (unsigned long long)sqlite3_column_int64(st, 4));
        else
            snprintf(out, len, "%s", fn ? fn : "??");
        if (!weak)
            break;
        first = 0;
    }
    sqlite3_finalize(st);
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

int ms__has_column(sqlite3 *db, const char *table, const char *column)
{
    sqlite3_stmt *st;
    int found = 0;
    char q[160];
    snprintf(q, sizeof q, "SELECT 1 FROM pragma_table_info('%s') WHERE name = ?", table);
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, column, -1, SQLITE_STATIC);
    found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

void ms__layer_filter(sqlite3 *db, const struct ms_analyze_opts *o, const char *col, char *buf,
                      size_t len)
{
    if (o->layer > 0) {
        snprintf(buf, len, "%s = %d", col, o->layer);
        return;
    }
    char ids[MS_MAX_RESERVE * 12 + 16] = "";
    size_t n = 0;
    sqlite3_stmt *st;
    if (ms__has_column(db, "pools", "reserve_layer") &&
        sqlite3_prepare_v2(db, "SELECT reserve_layer FROM pools ORDER BY 1", -1, &st, NULL) ==
            SQLITE_OK) {
        /* NEEDSWORK: beyond MS_MAX_RESERVE pools their regions are counted too. */
        for (int i = 0; i < MS_MAX_RESERVE && sqlite3_step(st) == SQLITE_ROW; i++)
            n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%d", n ? ", " : "",
                                  sqlite3_column_int(st, 0));
        sqlite3_finalize(st);
    }
    if (n)
        snprintf(buf, len, "%s > 0 AND %s NOT IN (%s)", col, col, ids);
    else
        snprintf(buf, len, "%s > 0", col);
}

int ms__layer_set_load(sqlite3 *db, const struct ms_analyze_opts *o, struct ms_layer_set *s)
{
    memset(s, 0, sizeof *s);
    s->layer = o->layer;
    sqlite3_stmt *st;
    if (o->layer > 0 || !ms__has_column(db, "pools", "reserve_layer"))
        return 0;
    if (sqlite3_prepare_v2(db, "SELECT reserve_layer FROM pools ORDER BY 1", -1, &st, NULL) !=
        SQLITE_OK)
        return MS_EDB;
    /* as ms__layer_filter: the first MS_MAX_RESERVE only */
    while (s->nreserve < MS_MAX_RESERVE && sqlite3_step(st) == SQLITE_ROW)
        s->reserve[s->nreserve++] = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return 0;
}

int ms__layer_selected(const struct ms_layer_set *s, int64_t layer)
{
    if (s->layer > 0)
        return layer == s->layer;
    if (layer <= 0)
        return 0;
    for (int i = 0; i < s->nreserve; i++)
        if (layer == s->reserve[i])
            return 0;
    return 1;
}

int ms__computed(sqlite3 *db, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s LIMIT 1", table);
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK)
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
    size_t nn = (size_t)id + 1;
    char **p = realloc(*arr, nn * sizeof *p);
    if (!p)
        return MS_ENOMEM;
    memset(p + *n, 0, (nn - *n) * sizeof *p);
    *arr = p;
    *n = nn;
    return 0;
}

int ms__names_load(sqlite3 *db, struct ms_names *n, char *err, size_t errlen)
{
    memset(n, 0, sizeof *n);
    sqlite3_stmt *st = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(db, "SELECT id, pid, exe FROM processes ORDER BY id", -1, &st, NULL) !=
        SQLITE_OK)
        goto db_fail;
    while (sqlite3_step(st) == SQLITE_ROW) {
        struct ms_name_proc *p = realloc(n->procs, (n->nprocs + 1) * sizeof *p);
        if (!p)
            goto oom;
        n->procs = p;
        p += n->nprocs++;
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
        return n->layers[id];
    snprintf(buf, sizeof buf, "layer%lld", (long long)id);
    return buf;
}

const char *ms__names_owner(const struct ms_names *n, int64_t id)
{
    if (id > 0 && (size_t)id < n->nowners)
        return n->owners[id];
    return NULL;
}

void ms__sites_init(struct ms_sites *s, sqlite3 *db)
{
    memset(s, 0, sizeof *s);
    s->db = db;
    ms_u64map_init(&s->by_stack, sizeof(char *), MS_U64MAP_MAX);
}

void ms__sites_release(struct ms_sites *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ntexts; i++)
        free(s->texts[i]);
    free(s->texts);
    ms_u64map_release(&s->by_stack);
    memset(s, 0, sizeof *s);
}

const char *ms__sites_get(struct ms_sites *s, int64_t stack_id)
{
    if (stack_id < 0)
        stack_id = 0;
    char **slot = ms_u64map_get(&s->by_stack, stack_id);
    if (slot)
        return *slot;
    char buf[1024];
    ms_stack_site(s->db, stack_id, buf, sizeof buf);
    /* Intern: a linear search would be quadratic over many stacks, so keep the texts in a
     * small open hash keyed by a string hash (collisions resolved by strcmp). */
    uint64_t h = 1469598103934665603ull;
    for (const char *p = buf; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    int64_t key = (int64_t)(h >> 2) | (1ll << 61); /* never collides with stack ids < 2^61 */
    char *text = NULL;
    for (;; key = (int64_t)(((uint64_t)key * 31 + 7) >> 2) | (1ll << 61)) {
        char **t = ms_u64map_get(&s->by_stack, key);
        if (!t)
            break;
        if (!strcmp(*t, buf)) {
            text = *t;
            break;
        }
    }
    if (!text) {
        if (s->ntexts == s->atexts && ms_grow((void **)&s->texts, &s->atexts, s->ntexts,
                                              sizeof *s->texts, 64, MS_GROW_MAX) < 0)
            return NULL;
        if (!(text = strdup(buf)))
            return NULL;
        s->texts[s->ntexts++] = text;
        int isnew;
        char **t = ms_u64map_put(&s->by_stack, key, &isnew);
        if (!t)
            return NULL;
        *t = text;
    }
    int isnew;
    slot = ms_u64map_put(&s->by_stack, stack_id, &isnew);
    if (!slot)
        return NULL;
    *slot = text;
    return text;
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
    return ms__names_load(db, &x->names, err, errlen);
}

void ms__actx_release(struct ms_actx *x)
{
    ms__sites_release(&x->sites);
    ms__names_release(&x->names);
}

int ms__actx_db_fail(struct ms_actx *x, const char *what)
{
    snprintf(x->err, x->errlen, "%s: %s: %s", x->name, what, sqlite3_errmsg(x->db));
    return MS_EDB;
}

int ms__actx_oom(struct ms_actx *x)
{
    snprintf(x->err, x->errlen, "%s: out of memory", x->name);
    return MS_ENOMEM;
}
