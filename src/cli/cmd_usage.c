/* cmd_usage.c: `memscope usage --pid PID [PID...] [--devices N...] [--interval S]
 * [--duration S] [-o FILE] [--plot FILE.svg]`: samples processes memscope did not start,
 * without tracing them (common/usage.c reads their /proc files from this process), and with
 * --devices the CUDA devices through NVML (usage_nvml.c), until Ctrl-C, --duration or the end
 * of every process, and writes a JSON report of each one's samples, last and peak figures, the
 * devices' part in Tiny-Torch's shape (docs/usage.md); with --plot, the picture of the samples
 * over time (usage_plot.c). Workload: a few processes, ten samples a second. */
#include "cli.h"

#include "analyze/analyze.h"
#include "common/files.h"
#include "common/ms_error.h"
#include "common/usage.h"
#include "usage_nvml.h"
#include "usage_plot.h"
#include "usage_sampler.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIDS 256
#define MAX_DEVICES 64

static const char usage_text[] =
    "usage: memscope usage --pid PID [PID...] [--devices N...] [--interval S] [--duration S]\n"
    "                      [-o report.json] [--plot usage.svg]\n"
    "       memscope usage --pid PID --into TRACE_DIR [--interval S]\n"
    "Samples the memory of running processes from /proc (RSS anonymous, file and shared, PSS,\n"
    "USS, stack, swap), without tracing them, until Ctrl-C, --duration or their end.\n"
    "  --pid PID...       the processes (several: --pid 1 2, --pid 1,2 or --pid 1 --pid 2)\n"
    "  --devices N...     also these CUDA devices through NVML (NVML's indexes), when present\n"
    "  --interval S       seconds between samples (default 0.1; 0.001 to 3600)\n"
    "  --duration S       stop after S seconds (default: at Ctrl-C or when all have ended)\n"
    "  -o FILE            the JSON report (default: stdout); docs/usage.md has its keys\n"
    "  --plot FILE.svg    also a picture of RSS, PSS and USS (and each device's memory used)\n"
    "                     over time, as an SVG image\n"
    "  --into DIR         instead of a report, the samples of `memscope run` into DIR (a trace\n"
    "                     directory) until the process (one --pid) and its traced children end\n"
    "                     or SIGTERM: the Python package's in-process mode runs it\n";

struct figures {
    uint64_t rss, rss_anon, pss, uss, stack, shmem, swap, threads;
};

struct target {
    pid_t pid;
    int ended, unread;
    char command[256];
    struct ms_usage_cgroup cg;
    struct ms_usage_proc rd; /* its /proc files, kept open, and the PSS/USS pace */
    uint64_t samples;
    int have_smaps;
    struct figures cur, peak;
    struct usage_plot_series *plot; /* --plot: its RSS, PSS and USS series, else NULL */
};

/* A device sampled through NVML: its last figures, its utilization (used / total, percent)
 * summed and at most, and each target's share now and at most. */
struct device {
    unsigned index;
    int unread;
    struct usage_nvml_sample cur;
    uint64_t samples, peak_used;
    double util_sum, util_max;
    uint64_t share[MAX_PIDS], peak_share[MAX_PIDS];
    struct usage_plot_series *plot; /* --plot: its memory used, else NULL */
};

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
    stop_sig = sig;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void read_command(pid_t pid, char *out, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(out, 1, len - 1, f) : 0;
    if (f)
        fclose(f);
    out[n] = '\0';
    for (size_t i = 0; i + 1 < n; i++)
        if (!out[i])
            out[i] = ' ';
}

static void max_into(uint64_t *peak, uint64_t v)
{
    if (v > *peak)
        *peak = v;
}

/* One sample of t, at; a process gone is said once and kept with what it had. share: the
 * processes sampled, whose PSS/USS reads share one budget (MS_USAGE_PACE). at: seconds since the
 * sampling began, for the picture. */
