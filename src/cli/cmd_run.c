/* cmd_run.c: `memscope run [options] [--] program [args]`: runs a program under the agent and
 * turns its traces into a database (or CSV, or keeps the raw traces).
 *
 * The program runs as a child with LD_PRELOAD=libmemscope.so and the agent's settings in its
 * environment; memscope waits for it (ignoring SIGINT/SIGQUIT, which the terminal delivers to
 * the program too, and forwarding SIGTERM/SIGHUP), then converts whatever the agents wrote,
 * even when the program died of a signal, prints a short summary on stderr, and exits with the
 * program's status (128+N for signal N). */
#include "cli.h"
#include "common/agent_api.h"

#include "analyze/analyze.h"
#include "common/ms_error.h"
#include "common/files.h"
#include "trace/pack.h"
#include "store/store.h"
#include "version.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum format { FMT_COMPACT, FMT_DB, FMT_CSV, FMT_TRACE };

struct run_options {
    unsigned c_depth;  /* 0 = no native stacks */
    unsigned py_depth; /* Python stack depth, 0 = none */
    int events_none;
    char events[128];
    enum format format;
    const char *output;
    int deferred;
    int no_follow;
    int keep_trace;
    int no_pack; /* keep traces raw (version 1) instead of packing them */
    int unwind_dwarf;
    char analysis[256];  /* --analysis list, "" for none */
    int events_given;    /* --events was on the command line (passed to the Python layer) */
    const char *level;   /* --level: op, kernel (the Python layer's op events) */
    const char *watch;   /* --watch=start[:outid],end[,full-content] */
    const char *step_on; /* --step-on=auto|none|OPTIMIZER (the Python layer's steps) */
    const char *device;  /* --device=cpu,cuda,cuda:N (the agent's CUDA hooks) */
    int symbolize;
};

static const char run_usage[] =
    "usage: memscope run [options] [--] program [args...]\n"
    "   or: memscope [options] program [args...]\n"
    "\n"
    "Runs program with the memscope agent, then writes what it recorded.\n"
    "\n"
    "  -o, --output-path=PATH   a .db (or .csv) file, or a directory (default:\n"
    "                           memscopeDumpResults/) that receives a folder of the run,\n"
    "                           memscope_<pid>_<YYYYmmddHHMMSS>/, with memscope_<stamp>.db\n"
    "                           (compact) or memscope_dump_<stamp>.db/.csv (msMemScope's)\n"
    "      --format=compact|db|csv|trace\n"
    "                           compact (default): a SQLite database of the run's tables\n"
    "                           and its packed traces, about 3 bytes per event; db: SQLite\n"
    "                           with one row per event (msMemScope's memscope_dump, what\n"
    "                           Insight opens; `memscope export --format=db` makes it from\n"
    "                           a compact one); csv: msMemScope's CSV; trace: keep the\n"
    "                           traces in PATH, packed (memscope import converts them)\n"
    "      --call-stack=c[:N][,python[:N]]\n"
    "                           native stack depth N in 0..1000 (default when given: 50);\n"
    "                           without this option: c:32, or python:32 when the program\n"
    "                           is a Python interpreter (python, python3, python3.11 ...),\n"
    "                           and so for each process a shell or launcher starts\n"
    "                           and memscope's Python package is installed\n"
    "      --events=LIST        alloc,free (default); access adds PyTorch op ranges and tensor\n"
    "                           accesses (Python programs); none records nothing\n"
    "                           launch adds CUDA kernel launches (KERNEL_LAUNCH rows)\n"
    "      --device=LIST        cuda (default: every CUDA device the program uses), cuda:N\n"
    "                           (device N only), cpu (host memory only: no CUDA hooks)\n"
    "      --level=op|kernel    PyTorch ops recorded as ranges with --events=launch (op)\n"
    "      --watch=START[:OUTID],END[,full-content]\n"
    "                           PyTorch: checksum the outputs of op START before and after\n"
    "                           every op until op END (docs/torch.md)\n"
    "      --step-on=auto|none|NAME\n"
    "                           PyTorch: which optimizer's step() ends a memscope step: the\n"
    "                           first one that steps (auto), none, or the optimizer class\n"
    "                           NAME (Adam); every optimizer's step tags its owners\n"
    "      --analysis=LIST      after the run, run these analyses (memscope analyze):\n"
    "                           leaks, peak, compare, inefficient, decompose, temporary,\n"
    "                           trend, fragmentation, oom[:K] (CUDA out-of-memory, K rows\n"
    "                           of live blocks after each OOM), all, or none (default)\n"
    "      --collect-mode=immediate|deferred\n"
    "                           deferred: record only after memscope_start() is called\n"
    "      --unwind=dwarf|fp    native unwinder: .eh_frame (default: full stacks whatever\n"
    "                           the build flags) or frame pointers (fastest; right only for\n"
    "                           code built with them)\n"
    "      --no-follow          do not trace programs that the program executes\n"
    "      --keep-trace         keep the traces next to the database, packed\n"
    "      --no-pack            keep traces as the agent wrote them (bigger, no packing time)\n"
    "      --no-symbols         do not resolve function names and source lines\n"
    "      --log-level=debug|info|warning|error\n"
    "  -q, --quiet              same as --log-level=error (no summary)\n"
    "  -v, --verbose            same as --log-level=debug\n"
    "  -V, --version            print the version\n"
    "  -h, --help               print this help\n"
    "\n"
    "Exit status: the program's own, 128+N when it died of signal N; 2 for a usage error;\n"
    "127 when the program cannot be started; 1 when recording or conversion failed.\n"
    "\n"
    "Environment: MEMSCOPE_NO_TSC=1 takes every timestamp with clock_gettime instead of\n"
    "computing it from the CPU's time-stamp counter (the default where that is safe).\n";

