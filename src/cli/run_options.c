/* run_options.c: the command line of `memscope run` (docs/cli.md): its usage text and the
 * parsing of every option into struct run_options (run.h), msMemScope's spellings included. */
#include "cli.h"
#include "run.h"
#include "analyze/analyze.h"
#include "common/agent_api.h"
#include "common/size.h"
#include "version.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    "                           without this option: c:256, or python:32 when the\n"
    "                           program is a Python interpreter (python, python3,\n"
    "                           python3.11 ...), and so for each process a shell or\n"
    "                           launcher starts\n"
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
    "                           of live blocks after each OOM), usage, all, or none (default)\n"
    "      --steps=LIST         record only the events of these steps (up to 5 numbers >= 1,\n"
    "                           as 2,3; the events before the first step end are step 1);\n"
    "                           the steps are still numbered; no analysis runs\n"
    "      --collect-mode=immediate|deferred\n"
    "                           deferred: record only after memscope_start() is called\n"
    "      --sampling[=BYTES]   sample heap allocations: one per BYTES allocated on average\n"
    "                           (default 512KiB), each weighted by the inverse of its\n"
    "                           chance; totals stay exact, figures per site are estimates\n"
    "                           (docs/production.md, \"Sampling\")\n"
    "      --max-trace-size=SIZE\n"
    "                           stop recording when the trace reaches SIZE (default with\n"
    "                           --sampling: 1GiB; none: no cap); the program runs on\n"
    "      --trace-ring=SIZE    keep the trace's disk usage under SIZE (at least 4MiB) by\n"
    "                           dropping its oldest events: the last 3/8 to 3/4 of SIZE\n"
    "                           of events are kept (for services run for days)\n"
    "      --unwind=dwarf|fp    native unwinder: .eh_frame (default: full stacks whatever\n"
    "                           the build flags) or frame pointers (fastest; right only for\n"
    "                           code built with them)\n"
    "      --no-follow          do not trace programs that the program executes\n"
    "      --keep-trace         keep the traces next to the database, packed\n"
    "      --no-pack            keep traces as the agent wrote them (bigger, no packing time)\n"
    "      --no-symbols         do not resolve function names and source lines\n"
    "      --usage-interval=S   sample every traced process's RSS, PSS, USS, stack, shared\n"
    "                           memory and cgroup from /proc every S seconds (default 0.1;\n"
    "                           0: off); memscope analyze usage reads them (docs/usage.md)\n"
    "\n"
    "Live monitoring (docs/monitor.md), from the memscope process while the program runs:\n"
    "      --metrics=HOST:PORT  serve Prometheus metrics at http://HOST:PORT/metrics until\n"
    "                           memscope exits (:PORT is 127.0.0.1:PORT; port 0: any)\n"
    "      --rank=N             the rank label of the metrics (default: each process's RANK)\n"
    "      --limit=BYTES        the memory the forecast counts to (default: the cgroup's\n"
    "                           limit, else MemAvailable)\n"
    "      --warn-before=S      warn once, with a report of what holds the memory, when the\n"
    "                           limit is forecast less than S seconds away (default 60)\n"
    "\n"
    "Budgets (docs/ci.md): fail the run when memory goes over a limit\n"
    "      --fail-on-leak[=BYTES[:LAYER]]\n"
    "                           more than BYTES (default 0) live at exit, after the\n"
    "                           suppressions (default layers: heap and mmap)\n"
    "      --fail-on-step-leak  a call site leaks by analyze leaks' growth rule\n"
    "      --max-peak=BYTES[:LAYER]\n"
    "                           a process's peak of live bytes of LAYER (default: heap\n"
    "                           and mmap together; cuda, cuda:N, pool:NAME ...) over BYTES;\n"
    "                           repeatable. Sizes: 4096, 64KiB, 1.5 MB, 2GiB (KB = KiB)\n"
    "      --suppressions=FILE  LeakSanitizer's leak:PATTERN lines for --fail-on-leak\n"
    "      --junit=FILE         a JUnit XML report, one test case per budget\n"
    "      --error-exitcode=N   the status when a budget fails and the program exited 0\n"
    "                           (default 23); a failing program's own status wins\n"
    "\n"
    "      --log-level=debug|info|warning|error\n"
    "  -q, --quiet              same as --log-level=error (no summary)\n"
    "  -v, --verbose            same as --log-level=debug\n"
    "  -V, --version            print the version\n"
    "  -h, --help               print this help\n"
    "\n"
    "Exit status: the program's own, 128+N when it died of signal N; 2 for a usage error;\n"
    "127 when the program cannot be started; 1 when recording or conversion failed; 23\n"
    "(--error-exitcode) when a budget failed and the program exited 0.\n"
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

