/* compare.c: `memscope analyze compare`: two steps of one run (--steps A,B) or two runs
 * (--with other.db), per call site and per owner, heaptrack-diff style; and, when the program
 * marked ops with memscope_range_push/pop, msMemScope's op-sequence compare (a Myers diff of
 * the op names, memory allocated per op) in its memory_compare CSV format (--csv FILE).
 *
 * Workload: one GROUP BY over blocks per side (sites and owners), then one call-site lookup
 * per distinct stack; the op compare adds one scan of events in id order, only when the
 * database has ranges. Memory: one row per distinct (layer, site) and (layer, owner), and one
 * per op of the two sequences.
 *
 * Definitions (docs/analyses.md): a step side is the blocks allocated in that step
 * (blocks.step); a run side is the blocks allocated over the whole run ("allocated") and the
 * blocks still live when their process ended ("live at end"). */
#include "analyze.h"
#include "db_ids.h"
#include "files.h"

#include "error.h"
#include "grow.h"
#include "store.h"

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
    if (s->n == s->cap &&
        ms_grow((void **)&s->v, &s->cap, s->n, sizeof *s->v, 64, MS_GROW_MAX) < 0)
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

static long long absll(long long v) { return v < 0 ? -v : v; }

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

static int load_side(const struct side *sd, const struct ms_analyze_opts *o, int idx,
                     struct result *res, char *err, size_t errlen)
{
    char filter[640], q[1400];
    ms__layer_filter(sd->db, o, "b.layer", filter, sizeof filter);
    char stepc[48] = "";
    if (sd->step > 0)
        snprintf(stepc, sizeof stepc, " AND b.step = %d", sd->step);
    /* One scan: grouped by (layer, stack, owner), then summed by site and by owner here. A
     * compact database has these sums by (process, layer, stack, owner, step) in site_stats. */
    if (ms__computed(sd->db, "site_stats") && !ms__retagged(sd->db))
        snprintf(q, sizeof q,
                 "SELECT l.name, b.stack_id, %s, SUM(b.allocs), SUM(b.alloc_bytes), "
                 "SUM(b.live_blocks), TOTAL(b.live_bytes) "
                 "FROM site_stats b LEFT JOIN layers l ON l.id = b.layer %s WHERE %s%s "
                 "GROUP BY b.layer, b.stack_id%s",
                 sd->has_owner ? "w.label" : "NULL",
                 sd->has_owner ? "LEFT JOIN owners w ON w.id = b.owner_id" : "", filter, stepc,
                 sd->has_owner ? ", b.owner_id" : "");
    else
        snprintf(q, sizeof q,
                 "SELECT l.name, b.stack_id, %s, COUNT(*), SUM(b.size), SUM(b.free_ns IS NULL), "
                 "TOTAL(CASE WHEN b.free_ns IS NULL THEN b.size END) "
                 "FROM blocks b LEFT JOIN layers l ON l.id = b.layer %s WHERE %s%s "
                 "GROUP BY b.layer, b.stack_id%s",
                 sd->has_owner ? "w.label" : "NULL",
                 sd->has_owner ? "LEFT JOIN owners w ON w.id = b.owner_id" : "", filter, stepc,
                 sd->has_owner ? ", b.owner_id" : "");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(sd->db, q, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "compare: %s", sqlite3_errmsg(sd->db));
        return MS_EDB;
    }
    int rc = 0, s;
    int64_t last_stack = -1;
    char site[512] = "";
    while (!rc && (s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *layer = (const char *)sqlite3_column_text(st, 0);
        int64_t stack = sqlite3_column_int64(st, 1);
        if (stack != last_stack) /* rows of one stack are adjacent: one lookup each */
            ms_stack_site(sd->db, stack, site, sizeof site);
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
    sqlite3_finalize(st);
    if (rc) {
        snprintf(err, errlen, "compare: %s",
                 rc == MS_EDB ? sqlite3_errmsg(sd->db) : ms_strerror(rc));
        return rc;
    }
    return 0;
}

/* ---- op sequences (ranges) and the Myers diff ---- */

struct op {
    char *name;
    long long bytes; /* bytes allocated between its RANGE_START and RANGE_END (inclusive of
                        nested ops), on its thread, in the analysed layers */
    int64_t end_id;  /* its RANGE_END event; 0 while open */
};

struct opseq {
    struct op *v;
    size_t n, cap;
};

static void opseq_release(struct opseq *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i].name);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int by_end(const void *a, const void *b)
{
    const struct op *x = a, *y = b;
    return x->end_id < y->end_id ? -1 : x->end_id > y->end_id;
}

