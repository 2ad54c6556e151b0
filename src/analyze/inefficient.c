/* inefficient.c: `memscope analyze inefficient`: blocks used inefficiently.
 *
 * Two families of rules (docs/analyses.md):
 * - msMemScope's API-count rules (reference §4.6, its offline analyzer/inefficient.py):
 *   early_allocation, late_deallocation, temporary_idleness. An API is one op (an outermost
 *   memscope_range_push .. pop); a MALLOC, FREE or ACCESS outside every op is an API of its own.
 *   The API counter and the "latest API with a MALLOC / a FREE" are per process.
 * - MindStudio Insight's time thresholds (reference §5): lazy_used, delayed_free, long_idle, each
 *   in ns (o->*_ns) or percent of the block's lifetime (o->*_pct), either one firing.
 * With o->write_back the findings replace the rows of table `inefficient` (docs/database.md).
 *
 * Workload: one scan of the memory, range and access events in id order (a compact database:
 * the same rows from its traces, ms_store_replay; none when it has no ACCESS rows, since only
 * accessed blocks can be flagged); state per live block
 * (a hash map keyed by allocation_id, entries removed at the free), per process and per thread.
 * Memory: O(live blocks + flagged blocks). */
#include "analyze.h"
#include "common/term_text.h"
#include "common/ns.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

enum {
    K_EARLY = 1 << 0,
    K_LATE = 1 << 1,
    K_IDLE = 1 << 2,
    K_LAZY = 1 << 3,
    K_DELAYED = 1 << 4,
    K_LONG = 1 << 5,
    NKINDS = 6,
};

static const char *const kind_names[NKINDS] = {"early_allocation",   "late_deallocation",
                                               "temporary_idleness", "lazy_used",
                                               "delayed_free",       "long_idle"};

#define NONE INT64_MAX /* msMemScope's MAX_UINT64: "no such API yet" */

enum {
    EV_MALLOC = MS_KIND_MALLOC,
    EV_FREE = MS_KIND_FREE,
    EV_RANGE_START = MS_KIND_RANGE_START,
    EV_RANGE_END = MS_KIND_RANGE_END,
    EV_ACCESS = MS_KIND_ACCESS,
};

struct blk {
    int64_t malloc_api, fa_api; /* fa: the first ACCESS API != malloc_api, NONE until seen */
    int64_t last_api;           /* the API of the block's latest event */
    int last_kind;              /* EV_MALLOC or EV_ACCESS */
    unsigned flags;
    int process;
    int64_t size, alloc_ns, first_ns, last_ns, max_gap; /* accesses; first_ns 0: none */
};

struct proc {
    int64_t api, malloc_api, free_api;
    int open;                 /* outermost ops open on its threads */
    int tmp_malloc, tmp_free; /* the API being built has a MALLOC / a FREE */
    int64_t end_ns;
};

struct finding {
    int64_t id, size;
    unsigned flags;
};

struct state {
    const struct ms_analyze_opts *o;
    struct proc *procs;
    int nproc;
    int *depth; /* per thread: open ranges */
    size_t nthreads;
    struct ms_u64map blocks;
    struct ms_u64map accessed; /* --accessed-only: allocation ids with an ACCESS */
    struct finding *found;
    size_t nfound, capfound;
    struct ms_layer_set layers; /* a compact database's replay: the selected layers */
};

static void classify(struct proc *p)
{
    if (p->tmp_malloc)
        p->malloc_api = p->api;
    if (p->tmp_free)
        p->free_api = p->api;
    p->tmp_malloc = p->tmp_free = 0;
}

/* Insight: x > ns, or x / lifetime > pct / 100; a rule is off with ns 0 and pct 0 or 100. */
static int over(int64_t x, int64_t life, uint64_t ns, double pct)
{
    if (ns > 0 && x > 0 && (uint64_t)x > ns)
        return 1;
    return pct > 0 && pct < 100 && life > 0 && (double)x / (double)life > pct / 100.0;
}

