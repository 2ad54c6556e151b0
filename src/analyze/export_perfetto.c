/* export_perfetto.c: the run's timeline as Chrome's trace event JSON (`--format=perfetto`; the
 * Perfetto UI, chrome://tracing and Catapult read it; docs/exports.md): per process, a counter
 * of live bytes for each layer (heap, mmap, cuda:N, pool:NAME ...) at a bounded level of
 * detail (the maximum of each of MS_PROFILE_BUCKETS intervals of the window, and the value at
 * its end: export_profile.c keeps them), slices for the steps (a track "steps" of the process)
 * and for the ranges, memscope.h's and NVTX's (on their thread), and instant events for the
 * marks and the OOMs. Times are microseconds from the run's start, with the nanoseconds.
 * Called by `memscope export`; workload: the counters' points, and one row per step, range,
 * mark and OOM of the window. */
#include "export.h"

#include "common/ms_error.h"

#include <string.h>

/* The virtual thread of a process's steps: no OS thread has it. */
#define STEPS_TID 0

struct perfetto {
    const struct ms_profile *p;
    struct ms_json j;
    struct ms_names names;
};

static int proc_selected(const struct ms_profile *p, int64_t process_id, int64_t pid)
{
    (void)process_id;
    return !p->o->pid || pid == p->o->pid;
}

/* ts as microseconds from the run's start */
static void put_ts(struct perfetto *x, const char *key, int64_t ns)
{
    ms_json_milli(&x->j, key, ns - x->p->run_start_ns);
}

static void process_names(struct perfetto *x)
{
    for (size_t i = 0; i < x->names.nprocs; i++) {
        const struct ms_name_proc *pr = &x->names.procs[i];
        if (!proc_selected(x->p, pr->id, pr->pid))
            continue;
        ms_json_begin_object(&x->j, NULL);
        ms_json_str(&x->j, "name", "process_name");
        ms_json_str(&x->j, "ph", "M");
        ms_json_int(&x->j, "pid", pr->pid);
        ms_json_begin_object(&x->j, "args");
        ms_json_str(&x->j, "name", pr->exe ? pr->exe : "process");
        ms_json_end_object(&x->j);
        ms_json_end_object(&x->j);
        ms_json_begin_object(&x->j, NULL);
        ms_json_str(&x->j, "name", "thread_name");
        ms_json_str(&x->j, "ph", "M");
        ms_json_int(&x->j, "pid", pr->pid);
        ms_json_int(&x->j, "tid", STEPS_TID);
        ms_json_begin_object(&x->j, "args");
        ms_json_str(&x->j, "name", "steps");
        ms_json_end_object(&x->j);
        ms_json_end_object(&x->j);
    }
}

static void counters(struct perfetto *x)
{
    const struct ms_profile *p = x->p;
    for (size_t i = 0; i < p->npl; i++) {
        const struct ms_profile_pl *pl = &p->pl[i];
        char name[160];
        snprintf(name, sizeof name, "live bytes %s", ms__names_layer(&x->names, pl->layer));
        for (size_t k = 0; k < pl->npts; k++) {
            ms_json_begin_object(&x->j, NULL);
            ms_json_str(&x->j, "name", name);
            ms_json_str(&x->j, "ph", "C");
            put_ts(x, "ts", pl->pts[k].ts_ns);
            ms_json_int(&x->j, "pid", pl->pid);
            ms_json_begin_object(&x->j, "args");
            ms_json_int(&x->j, "bytes", pl->pts[k].bytes);
            ms_json_end_object(&x->j);
            ms_json_end_object(&x->j);
        }
    }
}

/* A complete slice [start, end] clipped to the window (the queries take the slices that
 * overlap it, or lie in it: one that only touches its edge does not). */
static void slice(struct perfetto *x, const char *name, const char *cat, int64_t pid, int64_t tid,
                  int64_t start, int64_t end)
{
    const struct ms_profile *p = x->p;
    if (start < p->from_ns)
        start = p->from_ns;
    if (end > p->to_ns)
        end = p->to_ns;
    ms_json_begin_object(&x->j, NULL);
    ms_json_str(&x->j, "name", name);
    ms_json_str(&x->j, "cat", cat);
    ms_json_str(&x->j, "ph", "X");
    put_ts(x, "ts", start);
    ms_json_milli(&x->j, "dur", end > start ? end - start : 0);
    ms_json_int(&x->j, "pid", pid);
    ms_json_int(&x->j, "tid", tid);
    ms_json_end_object(&x->j);
}