/* Parses an unsigned decimal in [0, max]; returns 0 or -1. */
static int parse_uint(const char *s, unsigned max, unsigned *out)
{
    if (!*s)
        return -1;
    unsigned long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (unsigned long)(*s - '0');
        if (v > max)
            return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* Splits a list on ',' or the full-width comma U+FF0C, as msMemScope does. Calls fn on each
 * item; stops at the first nonzero return and returns it. */
static int for_each_item(const char *list, int (*fn)(const char *item, void *arg), void *arg)
{
    char buf[512];
    if (strlen(list) >= sizeof buf)
        return -1;
    size_t n = 0;
    for (const char *s = list;; s++) {
        int sep = *s == ',' || !*s;
        int wide = !memcmp(s, "\xef\xbc\x8c", 3);
        if (sep || wide) {
            buf[n] = 0;
            int rc = fn(buf, arg);
            if (rc)
                return rc;
            n = 0;
            if (!*s)
                return 0;
            if (wide)
                s += 2;
            continue;
        }
        buf[n++] = *s;
    }
}

static int stack_item(const char *item, void *arg)
{
    struct run_options *o = arg;
    const char *colon = strchr(item, ':');
    size_t kl = colon ? (size_t)(colon - item) : strlen(item);
    unsigned n = 50;
    if (colon && parse_uint(colon + 1, 1000, &n) < 0)
        return -1;
    if (kl == 1 && item[0] == 'c')
        o->c_depth = n;
    else if (kl == 6 && !strncmp(item, "python", 6))
        o->py_depth = n;
    else
        return -1;
    return 0;
}

/* --device items: cpu (host memory only), cuda (every device, the default), cuda:N. */
static int device_item(const char *item, void *arg)
{
    (void)arg;
    if (!strcmp(item, "cpu") || !strcmp(item, "cuda"))
        return 0;
    if (strncmp(item, "cuda:", 5) || !item[5] || strlen(item) > 7)
        return -1;
    for (const char *p = item + 5; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    return atoi(item + 5) < 64 ? 0 : -1;
}

static int event_item(const char *item, void *arg)
{
    struct run_options *o = arg;
    static const char *const known[] = {"alloc", "free", "launch", "access", "traceback"};
    if (!strcmp(item, "none")) {
        o->events_none = 1;
        return 0;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(item, known[i])) {
            /* launch and access are the PyTorch layer's (op ranges, tensor accesses); it reads
             * the list from MEMSCOPE_EVENTS in the program. */
            if (i == 4)
                cli_log(2, "--events=traceback: start the Python tracer with "
                           "memscope.tracer.start() in the program");
            return 0;
        }
    return -1;
}

/* Whether prog names a Python interpreter: python, python3, python3.11 ... (any directory). */
static int python_program(const char *prog)
{
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    if (strncmp(base, "python", 6) != 0)
        return 0;
    for (const char *p = base + 6; *p; p++)
        if ((*p < '0' || *p > '9') && *p != '.')
            return 0;
    return 1;
}

static int level_item(const char *item, void *arg)
{
    (void)arg;
    return strcmp(item, "op") && strcmp(item, "kernel") && strcmp(item, "0") && strcmp(item, "1");
}

/* The K of an oom[:K] item of the --analysis list (0: none given). */
static unsigned oom_k_of(const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save))
        if (ms_oom_k(it))
            return ms_oom_k(it);
    return 0;
}

