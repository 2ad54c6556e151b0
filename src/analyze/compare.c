/* compare.c: `memscope analyze compare`: two steps of one run (--steps A,B) or two runs
 * (--with other.db), per call site and per owner, heaptrack-diff style; and, when the program
 * marked ops with memscope_range_push/pop, msMemScope's op-sequence compare (a Myers diff of
 * the op names, memory allocated per op) in its memory_compare CSV format (--csv FILE).
 *
 * Workload: one GROUP BY over blocks (or site_stats) per side, then one call-site lookup per
 * distinct stack; the op compare (compare_ops.c) adds one scan of events in id order, only when
 * the database has ranges. Memory: one row per distinct (layer, site) and (layer, owner), and one
 * per op of the two sequences.
 *
 * Definitions (docs/analyses.md): a step side is the blocks allocated in that step
 * (blocks.step); a run side is the blocks allocated over the whole run ("allocated") and the
 * blocks still live when their process ended ("live at end"). */
#include "analyze.h"
#include "common/term_text.h"
#include "compare_ops.h"
#include "common/db_ids.h"
#include "common/files.h"

#include "common/ms_error.h"
#include "common/grow.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* One row of a ranking: a (layer, key) with counts and bytes on sides A (0) and B (1). */
struct crow {
    char *layer, *key;
    long long cnt[2], bytes[2];
};

struct cset {
    struct crow *v;
    size_t n, cap;
};

static void cset_release(struct cset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].layer);
        free(s->v[i].key);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cset_add(struct cset *s, const char *layer, const char *key, int side, long long cnt,
                    long long bytes)
{
    if (s->n == s->cap && ms_grow((void **)&s->v, &s->cap, s->n, sizeof *s->v, 64, MS_GROW_MAX) < 0)
        return MS_ENOMEM;
    struct crow *r = &s->v[s->n];
    memset(r, 0, sizeof *r);
    r->layer = strdup(layer ? layer : "?");
    r->key = strdup(key);
    if (!r->layer || !r->key) {
        free(r->layer);
        free(r->key);
        return MS_ENOMEM;
    }
    r->cnt[side] = cnt;
    r->bytes[side] = bytes;
    s->n++;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    const struct crow *x = a, *y = b;
    int c = strcmp(x->layer, y->layer);
    return c ? c : strcmp(x->key, y->key);
}

static long long absll(long long v)
{
    return v < 0 ? -v : v;
}

/* Largest |B - A| bytes first, then largest |B - A| count, then by name (deterministic). */
static int by_diff(const void *a, const void *b)
{
    const struct crow *x = a, *y = b;
    long long dx = absll(x->bytes[1] - x->bytes[0]), dy = absll(y->bytes[1] - y->bytes[0]);
    if (dx != dy)
        return dx > dy ? -1 : 1;
    dx = absll(x->cnt[1] - x->cnt[0]);
    dy = absll(y->cnt[1] - y->cnt[0]);
    if (dx != dy)
        return dx > dy ? -1 : 1;
    return by_name(a, b);
}

/* Merges rows with the same (layer, key), then sorts by difference. */
static void cset_finish(struct cset *s)
{
    if (!s->n)
        return;
    qsort(s->v, s->n, sizeof *s->v, by_name);
    size_t w = 0;
    for (size_t i = 1; i < s->n; i++) {
        struct crow *d = &s->v[w], *r = &s->v[i];
        if (!by_name(d, r)) {
            for (int k = 0; k < 2; k++) {
                d->cnt[k] += r->cnt[k];
                d->bytes[k] += r->bytes[k];
            }
            free(r->layer);
            free(r->key);
        } else {
            s->v[++w] = *r;
        }
    }
    s->n = w + 1;
    qsort(s->v, s->n, sizeof *s->v, by_diff);
}