#define MAX_OP_DEPTH 256

/* Per thread: the stack of open ops (indexes into the sequence). */
struct tstack {
    size_t idx[MAX_OP_DEPTH];
    int depth;
};

static int has_ranges(sqlite3 *db)
{
    sqlite3_stmt *st;
    int yes = 0;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM ranges LIMIT 1", -1, &st, NULL) == SQLITE_OK)
        yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

/* Event-id bounds of step `step` per process: (lo[p], hi[p]]; lo = hi = 0 where the process
 * has no such step. */
struct bounds {
    int64_t *lo, *hi;
    int nproc;
};

static int load_bounds(sqlite3 *db, int step, struct bounds *b)
{
    memset(b, 0, sizeof *b);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(id), 0) FROM processes", -1, &st, NULL) !=
            SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return MS_EDB;
    }
    b->nproc = sqlite3_column_int(st, 0) + 1;
    sqlite3_finalize(st);
    b->lo = calloc((size_t)b->nproc, sizeof *b->lo);
    b->hi = calloc((size_t)b->nproc, sizeof *b->hi);
    if (!b->lo || !b->hi)
        return MS_ENOMEM;
    const char *q = "SELECT s.process_id, COALESCE(p.end_event_id, 0), "
                    "COALESCE(s.end_event_id, 9223372036854775807) FROM steps s "
                    "LEFT JOIN steps p ON p.process_id = s.process_id AND p.step = s.step - 1 "
                    "WHERE s.step = ?";
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int(st, 1, step);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int p = sqlite3_column_int(st, 0);
        if (p <= 0 || p >= b->nproc)
            continue;
        b->lo[p] = sqlite3_column_int64(st, 1);
        b->hi[p] = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    return 0;
}

/* Reads the ops of db (of step `step` when > 0: those whose RANGE_END falls in the step), in
 * the order they end, with the bytes allocated inside each. */
/* The op scan's state. */
struct opctx {
    int step;
    struct bounds bd;
    struct tstack **threads;
    size_t nthreads;
    struct opseq *out;
    struct ms_layer_set layers; /* a compact database's replay */
};

/* One row: RANGE_START, RANGE_END or MALLOC (of a selected layer), in id order. */
static int op_row(struct opctx *x, int64_t id, int kind, int proc, int64_t tid, long long size,
                  const char *name)
{
    struct opseq *out = x->out;
    if (tid < 0 || tid > (1 << 24)) /* hostile input: thread ids are dense from 1 */
        return 0;
    if ((size_t)tid >= x->nthreads) {
        if (kind == MS_KIND_MALLOC)
            return 0; /* no op ever opened on this thread */
        size_t nn = (size_t)tid + 16;
        struct tstack **t = realloc(x->threads, nn * sizeof *t);
        if (!t)
            return MS_ENOMEM;
        memset(t + x->nthreads, 0, (nn - x->nthreads) * sizeof *t);
        x->threads = t;
        x->nthreads = nn;
    }
    struct tstack *ts = x->threads[tid];
    if (kind == MS_KIND_MALLOC) {
        if (!ts)
            return 0;
        for (int d = 0; d < ts->depth && d < MAX_OP_DEPTH; d++)
            out->v[ts->idx[d]].bytes += size;
    } else if (kind == MS_KIND_RANGE_START) {
        if (!ts && !(ts = x->threads[tid] = calloc(1, sizeof *ts)))
            return MS_ENOMEM;
        if (ts->depth >= MAX_OP_DEPTH) {
            ts->depth++; /* too deep: counted, not recorded */
            return 0;
        }
        if (out->n == out->cap &&
            ms_grow((void **)&out->v, &out->cap, out->n, sizeof *out->v, 256, MS_GROW_MAX) < 0)
            return MS_ENOMEM;
        struct op *op = &out->v[out->n];
        op->name = strdup(name ? name : "");
        op->bytes = 0;
        op->end_id = 0;
        if (!op->name)
            return MS_ENOMEM;
        ts->idx[ts->depth++] = out->n++;
    } else if (ts && ts->depth > 0) {
        ts->depth--;
        if (ts->depth < MAX_OP_DEPTH) {
            int in = x->step <= 0 || (proc > 0 && proc < x->bd.nproc && id > x->bd.lo[proc] &&
                                      id <= x->bd.hi[proc]);
            /* end_id -1 marks ops outside the step, dropped below. */
            out->v[ts->idx[ts->depth]].end_id = in ? id : -1;
        }
    }
    return 0;
}