static void sample(struct target *t, unsigned share, double at)
{
    struct ms_usage_sample s;
    int rc = ms_usage_proc_read(&t->rd, share, &s);
    if (rc == 0)
        ms_usage_read_cgroup(&t->cg, t->rd.keep, &s);
    if (rc < 0) {
        t->ended = 1;
        if (rc == -ESRCH)
            cli_log(1, "usage: pid %d ended after %llu samples", (int)t->pid,
                    (unsigned long long)t->samples);
        else
            cli_log(2, "usage: pid %d can no longer be read (%s) after %llu samples", (int)t->pid,
                    strerror(-rc), (unsigned long long)t->samples);
        return;
    }
    struct figures f = {s.rss_anon + s.rss_file + s.rss_shmem,
                        s.rss_anon,
                        s.pss,
                        s.uss,
                        s.stack,
                        s.rss_shmem,
                        s.swap,
                        s.threads};
    if (!(s.flags & MS_USAGE_F_SMAPS)) { /* not read this time (paced): the last reading */
        f.pss = t->cur.pss;
        f.uss = t->cur.uss;
    }
    t->have_smaps |= (s.flags & MS_USAGE_F_SMAPS) != 0;
    t->cur = f;
    max_into(&t->peak.rss, f.rss);
    max_into(&t->peak.rss_anon, f.rss_anon);
    max_into(&t->peak.pss, f.pss);
    max_into(&t->peak.uss, f.uss);
    max_into(&t->peak.stack, f.stack);
    max_into(&t->peak.shmem, f.shmem);
    max_into(&t->peak.swap, f.swap);
    max_into(&t->peak.threads, f.threads);
    t->samples++;
    if (t->plot) { /* PSS and USS from their first reading on */
        usage_plot_add(&t->plot[0], at, f.rss);
        if (t->have_smaps) {
            usage_plot_add(&t->plot[1], at, f.pss);
            usage_plot_add(&t->plot[2], at, f.uss);
        }
    }
}

/* One sample of every readable device. */
static void sample_devices(struct usage_nvml *nv, struct device *dv, size_t nd,
                           const struct target *t, size_t n, double at)
{
    pid_t pids[MAX_PIDS];
    for (size_t i = 0; i < n; i++)
        pids[i] = t[i].unread ? 0 : t[i].pid;
    for (size_t d = 0; d < nd; d++) {
        struct device *v = &dv[d];
        if (v->unread)
            continue;
        if (usage_nvml_read(nv, v->index, pids, n, v->share, &v->cur) < 0) {
            cli_error("usage: CUDA device %u cannot be read through NVML; left out", v->index);
            v->unread = 1;
            continue;
        }
        double u = v->cur.total ? 100.0 * (double)v->cur.used / (double)v->cur.total : 0;
        v->util_sum += u;
        if (u > v->util_max)
            v->util_max = u;
        max_into(&v->peak_used, v->cur.used);
        if (v->plot)
            usage_plot_add(v->plot, at, v->cur.used);
        for (size_t i = 0; i < n; i++)
            max_into(&v->peak_share[i], v->share[i]);
        v->samples++;
    }
}

static void put_figures(struct ms_json *j, const char *key, const struct figures *f, int smaps)
{
    ms_json_begin_object(j, key);
    ms_json_int(j, "rss_bytes", (long long)f->rss);
    ms_json_int(j, "rss_anon_bytes", (long long)f->rss_anon);
    if (smaps) {
        ms_json_int(j, "pss_bytes", (long long)f->pss);
        ms_json_int(j, "uss_bytes", (long long)f->uss);
    } else {
        ms_json_null(j, "pss_bytes");
        ms_json_null(j, "uss_bytes");
    }
    ms_json_int(j, "stack_bytes", (long long)f->stack);
    ms_json_int(j, "shmem_bytes", (long long)f->shmem);
    ms_json_int(j, "swap_bytes", (long long)f->swap);
    ms_json_int(j, "threads", (long long)f->threads);
    ms_json_end_object(j);
}

