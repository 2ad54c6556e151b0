/* metrics.c: the live monitor's figures as Prometheus's text exposition format 0.0.4
 * (docs/monitor.md lists every metric and label; they are part of memscope's interface).
 *
 * Called by the monitor's thread for each scrape (metrics_http.c), and by tests. Labels are
 * bounded: a process (pid, rank), the machine (host, and DCGM's Hostname), a layer and a device
 * (and DCGM's gpu for a CUDA device), an owner category, a kind of resident memory; never a call
 * site or anything else the program names. Workload: a few KB per process per scrape. */
#include "monitor.h"

#include "common/ms_error.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A label value with Prometheus's escapes (backslash, double quote, newline). */
static void put_value(FILE *o, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fputc('\\', o);
        if (*v == '\n')
            fputs("\\n", o);
        else
            fputc(*v, o);
    }
}

/* The labels of process p: pid, rank (when known), host, Hostname, pod and namespace (when the
 * environment names them), without the braces. */
static void proc_labels(FILE *o, const struct monitor *m, size_t i)
{
    fprintf(o, "pid=\"%" PRIu64 "\"", m->f.procs[i].pid);
    if (m->mp[i].rank[0]) {
        fputs(",rank=\"", o);
        put_value(o, m->mp[i].rank);
        fputc('"', o);
    }
    fputs(",host=\"", o);
    put_value(o, m->host);
    fputs("\",Hostname=\"", o);
    put_value(o, m->host);
    fputc('"', o);
    if (m->pod[0]) {
        fputs(",pod=\"", o);
        put_value(o, m->pod);
        fputc('"', o);
    }
    if (m->ns[0]) {
        fputs(",namespace=\"", o);
        put_value(o, m->ns);
        fputc('"', o);
    }
}

