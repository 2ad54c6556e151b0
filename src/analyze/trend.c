/* trend.c: `memscope analyze trend`: live bytes over time and at each step end, the growth rate
 * by least squares (bytes per second over the time samples, bytes per step over the step
 * ends) with R^2 and the slope's standard error, and with --limit the predicted time and step
 * at which live bytes reach the limit, from a fit over the last half of the run (and not when the
 * fit does not grow, or the limit lies far beyond what the run or its steps cover).
 *
 * Called through ms_analyses[]. Workload: one rowid-order scan of events (MALLOC, FREE and
 * STEP) replayed with ms__live_apply (a compact database: the same rows from its traces,
 * ms_store_replay, without SQL); the time series is TREND_POINTS + 1 evenly spaced samples
 * of the total live bytes of the selected layers over all processes; the step series is the
 * live bytes of the stepping process (all its selected layers) at each of its STEP events. */
#include "analyze.h"
#include "common/forecast.h"
#include "common/db_ids.h"

#include "common/ms_error.h"
#include "common/grow.h"
#include "store/store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TREND_POINTS MS_TREND_POINTS

/* The step series of one process, and its fit from the first step after the warm-up. */
struct pseries {
    int64_t process_id;
    double *step, *live;
    int n;
    size_t cap_step, cap_live;
    int first;         /* the fit's first point */
    struct ms_fit fit; /* live bytes per step */
    int reached_at;    /* --limit: the first point at or over it, or -1 */
    double limit_step; /* --limit: the step the fit reaches it at, or -1 */
    int why;           /* --limit: MS_LIMIT_* */
};

/* The result: live bytes over time with its fit, and each stepping process's series. */
struct trend {
    int64_t t0, t1, start_ns;
    int64_t samples[TREND_POINTS + 1];
    int64_t final_live, max_live;
    struct ms_fit time_fit; /* live bytes per second */
    struct ms_fit tail_fit; /* the same over the last half of the run: --limit predicts from it */
    int limit_reached;      /* --limit: max_live reached it */
    double limit_s;         /* --limit: seconds after t0 at which the tail fit reaches it, or -1 */
    int why;                /* --limit: LIMIT_* */
    struct pseries *ps;
    size_t nps, aps;
};

/* The scan that fills a trend's series. */
struct tctx {
    struct ms_actx *x;
    struct trend *r;
    struct ms_live live;
    struct ms_layer_set layers;
    int64_t total;
    int k;
};

static int add_step(struct tctx *T, int64_t proc, double step, double live)
{
    struct pseries *p = NULL;
    for (size_t i = 0; i < T->r->nps; i++)
        if (T->r->ps[i].process_id == proc)
            p = &T->r->ps[i];
    if (!p) {
        if (ms_grow((void **)&T->r->ps, &T->r->aps, T->r->nps, sizeof *T->r->ps, 4, MS_GROW_MAX) <
            0)
            return MS_ENOMEM;
        p = &T->r->ps[T->r->nps++];
        memset(p, 0, sizeof *p);
        p->process_id = proc;
    }
    if (p->n >= (1 << 26))
        return MS_ELIMIT;
    if (ms_grow((void **)&p->step, &p->cap_step, (size_t)p->n, sizeof *p->step, 64, 1 << 26) < 0 ||
        ms_grow((void **)&p->live, &p->cap_live, (size_t)p->n, sizeof *p->live, 64, 1 << 26) < 0)
        return MS_ENOMEM;
    p->step[p->n] = step;
    p->live[p->n++] = live;
    return 0;
}

/* Live bytes of one process over the selected layers. */
static int64_t proc_live(const struct ms_live *l, int64_t proc)
{
    int64_t v = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->pl[i].process_id == proc)
            v += l->pl[i].live;
    return v;
}

/* One events row (MALLOC or FREE of a selected layer, or STEP), in id order. */
static int on_row(struct tctx *T, int64_t ts, int kind, int64_t layer, int64_t proc, int64_t addr,
                  int64_t size, int has_alloc_id, const char *name)
{
    /* Sample k is taken at t0 + span * k / TREND_POINTS, in integers: epoch nanoseconds do
     * not fit a double's 53 bits. */
    int64_t span = T->r->t1 - T->r->t0;
    while (T->k <= TREND_POINTS &&
           T->r->t0 + span / TREND_POINTS * T->k + span % TREND_POINTS * T->k / TREND_POINTS < ts)
        T->r->samples[T->k++] = T->total;
    if (kind == MS_KIND_STEP)
        return name ? add_step(T, proc, atof(name), (double)proc_live(&T->live, proc)) : 0;
    if (!ms__live_apply(&T->live, kind, proc, layer, addr, size, has_alloc_id))
        return MS_ENOMEM;
    T->total = 0;
    for (size_t i = 0; i < T->live.n; i++)
        T->total += T->live.pl[i].live;
    if (T->total > T->r->max_live)
        T->r->max_live = T->total;
    return 0;
}

