/* run.h: what `memscope run` knows from its command line (run_options.c parses it, cmd_run.c
 * runs with it). */
#ifndef MS_CLI_RUN_H
#define MS_CLI_RUN_H

#include "analyze/budget.h"

enum format { FMT_COMPACT, FMT_DB, FMT_CSV, FMT_TRACE };

#define RUN_MAX_BUDGETS 32

/* The native stack depth without --call-stack: whole stacks of >= 99% of the distinct stacks of
 * real C++ programs (clang++ compiling templated files: 99.4-99.7% at 192, 99.6-99.99% at 256;
 * GCC's cc1: all at 64), where 32 cut 84-94% of clang's (bench/RESULTS.md, issue 47). */
#define MS_RUN_C_DEPTH 256 /* run_options.c's help text says it; so does docs/cli.md */

/* --sampling without a value: jemalloc's, Go's and Node's mean bytes between samples. */
#define RUN_SAMPLING_DEFAULT (512ull << 10)
/* --max-trace-size: the default cap with --sampling, and the smallest cap accepted (the agent
 * needs room for its first chunks and descriptions). */
#define RUN_MAX_TRACE_SAMPLING (1ull << 30)
#define RUN_MAX_TRACE_MIN (1ull << 20)

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
    uint64_t sampling;   /* --sampling: mean bytes between heap samples; 0: exact (every event) */
    uint64_t max_trace;  /* --max-trace-size in bytes; 0: no cap */
    uint64_t trace_ring; /* --trace-ring in bytes; 0: none (docs/production.md) */
    char analysis[256];  /* --analysis list, "" for none */
    int events_given;    /* --events was on the command line (passed to the Python layer) */
    const char *level;   /* --level: op, kernel (the Python layer's op events) */
    const char *watch;   /* --watch=start[:outid],end[,full-content] */
    const char *step_on; /* --step-on=auto|none|OPTIMIZER (the Python layer's steps) */
    const char *device;  /* --device=cpu,cuda,cuda:N (the agent's CUDA hooks) */
    char steps[64];      /* --steps=1,3: record only these steps ("" every step) */
    int symbolize;
    /* --usage-interval: seconds between usage samples (docs/usage.md; 0: not given, the default
     * 0.1 s), usage_off: --usage-interval=0 */
    double usage_interval;
    int usage_off;
    int stack_given; /* --call-stack was on the command line */
    char **prog;     /* the program and its arguments */
    /* budgets (run_budget.c, docs/ci.md) */
    struct ms_budget budgets[RUN_MAX_BUDGETS];
    int nbudgets;
    const char *suppressions_path; /* --suppressions=FILE */
    const char *junit;             /* --junit=FILE */
    int error_exitcode;            /* --error-exitcode=N (RUN_BUDGET_EXIT when not given) */
    /* the live monitor (monitor.h, docs/monitor.md): on with any of these */
    const char *metrics;      /* --metrics=HOST:PORT: serve Prometheus metrics there */
    const char *rank;         /* --rank=N: the rank label (default: each process's RANK) */
    unsigned long long limit; /* --limit=BYTES (0: the cgroup's limit, else MemAvailable) */
    double warn_before;       /* --warn-before=S (0: not given, 60 when the monitor runs) */
};

/* Parses memscope run's options into o (o->prog: the program and its arguments; o must come
 * with its defaults set). Returns -1 to go on, else the exit status (0 after --help or
 * --version, 2 for a usage error, said on stderr). */
int run_parse_options(int argc, char **argv, struct run_options *o);

/* run_budget.c: memscope run's budgets (docs/ci.md). */
/* Adds a budget of that kind to o (value: the option's value, NULL for none); 0, or a usage
 * error's exit status 2 with the message printed. */
int run_budget_add(struct run_options *o, enum ms_budget_kind kind, const char *value);
/* Checks what the budgets need before anything runs (the suppressions file read, a format with
 * a database); 0, or a usage error's exit status 2 with the message printed. */
int run_budgets_prepare(struct run_options *o);
/* Checks every budget against the run's database db_path, prints the failures (and, at info
 * level, what held) on stderr and writes --junit. Returns 0 when every budget held (or there
 * are none), 1 when one failed, -1 when they could not be checked (said). */
int run_budgets_check(struct run_options *o, const char *db_path);
/* For a run that recorded nothing: says, when there are budgets, that they could not be checked.
 * Returns what run_budgets_check would: -1 with budgets, else 0. */
int run_budgets_unchecked(const struct run_options *o);
/* The exit status of a run whose program exited with status and whose budgets returned budgets
 * (run_budgets_check): the program's own failing status wins; else the budgets' status. */
int run_budgets_status(const struct run_options *o, int status, int budgets);

#endif