/* --steps items: step numbers 1..999999999, at most MS_MAX_STEP_FILTER, into o->steps. */
static int steps_item(const char *item, void *arg)
{
    struct run_options *o = arg;
    unsigned n, count = 1;
    if (parse_uint(item, 999999999, &n) < 0 || n == 0)
        return -1;
    for (const char *p = o->steps; *p; p++)
        count += *p == ',';
    if (o->steps[0] && count >= MS_MAX_STEP_FILTER)
        return -1;
    size_t len = strlen(o->steps);
    snprintf(o->steps + len, sizeof o->steps - len, "%s%u", len ? "," : "", n);
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

static int level_item(const char *item, void *arg)
{
    (void)arg;
    return strcmp(item, "op") && strcmp(item, "kernel") && strcmp(item, "0") && strcmp(item, "1");
}

static int analysis_item(const char *item, void *arg)
{
    (void)arg;
    return !strcmp(item, "all") || ms_analysis_find(item) ? 0 : -1;
}

/* Parses memscope run's options into o (o->prog: the program and its arguments). Returns
 * -1 to go on, else the exit status (0 after --help or --version, 2 for a usage error). */
int run_parse_options(int argc, char **argv, struct run_options *o)
{
    int log_explicit = 0, quiet = 0, verbose = 0, max_trace_given = 0;
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
        OPT_STEPON,
        OPT_STEPS,
        OPT_FAIL_LEAK,
        OPT_FAIL_STEP_LEAK,
        OPT_MAX_PEAK,
        OPT_SUPP,
        OPT_JUNIT,
        OPT_ERROR_EXIT,
        OPT_USAGE,
        OPT_SAMPLING,
        OPT_MAX_TRACE,
        OPT_TRACE_RING,
        OPT_METRICS,
        OPT_RANK,
        OPT_LIMIT,
        OPT_WARN
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
        {"sampling", optional_argument, NULL, OPT_SAMPLING},
        {"max-trace-size", required_argument, NULL, OPT_MAX_TRACE},
        {"trace-ring", required_argument, NULL, OPT_TRACE_RING},
        {"analysis", required_argument, NULL, OPT_ANALYSIS},
        {"level", required_argument, NULL, OPT_LEVEL},
        {"watch", required_argument, NULL, OPT_WATCH},
        {"step-on", required_argument, NULL, OPT_STEPON},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"usage-interval", required_argument, NULL, OPT_USAGE},
        {"metrics", required_argument, NULL, OPT_METRICS},
        {"rank", required_argument, NULL, OPT_RANK},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"warn-before", required_argument, NULL, OPT_WARN},
        {"no-symbols", no_argument, NULL, OPT_NOSYM},
        {"fail-on-leak", optional_argument, NULL, OPT_FAIL_LEAK},
        {"fail-on-step-leak", no_argument, NULL, OPT_FAIL_STEP_LEAK},
        {"max-peak", required_argument, NULL, OPT_MAX_PEAK},
        {"suppressions", required_argument, NULL, OPT_SUPP},
        {"junit", required_argument, NULL, OPT_JUNIT},
        {"error-exitcode", required_argument, NULL, OPT_ERROR_EXIT},
        {"log-level", required_argument, NULL, OPT_LOG},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"debug", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    snprintf(o->events, sizeof o->events, "alloc,free");
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "+:o:qvVh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o->output = optarg; break;
        case OPT_FORMAT:
            if (!strcmp(optarg, "compact"))
                o->format = FMT_COMPACT;
            else if (!strcmp(optarg, "db"))
                o->format = FMT_DB;
            else if (!strcmp(optarg, "csv"))
                o->format = FMT_CSV;
            else if (!strcmp(optarg, "trace"))
                o->format = FMT_TRACE;
            else
                return usage_error("--format: expected compact, db, csv or trace, not '%s'",
                                   optarg);
            break;
        case OPT_STACK:
            o->stack_given = 1;
            o->c_depth = 0;
            o->py_depth = 0;
            if (for_each_item(optarg, stack_item, o))
                return usage_error("--call-stack: expected c[:N],python[:N] with N in 0..1000, "
                                   "not '%s'",
                                   optarg);
            break;
        case OPT_EVENTS:
            if (for_each_item(optarg, event_item, o))
                return usage_error("--events: expected a list of alloc, free, launch, access, "
                                   "traceback or none, not '%s'",
                                   optarg);
            snprintf(o->events, sizeof o->events, "%s", optarg);
            o->events_given = 1;
            break;
        case OPT_STEPS:
            o->steps[0] = 0;
            if (for_each_item(optarg, steps_item, o))
                return usage_error("--steps: expected up to %d step numbers >= 1, as 2,3, not "
                                   "'%s'",
                                   MS_MAX_STEP_FILTER, optarg);
            break;
        case OPT_USAGE: {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(v >= 0) || v > 3600 || (v > 0 && v < 0.001))
                return usage_error("--usage-interval: expected seconds, 0 (off) or from 0.001 "
                                   "to 3600, not '%s'",
                                   optarg);
            o->usage_interval = v;
            o->usage_off = v == 0;
            break;
        }
        case OPT_METRICS: o->metrics = optarg; break;
        case OPT_RANK:
            if (!*optarg || strlen(optarg) > 9 || strspn(optarg, "0123456789") != strlen(optarg))
                return usage_error("--rank: expected a number, not '%s'", optarg);
            o->rank = optarg;
            break;
        case OPT_LIMIT: {
            uint64_t v;
            if (ms_size_parse(optarg, &v) < 0 || v == 0)
                return usage_error("--limit: expected a size such as 200MiB or 16GiB, not '%s'",
                                   optarg);
            o->limit = v;
            break;
        }
        case OPT_WARN: {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(v > 0) || v > 1e7)
                return usage_error("--warn-before: expected seconds above 0, not '%s'", optarg);
            o->warn_before = v;
            break;
        }
        case OPT_DEVICE:
            if (for_each_item(optarg, device_item, NULL) || strlen(optarg) > 100)
                return usage_error("--device: expected a list of cpu, cuda or cuda:N, not '%s'",
                                   optarg);
            o->device = optarg;
            break;
        case OPT_LEVEL:
            if (for_each_item(optarg, level_item, NULL))
                return usage_error("--level: expected op or kernel (or 0, 1), not '%s'", optarg);
            o->level = optarg;
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
            o->watch = optarg;
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
            o->step_on = optarg;
            break;
        }
        case OPT_COLLECT:
            if (!strcmp(optarg, "immediate"))
                o->deferred = 0;
            else if (!strcmp(optarg, "deferred"))
                o->deferred = 1;
            else
                return usage_error("--collect-mode: expected immediate or deferred, not '%s'",
                                   optarg);
            break;
        case OPT_NOFOLLOW: o->no_follow = 1; break;
        case OPT_KEEP: o->keep_trace = 1; break;
        case OPT_NOPACK: o->no_pack = 1; break;
        case OPT_UNWIND:
            if (!strcmp(optarg, "fp") || !strcmp(optarg, "dwarf"))
                o->unwind_dwarf = optarg[0] == 'd';
            else
                return usage_error("--unwind: expected fp or dwarf, not '%s'", optarg);
            break;
        case OPT_SAMPLING:
            if (!optarg && optind < argc && ms_size_parse(argv[optind], &o->sampling) == 0)
                return usage_error("--sampling takes its size after '=': --sampling=%s",
                                   argv[optind]); /* else that size would be the program */
            if (!optarg)
                o->sampling = RUN_SAMPLING_DEFAULT;
            else if (ms_size_parse(optarg, &o->sampling) < 0 || o->sampling == 0)
                return usage_error("--sampling: expected a size above 0 (512KiB, 65536, 2MiB), "
                                   "not '%s'",
                                   optarg);
            break;
        case OPT_MAX_TRACE:
            if (!strcmp(optarg, "none"))
                o->max_trace = 0, max_trace_given = 1;
            else if (ms_size_parse(optarg, &o->max_trace) < 0 || o->max_trace < RUN_MAX_TRACE_MIN)
                return usage_error("--max-trace-size: expected a size of at least 1MiB, or none, "
                                   "not '%s'",
                                   optarg);
            else
                max_trace_given = 1;
            break;
        case OPT_TRACE_RING:
            if (ms_size_parse(optarg, &o->trace_ring) < 0 || o->trace_ring < MS_TRACE_RING_MIN)
                return usage_error("--trace-ring: expected a size of at least 4MiB, not '%s'",
                                   optarg);
            break;
        case OPT_ANALYSIS:
            if (!strcmp(optarg, "none")) {
                o->analysis[0] = 0;
                break;
            }
            if (for_each_item(optarg, analysis_item, NULL))
                return usage_error(
                    "--analysis: expected a list of leaks, peak, compare, "
                    "inefficient, decompose, temporary, trend, fragmentation, oom[:K], "
                    "usage, all or none, not '%s'",
                    optarg);
            snprintf(o->analysis, sizeof o->analysis, "%s", optarg);
            break;
        case OPT_NOSYM: o->symbolize = 0; break;
        case OPT_FAIL_LEAK:
        case OPT_FAIL_STEP_LEAK:
        case OPT_MAX_PEAK: {
            enum ms_budget_kind k = c == OPT_FAIL_LEAK        ? MS_BUDGET_LEAK
                                    : c == OPT_FAIL_STEP_LEAK ? MS_BUDGET_STEP_LEAK
                                                              : MS_BUDGET_PEAK;
            int rc = run_budget_add(o, k, optarg);
            if (rc)
                return rc;
            break;
        }
        case OPT_SUPP:
            if (!*optarg)
                return usage_error("--suppressions: needs a file name");
            o->suppressions_path = optarg;
            break;
        case OPT_JUNIT:
            if (!*optarg)
                return usage_error("--junit: needs a file name");
            o->junit = optarg;
            break;
        case OPT_ERROR_EXIT: {
            unsigned n;
            if (parse_uint(optarg, 255, &n) < 0 || n == 0)
                return usage_error("--error-exitcode: expected a status in 1..255, not '%s'",
                                   optarg);
            o->error_exitcode = (int)n;
            break;
        }
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
    o->prog = argv + optind;
    if (o->trace_ring && max_trace_given && o->max_trace)
        return usage_error("--trace-ring and --max-trace-size: give one (the ring keeps the "
                           "latest events under its size, the cap the first ones)");
    if (o->trace_ring)
        o->max_trace = 0; /* the ring bounds the trace */
    else if (o->sampling && !max_trace_given)
        o->max_trace = RUN_MAX_TRACE_SAMPLING; /* a service sampled for days stays bounded */
    int rc = run_budgets_prepare(o);
    return rc ? rc : -1;
}