static int op_replayed(void *ctx, const struct ms_store_row *r)
{
    struct opctx *x = ctx;
    if (r->kind == MS_KIND_MALLOC ? !ms__layer_selected(&x->layers, r->layer)
                                  : r->kind != MS_KIND_RANGE_START && r->kind != MS_KIND_RANGE_END)
        return 0;
    char *name = NULL;
    if (r->kind == MS_KIND_RANGE_START && r->name && !(name = strndup(r->name, r->name_len)))
        return MS_ENOMEM;
    int rc = op_row(x, r->id, r->kind, (int)r->process_id, r->thread_id, r->has_size ? r->size : 0,
                    name);
    free(name);
    return rc;
}

static int load_ops(sqlite3 *db, const struct ms_analyze_opts *o, int step, struct opseq *out,
                    char *err, size_t errlen)
{
    struct opctx x = {.step = step, .out = out};
    int rc = 0, s = SQLITE_DONE;
    sqlite3_stmt *st = NULL;
    if (step > 0 && (rc = load_bounds(db, step, &x.bd)) < 0)
        goto done;
    if (ms_store_is_compact(db)) { /* the same rows from its traces */
        if ((rc = ms__layer_set_load(db, o, &x.layers)) == 0)
            rc = ms_store_replay(sqlite3_db_filename(db, "main"), op_replayed, &x, err, errlen);
        if (rc < 0) {
            for (size_t i = 0; i < x.nthreads; i++)
                free(x.threads[i]);
            free(x.threads);
            free(x.bd.lo);
            free(x.bd.hi);
            return rc; /* err says why */
        }
    } else {
        char filter[640], q[900];
        ms__layer_filter(db, o, "layer", filter, sizeof filter);
        snprintf(q, sizeof q,
                 "SELECT id, kind, process_id, thread_id, size, name FROM events "
                 "WHERE kind IN (" MS_SQL_RANGE_START ", " MS_SQL_RANGE_END ") OR "
                 "(kind = " MS_SQL_MALLOC " AND %s) ORDER BY id",
                 filter);
        if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) {
            rc = MS_EDB;
            goto done;
        }
        while (!rc && (s = sqlite3_step(st)) == SQLITE_ROW)
            rc = op_row(&x, sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1),
                        sqlite3_column_int(st, 2), sqlite3_column_int64(st, 3),
                        sqlite3_column_int64(st, 4), (const char *)sqlite3_column_text(st, 5));
        if (!rc && s != SQLITE_DONE)
            rc = MS_EDB;
        sqlite3_finalize(st);
    }
    if (!rc) {
        size_t w = 0;
        for (size_t i = 0; i < out->n; i++) {
            if (out->v[i].end_id > 0)
                out->v[w++] = out->v[i];
            else
                free(out->v[i].name);
        }
        out->n = w;
        if (out->n > 1)
            qsort(out->v, out->n, sizeof *out->v, by_end);
    }
done:
    for (size_t i = 0; i < x.nthreads; i++)
        free(x.threads[i]);
    free(x.threads);
    free(x.bd.lo);
    free(x.bd.hi);
    if (rc)
        snprintf(err, errlen, "compare: reading ops: %s",
                 rc == MS_EDB ? sqlite3_errmsg(db) : ms_strerror(rc));
    return rc;
}

/* One line of the op diff: a in base (or -1), b in compare (or -1). */
struct edit {
    long a, b;
};

/* The Myers D cap: the trace of V arrays costs (D+1)^2 ints. Past it the unmatched middle is
 * reported as removed then added, as msMemScope does when its MAXLOOPTIME expires. */
#define MYERS_MAX_D 2000

