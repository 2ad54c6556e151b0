/* cmd_usage.c: `memscope usage --pid PID [PID...] [--interval S] [--duration S] [-o FILE]`:
 * samples processes memscope did not start, without tracing them (common/usage.c reads their
 * /proc files from this process), until Ctrl-C, --duration or the end of every one of them, and
 * writes a JSON report of each one's samples, last and peak figures (docs/usage.md). Workload:
 * a few processes, ten samples a second. */
#include "cli.h"

#include "analyze/analyze.h"
#include "common/files.h"
#include "common/ms_error.h"
#include "common/usage.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIDS 256

static const char usage_text[] =
    "usage: memscope usage --pid PID [PID...] [--interval S] [--duration S] [-o report.json]\n"
    "Samples the memory of running processes from /proc (RSS anonymous, file and shared, PSS,\n"
    "USS, stack, swap), without tracing them, until Ctrl-C, --duration or their end.\n"
    "  --pid PID...       the processes (several: --pid 1 2, --pid 1,2 or --pid 1 --pid 2)\n"
    "  --interval S       seconds between samples (default 0.1; 0.001 to 3600)\n"
    "  --duration S       stop after S seconds (default: at Ctrl-C or when all have ended)\n"
    "  -o FILE            the JSON report (default: stdout); docs/usage.md has its keys\n";

struct figures {
    uint64_t rss, rss_anon, pss, uss, stack, shmem, swap, threads;
};

struct target {
    pid_t pid;
    int ended, unread;
    char command[256];
    struct ms_usage_cgroup cg;
    uint64_t next_smaps_ns; /* ms_usage_read_paced */
    uint64_t samples;
    int have_smaps;
    struct figures cur, peak;
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

/* One sample of t; a process gone is said once and kept with what it had. */
static void sample(struct target *t)
{
    struct ms_usage_sample s;
    int rc = ms_usage_read_paced(t->pid, &t->cg, &t->next_smaps_ns, &s);
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

static void report(FILE *out, const struct target *t, size_t n, double start_unix, double interval,
                   double elapsed)
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
    /* "devices" (NVML) is absent: this memscope does not read device memory yet */
    ms_json_begin_object(&j, "summary");
    ms_json_int(&j, "processes", (long long)sampled);
    ms_json_int(&j, "samples", (long long)samples);
    ms_json_int(&j, "sum_of_peak_rss_bytes", (long long)peak_rss);
    ms_json_str(&j, "devices", "not sampled: no NVML support in this memscope");
    ms_json_end_object(&j);
    ms_json_end_object(&j);
    ms_json_finish(&j);
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

int cmd_usage(int argc, char **argv)
{
    static struct target t[MAX_PIDS];
    size_t n = 0;
    double interval = 0.1, duration = 0;
    const char *out_path = NULL;
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
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc)
                return usage_error("usage: %s needs a file name", a);
            out_path = argv[++i];
        } else {
            return usage_error("usage: unexpected argument '%s'", a);
        }
    }
    if (!n)
        return usage_error("usage: no process given (--pid PID)");

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
            readable++;
            continue;
        }
        t[i].unread = 1;
    }
    if (!readable) {
        cli_error("usage: no process to sample");
        return 1;
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
        for (size_t i = 0; i < n; i++)
            if (!t[i].unread && !t[i].ended) {
                sample(&t[i]);
                alive += !t[i].ended;
            }
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
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);

    FILE *f = stdout;
    struct ms_output mo = {.fd = -1};
    if (out_path && strcmp(out_path, "-") != 0) {
        int orc = ms_output_open(&mo, out_path);
        f = orc == 0 ? fdopen(mo.fd, "w") : NULL;
        if (!f) {
            cli_error("usage: cannot create %s: %s", out_path, ms_strerror(orc < 0 ? orc : -errno));
            ms_output_abort(&mo);
            return 1;
        }
    }
    report(f, t, n, start_unix, interval, elapsed);
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
    if (rc < 0) {
        cli_error("usage: cannot write the report: %s", strerror(-rc));
        return 1;
    }
    if (stop_sig)
        cli_log(1, "usage: stopped by %s; the report has what was sampled", strsignal(stop_sig));
    return readable == n ? 0 : 1;
}