/* The rows of a compact database's replay (ms_store_replay). */
static int on_replayed(void *ctx, const struct ms_store_row *r)
{
    struct tctx *T = ctx;
    if (r->kind == MS_KIND_STEP) {
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(r->name_len < 31 ? r->name_len : 31),
                 r->name ? r->name : "");
        return on_row(T, r->ts_ns, MS_KIND_STEP, r->layer, r->process_id, 0, 0, 0,
                      r->name ? name : NULL);
    }
    if ((r->kind != MS_KIND_MALLOC && r->kind != MS_KIND_FREE) ||
        !ms__layer_selected(&T->layers, r->layer))
        return 0;
    return on_row(T, r->ts_ns, r->kind, r->layer, r->process_id, r->addr, r->size,
                  r->allocation_id != 0, NULL);
}

/* A compact database's series of the default layers, computed by the conversion (live_samples,
 * step_live, meta): 1 when read, 0 when it has none (the caller replays), or an error. */
static int precomputed(struct tctx *T)
{
    sqlite3_stmt *st;
    int have = 0, rc = 0;
    if (sqlite3_prepare_v2(T->x->db,
                           "SELECT (SELECT value FROM meta WHERE key = "
                           "'max_live_bytes'), (SELECT value FROM meta WHERE key = "
                           "'final_live_bytes'), (SELECT count(*) FROM live_samples)",
                           -1, &st, NULL) != SQLITE_OK)
        return 0; /* a compact database of before these tables */
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL &&
        sqlite3_column_int(st, 2) == TREND_POINTS + 1) {
        have = 1;
        T->r->max_live = sqlite3_column_int64(st, 0);
        T->r->final_live = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (!have)
        return 0;
    if (sqlite3_prepare_v2(T->x->db, "SELECT k, live_bytes FROM live_samples ORDER BY k", -1, &st,
                           NULL) != SQLITE_OK)
        return MS_EDB;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int k = sqlite3_column_int(st, 0);
        if (k >= 0 && k <= TREND_POINTS)
            T->r->samples[k] = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(T->x->db,
                           "SELECT process_id, step, live_bytes FROM step_live ORDER BY "
                           "event_id",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW)
        rc = add_step(T, sqlite3_column_int64(st, 0), (double)sqlite3_column_int64(st, 1),
                      (double)sqlite3_column_int64(st, 2));
    sqlite3_finalize(st);
    if (rc)
        snprintf(T->x->err, T->x->errlen, "trend: %s", ms_strerror(rc));
    return rc < 0 ? rc : 1;
}

