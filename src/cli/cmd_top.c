/* cmd_top.c: `memscope top [TRACE_DIR | --pid PID | --targets HOST:PORT,...]`: a terminal view of
 * live memory refreshed every second (docs/monitor.md, "memscope top"): per process its live
 * bytes by layer and device, peak, rate, usage figures, forecast and the call sites holding the
 * most; with --targets, one line per exporter (rank) scraped over HTTP and the job's totals.
 * Quits on q or Ctrl-C (or after --iterations). Workload: one monitor tick or one scrape per
 * target a second. */
#include "cli.h"
#include "metrics_http.h"
#include "monitor.h"

#include "common/size.h"
#include "common/term_text.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 256
#define SCRAPE_CAP (16u << 20) /* bytes of one exporter's answer read */
#define TOP_SITES 3

static const char usage_text[] =
    "usage: memscope top [TRACE_DIR | --pid PID | --targets HOST:PORT,...] [--interval S]\n"
    "                    [--iterations N] [--limit BYTES] [--window S]\n"
    "A terminal view of live memory, refreshed every second (q quits).\n"
    "  TRACE_DIR           follow the traces a running program writes there\n"
    "  --pid PID           follow the traces of traced process PID (its MEMSCOPE_TRACE_DIR)\n"
    "  --targets LIST      scrape memscope exporters (memscope run --metrics): one line per\n"
    "                      rank and the job's totals\n"
    "  --interval S        seconds between refreshes (default 1)\n"
    "  --iterations N      stop after N refreshes (default: at q or Ctrl-C)\n"
    "  --limit BYTES       the memory the forecast counts to (TRACE_DIR, --pid)\n"
    "  --window S          the call sites' growth is over the last S to 2S seconds\n"
    "                      (default 5; TRACE_DIR, --pid)\n";

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
    stop_sig = sig;
}

/* The trace directory of traced process pid: MEMSCOPE_TRACE_DIR in its environment. */
static int trace_dir_of(long pid, char *out, size_t len)
{
    char path[64], buf[65536];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (char *p = buf; p < buf + n; p += strlen(p) + 1)
        if (strncmp(p, "MEMSCOPE_TRACE_DIR=", 19) == 0 && strlen(p + 19) < len) {
            snprintf(out, len, "%s", p + 19);
            return 0;
        }
    return -ENOENT;
}

static void fmt_eta(const struct monitor_proc *q, char *out, size_t len)
{
    char lim[32];
    monitor_bytes(q->limit, lim, sizeof lim);
    if (!q->limit)
        snprintf(out, len, "-");
    else if (q->why == MS_LIMIT_REACHED)
        snprintf(out, len, "limit %s reached", lim);
    else if (q->why == MS_LIMIT_PREDICTED)
        snprintf(out, len, "limit %s in %.0f s", lim, q->eta_s);
    else
        snprintf(out, len, "limit %s: not growing", lim);
}