/* What one side of the comparison reads. */
struct side {
    sqlite3 *db;
    int step;      /* > 0: blocks allocated in this step; 0: the whole run */
    int live;      /* for a run: fill the live-at-end sets as well */
    int has_owner; /* blocks.owner_id exists */
};

/* Sets: allocated by site, by owner; live at end by site, by owner. */
struct result {
    struct cset site, owner, live_site, live_owner;
};

/* One side's rows into res through the call sites' reader sr. */
static int load_rows(const struct side *sd, const struct ms_analyze_opts *o, int idx,
                     struct result *res, struct ms_site_reader *sr, char *err, size_t errlen)
{
    char *filter = ms__layer_filter(sd->db, o, "b.layer");
    if (!filter) {
        return ms_errf(err, errlen, MS_ENOMEM, "compare: out of memory");
    }
    const char *stepc = sd->step > 0 ? " AND b.step = ?1" : "";
    /* One scan: grouped by (layer, stack, owner), then summed by site and by owner here. A
     * compact database has these sums by (process, layer, stack, owner, step) in site_stats. */
    sqlite3_stmt *st;
    int prc;
    if (ms__computed(sd->db, "site_stats") && !ms__retagged(sd->db))
        prc = ms__prepare(sd->db, &st,
                          "SELECT l.name, b.stack_id, %s, SUM(b.allocs), SUM(b.alloc_bytes), "
                          "SUM(b.live_blocks), TOTAL(b.live_bytes) "
                          "FROM site_stats b LEFT JOIN layers l ON l.id = b.layer %s WHERE %s%s "
                          "GROUP BY b.layer, b.stack_id%s",
                          sd->has_owner ? "w.label" : "NULL",
                          sd->has_owner ? "LEFT JOIN owners w ON w.id = b.owner_id" : "", filter,
                          stepc, sd->has_owner ? ", b.owner_id" : "");
    else
        prc = ms__prepare(sd->db, &st,
                          "SELECT l.name, b.stack_id, %s, COUNT(*), SUM(b.size), "
                          "SUM(b.free_ns IS NULL), TOTAL(CASE WHEN b.free_ns IS NULL THEN b.size "
                          "END) FROM blocks b LEFT JOIN layers l ON l.id = b.layer %s WHERE %s%s "
                          "GROUP BY b.layer, b.stack_id%s",
                          sd->has_owner ? "w.label" : "NULL",
                          sd->has_owner ? "LEFT JOIN owners w ON w.id = b.owner_id" : "", filter,
                          stepc, sd->has_owner ? ", b.owner_id" : "");
    sqlite3_free(filter);
    if (prc != SQLITE_OK) {
        return ms_errf(err, errlen, prc == SQLITE_NOMEM ? MS_ENOMEM : MS_EDB, "compare: %s",
                       sqlite3_errmsg(sd->db));
    }
    if (sd->step > 0)
        sqlite3_bind_int(st, 1, sd->step);
    int rc = 0, s;
    int64_t last_stack = -1;
    char site[512] = "";
    while (!rc && (s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *layer = (const char *)sqlite3_column_text(st, 0);
        int64_t stack = sqlite3_column_int64(st, 1);
        /* rows of one stack are adjacent: one lookup each; a stack that cannot be read
         * fails the comparison (never a row that says "(no stack)" for it) */
        if (stack != last_stack && (rc = ms_site_reader_site(sr, stack, site, sizeof site)) < 0)
            break;
        last_stack = stack;
        const char *w = (const char *)sqlite3_column_text(st, 2);
        if (!w)
            w = "(no owner)";
        long long cnt = sqlite3_column_int64(st, 3), bytes = sqlite3_column_int64(st, 4);
        long long lc = sqlite3_column_int64(st, 5);
        long long lb = (long long)sqlite3_column_double(st, 6);
        rc = cset_add(&res->site, layer, site, idx, cnt, bytes);
        if (!rc)
            rc = cset_add(&res->owner, layer, w, idx, cnt, bytes);
        if (!rc && sd->live && lc > 0)
            rc = cset_add(&res->live_site, layer, site, idx, lc, lb);
        if (!rc && sd->live && lc > 0)
            rc = cset_add(&res->live_owner, layer, w, idx, lc, lb);
    }
    if (!rc && s != SQLITE_DONE)
        rc = MS_EDB;
    if (rc) /* before the finalize, which clears the connection's message */
        rc = ms_errf(err, errlen, rc, "compare: %s",
                     rc == MS_EDB ? sqlite3_errmsg(sd->db) : ms_strerror(rc));
    sqlite3_finalize(st);
    return rc;
}

static int load_side(const struct side *sd, const struct ms_analyze_opts *o, int idx,
                     struct result *res, char *err, size_t errlen)
{
    struct ms_site_reader sr;
    ms_site_reader_init(&sr, sd->db);
    int rc = load_rows(sd, o, idx, res, &sr, err, errlen);
    ms_site_reader_release(&sr);
    return rc;
}

/* ---- reports ---- */

static void totals(const struct cset *s, long long cnt[2], long long bytes[2])
{
    cnt[0] = cnt[1] = bytes[0] = bytes[1] = 0;
    for (size_t i = 0; i < s->n; i++)
        for (int k = 0; k < 2; k++) {
            cnt[k] += s->v[i].cnt[k];
            bytes[k] += s->v[i].bytes[k];
        }
}

static size_t shown(const struct ms_analyze_opts *o, size_t n)
{
    return o->top > 0 && (size_t)o->top < n ? (size_t)o->top : n;
}

static void text_table(FILE *out, const char *title, const char *what, const struct cset *s,
                       const struct ms_analyze_opts *o)
{
    size_t n = shown(o, s->n);
    fprintf(out, "\n%s (largest difference first%s):\n", title, n < s->n ? ", top rows" : "");
    if (!s->n) {
        fprintf(out, "  (none)\n");
        return;
    }
    fprintf(out, "  %14s %8s  %14s %8s  %14s %8s  %-12s %s\n", "diff bytes", "diff #", "A bytes",
            "A #", "B bytes", "B #", "layer", what);
    for (size_t i = 0; i < n; i++) {
        const struct crow *r = &s->v[i];
        fprintf(out, "  %+14lld %+8lld  %14lld %8lld  %14lld %8lld  %-12s %s\n",
                r->bytes[1] - r->bytes[0], r->cnt[1] - r->cnt[0], r->bytes[0], r->cnt[0],
                r->bytes[1], r->cnt[1], ms_term_text(r->layer), ms_term_text(r->key));
    }
    if (n < s->n)
        fprintf(out, "  ... %zu more\n", s->n - n);
}

static void text_section(FILE *out, const char *measure, const struct cset *site,
                         const struct cset *owner, const struct ms_analyze_opts *o)
{
    long long c[2], b[2];
    totals(site, c, b);
    fprintf(out,
            "\n== %s ==\nTotal: A %lld B in %lld blocks, B %lld B in %lld blocks, "
            "difference %+lld B (%+lld blocks).\n",
            measure, b[0], c[0], b[1], c[1], b[1] - b[0], c[1] - c[0]);
    text_table(out, "By call site", "site", site, o);
    text_table(out, "By owner", "owner", owner, o);
}

static void json_rows(struct ms_json *j, const char *key, const char *what, const struct cset *s,
                      const struct ms_analyze_opts *o)
{
    ms_json_begin_array(j, key);
    for (size_t i = 0, n = shown(o, s->n); i < n; i++) {
        const struct crow *r = &s->v[i];
        ms_json_begin_object(j, NULL);
        ms_json_str(j, what, r->key);
        ms_json_str(j, "layer", r->layer);
        ms_json_int(j, "a_bytes", r->bytes[0]);
        ms_json_int(j, "a_count", r->cnt[0]);
        ms_json_int(j, "b_bytes", r->bytes[1]);
        ms_json_int(j, "b_count", r->cnt[1]);
        ms_json_int(j, "diff_bytes", r->bytes[1] - r->bytes[0]);
        ms_json_int(j, "diff_count", r->cnt[1] - r->cnt[0]);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}

static void json_section(struct ms_json *j, const char *key, const struct cset *site,
                         const struct cset *owner, const struct ms_analyze_opts *o)
{
    long long c[2], b[2];
    totals(site, c, b);
    ms_json_begin_object(j, key);
    ms_json_begin_object(j, "totals");
    ms_json_int(j, "a_bytes", b[0]);
    ms_json_int(j, "a_count", c[0]);
    ms_json_int(j, "b_bytes", b[1]);
    ms_json_int(j, "b_count", c[1]);
    ms_json_int(j, "diff_bytes", b[1] - b[0]);
    ms_json_int(j, "diff_count", c[1] - c[0]);
    ms_json_end_object(j);
    json_rows(j, "by_site", "site", site, o);
    json_rows(j, "by_owner", "owner", owner, o);
    ms_json_end_object(j);
}

static void fmt_opt(char *buf, size_t len, const struct opseq *s, long i)
{
    if (i < 0)
        snprintf(buf, len, "N/A");
    else
        snprintf(buf, len, "%lld", s->v[i].bytes);
}

/* The comparison: both sides' rankings, and the op sequences with their diff. */
struct cresult {
    int steps; /* two steps of one run (else two runs) */
    char label_a[300], label_b[300];
    struct result res;
    int ops; /* either side has ops */
    struct opseq A, B;
    struct edit *ed;
    size_t ne;
    struct ops_summary sm;
};

static void cresult_release(struct cresult *r)
{
    free(r->sm.differ);
    free(r->ed);
    opseq_release(&r->A);
    opseq_release(&r->B);
    cset_release(&r->res.site);
    cset_release(&r->res.owner);
    cset_release(&r->res.live_site);
    cset_release(&r->res.live_owner);
}

/* Fills r (and writes o->csv_path); writes nothing on x->out. 0, or a negative code with
 * x->err set. */
static int compute(struct ms_actx *x, struct cresult *r)
{
    sqlite3 *db = x->db;
    const struct ms_analyze_opts *o = x->o;
    char *err = x->err;
    size_t errlen = x->errlen;
    int steps = r->steps = o->step_a > 0 || o->step_b > 0;
    if (steps && o->other_db)
        return ms_errf(err, errlen, MS_EINVAL,
                       "compare: give either --steps A,B or --with OTHER.db, not both");
    if (!steps && !o->other_db)
        return ms_errf(err, errlen, MS_EINVAL,
                       "compare: give --steps A,B (two steps of this run) or --with "
                       "OTHER.db (another run)");
    sqlite3 *db2 = NULL;
    struct ms_store_full other = {.dir = ""};
    struct side sa = {db, 0, 0, ms__has_column(db, "blocks", "owner_id")};
    struct side sb = sa;
    int rc;
    if (steps) {
        if (o->step_a <= 0 || o->step_b <= 0)
            return ms_errf(err, errlen, MS_EINVAL,
                           "compare: --steps needs two step numbers >= 1, as A,B");
        if (!ms__has_column(db, "blocks", "step"))
            return ms_errf(err, errlen, MS_EFORMAT,
                           "compare: this database has no step information");
        sqlite3_stmt *st;
        int maxstep = 0;
        if (sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(step), 0) FROM steps", -1, &st, NULL) ==
                SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            maxstep = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (maxstep == 0)
            return ms_errf(err, errlen, MS_EINVAL,
                           "compare: the program never called memscope_step(): this run "
                           "has no steps to compare");
        int bad = o->step_a > maxstep ? o->step_a : o->step_b > maxstep ? o->step_b : 0;
        if (bad)
            return ms_errf(err, errlen, MS_EINVAL,
                           "compare: step %d does not exist: the run has steps 1 to %d", bad,
                           maxstep);
        sa.step = o->step_a;
        sb.step = o->step_b;
        snprintf(r->label_a, sizeof r->label_a, "step %d", o->step_a);
        snprintf(r->label_b, sizeof r->label_b, "step %d", o->step_b);
    } else {
        /* a compact database whose owners a tag changed: its full database */
        if ((rc = ms_analyze_open(o->other_db, 0, &db2, err, errlen)) < 0)
            return rc;
        if (ms_store_is_compact(db2) && ms__retagged(db2)) {
            sqlite3_close(db2);
            db2 = NULL;
            if ((rc = ms_store_full_open(&other, o->other_db, err, errlen)) < 0 ||
                (rc = ms_analyze_open(other.path, 0, &db2, err, errlen)) < 0) {
                ms_store_full_close(&other);
                return rc;
            }
        }
        sb.db = db2;
        sb.has_owner = ms__has_column(db2, "blocks", "owner_id");
        sa.live = sb.live = 1;
        const char *base = strrchr(o->other_db, '/');
        snprintf(r->label_a, sizeof r->label_a, "this run");
        snprintf(r->label_b, sizeof r->label_b, "%s", base ? base + 1 : o->other_db);
    }

    if ((rc = load_side(&sa, o, 0, &r->res, err, errlen)) < 0 ||
        (rc = load_side(&sb, o, 1, &r->res, err, errlen)) < 0)
        goto done;
    cset_finish(&r->res.site);
    cset_finish(&r->res.owner);
    cset_finish(&r->res.live_site);
    cset_finish(&r->res.live_owner);

    r->ops = has_ranges(sa.db) || has_ranges(sb.db);
    if (r->ops) {
        if ((rc = load_ops(sa.db, o, sa.step, &r->A, err, errlen)) < 0 ||
            (rc = load_ops(sb.db, o, sb.step, &r->B, err, errlen)) < 0)
            goto done;
        if ((rc = op_diff(&r->A, &r->B, &r->ed, &r->ne)) < 0 ||
            (rc = summarize_ops(&r->A, &r->B, r->ed, r->ne, &r->sm)) < 0) {
            rc = ms_errf(err, errlen, rc, "compare: %s", ms_strerror(rc));
            goto done;
        }
    }
    if (o->csv_path) {
        if (!r->ops && !o->csv_no_ops_ok) {
            rc = ms_errf(err, errlen, MS_EINVAL,
                         "compare: --csv needs ops (memscope_range_push/pop), and "
                         "neither side has any");
            goto done;
        }
        if ((rc = write_csv(o->csv_path, &r->A, &r->B, r->ed, r->ne, err, errlen)) < 0)
            goto done;
    }
    rc = 0;
done:
    if (db2)
        sqlite3_close(db2);
    ms_store_full_close(&other);
    return rc;
}

static void render_json(struct ms_actx *x, const struct cresult *r)
{
    const struct ms_analyze_opts *o = x->o;
    const struct opseq *A = &r->A, *B = &r->B;
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "compare");
    ms_json_str(&j, "mode", r->steps ? "steps" : "runs");
    ms_json_str(&j, "a", r->label_a);
    ms_json_str(&j, "b", r->label_b);
    if (r->steps) {
        ms_json_int(&j, "step_a", o->step_a);
        ms_json_int(&j, "step_b", o->step_b);
    }
    json_section(&j, "allocated", &r->res.site, &r->res.owner, o);
    if (!r->steps)
        json_section(&j, "live_at_end", &r->res.live_site, &r->res.live_owner, o);
    if (r->ops) {
        ms_json_begin_object(&j, "ops");
        ms_json_int(&j, "a_count", (long long)A->n);
        ms_json_int(&j, "b_count", (long long)B->n);
        ms_json_int(&j, "matched", (long long)r->sm.matched);
        ms_json_int(&j, "only_a", (long long)r->sm.only_a);
        ms_json_int(&j, "only_b", (long long)r->sm.only_b);
        ms_json_begin_array(&j, "differ");
        for (size_t i = 0, n = shown(o, r->sm.ndiffer); i < n; i++) {
            const struct edit *e = &r->ed[r->sm.differ[i]];
            ms_json_begin_object(&j, NULL);
            ms_json_str(&j, "name", e->a >= 0 ? A->v[e->a].name : B->v[e->b].name);
            if (e->a >= 0)
                ms_json_int(&j, "a_bytes", A->v[e->a].bytes);
            else
                ms_json_null(&j, "a_bytes");
            if (e->b >= 0)
                ms_json_int(&j, "b_bytes", B->v[e->b].bytes);
            else
                ms_json_null(&j, "b_bytes");
            ms_json_int(&j, "diff_bytes", edit_diff(e));
            ms_json_end_object(&j);
        }
        ms_json_end_array(&j);
        ms_json_end_object(&j);
    } else {
        ms_json_null(&j, "ops");
    }
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

static void render_text(struct ms_actx *x, const struct cresult *r)
{
    const struct ms_analyze_opts *o = x->o;
    const struct opseq *A = &r->A, *B = &r->B;
    FILE *out = x->out;
    fprintf(out, "Compare A (%s) with B (%s).\n", r->label_a, ms_term_text(r->label_b));
    if (r->steps)
        fprintf(out,
                "A side: blocks allocated in step %d; B side: blocks allocated in "
                "step %d.\n",
                o->step_a, o->step_b);
    text_section(out, r->steps ? "Allocated in the step" : "Allocated over the run", &r->res.site,
                 &r->res.owner, o);
    if (!r->steps)
        text_section(out, "Live at end", &r->res.live_site, &r->res.live_owner, o);
    if (r->ops) {
        fprintf(out,
                "\n== Ops (memory allocated inside each op, Myers diff of op names) "
                "==\n%zu ops in A, %zu in B: %zu matched, %zu only in A, %zu only in "
                "B.\n",
                A->n, B->n, r->sm.matched, r->sm.only_a, r->sm.only_b);
        size_t n = shown(o, r->sm.ndiffer);
        if (!r->sm.ndiffer)
            fprintf(out, "Every matched op allocated the same bytes in A and B.\n");
        else
            fprintf(out, "  %14s  %14s  %14s  %s\n", "diff bytes", "A bytes", "B bytes", "op");
        for (size_t i = 0; i < n; i++) {
            const struct edit *e = &r->ed[r->sm.differ[i]];
            char ab[32], bb[32];
            fmt_opt(ab, sizeof ab, A, e->a);
            fmt_opt(bb, sizeof bb, B, e->b);
            fprintf(out, "  %+14lld  %14s  %14s  %s\n", edit_diff(e), ab, bb,
                    ms_term_text(e->a >= 0 ? A->v[e->a].name : B->v[e->b].name));
        }
        if (n < r->sm.ndiffer)
            fprintf(out, "  ... %zu more\n", r->sm.ndiffer - n);
    } else if (o->csv_path) {
        fprintf(out, "\n== Ops ==\nNeither run has ops (memscope_range_push/pop; PyTorch ops "
                     "with --events=access or launch): the op compare CSV holds its header "
                     "lines only.\n");
    }
}

/* Computed whole first, then written: a failure writes nothing (analyze.h's contract). */
int ms_analyze_compare(struct ms_actx *x)
{
    struct cresult r;
    memset(&r, 0, sizeof r);
    int rc = ms__actx_computed(x, compute(x, &r));
    if (rc == 0)
        (x->o->json ? render_json : render_text)(x, &r);
    cresult_release(&r);
    return rc;
}