static void report_devices(struct ms_json *j, const struct device *dv, size_t nd,
                           const struct target *t, size_t n)
{
    ms_json_begin_object(j, "devices");
    for (size_t d = 0; d < nd; d++) {
        if (dv[d].unread || !dv[d].samples)
            continue;
        const struct device *v = &dv[d];
        char key[24];
        snprintf(key, sizeof key, "%u", v->index);
        ms_json_begin_object(j, key);
        ms_json_begin_object(j, "current_usage");
        ms_json_int(j, "allocated", (long long)v->cur.used);
        ms_json_int(j, "free", (long long)v->cur.free);
        ms_json_int(j, "total", (long long)v->cur.total);
        ms_json_double(j, "utilization_percent",
                       v->cur.total ? 100.0 * (double)v->cur.used / (double)v->cur.total : 0);
        ms_json_end_object(j);
        ms_json_begin_object(j, "statistics");
        ms_json_double(j, "avg_utilization", v->util_sum / (double)v->samples);
        ms_json_double(j, "max_utilization", v->util_max);
        ms_json_int(j, "samples_count", (long long)v->samples);
        ms_json_int(j, "peak_allocated", (long long)v->peak_used);
        ms_json_end_object(j);
        ms_json_begin_object(j, "processes"); /* the sampled processes' shares NVML listed */
        for (size_t i = 0; i < n; i++) {
            if (t[i].unread)
                continue;
            char pk[24];
            snprintf(pk, sizeof pk, "%d", (int)t[i].pid);
            ms_json_begin_object(j, pk);
            ms_json_int(j, "current_bytes", (long long)v->share[i]);
            ms_json_int(j, "peak_bytes", (long long)v->peak_share[i]);
            ms_json_end_object(j);
        }
        ms_json_end_object(j);
        ms_json_end_object(j);
    }
    ms_json_end_object(j);
}

static void report(FILE *out, const struct target *t, size_t n, double start_unix, double interval,
                   double elapsed, const struct device *dv, size_t nd, const char *no_devices)
{
    struct ms_json j;
    ms_json_init(&j, out);
    ms_json_begin_object(&j, NULL);
    ms_json_double(&j, "timestamp", start_unix);
    ms_json_double(&j, "interval_s", interval);
    ms_json_double(&j, "duration_s", elapsed);
    ms_json_begin_object(&j, "processes");
    uint64_t samples = 0, peak_rss = 0;
    size_t sampled = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].unread)
            continue;
        char key[24];
        snprintf(key, sizeof key, "%d", (int)t[i].pid);
        ms_json_begin_object(&j, key);
        ms_json_str(&j, "command", t[i].command);
        ms_json_int(&j, "samples", (long long)t[i].samples);
        ms_json_bool(&j, "ended", t[i].ended);
        put_figures(&j, "current", &t[i].cur, t[i].have_smaps);
        put_figures(&j, "peak", &t[i].peak, t[i].have_smaps);
        ms_json_end_object(&j);
        samples += t[i].samples;
        peak_rss += t[i].peak.rss;
        sampled++;
    }
    ms_json_end_object(&j);
    size_t ndev = 0;
    for (size_t d = 0; d < nd; d++)
        ndev += !dv[d].unread && dv[d].samples;
    if (!no_devices) /* Tiny-Torch's part: absent without NVML or --devices */
        report_devices(&j, dv, nd, t, n);
    ms_json_begin_object(&j, "summary");
    ms_json_int(&j, "processes", (long long)sampled);
    ms_json_int(&j, "samples", (long long)samples);
    ms_json_int(&j, "sum_of_peak_rss_bytes", (long long)peak_rss);
    if (no_devices)
        ms_json_str(&j, "devices", no_devices);
    else
        ms_json_int(&j, "devices", (long long)ndev);
    ms_json_end_object(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
}

/* Writes the report to out_path (NULL or "-": stdout) through a new file renamed over it.
 * Returns 0, or a negative code after saying why. */
static int write_report(const char *out_path, const struct target *t, size_t n, double start_unix,
                        double interval, double elapsed, const struct device *dv, size_t nd,
                        const char *no_devices)
{
    FILE *f = stdout;
    struct ms_output mo = {.fd = -1};
    if (out_path && strcmp(out_path, "-") != 0) {
        int orc = ms_output_open(&mo, out_path);
        f = orc == 0 ? fdopen(mo.fd, "w") : NULL;
        if (!f) {
            orc = orc < 0 ? orc : -errno;
            cli_error("usage: cannot create %s: %s", out_path, ms_strerror(orc));
            ms_output_abort(&mo);
            return orc;
        }
    }
    report(f, t, n, start_unix, interval, elapsed, dv, nd, no_devices);
    int rc = 0;
    if (f != stdout) {
        if (fclose(f) != 0)
            rc = -errno;
        mo.fd = -1;
        if (rc < 0)
            ms_output_abort(&mo);
        else
            rc = ms_output_commit(&mo);
    } else if (fflush(stdout) != 0) {
        rc = -errno;
    }
    if (rc < 0)
        cli_error("usage: cannot write the report: %s", ms_strerror(rc));
    return rc;
}

