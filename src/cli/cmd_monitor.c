/* cmd_monitor.c: `memscope monitor TRACE_DIR [--listen HOST:PORT] ...`: the live monitor
 * (monitor.h) of a run started elsewhere (torchrun with the agent in the environment:
 * docs/monitor.md), following its trace directory as it grows, until Ctrl-C (or, with
 * --until-exit, until every traced process has ended); `--once` reads what the directory holds
 * now and prints the metrics. Workload: that of monitor.c. */
#include "cli.h"
#include "monitor.h"

#include "common/size.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: memscope monitor TRACE_DIR [--listen HOST:PORT] [--rank N] [--limit BYTES]\n"
    "                        [--warn-before S] [--report-dir DIR] [--until-exit] [--once]\n"
    "Follows the traces a running program writes into TRACE_DIR (MEMSCOPE_TRACE_DIR of its\n"
    "agent) and serves their figures as Prometheus metrics (docs/monitor.md).\n"
    "  --listen HOST:PORT  serve http://HOST:PORT/metrics (:PORT is 127.0.0.1:PORT)\n"
    "  --rank N            the rank label (default: each process's RANK)\n"
    "  --limit BYTES       the memory the forecast counts to (default: the cgroup's limit,\n"
    "                      else MemAvailable)\n"
    "  --warn-before S     warn when the limit is forecast less than S seconds away\n"
    "                      (default 60)\n"
    "  --report-dir DIR    where the warning's report is written (default: .)\n"
    "  --until-exit        stop once every traced process has ended\n"
    "  --once              read the directory once, print the metrics on stdout, and exit\n";

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
    stop_sig = sig;
}

/* 1 when dir holds a trace, 0 when it holds nothing (a run not started yet), -1 when it holds
 * files and none is a trace: not a trace directory. */
static int trace_dir_kind(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int any = 0, traces = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        any = 1;
        size_t n = strlen(e->d_name);
        if ((n > 4 && strcmp(e->d_name + n - 4, ".mst") == 0) ||
            (n > 4 && strcmp(e->d_name + n - 4, ".msu") == 0) ||
            (n > 4 && strcmp(e->d_name + n - 4, ".msg") == 0))
            traces = 1;
    }
    closedir(d);
    return traces ? 1 : any ? -1 : 0;
}

int cmd_monitor(int argc, char **argv)
{
    struct monitor_opts mo = {.warn_before = 60, .report_dir = "."};
    int once = 0, until_exit = 0;
    enum { OPT_LISTEN = 256, OPT_RANK, OPT_LIMIT, OPT_WARN, OPT_REPORT, OPT_ONCE, OPT_UNTIL };
    static const struct option longopts[] = {{"listen", required_argument, NULL, OPT_LISTEN},
                                             {"rank", required_argument, NULL, OPT_RANK},
                                             {"limit", required_argument, NULL, OPT_LIMIT},
                                             {"warn-before", required_argument, NULL, OPT_WARN},
                                             {"report-dir", required_argument, NULL, OPT_REPORT},
                                             {"once", no_argument, NULL, OPT_ONCE},
                                             {"until-exit", no_argument, NULL, OPT_UNTIL},
                                             {"help", no_argument, NULL, 'h'},
                                             {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_LISTEN: mo.listen = optarg; break;
        case OPT_RANK:
            if (!*optarg || strlen(optarg) > 9 || strspn(optarg, "0123456789") != strlen(optarg))
                return usage_error("monitor: --rank: expected a number, not '%s'", optarg);
            mo.rank = optarg;
            break;
        case OPT_LIMIT: {
            uint64_t v;
            if (ms_size_parse(optarg, &v) < 0 || v == 0)
                return usage_error("monitor: --limit: expected a size such as 200MiB, not '%s'",
                                   optarg);
            mo.limit = v;
            break;
        }
        case OPT_WARN: {
            char *end;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || !(v > 0) || v > 1e7)
                return usage_error("monitor: --warn-before: expected seconds above 0, not '%s'",
                                   optarg);
            mo.warn_before = v;
            break;
        }
        case OPT_REPORT: mo.report_dir = optarg; break;
        case OPT_ONCE: once = 1; break;
        case OPT_UNTIL: until_exit = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fputs(usage_text, stderr);
        return 2;
    }
    mo.trace_dir = argv[optind];
    if (!mo.listen && !once) {
        cli_error("monitor: nothing to do: give --listen HOST:PORT (or --once)");
        return 2;
    }
    int kind = trace_dir_kind(mo.trace_dir);
    struct monitor m;
    char err[512];
    if (kind < 0 && access(mo.trace_dir, F_OK) == 0) {
        DIR *d = opendir(mo.trace_dir);
        if (d)
            closedir(d);
        cli_error("monitor: '%s' is not a trace directory (%s)", mo.trace_dir,
                  d ? "it holds no <pid>.<n>.mst traces" : "not a directory");
        return 1;
    }
    if (monitor_open(&m, &mo, err, sizeof err) < 0) {
        cli_error("monitor: %s", err);
        return 1;
    }
    if (once) {
        monitor_programs_ended(&m);
        if (monitor_tick(&m, monitor_now_ns()) < 0) {
            cli_error("monitor: out of memory reading '%s'", mo.trace_dir);
            monitor_release(&m);
            return 1;
        }
        char *body;
        size_t len;
        int rc = metrics_render(&m, &body, &len);
        if (rc == 0) {
            fwrite(body, 1, len, stdout);
            free(body);
        }
        monitor_release(&m);
        return rc == 0 ? 0 : 1;
    }
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (monitor_start(&m) < 0) {
        cli_error("monitor: cannot start its thread");
        monitor_release(&m);
        return 1;
    }
    while (!stop_sig) {
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        if (until_exit) {
            if (__atomic_load_n(&m.all_gone, __ATOMIC_ACQUIRE)) {
                monitor_programs_ended(&m);
                struct timespec t2 = {0, 600000000}; /* the final tick */
                nanosleep(&t2, NULL);
                break;
            }
        }
    }
    monitor_release(&m);
    return 0;
}