/* Appends the shortest edit script from a[0..n) to b[0..m) to *ed (Myers 1986, O((N+M)D)). */
static int myers(const struct op *a, long n, const struct op *b, long m, long a0, long b0,
                 struct edit *ed, size_t *ned)
{
    long max = n + m;
    if (max > MYERS_MAX_D)
        max = MYERS_MAX_D;
    long off = max + 1;
    long *v = malloc((size_t)(2 * max + 3) * sizeof *v);
    long **trace = calloc((size_t)max + 1, sizeof *trace);
    if (!v || !trace) {
        free(v);
        free(trace);
        return MS_ENOMEM;
    }
    v[off + 1] = 0;
    long found = -1;
    for (long d = 0; d <= max && found < 0; d++) {
        for (long k = -d; k <= d; k += 2) {
            long x;
            if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
                x = v[off + k + 1];
            else
                x = v[off + k - 1] + 1;
            long y = x - k;
            while (x < n && y < m && !strcmp(a[x].name, b[y].name)) {
                x++;
                y++;
            }
            v[off + k] = x;
            if (x >= n && y >= m) {
                found = d;
                break;
            }
        }
        trace[d] = malloc((size_t)(2 * d + 1) * sizeof **trace);
        if (!trace[d]) {
            found = -2;
            break;
        }
        for (long k = -d; k <= d; k++)
            trace[d][k + d] = v[off + k];
    }
    int rc = 0;
    if (found == -2) {
        rc = MS_ENOMEM;
    } else if (found < 0) {
        for (long i = 0; i < n; i++)
            ed[(*ned)++] = (struct edit){a0 + i, -1};
        for (long j = 0; j < m; j++)
            ed[(*ned)++] = (struct edit){-1, b0 + j};
    } else {
        /* Walk back from (n, m), writing the script backwards, then reverse it. */
        size_t start = *ned;
        long x = n, y = m;
        for (long d = found; d >= 0; d--) {
            long k = x - y, pk;
            if (d == 0) {
                while (x > 0 && y > 0) {
                    x--, y--;
                    ed[(*ned)++] = (struct edit){a0 + x, b0 + y};
                }
                break;
            }
            const long *pv = trace[d - 1]; /* index k' + (d-1) */
            if (k == -d || (k != d && pv[k - 1 + d - 1] < pv[k + 1 + d - 1]))
                pk = k + 1;
            else
                pk = k - 1;
            long px = pv[pk + d - 1], py = px - pk;
            while (x > px && y > py) {
                x--, y--;
                ed[(*ned)++] = (struct edit){a0 + x, b0 + y};
            }
            if (x == px)
                ed[(*ned)++] = (struct edit){-1, b0 + (--y)};
            else
                ed[(*ned)++] = (struct edit){a0 + (--x), -1};
        }
        for (size_t i = start, j = *ned - 1; i < j; i++, j--) {
            struct edit t = ed[i];
            ed[i] = ed[j];
            ed[j] = t;
        }
    }
    for (long d = 0; d <= max; d++)
        free(trace[d]);
    free(trace);
    free(v);
    return rc;
}