static int replay(struct tctx *T)
{
    sqlite3_stmt *st;
    int compact = ms_store_is_compact(T->x->db);
    /* events.id is in time order: the first and last rows hold the extremes (a compact
     * database, without MALLOC and FREE rows, has them in meta). */
    if (sqlite3_prepare_v2(T->x->db,
                           compact ? "SELECT (SELECT value FROM meta WHERE key = "
                                     "'first_event_ns'), (SELECT value FROM meta WHERE "
                                     "key = 'last_event_ns')"
                                   : "SELECT (SELECT ts_ns FROM events ORDER BY id LIMIT "
                                     "1), (SELECT ts_ns FROM events ORDER BY id DESC "
                                     "LIMIT 1)",
                           -1, &st, NULL) != SQLITE_OK)
        goto db_fail;
    if (sqlite3_step(st) == SQLITE_ROW) {
        T->r->t0 = sqlite3_column_int64(st, 0);
        T->r->t1 = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    ms__live_init(&T->live);
    int rc = 0, s = SQLITE_DONE;
    if (!T->x->o->layer && (rc = precomputed(T)) != 0) {
        ms__live_release(&T->live);
        return rc < 0 ? rc : 0;
    }
    if (compact) {
        if ((rc = ms__layer_set_load(T->x->db, T->x->o, &T->layers)) == 0)
            rc = ms_store_replay(sqlite3_db_filename(T->x->db, "main"), on_replayed, T, T->x->err,
                                 T->x->errlen);
        ms__layer_set_release(&T->layers);
        if (rc < 0) {
            ms__live_release(&T->live);
            return rc;
        }
        goto done;
    }

    int has_name = ms__has_column(T->x->db, "events", "name");
    char *layer_sql = ms__layer_filter(T->x->db, T->x->o, "e.layer");
    int prc = !layer_sql
                  ? SQLITE_NOMEM
                  : ms__prepare(T->x->db, &st,
                                "SELECT ts_ns, kind, layer, process_id, addr, size, "
                                "allocation_id, %s FROM events e WHERE (kind IN (" MS_SQL_MALLOC
                                ", " MS_SQL_FREE ") AND %s)%s ORDER BY id",
                                has_name ? "name" : "NULL", layer_sql,
                                has_name ? " OR kind = " MS_SQL_STEP : "");
    sqlite3_free(layer_sql);
    if (prc != SQLITE_OK) {
        ms__live_release(&T->live);
        goto db_fail;
    }
    while ((s = sqlite3_step(st)) == SQLITE_ROW &&
           (rc = on_row(T, sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1),
                        sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                        sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
                        sqlite3_column_type(st, 6) != SQLITE_NULL,
                        (const char *)sqlite3_column_text(st, 7))) == 0)
        ;
    if (!rc && s != SQLITE_DONE) {
        sqlite3_finalize(st);
        ms__live_release(&T->live);
        goto db_fail;
    }
    sqlite3_finalize(st);
done:
    while (T->k <= TREND_POINTS)
        T->r->samples[T->k++] = T->total;
    T->r->final_live = T->total;
    ms__live_release(&T->live);
    if (rc)
        snprintf(T->x->err, T->x->errlen, "trend: %s", ms_strerror(rc));
    return rc;
db_fail:
    snprintf(T->x->err, T->x->errlen, "trend: events: %s", sqlite3_errmsg(T->x->db));
    return MS_EDB;
}

/* Fills r: the series (precomputed or replayed), the fits, and the limit's predictions. */
static int compute(struct ms_actx *x, struct trend *r)
{
    struct tctx T = {.x = x, .r = r};
    int rc = replay(&T);
    if (rc < 0)
        return rc;
    double tx[TREND_POINTS + 1], ty[TREND_POINTS + 1];
    double span_s = (double)(r->t1 - r->t0) / 1e9;
    for (int i = 0; i <= TREND_POINTS; i++) {
        tx[i] = span_s * i / TREND_POINTS;
        ty[i] = (double)r->samples[i];
    }
    r->time_fit = ms_fit_line(tx, ty, TREND_POINTS + 1);
    /* The start-up (imports, a model's weights, a server's pools) is a ramp that a fit over the
     * whole run takes for growth; what the program does now is the last half. */
    r->tail_fit = ms_fit_line(tx + TREND_POINTS / 2, ty + TREND_POINTS / 2, TREND_POINTS / 2 + 1);
    r->start_ns = ms__run_start_ns(x->db);
    const double limit = (double)x->o->limit;
    r->limit_reached = (double)r->max_live >= limit;
    r->limit_s = -1;
    r->why =
        ms_forecast_limit(&r->tail_fit, r->limit_reached, limit, span_s / 2, span_s, &r->limit_s);
    for (size_t i = 0; i < r->nps; i++) {
        struct pseries *p = &r->ps[i];
        p->first = 0;
        while (p->first < p->n && p->step[p->first] <= x->o->warmup)
            p->first++;
        if (p->n - p->first < 2)
            p->first = 0;
        p->fit = ms_fit_line(p->step + p->first, p->live + p->first, p->n - p->first);
        p->reached_at = -1;
        for (int k = 0; k < p->n; k++)
            if (p->live[k] >= limit) {
                p->reached_at = k;
                break;
            }
        p->limit_step = -1;
        double first = p->n ? p->step[p->first] : 0, last = p->n ? p->step[p->n - 1] : 0;
        p->why = ms_forecast_limit(&p->fit, p->reached_at >= 0, limit, last - first, last,
                                   &p->limit_step);
    }
    return 0;
}

static void text_fit(FILE *out, const struct ms_fit *f, const char *unit)
{
    fprintf(out, "  growth: %+.1f bytes/%s (R^2 %.4f, standard error %.1f bytes/%s, %d points)\n",
            f->slope, unit, f->r2, f->se, unit, f->n);
}

