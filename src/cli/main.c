/* main.c: the memscope command. Dispatches to one cmd_<name>() per subcommand through the
 * commands[] table; a first argument that is an option or a program (msMemScope's form,
 * `memscope [options] prog args`) means `run`, unless it is a mistyped command's name and no
 * program (cli_mistyped, typo.c). What is set up around a command is startup.c's; how the
 * command speaks, messages.c's. */
#include "cli.h"
#include "analyze/analyze.h"
#include "common/files.h"
#include "common/ms_error.h"

#include "version.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: memscope run [options] [--] program [args...]\n"
    "       memscope [options] program [args...]        (msMemScope form; same as run)\n"
    "       memscope import TRACE_DIR -o run.db         (raw traces -> database)\n"
    "       memscope pack TRACE_DIR|FILE.mst...         (raw traces -> packed traces)\n"
    "       memscope export run.db --format=csv|db|parquet|torch-snapshot|pprof|collapsed|\n"
    "                      speedscope|perfetto [-o FILE]  (memscope export --help)\n"
    "       memscope sql JOB \"SQL\" [--format=table|csv|json]  (a job's Parquet tables)\n"
    "       memscope ranks JOB [--layer=NAME] [--json]   (the rank that differs, and why)\n"
    "       memscope analyze KIND|all|list run.db [options]   (memscope analyze --help)\n"
    "       memscope plot run.db [-o mem.svg] [--layer=NAME]   (live bytes over time)\n"
    "       memscope view run.db [--port N]               (the viewer, in a browser)\n"
    "       memscope report run.db [-o run.html]          (the viewer as one HTML file)\n"
    "       memscope usage --pid PID... [--devices N...] [--interval S] [--duration S]\n"
    "                      [-o report.json] [--plot usage.svg]   (processes not traced)\n"
    "       memscope usage --pid PID --into TRACE_DIR [--interval S]  (run's sampler)\n"
    "       memscope attach PID [-o OUT] [--duration=S]   (record a running process)\n"
    "       memscope monitor TRACE_DIR [--listen HOST:PORT] [--limit BYTES] [--once]\n"
    "       memscope top [TRACE_DIR | --pid PID | --targets HOST:PORT,...]  (live view)\n"
    "       memscope --compare --input-path=A.db,B.db [-o DIR]  (two runs, msMemScope's form)\n"
#ifdef MEMSCOPE_HAVE_SNAPSHOT
    "       memscope snapshot FILE [--json] [-o run.db] [--state-at N]\n"
#endif
    "       memscope --help | --version\n"
    "\n"
    "Run `memscope run --help` for the recording options.\n";

/* own_signals: the command handles SIGINT and SIGTERM itself (run stops its conversion and
 * keeps the traces, view stops its server); the others get cli_cleanup_on_signals (startup.c). */
static const struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    int own_signals;
} commands[] = {
    {"run", cmd_run, 1},           {"import", cmd_import, 0},   {"export", cmd_export, 0},
    {"analyze", cmd_analyze, 0},   {"pack", cmd_pack, 0},       {"plot", cmd_plot, 0},
    {"view", cmd_view, 1},         {"report", cmd_report, 0},   {"usage", cmd_usage, 1},
    {"attach", cmd_attach, 1},     {"monitor", cmd_monitor, 1}, {"top", cmd_top, 1},
    {"sql", cmd_sql, 0},           {"ranks", cmd_ranks, 0},
#ifdef MEMSCOPE_HAVE_SNAPSHOT
    {"snapshot", cmd_snapshot, 0},
#endif
};

static int run_command(int argc, char **argv);

int main(int argc, char **argv)
{
    cli_huge_page_heap(argv);
    cli_sqlite_oom_log();
    /* the program's own allocation wrappers, for every command that names call sites */
    const char *skip = getenv("MEMSCOPE_SITE_SKIP");
    int rc = skip && *skip ? cli_site_skip(NULL, "MEMSCOPE_SITE_SKIP", skip) : 0;
    /* said before anything runs, not when a temporary directory is first needed */
    const char *tmpdir = getenv("TMPDIR");
    if (rc == 0 && tmpdir && *tmpdir && strcmp(ms_tmp_dir(), tmpdir) != 0)
        cli_log(2,
                "TMPDIR '%s' is not a directory memscope can write; its temporary "
                "directories go to /tmp",
                tmpdir);
    if (rc == 0)
        rc = run_command(argc, argv);
    ms_site_rule_release(&ms_site_rule);
    if (rc == 0 && ms_oom_seen()) { /* an answer printed after a failed allocation */
        fprintf(stderr, "memscope: out of memory (an allocation failed): the output above may be "
                        "incomplete\n");
        rc = 1;
    }
    /* everything memscope printed on stdout must have reached it (a full disk, /dev/full): else
     * the command fails, even --help and --version */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (rc == 0)
            fprintf(stderr, "memscope: cannot write to stdout: %s\n", strerror(errno));
        return rc ? rc : 1;
    }
    return rc;
}

static int run_command(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
        printf("memscope version %s\n", MEMSCOPE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            if (!commands[i].own_signals)
                cli_cleanup_on_signals();
            return commands[i].fn(argc - 1, argv + 1);
        }
    const char *names[sizeof commands / sizeof commands[0] + 1];
    size_t n = 0;
    for (; n < sizeof commands / sizeof commands[0]; n++)
        names[n] = commands[n].name;
    names[n++] = "help";
    const char *typo = cli_mistyped(argv[1], names, n);
    if (typo)
        return usage_error("'%s' is neither a command nor a program on PATH: did you mean %s?",
                           argv[1], typo);
    /* msMemScope form: options then the program; with --compare, no program (offline compare) */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--compare"))
            return cmd_compare_ms(argc, argv);
        int takes_value = !strcmp(argv[i], "-i") || !strcmp(argv[i], "--input-path") ||
                          !strcmp(argv[i], "-o") || !strcmp(argv[i], "--output-path");
        if (argv[i][0] != '-')
            break; /* the program */
        i += takes_value;
    }
    argv[0] = "run";
    return cmd_run(argc, argv);
}