unsigned ms_analyze_insight_flags(const struct ms_insight_thresholds *t, int64_t alloc_ns,
                                  int64_t end_ns, int64_t first_ns, int64_t last_ns,
                                  int64_t max_gap)
{
    int64_t life = ms_ns_sub(end_ns, alloc_ns); /* saturating: times from a database */
    unsigned f = 0;
    if (!first_ns)
        return 0;
    int64_t first = ms_ns_sub(first_ns, alloc_ns);
    if (first > 0 && over(first, life, t->lazy_ns, t->lazy_pct))
        f |= MS_INEFF_LAZY;
    if (ms_ns_sub(last_ns, alloc_ns) > 0 &&
        over(ms_ns_sub(end_ns, last_ns), life, t->delayed_ns, t->delayed_pct))
        f |= MS_INEFF_DELAYED;
    if (max_gap > 0 && over(max_gap, life, t->idle_ns, t->idle_pct))
        f |= MS_INEFF_LONG_IDLE;
    return f;
}

/* Ends a block (freed at end_ns, or live at its process's end): applies Insight's thresholds
 * and records it when anything fired. */
static int finish_block(struct state *s, int64_t id, struct blk *b, int64_t end_ns)
{
    const struct ms_analyze_opts *o = s->o;
    const struct ms_insight_thresholds t = {o->lazy_ns,  o->delayed_ns,  o->idle_ns,
                                            o->lazy_pct, o->delayed_pct, o->idle_pct};
    unsigned f =
        ms_analyze_insight_flags(&t, b->alloc_ns, end_ns, b->first_ns, b->last_ns, b->max_gap);
    if (f & MS_INEFF_LAZY)
        b->flags |= K_LAZY;
    if (f & MS_INEFF_DELAYED)
        b->flags |= K_DELAYED;
    if (f & MS_INEFF_LONG_IDLE)
        b->flags |= K_LONG;
    if (!b->flags)
        return 0;
    if (s->nfound == s->capfound &&
        ms_grow((void **)&s->found, &s->capfound, s->nfound, sizeof *s->found, 64, MS_GROW_MAX) < 0)
        return MS_ENOMEM;
    s->found[s->nfound++] = (struct finding){id, b->size, b->flags};
    return 0;
}

/* One MALLOC, FREE or ACCESS (reference §4.6; analyzer/inefficient.py _handle_memory_event). */
static int memory_event(struct state *s, struct proc *p, int kind, int64_t aid, int has_aid,
                        int64_t size, int64_t ts, int process)
{
    if (!p->open) {
        p->api++;
        p->tmp_malloc = kind == EV_MALLOC;
        p->tmp_free = kind == EV_FREE;
        classify(p);
    } else {
        p->tmp_malloc |= kind == EV_MALLOC;
        p->tmp_free |= kind == EV_FREE;
    }
    if (!has_aid)
        return 0;
    int64_t api = p->api;
    if (kind == EV_MALLOC) {
        int isnew;
        struct blk *b = ms_u64map_put(&s->blocks, aid, &isnew);
        if (!b)
            return MS_ENOMEM;
        memset(b, 0, sizeof *b);
        b->malloc_api = api;
        b->fa_api = NONE;
        b->last_api = api;
        b->last_kind = EV_MALLOC;
        b->process = process;
        b->size = size;
        b->alloc_ns = ts;
        return 0;
    }
    struct blk *b = ms_u64map_get(&s->blocks, aid);
    if (!b)
        return 0; /* a block of another layer, or allocated before recording */
    if (kind == EV_ACCESS) {
        /* temporary_idleness: this ACCESS follows an ACCESS more than idle_threshold APIs
         * before. */
        if (b->last_kind == EV_ACCESS && api > b->last_api &&
            (uint64_t)(api - b->last_api) > s->o->idle_threshold)
            b->flags |= K_IDLE;
        if (b->fa_api == NONE && api != b->malloc_api)
            b->fa_api = api;
        /* early_allocation: another block was freed between this one's MALLOC and its first
         * use: M < freeApi < FA. */
        if (p->free_api != NONE && b->fa_api != NONE && b->malloc_api != p->free_api &&
            b->fa_api > p->free_api && b->malloc_api < p->free_api)
            b->flags |= K_EARLY;
        b->last_kind = EV_ACCESS;
        b->last_api = api;
        if (!b->first_ns)
            b->first_ns = ts;
        else if (ts - b->last_ns > b->max_gap)
            b->max_gap = ts - b->last_ns;
        b->last_ns = ts;
        return 0;
    }
    /* FREE. late_deallocation: another block was allocated between this one's last use and
     * its free: LA < mallocApi < current API, LA not the current API. */
    if (p->malloc_api != NONE && b->last_kind == EV_ACCESS && b->last_api != api &&
        b->last_api < p->malloc_api && api > p->malloc_api)
        b->flags |= K_LATE;
    int rc = finish_block(s, aid, b, ts);
    ms_u64map_del(&s->blocks, aid, NULL);
    return rc;
}