static void render_text(struct ms_actx *x, const struct trend *r)
{
    FILE *out = x->out;
    const unsigned long long limit = (unsigned long long)x->o->limit;
    fprintf(out, "trend: live bytes over time (all processes, selected layers)\n");
    fprintf(out, "  %12s %14s\n", "time (ms)", "live bytes");
    for (int i = 0; i <= TREND_POINTS; i += TREND_POINTS / 10)
        fprintf(out, "  %12.3f %14lld\n", (double)(r->t1 - r->t0) * i / TREND_POINTS / 1e6,
                (long long)r->samples[i]);
    fprintf(out, "  final %lld bytes, maximum %lld bytes\n", (long long)r->final_live,
            (long long)r->max_live);
    text_fit(out, &r->time_fit, "s");
    if (limit) {
        fprintf(out, "  over the last half of the run (%lld to %lld bytes):\n",
                (long long)r->samples[TREND_POINTS / 2], (long long)r->samples[TREND_POINTS]);
        text_fit(out, &r->tail_fit, "s");
    }
    double run_ms = (double)(r->t1 - r->t0) / 1e6;
    if (limit && r->why == MS_LIMIT_REACHED)
        fprintf(out, "  limit %llu bytes: already reached (maximum %lld bytes)\n", limit,
                (long long)r->max_live);
    else if (limit && r->why == MS_LIMIT_PREDICTED)
        fprintf(out, "  limit %llu bytes: predicted at +%.3f s from the start\n", limit,
                (double)(r->t0 - r->start_ns) / 1e9 + r->limit_s);
    else if (limit && r->why == MS_LIMIT_TOO_SHORT)
        fprintf(out,
                "  limit %llu bytes: not predicted: the run (%.3f ms) is too short; at this rate "
                "it is more than %d times the last half of the run away\n",
                limit, run_ms, MS_FORECAST_MAX_EXTRAPOLATE);
    else if (limit)
        fprintf(out,
                "  limit %llu bytes: never at this rate: live bytes are not growing over the "
                "last half of the run (%.3f ms)\n",
                limit, run_ms);

    fprintf(out, "\ntrend: live bytes at step ends\n");
    if (!r->nps)
        fprintf(out, "  no steps recorded (the program never called memscope_step())\n");
    for (size_t i = 0; i < r->nps; i++) {
        const struct pseries *p = &r->ps[i];
        const struct ms_name_proc *pr = ms__names_proc(&x->names, p->process_id);
        fprintf(out, "  process %lld %s (pid %lld): %d step ends\n", (long long)p->process_id,
                pr ? pr->exe : "?", (long long)(pr ? pr->pid : 0), p->n);
        fprintf(out, "  %8s %14s\n", "step", "live bytes");
        for (int k = 0; k < p->n; k++) {
            if (p->n > 20 && k >= 10 && k < p->n - 5) {
                if (k == 10)
                    fprintf(out, "  %8s\n", "...");
                continue;
            }
            fprintf(out, "  %8lld %14lld\n", (long long)p->step[k], (long long)p->live[k]);
        }
        if (p->n)
            fprintf(out, "  fit from step %lld:\n", (long long)p->step[p->first]);
        text_fit(out, &p->fit, "step");
        if (limit && p->reached_at >= 0)
            fprintf(out, "  limit %llu bytes: reached at the end of step %lld\n", limit,
                    (long long)p->step[p->reached_at]);
        else if (limit && p->why == MS_LIMIT_PREDICTED)
            fprintf(out, "  limit %llu bytes: predicted at the end of step %lld (%.2f)\n", limit,
                    (long long)ceil(p->limit_step), p->limit_step);
        else if (limit && p->why == MS_LIMIT_TOO_SHORT)
            fprintf(out,
                    "  limit %llu bytes: not predicted: too few steps; at this rate it is more "
                    "than %d times the steps fitted away\n",
                    limit, MS_FORECAST_MAX_EXTRAPOLATE);
        else if (limit)
            fprintf(out, "  limit %llu bytes: never at this rate (not growing per step)\n", limit);
    }
}

static void json_fit(struct ms_json *j, const char *key, const struct ms_fit *f)
{
    ms_json_begin_object(j, key);
    ms_json_int(j, "points", f->n);
    ms_json_double(j, "slope", f->slope);
    ms_json_double(j, "intercept", f->intercept);
    ms_json_double(j, "r2", f->r2);
    ms_json_double(j, "slope_stderr", f->se);
    ms_json_end_object(j);
}