static int analysis_item(const char *item, void *arg)
{
    (void)arg;
    return !strcmp(item, "all") || ms_analysis_find(item) ? 0 : -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* ---- child management ---- */

static volatile pid_t child_pid;
static volatile int stop_signal; /* SIGINT, SIGTERM or SIGHUP received during the conversion */

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill(child_pid, sig);
}

/* Starts argv[0] with the agent. Returns the child's pid, or -1 (message printed) when the
 * program cannot be started; *exec_errno gets the reason. */
static pid_t spawn(char **argv, char *const *env_add, int *exec_errno)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        *exec_errno = errno;
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        close(pfd[0]);
        for (size_t i = 0; env_add[i]; i++)
            putenv(env_add[i]);
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(pfd[1]);
    int e = 0;
    ssize_t r;
    do
        r = read(pfd[0], &e, sizeof e);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        *exec_errno = e;
        return -1;
    }
    return pid;
}

static int wait_child(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return 1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* ---- the command ---- */

/* Packs the traces this run wrote in dir (modified since run_start); a failure leaves a file
 * raw, which every reader reads too. */
static void pack_traces(const char *dir, time_t run_start)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct ms_pack_stats st = {0};
    int packed = 0;
    cli_pack_path(dir, cpus > 0 ? (int)cpus : 1, run_start, &st, &packed);
    if (packed)
        cli_log(0, "packed %d trace%s: %llu events, %llu -> %llu bytes", packed,
                packed == 1 ? "" : "s", (unsigned long long)st.events,
                (unsigned long long)st.in_bytes, (unsigned long long)st.out_bytes);
}