static int steps_and_ranges(struct perfetto *x)
{
    const struct ms_profile *p = x->p;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(p->db,
                           "SELECT p.pid, s.step, s.start_ns, s.end_ns FROM steps s JOIN processes "
                           "p ON p.id = s.process_id WHERE ((s.end_ns > ?1 AND s.start_ns < ?2) OR "
                           "(s.start_ns >= ?1 AND s.end_ns <= ?2)) "
                           "AND (?3 = 0 OR p.pid = ?3) ORDER BY s.start_ns, p.pid",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, p->from_ns);
    sqlite3_bind_int64(st, 2, p->to_ns);
    sqlite3_bind_int64(st, 3, p->o->pid);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        char name[48];
        snprintf(name, sizeof name, "step %lld", (long long)sqlite3_column_int64(st, 1));
        slice(x, name, "step", sqlite3_column_int64(st, 0), STEPS_TID, sqlite3_column_int64(st, 2),
              sqlite3_column_int64(st, 3));
    }
    sqlite3_finalize(st);
    if (s != SQLITE_DONE)
        return MS_EDB;
    /* ranges (memscope.h, NVTX): unended ones end with their process */
    if (sqlite3_prepare_v2(p->db,
                           "SELECT p.pid, t.tid, r.name, r.start_ns, COALESCE(r.end_ns, p.end_ns, "
                           "r.start_ns) FROM ranges r JOIN processes p ON p.id = r.process_id "
                           "LEFT JOIN threads t ON t.id = r.thread_id WHERE ((r.start_ns < ?2 AND "
                           "COALESCE(r.end_ns, p.end_ns, r.start_ns) > ?1) OR (r.start_ns >= ?1 "
                           "AND COALESCE(r.end_ns, p.end_ns, r.start_ns) <= ?2)) AND (?3 = 0 OR "
                           "p.pid = ?3) ORDER BY r.start_ns, r.depth",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, p->from_ns);
    sqlite3_bind_int64(st, 2, p->to_ns);
    sqlite3_bind_int64(st, 3, p->o->pid);
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 2);
        slice(x, name ? name : "", "range", sqlite3_column_int64(st, 0),
              sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 3),
              sqlite3_column_int64(st, 4));
    }
    sqlite3_finalize(st);
    return s == SQLITE_DONE ? 0 : MS_EDB;
}

/* MARK rows (kind 5) and OOM rows (kind 9): instant events. */
static int instants(struct perfetto *x)
{
    const struct ms_profile *p = x->p;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(p->db,
                           "SELECT e.kind, e.ts_ns, p.pid, t.tid, e.name, e.size, e.func, "
                           "l.name FROM events e JOIN processes p ON p.id = e.process_id LEFT "
                           "JOIN threads t ON t.id = e.thread_id LEFT JOIN layers l ON l.id = "
                           "e.layer WHERE e.kind IN (5, 9) AND e.ts_ns BETWEEN ?1 AND ?2 AND (?3 "
                           "= 0 OR p.pid = ?3) ORDER BY e.id",
                           -1, &st, NULL) != SQLITE_OK)
        return MS_EDB;
    sqlite3_bind_int64(st, 1, p->from_ns);
    sqlite3_bind_int64(st, 2, p->to_ns);
    sqlite3_bind_int64(st, 3, p->o->pid);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        int oom = sqlite3_column_int(st, 0) == 9;
        const char *name = (const char *)sqlite3_column_text(st, 4);
        ms_json_begin_object(&x->j, NULL);
        ms_json_str(&x->j, "name", oom ? "OOM" : name ? name : "");
        ms_json_str(&x->j, "cat", oom ? "oom" : "mark");
        ms_json_str(&x->j, "ph", "i");
        ms_json_str(&x->j, "s", oom ? "p" : "t");
        put_ts(x, "ts", sqlite3_column_int64(st, 1));
        ms_json_int(&x->j, "pid", sqlite3_column_int64(st, 2));
        ms_json_int(&x->j, "tid", sqlite3_column_int64(st, 3));
        if (oom) {
            ms_json_begin_object(&x->j, "args");
            ms_json_int(&x->j, "requested", sqlite3_column_int64(st, 5));
            ms_json_str(&x->j, "func", (const char *)sqlite3_column_text(st, 6));
            ms_json_str(&x->j, "layer", (const char *)sqlite3_column_text(st, 7));
            ms_json_end_object(&x->j);
        }
        ms_json_end_object(&x->j);
    }
    sqlite3_finalize(st);
    return s == SQLITE_DONE ? 0 : MS_EDB;
}

int ms_export_perfetto(const struct ms_profile *p, FILE *out, char *err, size_t errlen)
{
    struct perfetto x = {.p = p};
    int rc = ms__names_load(p->db, &x.names, err, errlen);
    if (rc < 0)
        return rc;
    ms_json_init(&x.j, out);
    ms_json_begin_object(&x.j, NULL);
    ms_json_str(&x.j, "displayTimeUnit", "ns");
    ms_json_begin_array(&x.j, "traceEvents");
    process_names(&x);
    counters(&x);
    rc = steps_and_ranges(&x);
    if (rc == 0)
        rc = instants(&x);
    ms_json_end_array(&x.j);
    ms_json_begin_object(&x.j, "otherData");
    ms_json_str(&x.j, "producer", "memscope");
    ms_json_int(&x.j, "start_time_ns", p->run_start_ns);
    ms_json_end_object(&x.j);
    ms_json_end_object(&x.j);
    ms_json_finish(&x.j);
    if (rc < 0)
        snprintf(err, errlen, "reading the annotations: %s", sqlite3_errmsg(p->db));
    ms__names_release(&x.names);
    return rc;
}