static int grow_ints(int **v, size_t *n, size_t want)
{
    if (want < *n)
        return 0;
    if (want > (1u << 24))
        return MS_ELIMIT;
    size_t nn = want + 64;
    int *t = realloc(*v, nn * sizeof *t);
    if (!t)
        return MS_ENOMEM;
    memset(t + *n, 0, (nn - *n) * sizeof *t);
    *v = t;
    *n = nn;
    return 0;
}

/* One events row (MALLOC or FREE of a selected layer, RANGE_START, RANGE_END, ACCESS), in id
 * order. */
static int on_row(struct state *s, int kind, int process, int64_t thread, int64_t aid, int has_aid,
                  int64_t size, int64_t ts)
{
    if (process <= 0 || process >= s->nproc || thread < 0)
        return 0;         /* not a row the store writes */
    ts = ms_ns_clamp(ts); /* a hostile database's times: in range for the gaps below */
    struct proc *p = &s->procs[process];
    if (kind == EV_RANGE_START || kind == EV_RANGE_END) {
        int rc = grow_ints(&s->depth, &s->nthreads, (size_t)thread);
        if (rc < 0)
            return rc;
        int *d = &s->depth[thread];
        if (kind == EV_RANGE_START) {
            /* An outermost op starts: a new API (ATEN_START in msMemScope). NEEDSWORK:
             * ops overlapping on several threads of one process each start an API, and
             * the events in between count for the latest; classification waits until
             * all of them have ended. */
            if ((*d)++ == 0) {
                p->open++;
                p->api++;
            }
        } else if (*d > 0 && --(*d) == 0 && p->open > 0 && --p->open == 0) {
            classify(p);
        }
        return 0;
    }
    if (s->o->accessed_only && kind != EV_ACCESS && (!has_aid || !ms_u64map_get(&s->accessed, aid)))
        return 0; /* not a tensor: neither an API nor a candidate */
    return memory_event(s, p, kind, aid, has_aid, size, ts, process);
}

static int on_replayed(void *ctx, const struct ms_store_row *r)
{
    struct state *s = ctx;
    if (r->kind == EV_MALLOC || r->kind == EV_FREE) {
        if (!ms__layer_selected(&s->layers, r->layer))
            return 0;
    } else if (r->kind != EV_RANGE_START && r->kind != EV_RANGE_END && r->kind != EV_ACCESS) {
        return 0;
    }
    return on_row(s, r->kind, (int)r->process_id, r->thread_id, r->allocation_id,
                  r->allocation_id != 0, r->has_size ? r->size : 0, r->ts_ns);
}