/* Writes the picture of the series into the file mo (made by ms_output_open) and commits it as
 * path. Returns 0, or a negative code after saying why (the file is then removed). */
static int write_plot(struct ms_output *mo, const char *path, const struct target *t, size_t n,
                      const struct usage_plot_series *series, size_t ns, double elapsed)
{
    char title[400];
    size_t sampled = 0, first = 0;
    for (size_t i = n; i-- > 0;)
        if (!t[i].unread)
            sampled++, first = i;
    if (sampled == 1)
        snprintf(title, sizeof title, "memory over time: pid %d (%.80s)", (int)t[first].pid,
                 t[first].command);
    else
        snprintf(title, sizeof title, "memory over time: %zu processes", sampled);
    FILE *f = fdopen(mo->fd, "w");
    if (!f) {
        int e = -errno;
        ms_output_abort(mo);
        cli_error("usage: cannot write %s: %s", path, ms_strerror(e));
        return e;
    }
    errno = 0;
    int rc = usage_plot_write(f, series, ns, elapsed, title) < 0 ? -(errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    mo->fd = -1; /* fclose closed it */
    if (rc == 0)
        rc = ms_output_commit(mo);
    else
        ms_output_abort(mo);
    if (rc < 0)
        cli_error("usage: cannot write %s: %s", path, ms_strerror(rc));
    else
        cli_log(1, "usage: wrote %s", path);
    return rc;
}

static int parse_seconds(const char *opt, const char *s, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || end == s || *end || errno || !(v >= lo) || v > 3600 * 24 * 365)
        return usage_error("usage: %s: expected seconds >= %g, not '%s'", opt, lo, s ? s : "");
    *out = v;
    return 0;
}

/* Adds the pids of a word ("12" or "12,13"); 1 when the word is no pid list. */
static int add_pids(const char *word, struct target *t, size_t *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", word);
    if (!buf[0] || buf[0] == '-')
        return 1;
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        long v = strtol(it, &end, 10);
        if (end == it || *end || errno || v <= 0 || v > (1l << 22))
            return 1;
        if (*n == MAX_PIDS)
            return 1;
        memset(&t[*n], 0, sizeof t[*n]);
        t[(*n)++].pid = (pid_t)v;
    }
    return 0;
}

/* Adds the device indexes of a word ("0" or "0,1"); 1 when the word is no index list. */
static int add_devices(const char *word, struct device *dv, size_t *nd)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", word);
    if (!buf[0] || buf[0] == '-')
        return 1;
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        char *end;
        errno = 0;
        long v = strtol(it, &end, 10);
        if (end == it || *end || errno || v < 0 || v >= 4096 || *nd == MAX_DEVICES)
            return 1;
        memset(&dv[*nd], 0, sizeof dv[*nd]);
        dv[(*nd)++].index = (unsigned)v;
    }
    return 0;
}

/* --into DIR: the sampler of `memscope run` (usage_sampler.c) for process pid and the traced
 * processes of DIR, from this process, until pid ends (or SIGINT / SIGTERM). The Python
 * package's in-process mode (memscope.start()) starts it, so that the program runs nothing for
 * its samples. Returns the exit status. */