/* The whole diff: common prefix and suffix matched directly, Myers on the middle. */
static int op_diff(const struct opseq *A, const struct opseq *B, struct edit **out, size_t *nout)
{
    long n = (long)A->n, m = (long)B->n, p = 0, s = 0;
    struct edit *ed = malloc((size_t)(n + m + 1) * sizeof *ed);
    if (!ed)
        return MS_ENOMEM;
    size_t ne = 0;
    while (p < n && p < m && !strcmp(A->v[p].name, B->v[p].name)) {
        ed[ne++] = (struct edit){p, p};
        p++;
    }
    while (s < n - p && s < m - p && !strcmp(A->v[n - 1 - s].name, B->v[m - 1 - s].name))
        s++;
    int rc = myers(A->v + p, n - p - s, B->v + p, m - p - s, p, p, ed, &ne);
    for (long i = 0; !rc && i < s; i++)
        ed[ne++] = (struct edit){n - s + i, m - s + i};
    if (rc) {
        free(ed);
        return rc;
    }
    *out = ed;
    *nout = ne;
    return 0;
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* msMemScope's memory_compare CSV (reference §3.3): two header lines, one row per edit. */
static int write_csv(const char *path, const struct opseq *A, const struct opseq *B,
                     const struct edit *ed, size_t ne, char *err, size_t errlen)
{
    struct ms_output mo;
    int orc = ms_output_open(&mo, path); /* renamed over path when complete (files.h) */
    FILE *f = orc == 0 ? fdopen(mo.fd, "w") : NULL;
    if (!f) {
        snprintf(err, errlen, "compare: cannot write '%s': %s", path,
                 strerror(orc < 0 ? -orc : errno));
        ms_output_abort(&mo);
        return MS_EIO;
    }
    fputs(",,,Base,Compare\nEvent,Name,Device Id,Allocated Memory(byte),"
          "Allocated Memory(byte),Diff Memory(byte)\n",
          f);
    for (size_t i = 0; i < ne; i++) {
        const struct op *a = ed[i].a >= 0 ? &A->v[ed[i].a] : NULL;
        const struct op *b = ed[i].b >= 0 ? &B->v[ed[i].b] : NULL;
        fputs("OP_LAUNCH,", f);
        csv_field(f, a ? a->name : b->name);
        fputs(",N/A,", f);
        if (a)
            fprintf(f, "%lld,", a->bytes);
        else
            fputs("N/A,", f);
        if (b)
            fprintf(f, "%lld,", b->bytes);
        else
            fputs("N/A,", f);
        fprintf(f, "%lld\n", (b ? b->bytes : 0) - (a ? a->bytes : 0));
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    mo.fd = -1; /* fclose closed it */
    if (bad || ms_output_commit(&mo) < 0) {
        ms_output_abort(&mo);
        snprintf(err, errlen, "compare: cannot write '%s'", path);
        return MS_EIO;
    }
    return 0;
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
    fprintf(out, "\n%s (largest difference first%s):\n", title,
            n < s->n ? ", top rows" : "");
    if (!s->n) {
        fprintf(out, "  (none)\n");
        return;
    }
    fprintf(out, "  %14s %8s  %14s %8s  %14s %8s  %-12s %s\n", "diff bytes", "diff #",
            "A bytes", "A #", "B bytes", "B #", "layer", what);
    for (size_t i = 0; i < n; i++) {
        const struct crow *r = &s->v[i];
        fprintf(out, "  %+14lld %+8lld  %14lld %8lld  %14lld %8lld  %-12s %s\n",
                r->bytes[1] - r->bytes[0], r->cnt[1] - r->cnt[0], r->bytes[0], r->cnt[0],
                r->bytes[1], r->cnt[1], r->layer, r->key);
    }
    if (n < s->n)
        fprintf(out, "  ... %zu more\n", s->n - n);
}

static void text_section(FILE *out, const char *measure, const struct cset *site,
                         const struct cset *owner, const struct ms_analyze_opts *o)
{
    long long c[2], b[2];
    totals(site, c, b);
    fprintf(out, "\n== %s ==\nTotal: A %lld B in %lld blocks, B %lld B in %lld blocks, "
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

/* The op edits that differ, largest |diff| first, then in sequence order. */
static const struct opseq *g_A, *g_B;
static const struct edit *g_ed;

static long long edit_diff(const struct edit *e)
{
    return (e->b >= 0 ? g_B->v[e->b].bytes : 0) - (e->a >= 0 ? g_A->v[e->a].bytes : 0);
}

static int by_edit_diff(const void *x, const void *y)
{
    size_t i = *(const size_t *)x, k = *(const size_t *)y;
    long long di = absll(edit_diff(&g_ed[i])), dk = absll(edit_diff(&g_ed[k]));
    if (di != dk)
        return di > dk ? -1 : 1;
    return i < k ? -1 : i > k;
}

struct ops_summary {
    size_t matched, only_a, only_b;
    size_t *differ; /* positions in the edit script: unmatched, or matched with a diff */
    size_t ndiffer;
};

/* Not reentrant (qsort has no context argument in C11): analyses run one at a time. */
static int summarize_ops(const struct opseq *A, const struct opseq *B, const struct edit *ed,
                         size_t ne, struct ops_summary *sm)
{
    memset(sm, 0, sizeof *sm);
    sm->differ = malloc((ne + 1) * sizeof *sm->differ);
    if (!sm->differ)
        return MS_ENOMEM;
    g_A = A;
    g_B = B;
    g_ed = ed;
    for (size_t i = 0; i < ne; i++) {
        if (ed[i].a >= 0 && ed[i].b >= 0)
            sm->matched++;
        else if (ed[i].a >= 0)
            sm->only_a++;
        else
            sm->only_b++;
        if (edit_diff(&ed[i]) != 0 || ed[i].a < 0 || ed[i].b < 0)
            sm->differ[sm->ndiffer++] = i;
    }
    if (sm->ndiffer > 1)
        qsort(sm->differ, sm->ndiffer, sizeof *sm->differ, by_edit_diff);
    return 0;
}

static void fmt_opt(char *buf, size_t len, const struct opseq *s, long i)
{
    if (i < 0)
        snprintf(buf, len, "N/A");
    else
        snprintf(buf, len, "%lld", s->v[i].bytes);
}

int ms_analyze_compare(sqlite3 *db, const struct ms_analyze_opts *o, FILE *out, char *err,
                       size_t errlen)
{
    int steps = o->step_a > 0 || o->step_b > 0;
    if (steps && o->other_db) {
        snprintf(err, errlen, "compare: give either --steps A,B or --with OTHER.db, not both");
        return MS_EINVAL;
    }
    if (!steps && !o->other_db) {
        snprintf(err, errlen, "compare: give --steps A,B (two steps of this run) or --with "
                              "OTHER.db (another run)");
        return MS_EINVAL;
    }
    sqlite3 *db2 = NULL;
    struct ms_store_full other = {.dir = ""};
    struct side sa = {db, 0, 0, ms__has_column(db, "blocks", "owner_id")};
    struct side sb = sa;
    char label_a[300], label_b[300];
    int rc;
    if (steps) {
        if (o->step_a <= 0 || o->step_b <= 0) {
            snprintf(err, errlen, "compare: --steps needs two step numbers >= 1, as A,B");
            return MS_EINVAL;
        }
        if (!ms__has_column(db, "blocks", "step")) {
            snprintf(err, errlen, "compare: this database has no step information");
            return MS_EFORMAT;
        }
        sqlite3_stmt *st;
        int maxstep = 0;
        if (sqlite3_prepare_v2(db, "SELECT COALESCE(MAX(step), 0) FROM steps", -1, &st,
                               NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            maxstep = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (maxstep == 0) {
            snprintf(err, errlen, "compare: the program never called memscope_step(): this run "
                                  "has no steps to compare");
            return MS_EINVAL;
        }
        int bad = o->step_a > maxstep ? o->step_a : o->step_b > maxstep ? o->step_b : 0;
        if (bad) {
            snprintf(err, errlen, "compare: step %d does not exist: the run has steps 1 to %d",
                     bad, maxstep);
            return MS_EINVAL;
        }
        sa.step = o->step_a;
        sb.step = o->step_b;
        snprintf(label_a, sizeof label_a, "step %d", o->step_a);
        snprintf(label_b, sizeof label_b, "step %d", o->step_b);
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
        snprintf(label_a, sizeof label_a, "this run");
        snprintf(label_b, sizeof label_b, "%s", base ? base + 1 : o->other_db);
    }

    struct result res;
    memset(&res, 0, sizeof res);
    struct opseq A = {0}, B = {0};
    struct edit *ed = NULL;
    size_t ne = 0;
    struct ops_summary sm = {0};
    int ops = 0;
    if ((rc = load_side(&sa, o, 0, &res, err, errlen)) < 0 ||
        (rc = load_side(&sb, o, 1, &res, err, errlen)) < 0)
        goto done;
    cset_finish(&res.site);
    cset_finish(&res.owner);
    cset_finish(&res.live_site);
    cset_finish(&res.live_owner);

    ops = has_ranges(sa.db) || has_ranges(sb.db);
    if (ops) {
        if ((rc = load_ops(sa.db, o, sa.step, &A, err, errlen)) < 0 ||
            (rc = load_ops(sb.db, o, sb.step, &B, err, errlen)) < 0)
            goto done;
        if ((rc = op_diff(&A, &B, &ed, &ne)) < 0 ||
            (rc = summarize_ops(&A, &B, ed, ne, &sm)) < 0) {
            snprintf(err, errlen, "compare: %s", ms_strerror(rc));
            goto done;
        }
    }
    if (o->csv_path) {
        if (!ops) {
            snprintf(err, errlen, "compare: --csv needs ops (memscope_range_push/pop), and "
                                  "neither side has any");
            rc = MS_EINVAL;
            goto done;
        }
        if ((rc = write_csv(o->csv_path, &A, &B, ed, ne, err, errlen)) < 0)
            goto done;
    }

    if (o->json) {
        struct ms_json j;
        ms_json_init(&j, out);
        ms_json_begin_object(&j, NULL);
        ms_json_str(&j, "analysis", "compare");
        ms_json_str(&j, "mode", steps ? "steps" : "runs");
        ms_json_str(&j, "a", label_a);
        ms_json_str(&j, "b", label_b);
        if (steps) {
            ms_json_int(&j, "step_a", o->step_a);
            ms_json_int(&j, "step_b", o->step_b);
        }
        json_section(&j, "allocated", &res.site, &res.owner, o);
        if (!steps)
            json_section(&j, "live_at_end", &res.live_site, &res.live_owner, o);
        if (ops) {
            ms_json_begin_object(&j, "ops");
            ms_json_int(&j, "a_count", (long long)A.n);
            ms_json_int(&j, "b_count", (long long)B.n);
            ms_json_int(&j, "matched", (long long)sm.matched);
            ms_json_int(&j, "only_a", (long long)sm.only_a);
            ms_json_int(&j, "only_b", (long long)sm.only_b);
            ms_json_begin_array(&j, "differ");
            for (size_t i = 0, n = shown(o, sm.ndiffer); i < n; i++) {
                const struct edit *e = &ed[sm.differ[i]];
                ms_json_begin_object(&j, NULL);
                ms_json_str(&j, "name", e->a >= 0 ? A.v[e->a].name : B.v[e->b].name);
                if (e->a >= 0)
                    ms_json_int(&j, "a_bytes", A.v[e->a].bytes);
                else
                    ms_json_null(&j, "a_bytes");
                if (e->b >= 0)
                    ms_json_int(&j, "b_bytes", B.v[e->b].bytes);
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
    } else {
        fprintf(out, "Compare A (%s) with B (%s).\n", label_a, label_b);
        if (steps)
            fprintf(out, "A side: blocks allocated in step %d; B side: blocks allocated in "
                         "step %d.\n",
                    o->step_a, o->step_b);
        text_section(out, steps ? "Allocated in the step" : "Allocated over the run",
                     &res.site, &res.owner, o);
        if (!steps)
            text_section(out, "Live at end", &res.live_site, &res.live_owner, o);
        if (ops) {
            fprintf(out, "\n== Ops (memory allocated inside each op, Myers diff of op names) "
                         "==\n%zu ops in A, %zu in B: %zu matched, %zu only in A, %zu only in "
                         "B.\n",
                    A.n, B.n, sm.matched, sm.only_a, sm.only_b);
            size_t n = shown(o, sm.ndiffer);
            if (!sm.ndiffer)
                fprintf(out, "Every matched op allocated the same bytes in A and B.\n");
            else
                fprintf(out, "  %14s  %14s  %14s  %s\n", "diff bytes", "A bytes", "B bytes",
                        "op");
            for (size_t i = 0; i < n; i++) {
                const struct edit *e = &ed[sm.differ[i]];
                char ab[32], bb[32];
                fmt_opt(ab, sizeof ab, &A, e->a);
                fmt_opt(bb, sizeof bb, &B, e->b);
                fprintf(out, "  %+14lld  %14s  %14s  %s\n", edit_diff(e), ab, bb,
                        e->a >= 0 ? A.v[e->a].name : B.v[e->b].name);
            }
            if (n < sm.ndiffer)
                fprintf(out, "  ... %zu more\n", sm.ndiffer - n);
        }
    }
    rc = 0;
done:
    free(sm.differ);
    free(ed);
    opseq_release(&A);
    opseq_release(&B);
    cset_release(&res.site);
    cset_release(&res.owner);
    cset_release(&res.live_site);
    cset_release(&res.live_owner);
    if (db2)
        sqlite3_close(db2);
    ms_store_full_close(&other);
    return rc;
}