static int scan(sqlite3 *db, struct state *s, char *err, size_t errlen)
{
    sqlite3_stmt *st;
    int rc = 0;
    if (sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(id), 0) FROM processes", -1, &st, NULL) !=
            SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return ms_errf(err, errlen, MS_EDB, "inefficient: %s", sqlite3_errmsg(db));
    }
    s->nproc = sqlite3_column_int(st, 0) + 1;
    sqlite3_finalize(st);
    if (s->nproc > (1 << 24) || !(s->procs = calloc((size_t)s->nproc, sizeof *s->procs))) {
        return ms_errf(err, errlen, MS_ENOMEM, "inefficient: %s", ms_strerror(MS_ENOMEM));
    }
    for (int i = 0; i < s->nproc; i++)
        s->procs[i].malloc_api = s->procs[i].free_api = NONE;
    if (sqlite3_prepare_v2(db, "SELECT id, COALESCE(end_ns, 0) FROM processes", -1, &st, NULL) ==
        SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            int p = sqlite3_column_int(st, 0);
            if (p > 0 && p < s->nproc)
                s->procs[p].end_ns = sqlite3_column_int64(st, 1);
        }
    }
    sqlite3_finalize(st);

    if (s->o->accessed_only) {
        if (sqlite3_prepare_v2(
                db,
                "SELECT DISTINCT allocation_id FROM events WHERE kind = " MS_SQL_ACCESS
                " AND allocation_id IS NOT NULL",
                -1, &st, NULL) != SQLITE_OK) {
            return ms_errf(err, errlen, MS_EDB, "inefficient: %s", sqlite3_errmsg(db));
        }
        int isnew;
        while (!rc && sqlite3_step(st) == SQLITE_ROW)
            if (!ms_u64map_put(&s->accessed, sqlite3_column_int64(st, 0), &isnew))
                rc = MS_ENOMEM;
        sqlite3_finalize(st);
        if (rc) {
            return ms_errf(err, errlen, rc, "inefficient: %s", ms_strerror(rc));
        }
    }
    if (ms_store_is_compact(db)) {
        /* the same rows from the traces (ms_store_replay); without an ACCESS row nothing can
         * be flagged */
        int accesses = 0;
        if (sqlite3_prepare_v2(db, "SELECT 1 FROM events WHERE kind = " MS_SQL_ACCESS " LIMIT 1",
                               -1, &st, NULL) == SQLITE_OK)
            accesses = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
        if (!accesses)
            return 0;
        if ((rc = ms__layer_set_load(db, s->o, &s->layers)) == 0)
            rc = ms_store_replay(sqlite3_db_filename(db, "main"), on_replayed, s, err, errlen);
        ms__layer_set_release(&s->layers);
        if (rc < 0)
            return rc;
    } else {
        char *filter = ms__layer_filter(db, s->o, "layer");
        int prc = !filter ? SQLITE_NOMEM
                          : ms__prepare(db, &st,
                                        "SELECT id, kind, process_id, thread_id, allocation_id, "
                                        "size, ts_ns FROM events WHERE kind IN (" MS_SQL_RANGE_START
                                        ", " MS_SQL_RANGE_END ", " MS_SQL_ACCESS
                                        ") OR (kind IN (" MS_SQL_MALLOC ", " MS_SQL_FREE
                                        ") AND %s) ORDER BY id",
                                        filter);
        sqlite3_free(filter);
        if (prc != SQLITE_OK) {
            return ms_errf(err, errlen, MS_EDB, "inefficient: %s", sqlite3_errmsg(db));
        }
        int r;
        while (!rc && (r = sqlite3_step(st)) == SQLITE_ROW)
            rc = on_row(s, sqlite3_column_int(st, 1), sqlite3_column_int(st, 2),
                        sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4),
                        sqlite3_column_type(st, 4) != SQLITE_NULL, sqlite3_column_int64(st, 5),
                        sqlite3_column_int64(st, 6));
        if (!rc && r != SQLITE_DONE)
            rc = MS_EDB;
        sqlite3_finalize(st);
    }
    /* Blocks live at the end: their lifetime ends with their process (Insight ends them at
     * the trace's last timestamp). */
    uint64_t key;
    void *val;
    for (size_t pos = 0; !rc && ms_u64map_next(&s->blocks, &pos, &key, &val);) {
        struct blk *b = val;
        int64_t end = s->procs[b->process].end_ns;
        rc = finish_block(s, (int64_t)key, b, end > b->alloc_ns ? end : b->alloc_ns);
    }
    if (rc)
        return ms_errf(err, errlen, rc, "inefficient: %s",
                       rc == MS_EDB ? sqlite3_errmsg(db) : ms_strerror(rc));
    return rc;
}