int cmd_run(int argc, char **argv)
{
    struct run_options o = {
        .c_depth = 32, .format = FMT_COMPACT, .symbolize = 1, .unwind_dwarf = 1};
    int stack_given = 0;
    int log_explicit = 0, quiet = 0, verbose = 0;
    enum {
        OPT_EVENTS = 256,
        OPT_STACK,
        OPT_FORMAT,
        OPT_LOG,
        OPT_COLLECT,
        OPT_NOFOLLOW,
        OPT_KEEP,
        OPT_NOSYM,
        OPT_UNWIND,
        OPT_ANALYSIS,
        OPT_LEVEL,
        OPT_WATCH,
        OPT_NOPACK,
        OPT_DEVICE,
        OPT_STEPON
    };
    static const struct option longopts[] = {
        {"output-path", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"data-format", required_argument, NULL, OPT_FORMAT}, /* msMemScope's older name */
        {"call-stack", required_argument, NULL, OPT_STACK},
        {"events", required_argument, NULL, OPT_EVENTS},
        {"collect-mode", required_argument, NULL, OPT_COLLECT},
        {"no-follow", no_argument, NULL, OPT_NOFOLLOW},
        {"keep-trace", no_argument, NULL, OPT_KEEP},
        {"no-pack", no_argument, NULL, OPT_NOPACK},
        {"unwind", required_argument, NULL, OPT_UNWIND},
        {"analysis", required_argument, NULL, OPT_ANALYSIS},
        {"level", required_argument, NULL, OPT_LEVEL},
        {"watch", required_argument, NULL, OPT_WATCH},
        {"step-on", required_argument, NULL, OPT_STEPON},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"no-symbols", no_argument, NULL, OPT_NOSYM},
        {"log-level", required_argument, NULL, OPT_LOG},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"debug", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    snprintf(o.events, sizeof o.events, "alloc,free");
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "+:o:qvVh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o.output = optarg; break;
        case OPT_FORMAT:
            if (!strcmp(optarg, "compact"))
                o.format = FMT_COMPACT;
            else if (!strcmp(optarg, "db"))
                o.format = FMT_DB;
            else if (!strcmp(optarg, "csv"))
                o.format = FMT_CSV;
            else if (!strcmp(optarg, "trace"))
                o.format = FMT_TRACE;
            else
                return usage_error("--format: expected compact, db, csv or trace, not '%s'",
                                   optarg);
            break;
        case OPT_STACK:
            stack_given = 1;
            o.c_depth = 0;
            o.py_depth = 0;
            if (for_each_item(optarg, stack_item, &o))
                return usage_error("--call-stack: expected c[:N],python[:N] with N in 0..1000, "
                                   "not '%s'",
                                   optarg);
            break;
        case OPT_EVENTS:
            if (for_each_item(optarg, event_item, &o))
                return usage_error("--events: expected a list of alloc, free, launch, access, "
                                   "traceback or none, not '%s'",
                                   optarg);
            snprintf(o.events, sizeof o.events, "%s", optarg);
            o.events_given = 1;
            break;
        case OPT_DEVICE:
            if (for_each_item(optarg, device_item, NULL) || strlen(optarg) > 100)
                return usage_error("--device: expected a list of cpu, cuda or cuda:N, not '%s'",
                                   optarg);
            o.device = optarg;
            break;
        case OPT_LEVEL:
            if (for_each_item(optarg, level_item, NULL))
                return usage_error("--level: expected op or kernel (or 0, 1), not '%s'", optarg);
            o.level = optarg;
            break;
        case OPT_WATCH: {
            /* msMemScope: start[:outid],end[,full-content]; both start and end are needed. */
            const char *comma = strchr(optarg, ',');
            const char *rest = comma ? strchr(comma + 1, ',') : NULL;
            if (!comma || comma == optarg || comma[1] == 0 || comma[1] == ',' ||
                (rest && strcmp(rest, ",full-content") != 0))
                return usage_error("--watch: expected START[:OUTID],END[,full-content], not "
                                   "'%s'",
                                   optarg);
            if (strlen(optarg) >= 512)
                return usage_error("--watch: value too long");
            o.watch = optarg;
            break;
        }
        case OPT_STEPON: {
            int ok = *optarg && strlen(optarg) < 64;
            for (const char *c = optarg; *c && ok; c++)
                ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                     (*c >= '0' && *c <= '9') || *c == '_';
            if (!ok)
                return usage_error("--step-on: expected auto, none or an optimizer class name, "
                                   "not '%s'",
                                   optarg);
            o.step_on = optarg;
            break;
        }
        case OPT_COLLECT:
            if (!strcmp(optarg, "immediate"))
                o.deferred = 0;
            else if (!strcmp(optarg, "deferred"))
                o.deferred = 1;
            else
                return usage_error("--collect-mode: expected immediate or deferred, not '%s'",
                                   optarg);
            break;
        case OPT_NOFOLLOW: o.no_follow = 1; break;
        case OPT_KEEP: o.keep_trace = 1; break;
        case OPT_NOPACK: o.no_pack = 1; break;
        case OPT_UNWIND:
            if (!strcmp(optarg, "fp") || !strcmp(optarg, "dwarf"))
                o.unwind_dwarf = optarg[0] == 'd';
            else
                return usage_error("--unwind: expected fp or dwarf, not '%s'", optarg);
            break;
        case OPT_ANALYSIS:
            if (!strcmp(optarg, "none")) {
                o.analysis[0] = 0;
                break;
            }
            if (for_each_item(optarg, analysis_item, NULL))
                return usage_error(
                    "--analysis: expected a list of leaks, peak, compare, "
                    "inefficient, decompose, temporary, trend, fragmentation, oom[:K], "
                    "all or none, not '%s'",
                    optarg);
            snprintf(o.analysis, sizeof o.analysis, "%s", optarg);
            break;
        case OPT_NOSYM: o.symbolize = 0; break;
        case OPT_LOG:
            log_explicit = 1;
            if (!strcmp(optarg, "debug"))
                cli_log_level = 0;
            else if (!strcmp(optarg, "info"))
                cli_log_level = 1;
            else if (!strcmp(optarg, "warning") || !strcmp(optarg, "warn")) {
                cli_log_level = 2;
                if (!strcmp(optarg, "warn"))
                    fputs("memscope: --log-level=warn is deprecated; use warning\n", stderr);
            } else if (!strcmp(optarg, "error"))
                cli_log_level = 3;
            else
                return usage_error("--log-level: expected debug, info, warning or error, "
                                   "not '%s'",
                                   optarg);
            break;
        case 'q': quiet = 1; break;
        case 'v': verbose = 1; break;
        case 'V': printf("memscope version %s\n", MEMSCOPE_VERSION); return 0;
        case 'h': fputs(run_usage, stdout); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!log_explicit)
        cli_log_level = verbose ? 0 : quiet ? 3 : 1;
    if (optind >= argc)
        return usage_error("no program to run");
    char **prog = argv + optind;

    char agent_path[PATH_MAX];
    if (run_find_agent(agent_path, sizeof agent_path) < 0) {
        cli_error("cannot find the agent libmemscope.so next to the memscope binary or in "
                  "../%s (set MEMSCOPE_AGENT to its path)",
                  "lib/memscope");
        return 1;
    }

    /* Decide the output paths and make sure they can be written before running anything. */
    time_t now = time(NULL), run_start = now;
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d%H%M%S", localtime(&now));
    const char *suffix = o.format == FMT_CSV ? ".csv" : ".db";
    const char *output = o.output ? o.output : "memscopeDumpResults";
    /* out_dir is at most PATH_MAX - 128 bytes (checked below): the others have room for it. */
    char out_dir[PATH_MAX], out_file[PATH_MAX + 128] = "", trace_dir[PATH_MAX + 128];
    int out_is_file = o.format != FMT_TRACE && ends_with(output, suffix);
    if (strlen(output) >= PATH_MAX - 128)
        return usage_error("--output-path: path too long");
    if (out_is_file) {
        snprintf(out_file, sizeof out_file, "%s", output);
        snprintf(out_dir, sizeof out_dir, "%s", output);
        char *slash = strrchr(out_dir, '/');
        if (!slash)
            strcpy(out_dir, ".");
        else if (slash == out_dir)
            out_dir[1] = 0; /* a file in / */
        else
            *slash = 0;
    } else {
        snprintf(out_dir, sizeof out_dir, "%s", output);
        size_t l = strlen(out_dir); /* "dir/" names dir: no "dir//file" in messages */
        while (l > 1 && out_dir[l - 1] == '/')
            out_dir[--l] = 0;
    }
    struct stat od_st;
    int out_dir_existed = stat(out_dir, &od_st) == 0;
    int rc = run_mkdir_p(out_dir);
    if (rc < 0) {
        cli_error("cannot create output directory '%s': %s", out_dir, ms_strerror(rc));
        return 1;
    }
    struct stat out_st;
    if (out_is_file && stat(out_file, &out_st) == 0 && S_ISDIR(out_st.st_mode)) {
        cli_error("cannot write '%s': it is a directory", out_file);
        return 1;
    }
    if (out_is_file && o.format != FMT_CSV && lstat(out_file, &out_st) == 0 &&
        !S_ISREG(out_st.st_mode)) { /* a database is renamed into place: never over a FIFO */
        cli_error("cannot write '%s': it exists and is not a regular file", out_file);
        return 1;
    }
    if (out_is_file && (rc = run_lock_output(out_file)) < 0) {
        if (rc == -EBUSY)
            cli_error("'%s' is being written by another memscope run; choose another output "
                      "(the program was not started)",
                      out_file);
        else
            cli_error("cannot lock '%s.lock': %s", out_file, strerror(-rc));
        return 1;
    }
    if (access(out_dir, W_OK) != 0) {
        cli_error("cannot write to output directory '%s': %s", out_dir, strerror(errno));
        return 1;
    }
    /* A directory receives msMemScope's layout: a folder of this run, memscope_<pid>_<stamp>
     * (<pid>: memscope's own, so that runs in the same second stay apart), holding
     * memscope_dump_<stamp>.db or .csv (docs/cli.md). */
    char base_dir[PATH_MAX];
    snprintf(base_dir, sizeof base_dir, "%s", out_dir);
    int made_run_dir = 0;
    if (!out_is_file && o.format != FMT_TRACE) {
        char run_dir[PATH_MAX + 64];
        snprintf(run_dir, sizeof run_dir, "%s/memscope_%ld_%s", base_dir, (long)getpid(), stamp);
        if (strlen(run_dir) >= sizeof out_dir) /* cannot happen: base_dir is short enough */
            return usage_error("--output-path: path too long");
        if (mkdir(run_dir, 0700) < 0) { /* memscope's directories: 0700 (docs/cli.md) */
            cli_error("cannot create '%s': %s", run_dir, strerror(errno));
            return 1;
        }
        memcpy(out_dir, run_dir, strlen(run_dir) + 1);
        made_run_dir = 1;
    }
    if (o.format == FMT_TRACE)
        snprintf(trace_dir, sizeof trace_dir, "%s", out_dir);
    else {
        snprintf(trace_dir, sizeof trace_dir, "%s/.memscope-trace-%ld-%s", out_dir, (long)getpid(),
                 stamp);
        if (mkdir(trace_dir, 0700) < 0) {
            cli_error("cannot create trace directory '%s': %s", trace_dir, strerror(errno));
            return 1;
        }
    }
    char abs_trace[PATH_MAX];
    if (!realpath(trace_dir, abs_trace)) {
        cli_error("cannot resolve '%s': %s", trace_dir, strerror(errno));
        return 1;
    }

    /* The child's environment additions (putenv keeps the pointers: static storage). */
    static char env_preload[PATH_MAX * 2 + 32], env_dir[PATH_MAX + 32], env_depth[48],
        env_deferred[32], env_nofollow[32], env_unwind[32], env_pydepth[48], env_events[160],
        env_level[96], env_watch[600], env_outdir[PATH_MAX + 32], env_stepon[96];
    const char *old_pre = getenv("LD_PRELOAD");
    snprintf(env_preload, sizeof env_preload, "LD_PRELOAD=%s%s%s", agent_path,
             old_pre && *old_pre ? ":" : "", old_pre ? old_pre : "");
    snprintf(env_dir, sizeof env_dir, MS_ENV_TRACE_DIR "=%s", abs_trace);
    /* (MEMSCOPE_DEPTH and MEMSCOPE_PY_DEPTH are written below, once the default for Python
     * programs is known.) */
    snprintf(env_deferred, sizeof env_deferred, MS_ENV_DEFERRED "=%d", o.deferred || o.events_none);
    snprintf(env_nofollow, sizeof env_nofollow, MS_ENV_NO_FOLLOW "=%d", o.no_follow);
    snprintf(env_unwind, sizeof env_unwind, MS_ENV_UNWIND "=%s", o.unwind_dwarf ? "dwarf" : "fp");
    /* The Python package (python/): <bin>/python in the build tree, <bin>/../lib/memscope/python
     * when installed; prepended to PYTHONPATH so `import memscope` works in the program. */
    static char env_pypath[PATH_MAX * 3 + 32];
    char pydir[PATH_MAX + 64] = "", bindir[PATH_MAX];
    if (run_exe_dir(bindir, sizeof bindir) == 0) {
        const char *pyc[] = {"/python", "/" MEMSCOPE_AGENT_RELDIR "/python"};
        for (size_t i = 0; i < 2 && !pydir[0]; i++) {
            char cand[PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%s%s/memscope", bindir, pyc[i]);
            if (access(cand, R_OK) == 0 && realpath(cand, pydir))
                *strrchr(pydir, '/') = 0;
        }
    }
    static char env_auto[40];
    int stacks_auto = 0;
    if (!stack_given && pydir[0] && python_program(prog[0])) {
        /* A Python program's native frames are the interpreter's (and cost 1.45x against 1.05x
         * on a PyTorch script, bench/RESULTS.md): its default is its Python stack, when the
         * Python package is there to report it. */
        o.c_depth = 0;
        o.py_depth = 32;
    } else if (!stack_given && pydir[0]) {
        /* A shell, env or launcher that starts Python programs: each process takes the default
         * of what it is (the agent looks at its own executable), as if run directly. */
        o.py_depth = 32;
        stacks_auto = 1;
        snprintf(env_auto, sizeof env_auto, MS_ENV_STACKS_AUTO "=1");
    }
    snprintf(env_depth, sizeof env_depth, MS_ENV_DEPTH "=%u", o.c_depth);
    snprintf(env_pydepth, sizeof env_pydepth, MS_ENV_PY_DEPTH "=%u", o.py_depth);
    const char *old_pp = getenv("PYTHONPATH");
    snprintf(env_pypath, sizeof env_pypath, "PYTHONPATH=%s%s%s", pydir,
             pydir[0] && old_pp && *old_pp ? ":" : "", old_pp ? old_pp : "");
    char *env_add[24] = {env_preload,  env_dir,    env_depth,  env_deferred,
                         env_nofollow, env_unwind, env_pydepth};
    size_t nenv = 7;
    if (pydir[0])
        env_add[nenv++] = env_pypath;
    if (stacks_auto)
        env_add[nenv++] = env_auto;
    /* What the Python layer reads (docs/torch.md): only what the user asked for; a
     * MEMSCOPE_OUTPUT_DIR already in the environment wins over the output directory. */
    char abs_out[PATH_MAX];
    if (!getenv(MS_ENV_OUTPUT_DIR) && realpath(out_dir, abs_out)) {
        snprintf(env_outdir, sizeof env_outdir, MS_ENV_OUTPUT_DIR "=%s", abs_out);
        env_add[nenv++] = env_outdir;
    }
    if (o.events_given) {
        snprintf(env_events, sizeof env_events, MS_ENV_EVENTS "=%s", o.events);
        env_add[nenv++] = env_events;
    }
    if (o.level && strlen(o.level) < 64) {
        snprintf(env_level, sizeof env_level, MS_ENV_LEVEL "=%s", o.level);
        env_add[nenv++] = env_level;
    }
    if (o.watch) {
        snprintf(env_watch, sizeof env_watch, MS_ENV_WATCH "=%s", o.watch);
        env_add[nenv++] = env_watch;
    }
    if (o.step_on) {
        snprintf(env_stepon, sizeof env_stepon, MS_ENV_STEP_ON "=%s", o.step_on);
        env_add[nenv++] = env_stepon;
    }
    /* NVTX ranges and marks reach the agent through NVTX's injection (docs/cuda.md), unless
     * the user named another injection library (Nsight): that one keeps them. */
    static char env_nvtx[PATH_MAX + 32];
    const char *old_nvtx = getenv("NVTX_INJECTION64_PATH");
    if (!old_nvtx || !*old_nvtx) {
        snprintf(env_nvtx, sizeof env_nvtx, "NVTX_INJECTION64_PATH=%s", agent_path);
        env_add[nenv++] = env_nvtx;
    } else {
        cli_log(1, "NVTX_INJECTION64_PATH is set (%s): NVTX ranges go there, not to memscope",
                old_nvtx);
    }
    /* The agent speaks on this stderr only while the program's fd 2 is still it (a program
     * that reopened fd 2 as its own file gets nothing written there): its device and inode. */
    static char env_stderr[64];
    struct stat err_st;
    if (fstat(2, &err_st) == 0) {
        snprintf(env_stderr, sizeof env_stderr, MS_ENV_STDERR "=%llu:%llu",
                 (unsigned long long)err_st.st_dev, (unsigned long long)err_st.st_ino);
        env_add[nenv++] = env_stderr;
    }
    static char env_device[128];
    if (o.device) {
        snprintf(env_device, sizeof env_device, MS_ENV_DEVICE "=%s", o.device);
        env_add[nenv++] = env_device;
    }
    env_add[nenv] = NULL;

    struct sigaction ign = {.sa_handler = SIG_IGN}, fwd = {.sa_handler = forward_signal}, old_int,
                     old_quit;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    sigaction(SIGTERM, &fwd, NULL);
    sigaction(SIGHUP, &fwd, NULL);
    int exec_errno = 0;
    pid_t pid = spawn(prog, env_add, &exec_errno);
    if (pid < 0) {
        cli_error("cannot run '%s': %s", prog[0], strerror(exec_errno));
        if (o.format != FMT_TRACE)
            run_remove_tree(trace_dir);
        return 127;
    }
    child_pid = pid;
    int status = wait_child(pid);
    child_pid = 0;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    /* From here on a SIGINT, SIGTERM or SIGHUP stops the conversion cleanly: what is
     * half-written goes, the traces stay, and memscope exits with the signal's status. */
    struct sigaction stop = {.sa_handler = on_stop_signal};
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGHUP, &stop, NULL);
    run_print_agent_messages(trace_dir);

    if (o.format == FMT_TRACE) {
        if (!o.no_pack)
            pack_traces(trace_dir, run_start);
        if (cli_log_level <= 1)
            fprintf(stderr,
                    "memscope: traces kept in %s (convert with memscope import %s "
                    "-o run.db)\n",
                    trace_dir, trace_dir);
        return status;
    }
    if (!out_is_file)
        snprintf(out_file, sizeof out_file, "%s/%s_%s%s", out_dir,
                 o.format == FMT_COMPACT ? "memscope" : "memscope_dump", stamp, suffix);
    char db_path[PATH_MAX + 160];
    if (o.format == FMT_CSV)
        snprintf(db_path, sizeof db_path, "%s.tmp.db", out_file);
    else
        snprintf(db_path, sizeof db_path, "%s", out_file);

    struct ms_store_options so = {
        .trace_dir = abs_trace,
        .db_path = db_path,
        .argv = (const char *const *)prog,
        .exit_status = status,
        .call_stack_c = o.c_depth,
        .events = o.events,
        .oom_k = oom_k_of(o.analysis),
        .stop = &stop_signal,
        .symbolize = o.symbolize,
        .compact = o.format == FMT_COMPACT,
    };
    struct ms_store_result res;
    char err[512] = "";
    rc = run_convert(&so, &stop_signal, &res, err, sizeof err);
    if (rc == -EINTR && stop_signal) {
        cli_error("stopped by %s during the conversion; the traces are kept in %s (convert them "
                  "with: memscope import %s -o %s)",
                  strsignal(stop_signal), trace_dir, trace_dir, db_path);
        return 128 + stop_signal;
    }
    if (rc == MS_ENOTFOUND && run_dir_empty(trace_dir)) {
        /* The agent never loaded: say why, and the program's status is the answer. */
        char why[256];
        run_untraceable_reason(prog[0], why, sizeof why);
        cli_error("'%s' ran untraced: %s; nothing was recorded", prog[0], why);
        rmdir(trace_dir); /* ours, and empty */
        if (made_run_dir && run_dir_empty(out_dir))
            rmdir(out_dir); /* created by this run, for nothing */
        if (!out_dir_existed && run_dir_empty(base_dir))
            rmdir(base_dir);
        return status;
    }
    struct stat tst;
    if (rc < 0 && lstat(trace_dir, &tst) != 0) {
        /* removed while the program ran (a program that cleans its output directory) */
        int out_gone = lstat(out_dir, &tst) != 0;
        cli_error("cannot write the database: the trace directory %s was removed while the program "
                  "ran%s%s; nothing recorded remains",
                  trace_dir, out_gone ? ", and the output directory " : "",
                  out_gone ? out_dir : "");
        return status ? status : 1;
    }
    if (rc < 0) {
        cli_error("cannot write the database: %s; the raw traces are kept in %s", err, trace_dir);
        return status ? status : 1;
    }
    if (res.warning[0])
        cli_log(2, "some trace data was damaged and skipped: %s", res.warning);
    if (res.lost_events)
        cli_log(2, "the agent could not record %llu events (see its message above)",
                (unsigned long long)res.lost_events);
    if (o.format == FMT_CSV) {
        struct ms_output mo;
        rc = ms_output_open(&mo, out_file); /* renamed over out_file when complete */
        FILE *f = rc == 0 ? fdopen(mo.fd, "w") : NULL;
        if (!f) {
            cli_error("cannot write '%s': %s", out_file, strerror(rc < 0 ? -rc : errno));
            ms_output_abort(&mo);
            return status ? status : 1;
        }
        rc = ms_store_export_csv(db_path, f, err, sizeof err);
        if (fclose(f) != 0 && rc == 0)
            rc = -errno;
        mo.fd = -1; /* fclose closed it */
        if (rc == 0)
            rc = ms_output_commit(&mo);
        if (rc < 0) {
            ms_output_abort(&mo);
            cli_error("cannot write '%s': %s", out_file, err[0] ? err : ms_strerror(rc));
            return status ? status : 1;
        }
    }
    if (cli_log_level <= 1)
        run_print_summary(db_path, stderr);
    if (o.analysis[0]) {
        struct ms_analyze_opts ao;
        ms_analyze_opts_init(&ao);
        ao.write_back = 1; /* as msMemScope: inefficient findings land in the run's database */
        fflush(stderr);
        if (ms_analyze_run_list(db_path, o.analysis, &ao, stderr, err, sizeof err) < 0)
            cli_error("analysis: %s", err);
    }
    if (o.format == FMT_CSV)
        unlink(db_path);
    long running = run_running_writer(trace_dir);
    if (running > 0) {
        /* a descendant that outlived the program (a daemon) still writes its trace: the
         * database has what it wrote so far; nothing it writes is deleted */
        cli_log(2,
                "process %ld (started by the program) is still running and writing its "
                "trace: the traces are kept in %s (convert them again with memscope import %s "
                "-o NEW.db once it has ended)",
                running, trace_dir, trace_dir);
    } else if (!o.keep_trace)
        run_remove_tree(trace_dir);
    else if (!o.no_pack)
        pack_traces(trace_dir, run_start);
    if (cli_log_level <= 1)
        fprintf(stderr, "memscope: %s written to %s%s%s\n",
                o.format == FMT_CSV ? "CSV" : "database", out_file,
                o.keep_trace ? "; traces kept in " : "", o.keep_trace ? trace_dir : "");
    if (cli_log_level <= 1 && o.format == FMT_COMPACT) /* what used to be there */
        fprintf(stderr,
                "memscope: a compact database, for memscope analyze; one row per event "
                "(what MindStudio Insight opens: memscope_dump_<stamp>.db beside it): "
                "memscope export %s --format=db\n",
                out_file);
    return status;
}