static void head(FILE *o, const char *name, const char *type, const char *help)
{
    fprintf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A layer's labels after the process's: layer and device (and gpu for a CUDA device). */
static void layer_labels(FILE *o, int l)
{
    if (l == MS_FOLLOW_HEAP)
        fputs(",layer=\"heap\",device=\"cpu\"", o);
    else if (l == MS_FOLLOW_MMAP)
        fputs(",layer=\"mmap\",device=\"cpu\"", o);
    else
        fprintf(o, ",layer=\"device\",device=\"cuda:%d\",gpu=\"%d\"", l - MS_FOLLOW_DEVICE0,
                l - MS_FOLLOW_DEVICE0);
}

/* Whether layer l of p has seen anything (a layer never used has no series). */
static int layer_used(const struct ms_follow_proc *p, int l)
{
    return l < MS_FOLLOW_DEVICE0 || p->layer[l].allocs;
}

/* The processes the monitor has figures for (the follower may know more when the monitor's own
 * array could not grow). */
static size_t nprocs(const struct monitor *m)
{
    return m->f.nprocs < m->amp ? m->f.nprocs : m->amp;
}

/* Whether process i is exported: not when it ended more than MONITOR_KEEP_ENDED_NS ago. */
static int shown(const struct monitor *m, size_t i)
{
    const struct monitor_proc *q = &m->mp[i];
    return !q->gone || m->now_ns - q->gone_ns <= MONITOR_KEEP_ENDED_NS;
}

enum { F_LIVE, F_PEAK, F_ALLOCS, F_FREES };

static void layer_metric(FILE *o, const struct monitor *m, const char *name, const char *type,
                         const char *help, int field)
{
    head(o, name, type, help);
    for (size_t i = 0; i < nprocs(m); i++) {
        const struct ms_follow_proc *p = &m->f.procs[i];
        if (!shown(m, i))
            continue;
        for (int l = 0; l < MS_FOLLOW_LAYERS; l++) {
            if (!layer_used(p, l))
                continue;
            const struct ms_follow_layer *x = &p->layer[l];
            fprintf(o, "%s{", name);
            proc_labels(o, m, i);
            layer_labels(o, l);
            long long v = field == F_LIVE     ? (long long)x->live
                          : field == F_PEAK   ? (long long)x->peak
                          : field == F_ALLOCS ? (long long)x->allocs
                                              : (long long)x->frees;
            fprintf(o, "} %lld\n", v);
        }
    }
}

/* One series per process: value(i) < 0 or NaN leaves it out. */
static void proc_metric(FILE *o, const struct monitor *m, const char *name, const char *type,
                        const char *help, const char *extra,
                        double (*value)(const struct monitor *, size_t))
{
    int any = 0;
    for (size_t i = 0; i < nprocs(m); i++) {
        double v = shown(m, i) ? value(m, i) : NAN;
        if (isnan(v))
            continue;
        if (!any++)
            head(o, name, type, help);
        fprintf(o, "%s{", name);
        proc_labels(o, m, i);
        if (extra)
            fputs(extra, o);
        if (isinf(v))
            fprintf(o, "} +Inf\n");
        else
            fprintf(o, "} %.17g\n", v);
    }
}

static double v_step(const struct monitor *m, size_t i)
{
    return (double)m->f.procs[i].step;
}

static double v_lag(const struct monitor *m, size_t i)
{
    return (double)m->f.procs[i].pending;
}

static double v_eta(const struct monitor *m, size_t i)
{
    const struct monitor_proc *q = &m->mp[i];
    if (!m->f.procs[i].first_ns || !q->limit)
        return NAN;
    if (q->why == MS_LIMIT_REACHED)
        return 0;
    return q->why == MS_LIMIT_PREDICTED ? q->eta_s : INFINITY;
}

static double v_limit(const struct monitor *m, size_t i)
{
    return m->mp[i].limit ? m->mp[i].limit : NAN;
}

static double v_pss(const struct monitor *m, size_t i)
{
    const struct monitor_proc *q = &m->mp[i];
    return q->have_usage && (q->usage.flags & MS_USAGE_F_SMAPS) ? (double)q->usage.pss : NAN;
}

static double v_uss(const struct monitor *m, size_t i)
{
    const struct monitor_proc *q = &m->mp[i];
    return q->have_usage && (q->usage.flags & MS_USAGE_F_SMAPS) ? (double)q->usage.uss : NAN;
}

/* docs/usage.md: rss_anon - live bytes - stack, at least 0 */
static double v_retained(const struct monitor *m, size_t i)
{
    const struct monitor_proc *q = &m->mp[i];
    if (!q->have_usage || !(q->usage.flags & MS_USAGE_F_STATUS))
        return NAN;
    double r = (double)q->usage.rss_anon - (double)m->f.procs[i].host_live - (double)q->usage.stack;
    return r > 0 ? r : 0;
}

/* memscope_oom_eta_seconds (pass 0) or memscope_limit_bytes (pass 1) of each CUDA device whose
 * total is known, after the host's series of the same family. */
static void device_forecasts(FILE *o, const struct monitor *m, int pass)
{
    for (size_t i = 0; i < nprocs(m); i++) {
        const struct monitor_proc *q = &m->mp[i];
        for (int d = 0; d < MS_FOLLOW_MAX_DEVICES && shown(m, i); d++) {
            const struct monitor_dev *v = q->dev[d];
            if (!v || !v->limit)
                continue;
            fputs(pass ? "memscope_limit_bytes{" : "memscope_oom_eta_seconds{", o);
            proc_labels(o, m, i);
            fprintf(o, ",device=\"cuda:%d\",gpu=\"%d\"} ", d, d);
            if (pass)
                fprintf(o, "%.17g\n", v->limit);
            else if (v->why == MS_LIMIT_REACHED)
                fputs("0\n", o);
            else if (v->why == MS_LIMIT_PREDICTED)
                fprintf(o, "%.17g\n", v->eta_s);
            else
                fputs("+Inf\n", o);
        }
    }
}

int metrics_render(struct monitor *m, char **body, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *o = open_memstream(&buf, &n);
    if (!o)
        return MS_ENOMEM;
    layer_metric(o, m, "memscope_live_bytes", "gauge",
                 "Bytes allocated and not yet freed, by process, layer and device.", F_LIVE);
    layer_metric(o, m, "memscope_peak_bytes", "gauge",
                 "The highest memscope_live_bytes so far, by process, layer and device.", F_PEAK);
    layer_metric(o, m, "memscope_allocations_total", "counter",
                 "Allocations recorded, by process, layer and device.", F_ALLOCS);
    layer_metric(o, m, "memscope_frees_total", "counter",
                 "Frees of recorded allocations, by process, layer and device.", F_FREES);
    proc_metric(o, m, "memscope_step", "gauge", "Steps ended (memscope_step() calls).", NULL,
                v_step);
    head(o, "memscope_owner_live_bytes", "gauge",
         "Live bytes of every layer by owner category (blocks without an owner: other).");
    for (size_t i = 0; i < nprocs(m); i++)
        for (int c = 0; c < MS_OWNER_COUNT && shown(m, i); c++) {
            fputs("memscope_owner_live_bytes{", o);
            proc_labels(o, m, i);
            fprintf(o, ",owner=\"%s\"} %lld\n", ms_follow_owner_name(c),
                    (long long)m->f.procs[i].owner_live[c]);
        }
    int any = 0;
    for (size_t i = 0; i < nprocs(m); i++) {
        const struct ms_follow_proc *p = &m->f.procs[i];
        for (int d = 0; d < MS_FOLLOW_MAX_DEVICES && shown(m, i); d++) {
            if (!(p->dev_seen & (1u << d)))
                continue;
            if (!any++)
                head(o, "memscope_device_used_bytes", "gauge",
                     "Memory used on the GPU as NVML reported it at the process's last step.");
            fputs("memscope_device_used_bytes{", o);
            proc_labels(o, m, i);
            fprintf(o, ",device=\"cuda:%d\",gpu=\"%d\"} %" PRIu64 "\n", d, d, p->dev_used[d]);
        }
    }
    proc_metric(
        o, m, "memscope_oom_eta_seconds", "gauge",
        "Seconds until the process's live bytes (host: heap and mmap; a CUDA device's) reach "
        "memscope_limit_bytes at their recent growth (+Inf: not growing, or too far to "
        "say; 0: reached).",
        ",device=\"cpu\"", v_eta);
    device_forecasts(o, m, 0);
    proc_metric(o, m, "memscope_limit_bytes", "gauge",
                "The capacity memscope_oom_eta_seconds forecasts against (host: --limit, the "
                "cgroup's limit, or live bytes plus MemAvailable; a device: its total, as NVML "
                "reports it).",
                ",device=\"cpu\"", v_limit);
    device_forecasts(o, m, 1);
    proc_metric(o, m, "memscope_trace_lag_events", "gauge",
                "Events of the trace read but not yet counted: how far behind the monitor is.",
                NULL, v_lag);
    any = 0;
    for (size_t i = 0; i < nprocs(m); i++) {
        const struct monitor_proc *q = &m->mp[i];
        if (!q->have_usage || !(q->usage.flags & MS_USAGE_F_STATUS) || !shown(m, i))
            continue;
        if (!any++)
            head(o, "memscope_rss_bytes", "gauge",
                 "Resident memory of the process by kind (/proc/PID/status RssAnon, RssFile, "
                 "RssShmem).");
        static const char *const kinds[] = {"anon", "file", "shmem"};
        const uint64_t v[] = {q->usage.rss_anon, q->usage.rss_file, q->usage.rss_shmem};
        for (int k = 0; k < 3; k++) {
            fputs("memscope_rss_bytes{", o);
            proc_labels(o, m, i);
            fprintf(o, ",kind=\"%s\"} %" PRIu64 "\n", kinds[k], v[k]);
        }
    }
    proc_metric(o, m, "memscope_pss_bytes", "gauge",
                "Proportional set size (/proc/PID/smaps_rollup Pss).", NULL, v_pss);
    proc_metric(o, m, "memscope_uss_bytes", "gauge",
                "Unique set size (smaps_rollup Private_Clean + Private_Dirty).", NULL, v_uss);
    proc_metric(o, m, "memscope_retained_bytes", "gauge",
                "Anonymous resident bytes the program does not hold live: RssAnon - live bytes - "
                "stack, at least 0 (memory the allocator keeps).",
                NULL, v_retained);
    if (fclose(o) != 0 || !buf) {
        free(buf);
        return MS_ENOMEM;
    }
    *body = buf;
    *len = n;
    return 0;
}