/* One screen of a followed directory. */
static void draw_dir(FILE *o, struct monitor *m, const char *what)
{
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%H:%M:%S", localtime(&t));
    fprintf(o, "memscope top - %s - %zu processes - %s   (q quits)\n", what, m->f.nprocs, now);
    fprintf(o, "%-8s %-5s %-12s %-12s %-13s %-12s %-12s %-12s %-6s %-6s %s\n", "PID", "RANK",
            "LIVE", "PEAK", "RATE/s", "RSS", "PSS", "USS", "STEP", "LAG", "FORECAST");
    for (size_t i = 0; i < m->f.nprocs && i < m->amp; i++) {
        struct ms_follow_proc *p = &m->f.procs[i];
        struct monitor_proc *q = &m->mp[i];
        char live[32], peak[32], rate[32], rss[32] = "-", pss[32] = "-", uss[32] = "-", eta[96];
        monitor_bytes((double)p->host_live, live, sizeof live);
        monitor_bytes((double)p->host_peak, peak, sizeof peak);
        monitor_bytes(q->rate, rate, sizeof rate);
        if (q->have_usage) {
            monitor_bytes((double)(q->usage.rss_anon + q->usage.rss_file + q->usage.rss_shmem), rss,
                          sizeof rss);
            if (q->usage.flags & MS_USAGE_F_SMAPS) {
                monitor_bytes((double)q->usage.pss, pss, sizeof pss);
                monitor_bytes((double)q->usage.uss, uss, sizeof uss);
            }
        }
        fmt_eta(q, eta, sizeof eta);
        fprintf(o,
                "%-8" PRIu64 " %-5s %-12s %-12s %s%-12s %-12s %-12s %-12s %-6" PRIu64 " %-6" PRIu64
                " %s%s\n",
                p->pid, q->rank[0] ? q->rank : "-", live, peak, q->rate >= 0 ? "+" : "", rate, rss,
                pss, uss, p->step, p->pending, eta, q->gone ? " (ended)" : "");
        fprintf(o, "         ");
        for (int l = 0; l < MS_FOLLOW_LAYERS; l++) {
            if (l >= MS_FOLLOW_DEVICE0 && !p->layer[l].allocs)
                continue;
            char b[32];
            monitor_bytes((double)p->layer[l].live, b, sizeof b);
            if (l == MS_FOLLOW_HEAP)
                fprintf(o, "heap %s  ", b);
            else if (l == MS_FOLLOW_MMAP)
                fprintf(o, "mmap %s  ", b);
            else
                fprintf(o, "cuda:%d %s  ", l - MS_FOLLOW_DEVICE0, b);
        }
        for (int c = 0; c < MS_OWNER_COUNT; c++)
            if (p->owner_live[c] && c != MS_OWNER_OTHER) {
                char b[32];
                monitor_bytes((double)p->owner_live[c], b, sizeof b);
                fprintf(o, "%s %s  ", ms_follow_owner_name(c), b);
            }
        fputc('\n', o);
        /* the call sites growing fastest over the window (ms_follow_mark_sites); when none
         * grows, those holding the most */
        struct ms_follow_stack_live top[TOP_SITES];
        size_t nt = ms_follow_top_growing(p, top, TOP_SITES);
        if (!nt)
            nt = ms_follow_top_stacks(p, top, TOP_SITES);
        double span = m->now_ns > q->mark_ns[0] ? (double)(m->now_ns - q->mark_ns[0]) / 1e9 : 0;
        for (size_t k = 0; k < nt; k++) {
            char site[512], held[32], grow[32];
            monitor_site_text(m, i, top[k].stack_id, site, sizeof site);
            monitor_bytes((double)top[k].live, held, sizeof held);
            monitor_bytes(span > 0 && top[k].growth > 0 ? (double)top[k].growth / span : 0, grow,
                          sizeof grow);
            fprintf(o, "         +%-10s %-12s %s\n", strcat(grow, "/s"), held, ms_term_text(site));
        }
    }
}

/* What one exporter's scrape says, summed over its processes. */
struct target {
    const char *addr;
    int up;
    char why[160];
    char rank[32];
    double live, peak, rss, pss, step, eta, lag, prev_live, rate;
    double prev_t;
    int have_prev;
};