static void render_json(struct ms_actx *x, const struct trend *r)
{
    const struct ms_analyze_opts *o = x->o;
    struct ms_json j;
    ms_json_init(&j, x->out);
    ms_json_begin_object(&j, NULL);
    ms_json_str(&j, "analysis", "trend");
    ms_json_int(&j, "start_ns", r->t0);
    ms_json_int(&j, "end_ns", r->t1);
    ms_json_int(&j, "final_live_bytes", r->final_live);
    ms_json_int(&j, "max_live_bytes", r->max_live);
    ms_json_begin_array(&j, "samples");
    for (int i = 0; i <= TREND_POINTS; i++) {
        ms_json_begin_object(&j, NULL);
        ms_json_int(&j, "offset_ns", (int64_t)((double)(r->t1 - r->t0) * i / TREND_POINTS));
        ms_json_int(&j, "live_bytes", r->samples[i]);
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    json_fit(&j, "time_fit", &r->time_fit);
    json_fit(&j, "tail_fit", &r->tail_fit);
    if (o->limit)
        ms_json_int(&j, "limit", (long long)o->limit);
    else
        ms_json_null(&j, "limit");
    if (o->limit) {
        ms_json_begin_object(&j, "time_to_limit");
        ms_json_bool(&j, "reached", r->limit_reached);
        ms_json_str(&j, "status", ms_limit_words[r->why]);
        if (r->limit_s >= 0) {
            ms_json_int(&j, "predicted_ns", r->t0 + (int64_t)(r->limit_s * 1e9));
            ms_json_int(&j, "predicted_offset_ns",
                        r->t0 - r->start_ns + (int64_t)(r->limit_s * 1e9));
        } else {
            ms_json_null(&j, "predicted_ns");
            ms_json_null(&j, "predicted_offset_ns");
        }
        ms_json_end_object(&j);
    }
    ms_json_begin_array(&j, "steps");
    for (size_t i = 0; i < r->nps; i++) {
        const struct pseries *p = &r->ps[i];
        const struct ms_name_proc *pr = ms__names_proc(&x->names, p->process_id);
        ms_json_begin_object(&j, NULL);
        ms_json_int(&j, "process_id", p->process_id);
        ms_json_int(&j, "pid", pr ? pr->pid : 0);
        ms_json_str(&j, "exe", pr ? pr->exe : NULL);
        ms_json_begin_array(&j, "ends");
        for (int k = 0; k < p->n; k++) {
            ms_json_begin_object(&j, NULL);
            ms_json_int(&j, "step", (long long)p->step[k]);
            ms_json_int(&j, "live_bytes", (long long)p->live[k]);
            ms_json_end_object(&j);
        }
        ms_json_end_array(&j);
        ms_json_int(&j, "fit_from_step", p->n ? (long long)p->step[p->first] : 0);
        json_fit(&j, "step_fit", &p->fit);
        if (o->limit) {
            ms_json_begin_object(&j, "step_to_limit");
            ms_json_str(&j, "status", ms_limit_words[p->why]);
            if (p->reached_at >= 0)
                ms_json_int(&j, "reached_at_step", (long long)p->step[p->reached_at]);
            else
                ms_json_null(&j, "reached_at_step");
            if (p->limit_step >= 0) {
                ms_json_double(&j, "predicted_step", p->limit_step);
                ms_json_int(&j, "predicted_step_end", (long long)ceil(p->limit_step));
            } else {
                ms_json_null(&j, "predicted_step");
                ms_json_null(&j, "predicted_step_end");
            }
            ms_json_end_object(&j);
        }
        ms_json_end_object(&j);
    }
    ms_json_end_array(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

int ms_analyze_trend(struct ms_actx *x)
{
    struct trend r;
    memset(&r, 0, sizeof r);
    int rc = compute(x, &r);
    if (rc == 0)
        (x->o->json ? render_json : render_text)(x, &r);
    for (size_t i = 0; i < r.nps; i++) {
        free(r.ps[i].step);
        free(r.ps[i].live);
    }
    free(r.ps);
    return rc;
}

int ms_analyze_live_series(sqlite3 *db, const struct ms_analyze_opts *o, struct ms_live_series *s,
                           char *err, size_t errlen)
{
    struct ms_actx x;
    struct trend r;
    memset(&r, 0, sizeof r);
    int rc = ms__actx_init(&x, "trend", db, o, NULL, err, errlen);
    if (rc == 0)
        rc = compute(&x, &r);
    if (rc == 0) {
        s->t0 = r.t0;
        s->t1 = r.t1;
        s->start_ns = r.start_ns;
        s->final_live = r.final_live;
        s->max_live = r.max_live;
        memcpy(s->samples, r.samples, sizeof s->samples);
    }
    for (size_t i = 0; i < r.nps; i++) {
        free(r.ps[i].step);
        free(r.ps[i].live);
    }
    free(r.ps);
    ms__actx_release(&x);
    return rc;
}