static int sample_into(pid_t pid, const char *dir, double interval)
{
    struct usage_sampler u;
    int rc = usage_sampler_start(&u, dir, pid, interval);
    if (rc < 0) {
        cli_error("usage: cannot sample into %s: %s", dir, strerror(-rc));
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct timespec ts = {0, 20000000};
    while (!stop_sig && (kill(pid, 0) == 0 || errno != ESRCH))
        nanosleep(&ts, NULL);
    usage_sampler_stop(&u);
    cli_log(0, "usage: %llu samples of pid %d into %s", (unsigned long long)u.samples, (int)pid,
            dir);
    return 0;
}

int cmd_usage(int argc, char **argv)
{
    static struct target t[MAX_PIDS];
    static struct device dv[MAX_DEVICES];
    size_t n = 0, nd = 0;
    int want_devices = 0;
    const char *into = NULL;
    double interval = 0.1, duration = 0;
    const char *out_path = NULL, *plot_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "--pid") || !strncmp(a, "--pid=", 6)) {
            const char *w = a[5] == '=' ? a + 6 : i + 1 < argc ? argv[++i] : NULL;
            if (!w || add_pids(w, t, &n))
                return usage_error("usage: --pid: expected process ids (at most %d), not '%s'",
                                   MAX_PIDS, w ? w : "");
            while (i + 1 < argc && add_pids(argv[i + 1], t, &n) == 0)
                i++;
        } else if (!strcmp(a, "--devices") || !strncmp(a, "--devices=", 10)) {
            const char *w = a[9] == '=' ? a + 10 : i + 1 < argc ? argv[++i] : NULL;
            if (!w || add_devices(w, dv, &nd))
                return usage_error("usage: --devices: expected device indexes (at most %d), not "
                                   "'%s'",
                                   MAX_DEVICES, w ? w : "");
            while (i + 1 < argc && add_devices(argv[i + 1], dv, &nd) == 0)
                i++;
            want_devices = 1;
        } else if (!strcmp(a, "--interval") || !strncmp(a, "--interval=", 11)) {
            const char *w = a[10] == '=' ? a + 11 : i + 1 < argc ? argv[++i] : NULL;
            if (parse_seconds("--interval", w, 0.001, &interval))
                return 2;
            if (interval > 3600)
                return usage_error("usage: --interval: at most 3600 seconds");
        } else if (!strcmp(a, "--duration") || !strncmp(a, "--duration=", 11)) {
            const char *w = a[10] == '=' ? a + 11 : i + 1 < argc ? argv[++i] : NULL;
            if (parse_seconds("--duration", w, 0.001, &duration))
                return 2;
        } else if (!strcmp(a, "--into")) {
            if (i + 1 >= argc)
                return usage_error("usage: --into needs a directory");
            into = argv[++i];
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc)
                return usage_error("usage: %s needs a file name", a);
            out_path = argv[++i];
        } else if (!strcmp(a, "--plot") || !strncmp(a, "--plot=", 7)) {
            plot_path = a[6] == '=' ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
            const char *dot = plot_path ? strrchr(plot_path, '.') : NULL;
            if (!dot || strcmp(dot, ".svg") != 0 || dot == plot_path || dot[-1] == '/')
                return usage_error("usage: --plot: name the picture FILE.svg, not '%s'",
                                   plot_path ? plot_path : "");
        } else {
            return usage_error("usage: unexpected argument '%s'", a);
        }
    }
    if (!n)
        return usage_error("usage: no process given (--pid PID)");
    if (into && (n != 1 || want_devices || out_path || plot_path || duration > 0))
        return usage_error(
            "usage: --into takes one --pid and no --devices, -o, --plot or --duration");
    if (into)
        return sample_into(t[0].pid, into, interval);

    /* the processes that can be read now; the others are said and left out */
    size_t readable = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < i; k++)
            if (t[k].pid == t[i].pid)
                t[i].unread = 1; /* given twice: sampled once */
        if (t[i].unread)
            continue;
        struct ms_usage_sample s;
        ms_usage_cgroup_find(t[i].pid, &t[i].cg);
        int rc = ms_usage_read(t[i].pid, &t[i].cg, 0, &s);
        if (rc == -ESRCH) {
            cli_error("usage: no process %d (or it has ended)", (int)t[i].pid);
        } else if (rc == -EACCES || rc == -EPERM) {
            cli_error("usage: cannot read process %d: permission denied (another user's process)",
                      (int)t[i].pid);
        } else if (rc < 0) {
            cli_error("usage: cannot read process %d: %s", (int)t[i].pid, strerror(-rc));
        } else {
            read_command(t[i].pid, t[i].command, sizeof t[i].command);
            ms_usage_proc_init(&t[i].rd, t[i].pid, readable < MS_USAGE_KEEP_MAX);
            readable++;
            continue;
        }
        t[i].unread = 1;
    }
    if (!readable) {
        cli_error("usage: no process to sample");
        return 1;
    }

    /* the devices through NVML; none readable: said, and the processes are sampled as asked */
    struct usage_nvml nv;
    char no_devices[200] = "not requested (--devices)";
    int nvml_ok = 0;
    if (want_devices) {
        char why[160];
        if (usage_nvml_open(&nv, why, sizeof why) < 0) {
            snprintf(no_devices, sizeof no_devices, "not sampled: %s", why);
            cli_error("usage: devices not sampled: %s", why);
        } else {
            nvml_ok = 1;
            int count = usage_nvml_count(&nv);
            for (size_t d = 0; d < nd; d++) {
                for (size_t k = 0; k < d; k++)
                    if (dv[k].index == dv[d].index)
                        dv[d].unread = 1; /* given twice */
                if (!dv[d].unread && (count < 0 || dv[d].index >= (unsigned)count)) {
                    cli_error("usage: no CUDA device %u (NVML lists %d)", dv[d].index,
                              count < 0 ? 0 : count);
                    dv[d].unread = 1;
                }
            }
        }
    }

    /* --plot: its file is made now (a name that cannot be written is said before any sampling)
     * and its series are kept while sampling */
    struct ms_output plot_out = {.fd = -1};
    struct usage_plot_series *series = NULL;
    if (plot_path) {
        int orc = ms_output_open(&plot_out, plot_path);
        series = orc == 0 ? calloc(3 * n + nd + 1, sizeof *series) : NULL;
        if (!series) {
            cli_error("usage: cannot create %s: %s", plot_path,
                      ms_strerror(orc < 0 ? orc : MS_ENOMEM));
            ms_output_abort(&plot_out);
            return 1;
        }
        for (size_t i = 0, k = 0; i < n; i++) {
            if (t[i].unread)
                continue;
            t[i].plot = &series[3 * i];
            for (int j = 0; j < 3; j++)
                usage_plot_series_init(&t[i].plot[j], (enum usage_plot_kind)j, (unsigned)t[i].pid,
                                       (unsigned)k);
            k++;
        }
        for (size_t d = 0; d < nd && nvml_ok; d++) {
            dv[d].plot = &series[3 * n + d];
            usage_plot_series_init(dv[d].plot, USAGE_PLOT_DEVICE, dv[d].index,
                                   (unsigned)(readable + d));
        }
    }

    struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    double start_unix = (double)real.tv_sec + (double)real.tv_nsec / 1e9;
    double start = now_s(), next = start;
    for (int first = 1;; first = 0) {
        size_t alive = 0;
        double at = now_s() - start;
        for (size_t i = 0; i < n; i++)
            if (!t[i].unread && !t[i].ended) {
                sample(&t[i], (unsigned)readable, at);
                alive += !t[i].ended;
            }
        if (nvml_ok)
            sample_devices(&nv, dv, nd, t, n, at);
        if (first)
            cli_log(1, "usage: sampling %zu process%s every %g s (Ctrl-C ends)", readable,
                    readable == 1 ? "" : "es", interval);
        if (!alive || stop_sig || (duration > 0 && now_s() - start >= duration))
            break;
        next += interval;
        double wait = next - now_s();
        if (duration > 0 && start + duration - now_s() < wait)
            wait = start + duration - now_s(); /* the last sample at the end of --duration */
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL); /* a signal ends it early: the loop looks at stop_sig */
        }
    }
    double elapsed = now_s() - start;
    for (size_t i = 0; i < n; i++)
        if (!t[i].unread) {
            ms_usage_proc_release(&t[i].rd);
            ms_usage_cgroup_release(&t[i].cg);
        }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    int rc = write_report(out_path, t, n, start_unix, interval, elapsed, dv, nd,
                          nvml_ok ? NULL : no_devices);
    if (plot_path && rc == 0)
        rc = write_plot(&plot_out, plot_path, t, n, series, 3 * n + nd, elapsed);
    else if (plot_path)
        ms_output_abort(&plot_out);
    for (size_t i = 0; series && i < 3 * n + nd; i++)
        usage_plot_series_release(&series[i]);
    free(series);
    if (rc < 0)
        return 1;
    if (stop_sig)
        cli_log(1, "usage: stopped by %s; the report has what was sampled", strsignal(stop_sig));
    int missing_device = 0;
    for (size_t d = 0; nvml_ok && d < nd; d++)
        missing_device |= dv[d].unread;
    return readable == n && !missing_device ? 0 : 1;
}
