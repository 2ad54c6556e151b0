/* budget.h: memory budgets that fail a build (docs/ci.md): a run's leaks and peaks checked
 * against limits (`memscope run --fail-on-leak`, `--fail-on-step-leak`, `--max-peak`), with
 * LeakSanitizer's suppression files, and the regression gates between two runs (`memscope
 * analyze compare BASE NEW --fail-if-peak-grows`, `--fail-if-leak-grows`).
 *
 * The library computes results; the CLI prints them (the failure lines, the JUnit report). Each
 * budget reuses the analyses' own rules: live at exit as `analyze leaks` groups it, the growth
 * rule's verdict (ms__leaks_verdict), the peaks of `analyze peak` (ms__peaks_top), the call
 * sites of site.c. */
#ifndef MS_ANALYZE_BUDGET_H
#define MS_ANALYZE_BUDGET_H

#include <stddef.h>
#include <stdint.h>

/* The status a failed budget or gate exits with by default (--error-exitcode): LeakSanitizer's,
 * neither 0, 1, 2, 127 nor 128+N. */
#define MS_BUDGET_EXIT 23

/* ---- Suppressions (suppress.c): LeakSanitizer's file format ----
 * One `leak:PATTERN` a line; blank lines and lines starting with '#' are skipped; blanks around
 * a line are trimmed. A pattern matches a function, source file or module name of a frame of
 * the block's stack (native frames; Python frames by function and file) when it occurs in the
 * name; '*' matches any run of characters, '^' at its start and '$' at its end anchor it. */
struct ms_suppression {
    char *pattern;
    int line;              /* in its file */
    int64_t bytes, blocks; /* what it suppressed (counted by ms_budget_check) */
};
struct ms_suppressions {
    struct ms_suppression *v;
    size_t n, cap;
};
#define MS_SUPP_MAX 10000 /* patterns in one file */
/* Loads the file at path into s (s zeroed first by the caller, or loaded before: patterns are
 * added). 0, or MS_ENOTFOUND (cannot open: err says why), MS_EINVAL ("FILE:LINE: ..." for a
 * line with an unknown kind, no kind or an empty pattern), MS_ELIMIT, MS_ENOMEM. */
int ms_suppressions_load(struct ms_suppressions *s, const char *path, char *err, size_t errlen);
void ms_suppressions_release(struct ms_suppressions *s);
/* 1 when pattern (a suppression's: substring, '*', '^', '$') matches name; 0 for NULL. */
int ms_suppression_match(const char *pattern, const char *name);

/* ---- Budgets of one run ---- */
enum ms_budget_kind {
    MS_BUDGET_LEAK,      /* --fail-on-leak[=BYTES[:LAYER]]: live at exit, after suppressions */
    MS_BUDGET_STEP_LEAK, /* --fail-on-step-leak: the growth rule's verdict */
    MS_BUDGET_PEAK,      /* --max-peak=BYTES[:LAYER]: each process's peak */
};
struct ms_budget {
    enum ms_budget_kind kind;
    uint64_t limit; /* bytes: fails above it */
    char layer[72]; /* "": heap and mmap together */
    char spec[160]; /* the option as given: the name of the budget in reports */
};
/* Parses the value of --fail-on-leak / --max-peak, "BYTES[:LAYER]" (BYTES as common/size.h),
 * into b->limit and b->layer. 0, or MS_EINVAL with a reason in err (bad size, unknown layer). */
int ms_budget_parse(struct ms_budget *b, const char *value, char *err, size_t errlen);
/* 1 when name can name layers of a run: heap, mmap, mmap_reserved, cuda_pinned, pta,
 * pta_segment, cuda, cuda_pool, cuda_vmm, cuda_va, cuda_map (each of the last seven also with
 * ":N", device N), pool (every pool), pool:NAME, or an event type (HOST, MMAP, HAL, ...); any
 * case. */
int ms_budget_layer_known(const char *name);

#define MS_BUDGET_SITES 8 /* call sites listed per failure: short enough for a CI log */
struct ms_budget_site {
    char site[256];
    int64_t bytes, blocks; /* blocks -1: not counted (a leaking site's held bytes) */
    double per_step;       /* step leak: growth per step (per tenth without steps) */
};
struct ms_budget_result {
    int failed;
    int64_t measured; /* live at exit; the highest peak; the leaking sites' growth */
    char where[200];  /* what was measured: "process 1 prog (pid 12), heap" or "" */
    int exceeded;     /* peak: (process, layer) pairs above the limit */
    int on_steps;     /* step leak: judged on steps (else tenths of the allocations) */
    size_t judged;    /* step leak: processes judged (0: too few steps) */
    struct ms_budget_site sites[MS_BUDGET_SITES];
    size_t nsites, more_sites; /* listed, and left out */
    int64_t suppressed_bytes, suppressed_blocks;
};
/* Checks budget b against the database at db_path (sup: NULL or the suppressions, whose counts
 * it adds to). A peak budget of heap and mmap together replays a process that used both from
 * its events (a compact database expanded into a private temporary directory, TMPDIR). 0 with *r filled (r->failed says), or a negative code with a reason in err. */
int ms_budget_check(const char *db_path, const struct ms_budget *b, struct ms_suppressions *sup,
                    struct ms_budget_result *r, char *err, size_t errlen);

/* ---- Gates between two runs (compare) ---- */
struct ms_gate {
    int is_peak;      /* --fail-if-peak-grows, else --fail-if-leak-grows */
    int pct;          /* threshold is a percentage (else bytes) */
    double threshold; /* percent or bytes */
    char spec[160];
};
/* Parses "PCT%" or "BYTES" into g. 0 or MS_EINVAL with a reason in err. */
int ms_gate_parse(struct ms_gate *g, int is_peak, const char *value, char *err, size_t errlen);
struct ms_gate_result {
    int failed;
    int64_t base, now;                            /* the measure in BASE and NEW */
    struct ms_budget_site sites[MS_BUDGET_SITES]; /* bytes: growth; blocks: NEW's blocks */
    size_t nsites, more_sites;
};
/* Checks gate g between databases base and new (layer: "" for heap and mmap, else a layer as
 * ms_budget_layer_known): the peak is the highest peak of a process as --max-peak measures it
 * (heap and mmap together, or each named layer); the leak, the bytes live at exit. Sites: those whose bytes (at the peak, live at exit) grew, most
 * first. 0 with *r, or a negative code with a reason in err. */
int ms_gate_check(const char *base, const char *new_db, const struct ms_gate *g, const char *layer,
                  struct ms_gate_result *r, char *err, size_t errlen);

#endif