static int by_size(const void *a, const void *b)
{
    const struct finding *x = a, *y = b;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int write_back(sqlite3 *db, const struct state *s, char *err, size_t errlen)
{
    const char *ddl = "CREATE TABLE IF NOT EXISTS inefficient (\n"
                      "  allocation_id INTEGER NOT NULL, type TEXT NOT NULL,\n"
                      "  PRIMARY KEY (allocation_id, type)\n"
                      ") WITHOUT ROWID;\n"
                      "BEGIN;\n"
                      /* the blocks flagged before: their memscope_dump rows change too */
                      "CREATE TEMP TABLE IF NOT EXISTS ineff_before (allocation_id INTEGER "
                      "PRIMARY KEY);\nDELETE FROM temp.ineff_before;\n"
                      "INSERT OR IGNORE INTO temp.ineff_before SELECT allocation_id FROM "
                      "inefficient;\n"
                      "DELETE FROM inefficient;\n";
    sqlite3_stmt *st = NULL;
    if (sqlite3_exec(db, ddl, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "INSERT INTO inefficient VALUES (?, ?)", -1, &st, NULL) != SQLITE_OK)
        goto fail;
    for (size_t i = 0; i < s->nfound; i++)
        for (int k = 0; k < NKINDS; k++) {
            if (!(s->found[i].flags & (1u << k)))
                continue;
            sqlite3_bind_int64(st, 1, s->found[i].id);
            sqlite3_bind_text(st, 2, kind_names[k], -1, SQLITE_STATIC);
            if (sqlite3_step(st) != SQLITE_DONE)
                goto fail;
            sqlite3_reset(st);
        }
    sqlite3_finalize(st);
    st = NULL;
    char derr[256];
    if (ms_dump_refresh(db,
                        "SELECT alloc_event_id FROM blocks WHERE allocation_id IN (SELECT "
                        "allocation_id FROM temp.ineff_before UNION SELECT allocation_id "
                        "FROM inefficient)",
                        derr, sizeof derr) < 0) {
        int rc = ms_errf(err, errlen, MS_EDB,
                         "inefficient: cannot record the findings in the database: %s", derr);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        return rc;
    }
    if (sqlite3_exec(db, "DROP TABLE temp.ineff_before; COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    return 0;
fail:;
    int rc =
        ms_errf(err, errlen, MS_EDB, "inefficient: cannot record the findings in the database: %s",
                sqlite3_errmsg(db));
    sqlite3_finalize(st);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* Site, owner and layer of a flagged block, as the reports show it. */
struct shown {
    char site[512], owner[512], layer[64];
};

/* Reads the site, owner and layer of block id into *w through the call sites' reader sr. 0, or
 * MS_EDB / MS_ENOMEM with x->err set (a block that cannot be described fails the analysis: never
 * a report with "(no stack)" for a stack that could not be read). */
static int describe(struct ms_actx *x, struct ms_site_reader *sr, int has_owner, int64_t id,
                    struct shown *w)
{
    sqlite3 *db = x->db;
    snprintf(w->site, sizeof w->site, "(no stack)");
    snprintf(w->owner, sizeof w->owner, "(no owner)");
    snprintf(w->layer, sizeof w->layer, "?");
    sqlite3_stmt *st;
    const char *q = has_owner ? "SELECT b.stack_id, w.label, l.name FROM blocks b "
                                "LEFT JOIN owners w ON w.id = b.owner_id "
                                "LEFT JOIN layers l ON l.id = b.layer WHERE b.allocation_id = ?"
                              : "SELECT b.stack_id, NULL, l.name FROM blocks b "
                                "LEFT JOIN layers l ON l.id = b.layer WHERE b.allocation_id = ?";
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return ms__actx_db_fail(x, "cannot describe a flagged block");
    sqlite3_bind_int64(st, 1, id);
    int rc = 0, r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        rc = ms_site_reader_site(sr, sqlite3_column_int64(st, 0), w->site, sizeof w->site);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL)
            snprintf(w->owner, sizeof w->owner, "%s", sqlite3_column_text(st, 1));
        if (sqlite3_column_type(st, 2) != SQLITE_NULL)
            snprintf(w->layer, sizeof w->layer, "%s", sqlite3_column_text(st, 2));
    } else if (r != SQLITE_DONE) {
        rc = MS_EDB;
    }
    if (rc == MS_ENOMEM)
        rc = ms__actx_oom(x);
    else if (rc) /* before the finalize, which clears the connection's message */
        rc = ms__actx_db_fail(x, "cannot describe a flagged block");
    sqlite3_finalize(st);
    return rc;
}

static void kinds_text(unsigned flags, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int k = 0; k < NKINDS && n < len; k++)
        if (flags & (1u << k))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", kind_names[k]);
}

static void threshold_text(char *buf, size_t len, uint64_t ns, double pct)
{
    int p = pct > 0 && pct < 100;
    if (ns && p)
        snprintf(buf, len, "> %llu ns or > %g%%", (unsigned long long)ns, pct);
    else if (ns)
        snprintf(buf, len, "> %llu ns", (unsigned long long)ns);
    else if (p)
        snprintf(buf, len, "> %g%% of lifetime", pct);
    else
        snprintf(buf, len, "off");
}

/* The result: the scan's findings (largest first), the counts per kind and the blocks shown. */
struct iresult {
    struct state s;
    long long cnt[NKINDS], bytes[NKINDS];
    struct shown *rows; /* the first n findings, described */
    size_t n;
    int has_owner;
};

static void iresult_release(struct iresult *r)
{
    ms_u64map_release(&r->s.blocks);
    ms_u64map_release(&r->s.accessed);
    free(r->s.procs);
    free(r->s.depth);
    free(r->s.found);
    free(r->rows);
}

/* Fills r (and, with o->write_back, the database's table); writes nothing on x->out. 0, or a
 * negative code with x->err set. */
static int compute(struct ms_actx *x, struct iresult *r)
{
    sqlite3 *db = x->db;
    const struct ms_analyze_opts *o = x->o;
    if (o->idle_threshold == 0)
        return ms_errf(x->err, x->errlen, MS_EINVAL,
                       "inefficient: the idle threshold must be a positive API count");
    if (o->lazy_pct < 0 || o->lazy_pct > 100 || o->delayed_pct < 0 || o->delayed_pct > 100 ||
        o->idle_pct < 0 || o->idle_pct > 100)
        return ms_errf(x->err, x->errlen, MS_EINVAL,
                       "inefficient: threshold percentages must be in 0..100");
    struct state *s = &r->s;
    int rc = scan(db, s, x->err, x->errlen);
    if (rc)
        return rc;
    if (s->nfound > 1)
        qsort(s->found, s->nfound, sizeof *s->found, by_size);
    for (size_t i = 0; i < s->nfound; i++)
        for (int k = 0; k < NKINDS; k++)
            if (s->found[i].flags & (1u << k)) {
                r->cnt[k]++;
                r->bytes[k] += s->found[i].size;
            }
    r->n = o->top > 0 && (size_t)o->top < s->nfound ? (size_t)o->top : s->nfound;
    r->has_owner = ms__has_column(db, "blocks", "owner_id");
    if (r->n && !(r->rows = calloc(r->n, sizeof *r->rows)))
        return ms__actx_oom(x);
    struct ms_site_reader sr;
    ms_site_reader_init(&sr, db);
    for (size_t i = 0; !rc && i < r->n; i++)
        rc = describe(x, &sr, r->has_owner, s->found[i].id, &r->rows[i]);
    ms_site_reader_release(&sr);
    if (!rc && o->write_back)
        rc = write_back(db, s, x->err, x->errlen);
    return rc;
}

static void render_json(struct ms_actx *x, const struct iresult *r)
{
    const struct ms_analyze_opts *o = x->o;
    const struct state *s = &r->s;
    uint64_t tns[3] = {o->lazy_ns, o->delayed_ns, o->idle_ns};
    double tpct[3] = {o->lazy_pct, o->delayed_pct, o->idle_pct};
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "inefficient");
    ms_json_int(&j, "idle_threshold", (long long)o->idle_threshold);
    ms_json_begin_object(&j, "thresholds");
    for (int k = 0; k < 3; k++) {
        ms_json_begin_object(&j, kind_names[3 + k]);
        ms_json_int(&j, "ns", (long long)tns[k]);
        ms_json_double(&j, "percent", tpct[k]);
        ms_json_end_object(&j);
    }
    ms_json_end_object(&j);
    ms_json_begin_object(&j, "counts");
    for (int k = 0; k < NKINDS; k++) {
        ms_json_begin_object(&j, kind_names[k]);
        ms_json_int(&j, "blocks", r->cnt[k]);
        ms_json_int(&j, "bytes", r->bytes[k]);
        ms_json_end_object(&j);
    }
    ms_json_end_object(&j);
    ms_json_int(&j, "flagged", (long long)s->nfound);
    ms_json_begin_array(&j, "blocks");
    for (size_t i = 0; i < r->n; i++) {
        const struct finding *f = &s->found[i];
        const struct shown *w = &r->rows[i];
        ms_json_begin_object(&j, NULL);
        ms_json_int(&j, "allocation_id", f->id);
        ms_json_int(&j, "size", f->size);
        ms_json_str(&j, "layer", w->layer);
        ms_json_begin_array(&j, "types");
        for (int k = 0; k < NKINDS; k++)
            if (f->flags & (1u << k))
                ms_json_str(&j, NULL, kind_names[k]);
        ms_json_end_array(&j);
        ms_json_str(&j, "site", w->site);
        ms_json_str(&j, "owner", r->has_owner && strcmp(w->owner, "(no owner)") ? w->owner : NULL);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_bool(&j, "written", o->write_back);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

static void render_text(struct ms_actx *x, const struct iresult *r)
{
    const struct ms_analyze_opts *o = x->o;
    const struct state *s = &r->s;
    FILE *out = x->out;
    uint64_t tns[3] = {o->lazy_ns, o->delayed_ns, o->idle_ns};
    double tpct[3] = {o->lazy_pct, o->delayed_pct, o->idle_pct};
    char kinds[160], th[3][80];
    for (int k = 0; k < 3; k++)
        threshold_text(th[k], sizeof th[k], tns[k], tpct[k]);
    fprintf(out, "Inefficient memory: %zu blocks flagged.\n", s->nfound);
    fprintf(out,
            "msMemScope rules count APIs (an op, or one event outside ops); temporary "
            "idleness threshold %llu APIs.\n",
            (unsigned long long)o->idle_threshold);
    fprintf(out, "Insight thresholds: lazy_used %s, delayed_free %s, long_idle %s.\n\n", th[0],
            th[1], th[2]);
    fprintf(out, "  %-20s %8s %14s\n", "kind", "blocks", "bytes");
    for (int k = 0; k < NKINDS; k++)
        fprintf(out, "  %-20s %8lld %14lld\n", kind_names[k], r->cnt[k], r->bytes[k]);
    if (s->nfound) {
        fprintf(out, "\nFlagged blocks (largest first%s):\n", r->n < s->nfound ? ", top rows" : "");
        fprintf(out, "  %12s %-12s %-40s %-24s %s\n", "size", "layer", "kinds", "owner", "site");
        for (size_t i = 0; i < r->n; i++) {
            const struct finding *f = &s->found[i];
            const struct shown *w = &r->rows[i];
            kinds_text(f->flags, kinds, sizeof kinds);
            fprintf(out, "  %12lld %-12s %-40s %-24s %s\n", (long long)f->size,
                    ms_term_text(w->layer), kinds, ms_term_text(w->owner), ms_term_text(w->site));
        }
        if (r->n < s->nfound)
            fprintf(out, "  ... %zu more\n", s->nfound - r->n);
    }
    if (o->write_back)
        fprintf(out, "\nFindings recorded in table 'inefficient' (%zu blocks).\n", s->nfound);
}

/* Computed whole first, then written: a failure writes nothing (analyze.h's contract). */
int ms_analyze_inefficient(struct ms_actx *x)
{
    struct iresult r;
    memset(&r, 0, sizeof r);
    r.s.o = x->o;
    ms_u64map_init(&r.s.blocks, sizeof(struct blk), MS_U64MAP_MAX);
    ms_u64map_init(&r.s.accessed, 1, MS_U64MAP_MAX);
    int rc = ms__actx_computed(x, compute(x, &r));
    if (rc == 0)
        (x->o->json ? render_json : render_text)(x, &r);
    iresult_release(&r);
    return rc;
}
