/* compare_ops.c: analyze compare's op-sequence part (compare_ops.h): the ops a run marked
 * (RANGE_START .. RANGE_END, from SQL or a compact database's replay) with the bytes allocated
 * in each, the Myers diff of two sequences, its summary, and msMemScope's memory_compare CSV.
 * Workload: one scan of events in id order per side; the diff O((N+M)D), D capped. */
#include "compare_ops.h"

#include "common/db_ids.h"
#include "common/ms_error.h"
#include "common/files.h"
#include "common/grow.h"
#include "store/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void opseq_release(struct opseq *s)
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

int has_ranges(sqlite3 *db)
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

int load_ops(sqlite3 *db, const struct ms_analyze_opts *o, int step, struct opseq *out, char *err,
             size_t errlen)
{
    struct opctx x = {.step = step, .out = out};
    int rc = 0, s = SQLITE_DONE;
    sqlite3_stmt *st = NULL;
    if (step > 0 && (rc = load_bounds(db, step, &x.bd)) < 0)
        goto done;
    if (ms_store_is_compact(db)) { /* the same rows from its traces */
        if ((rc = ms__layer_set_load(db, o, &x.layers)) == 0)
            rc = ms_store_replay(sqlite3_db_filename(db, "main"), op_replayed, &x, err, errlen);
        ms__layer_set_release(&x.layers);
        if (rc < 0) {
            for (size_t i = 0; i < x.nthreads; i++)
                free(x.threads[i]);
            free(x.threads);
            free(x.bd.lo);
            free(x.bd.hi);
            return rc; /* err says why */
        }
    } else {
        char *filter = ms__layer_filter(db, o, "layer");
        int prc =
            !filter ? SQLITE_NOMEM
                    : ms__prepare(db, &st,
                                  "SELECT id, kind, process_id, thread_id, size, name FROM "
                                  "events WHERE kind IN (" MS_SQL_RANGE_START ", " MS_SQL_RANGE_END
                                  ") OR (kind = " MS_SQL_MALLOC " AND %s) ORDER BY id",
                                  filter);
        sqlite3_free(filter);
        if (prc != SQLITE_OK) {
            rc = prc == SQLITE_NOMEM ? MS_ENOMEM : MS_EDB;
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
        return ms_errf(err, errlen, rc, "compare: reading ops: %s",
                       rc == MS_EDB ? sqlite3_errmsg(db) : ms_strerror(rc));
    return rc;
}

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
        /* none written (both sides empty): *ned - 1 would wrap around */
        for (size_t i = start, j = *ned > start ? *ned - 1 : start; i < j; i++, j--) {
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
int op_diff(const struct opseq *A, const struct opseq *B, struct edit **out, size_t *nout)
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
int write_csv(const char *path, const struct opseq *A, const struct opseq *B, const struct edit *ed,
              size_t ne, char *err, size_t errlen)
{
    struct ms_output mo;
    int orc = ms_output_open(&mo, path); /* renamed over path when complete (files.h) */
    FILE *f = orc == 0 ? fdopen(mo.fd, "w") : NULL;
    if (!f) {
        int rc = ms_errf(err, errlen, MS_EIO, "compare: cannot write '%s': %s", path,
                         strerror(orc < 0 ? -orc : errno));
        ms_output_abort(&mo);
        return rc;
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
        return ms_errf(err, errlen, MS_EIO, "compare: cannot write '%s'", path);
    }
    return 0;
}

static long long absll(long long v)
{
    return v < 0 ? -v : v;
}

/* The op edits that differ, largest |diff| first, then in sequence order. */
static const struct opseq *g_A, *g_B;
static const struct edit *g_ed;

long long edit_diff(const struct edit *e)
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

/* Not reentrant (qsort has no context argument in C11): analyses run one at a time. */
int summarize_ops(const struct opseq *A, const struct opseq *B, const struct edit *ed, size_t ne,
                  struct ops_summary *sm)
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
