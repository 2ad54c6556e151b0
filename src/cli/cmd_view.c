/* cmd_view.c: `memscope view RUN.db [--port N]`: loads the run's model (src/view/model.h) and
 * serves the viewer on 127.0.0.1 until Ctrl-C; prints the URL to open, with its token. */
#include "cli.h"

#include "common/ms_error.h"
#include "view/api.h"
#ifdef MEMSCOPE_HAVE_MHD
#include "view/server.h"
#endif

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char view_usage[] =
    "usage: memscope view RUN.db|TRACE_DIR|SNAPSHOT [--port N] [--site-skip=NAME,...]\n"
    "  Serves an interactive view of the run (memory over time, flame graphs of allocation\n"
    "  stacks, the largest blocks, owners) on 127.0.0.1 and prints the URL to open in a\n"
    "  browser; the URL carries a token without which the server answers nothing. Ctrl-C\n"
    "  stops it. RUN.db is any memscope database (the default compact one or a full one); a\n"
    "  trace directory or a PyTorch memory snapshot is converted first (into a temporary\n"
    "  file, removed when the server stops).\n"
    "  --port N   listen on port N (default 0: a free port)\n"
    "  --site-skip=NAME[,NAME...]   call sites skip these functions too (memscope analyze)\n";

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

#ifdef MEMSCOPE_HAVE_MHD
static void on_ready(const char *url, void *ctx)
{
    (void)ctx;
    printf("memscope view: open %s\n(Ctrl-C stops the server)\n", url);
    fflush(stdout);
}
#endif

int cmd_view(int argc, char **argv)
{
    const char *db = NULL;
    long port = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(view_usage, stdout);
            return 0;
        }
        if (!strncmp(a, "--site-skip", 11) && (a[11] == '=' || (!a[11] && i + 1 < argc))) {
            int rc = cli_site_skip("view", "--site-skip", a[11] ? a + 12 : argv[++i]);
            if (rc)
                return rc;
            continue;
        }
        if (!strcmp(a, "--port") && i + 1 < argc)
            v = argv[++i];
        else if (!strncmp(a, "--port=", 7))
            v = a + 7;
        if (v) {
            char *end;
            errno = 0;
            port = strtol(v, &end, 10);
            if (!*v || *end || errno || port < 0 || port > 65535)
                return usage_error("view: --port '%s': expected 0 to 65535", v);
        } else if (a[0] == '-' && a[1]) {
            return usage_error("view: unknown option '%s'", a);
        } else if (db) {
            return usage_error("view: one database at a time ('%s' and '%s')", db, a);
        } else {
            db = a;
        }
    }
    if (!db)
        return usage_error("view: which database? (memscope view RUN.db)");
#ifndef MEMSCOPE_HAVE_MHD
    (void)port;
    (void)on_signal;
    cli_error("view: this memscope was built without libmicrohttpd (install libmicrohttpd-dev "
              "and build again: scripts/setup-debian.sh does)");
    return 1;
#else
    char err[512] = "";
    struct ms_view v;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct cli_view_input in;
    if (cli_view_input("view", db, &in) < 0)
        return 1;
    int opened = ms_view_open(&v, in.db, err, sizeof err);
    if (opened < 0) {
        cli_view_input_release(&in);
        cli_error("view: %s", err);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cli_log(0, "view: %llu events, %zu blocks loaded in %.2f s", (unsigned long long)v.m.events,
            v.m.nblocks, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct ms_view_server_opts o = {.port = (int)port, .stop = &stop_flag, .on_ready = on_ready};
    int rc = ms_view_serve(&v, &o, err, sizeof err);
    ms_view_release(&v);
    cli_view_input_release(&in);
    if (rc < 0) {
        cli_error("view: %s", err);
        return 1;
    }
    return 0;
#endif
}