/* Reads "name{labels} value" lines of an exposition into t. */
static void parse_scrape(struct target *t, char *body)
{
    t->live = t->peak = t->rss = t->pss = t->step = t->lag = 0;
    t->eta = INFINITY;
    t->rank[0] = 0;
    for (char *line = strtok(body, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char *sp = strrchr(line, ' ');
        if (!sp)
            continue;
        double v = strtod(sp + 1, NULL);
        if (strstr(sp + 1, "Inf"))
            v = sp[1] == '-' ? -INFINITY : INFINITY;
        char *r = strstr(line, "rank=\"");
        if (r && !t->rank[0]) {
            size_t k = strcspn(r + 6, "\"");
            if (k < sizeof t->rank)
                snprintf(t->rank, sizeof t->rank, "%.*s", (int)k, r + 6);
        }
#define IS(name) (strncmp(line, name "{", sizeof name) == 0)
        if (IS("memscope_live_bytes"))
            t->live += v;
        else if (IS("memscope_peak_bytes"))
            t->peak += v;
        else if (IS("memscope_rss_bytes"))
            t->rss += v;
        else if (IS("memscope_pss_bytes"))
            t->pss += v;
        else if (IS("memscope_step") && v > t->step)
            t->step = v;
        else if (IS("memscope_trace_lag_events"))
            t->lag += v;
        else if (IS("memscope_oom_eta_seconds") && v < t->eta)
            t->eta = v;
#undef IS
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void draw_targets(FILE *o, struct target *ts, size_t n)
{
    char now[32];
    time_t tt = time(NULL);
    strftime(now, sizeof now, "%H:%M:%S", localtime(&tt));
    size_t up = 0;
    for (size_t i = 0; i < n; i++)
        up += ts[i].up;
    fprintf(o, "memscope top - %zu targets, %zu up - %s   (q quits)\n", n, up, now);
    fprintf(o, "%-5s %-24s %-12s %-12s %-13s %-12s %-12s %-6s %s\n", "RANK", "TARGET", "LIVE",
            "PEAK", "RATE/s", "RSS", "PSS", "STEP", "OOM IN");
    double live = 0, peak = 0, rss = 0, pss = 0, rate = 0, eta = INFINITY;
    for (size_t i = 0; i < n; i++) {
        struct target *t = &ts[i];
        if (!t->up) {
            fprintf(o, "%-5s %-24s down: %s\n", "-", t->addr, t->why);
            continue;
        }
        char a[32], b[32], c[32], d[32], e[32], f[32] = "-";
        monitor_bytes(t->live, a, sizeof a);
        monitor_bytes(t->peak, b, sizeof b);
        monitor_bytes(t->rate, c, sizeof c);
        monitor_bytes(t->rss, d, sizeof d);
        monitor_bytes(t->pss, e, sizeof e);
        if (isfinite(t->eta))
            snprintf(f, sizeof f, "%.0f s", t->eta);
        fprintf(o, "%-5s %-24s %-12s %-12s %s%-12s %-12s %-12s %-6.0f %s\n",
                t->rank[0] ? t->rank : "-", t->addr, a, b, t->rate >= 0 ? "+" : "", c, d, e,
                t->step, f);
        live += t->live;
        peak += t->peak;
        rss += t->rss;
        pss += t->pss;
        rate += t->rate;
        if (t->eta < eta)
            eta = t->eta;
    }
    char a[32], b[32], c[32], d[32], e[32], f[32] = "-";
    monitor_bytes(live, a, sizeof a);
    monitor_bytes(peak, b, sizeof b);
    monitor_bytes(rate, c, sizeof c);
    monitor_bytes(rss, d, sizeof d);
    monitor_bytes(pss, e, sizeof e);
    if (isfinite(eta))
        snprintf(f, sizeof f, "%.0f s", eta);
    fprintf(o, "%-5s %-24s %-12s %-12s %s%-12s %-12s %-12s %-6s %s\n", "job", "total", a, b,
            rate >= 0 ? "+" : "", c, d, e, "", f);
}

static void scrape_all(struct target *ts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct target *t = &ts[i];
        char *body = NULL;
        if (mhttp_get(t->addr, SCRAPE_CAP, 1000, &body, t->why, sizeof t->why) < 0) {
            t->up = 0;
            t->have_prev = 0;
            continue;
        }
        t->up = 1;
        parse_scrape(t, body);
        free(body);
        double now = now_s();
        if (t->have_prev && now > t->prev_t)
            t->rate = (t->live - t->prev_live) / (now - t->prev_t);
        t->prev_live = t->live;
        t->prev_t = now;
        t->have_prev = 1;
    }
}

/* Waits up to ms for a key on a terminal (else just waits); 1 when it was q (or Q). */
static int quit_key(int tty, int ms)
{
    struct pollfd p = {.fd = 0, .events = POLLIN};
    if (!tty) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
        return 0;
    }
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char c;
    if (read(0, &c, 1) != 1)
        return 0;
    return c == 'q' || c == 'Q';
}

int cmd_top(int argc, char **argv)
{
    const char *targets = NULL;
    long pid = 0, iterations = 0;
    double interval = 1, window = 5;
    uint64_t limit = 0;
    enum { OPT_PID = 256, OPT_TARGETS, OPT_INTERVAL, OPT_ITER, OPT_LIMIT, OPT_WINDOW };
    static const struct option longopts[] = {{"pid", required_argument, NULL, OPT_PID},
                                             {"targets", required_argument, NULL, OPT_TARGETS},
                                             {"interval", required_argument, NULL, OPT_INTERVAL},
                                             {"iterations", required_argument, NULL, OPT_ITER},
                                             {"limit", required_argument, NULL, OPT_LIMIT},
                                             {"window", required_argument, NULL, OPT_WINDOW},
                                             {"help", no_argument, NULL, 'h'},
                                             {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case OPT_PID:
            pid = strtol(optarg, &end, 10);
            if (*end || pid <= 0)
                return usage_error("top: --pid: expected a process id, not '%s'", optarg);
            break;
        case OPT_TARGETS: targets = optarg; break;
        case OPT_INTERVAL:
            interval = strtod(optarg, &end);
            if (*end || !(interval >= 0.1 && interval <= 3600))
                return usage_error("top: --interval: expected 0.1 to 3600 seconds, not '%s'",
                                   optarg);
            break;
        case OPT_ITER:
            iterations = strtol(optarg, &end, 10);
            if (*end || iterations <= 0)
                return usage_error("top: --iterations: expected a count, not '%s'", optarg);
            break;
        case OPT_LIMIT:
            if (ms_size_parse(optarg, &limit) < 0 || !limit)
                return usage_error("top: --limit: expected a size such as 200MiB, not '%s'",
                                   optarg);
            break;
        case OPT_WINDOW:
            window = strtod(optarg, &end);
            if (*end || !(window >= 0.1 && window <= 3600))
                return usage_error("top: --window: expected 0.1 to 3600 seconds, not '%s'", optarg);
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    int sources = (optind < argc) + (pid > 0) + (targets != NULL);
    if (sources != 1 || argc - optind > 1) {
        fputs(usage_text, stderr);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct termios old;
    int tty = isatty(0) && tcgetattr(0, &old) == 0;
    if (tty) {
        struct termios raw = old;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(0, TCSANOW, &raw);
    }
    const char *clear = isatty(1) ? "\033[H\033[2J" : "";
    int rc = 0;
    if (targets) {
        struct target *ts = calloc(MAX_TARGETS, sizeof *ts);
        char *list = strdup(targets);
        size_t n = 0;
        for (char *s = list ? strtok(list, ",") : NULL; s && n < MAX_TARGETS; s = strtok(NULL, ","))
            if (*s)
                ts[n++].addr = s;
        if (!ts || !list || !n) {
            cli_error("top: --targets: expected HOST:PORT,..., not '%s'", targets);
            rc = 2;
        }
        for (long it = 0; !rc && !stop_sig && (!iterations || it < iterations); it++) {
            scrape_all(ts, n);
            fputs(clear, stdout);
            draw_targets(stdout, ts, n);
            fflush(stdout);
            if ((!iterations || it + 1 < iterations) && quit_key(tty, (int)(interval * 1000)))
                break;
        }
        free(list);
        free(ts);
    } else {
        char dir[4096];
        if (pid > 0) {
            if (trace_dir_of(pid, dir, sizeof dir) < 0) {
                cli_error("top: process %ld is not traced by memscope (no MEMSCOPE_TRACE_DIR in "
                          "its environment, or it cannot be read)",
                          pid);
                rc = 1;
            }
        } else
            snprintf(dir, sizeof dir, "%s", argv[optind]);
        struct monitor m;
        char err[512];
        struct monitor_opts mo = {
            .trace_dir = dir, .limit = limit, .growth_window_ns = (uint64_t)(window * 2e9)};
        if (!rc && monitor_open(&m, &mo, err, sizeof err) < 0) {
            cli_error("top: %s", err);
            rc = 1;
        }
        for (long it = 0; !rc && !stop_sig && (!iterations || it < iterations); it++) {
            monitor_tick(&m, monitor_now_ns());
            fputs(clear, stdout);
            draw_dir(stdout, &m, dir);
            fflush(stdout);
            if ((!iterations || it + 1 < iterations) && quit_key(tty, (int)(interval * 1000)))
                break;
        }
        if (!rc)
            monitor_release(&m);
    }
    if (tty)
        tcsetattr(0, TCSANOW, &old);
    return rc;
}
