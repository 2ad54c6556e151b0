/* analyze.h: the analyses of a memscope database (`memscope analyze <kind>`, `--analysis=`).
 *
 * One file per analysis, each exporting one entry of ms_analyses[]. An analysis reads the
 * database through SQL (docs/database.md), streams over events or blocks in time order where it
 * must, and writes a readable report or, with opts->json, a JSON document whose keys are
 * documented in docs/cli.md. Analyses never modify the database, except `inefficient`, which
 * also records its findings when opts->write_back is set. */
#ifndef MS_ANALYZE_H
#define MS_ANALYZE_H

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

struct ms_analyze_opts {
    int json;                 /* JSON instead of text */
    int top;                  /* rows per ranking (default 10) */
    int warmup;               /* leaks: steps <= warmup are ignored (default 1: steps 0 and 1) */
    int step_a, step_b;       /* compare --steps A,B (0 = not given) */
    const char *other_db;     /* compare: a second database (NULL: compare steps of one) */
    uint64_t limit;           /* trend --limit BYTES (0 = none) */
    int64_t at_ns;            /* decompose --at NS (epoch ns; 0 = not given) */
    int at_step;              /* decompose --step N (0 = not given) */
    uint64_t idle_threshold;  /* inefficient: API count for temporary idleness (default 3000) */
    uint64_t lazy_ns, delayed_ns, idle_ns;     /* inefficient: Insight thresholds, ns (0 = off) */
    double lazy_pct, delayed_pct, idle_pct;    /* ... and percent of lifetime (0 or 100 = off) */
    int write_back;           /* inefficient: store findings in the database */
    int layer;                /* restrict to one layer id (0 = all memory layers) */
};

/* Fills opts with the defaults. */
void ms_analyze_opts_init(struct ms_analyze_opts *o);

/* An analysis: run() returns 0, or a negative MS_E* code with a one-line reason in err. */
struct ms_analysis {
    const char *name;
    const char *summary; /* one line for --help */
    int (*run)(sqlite3 *db, const struct ms_analyze_opts *o, FILE *out, char *err,
               size_t errlen);
};

extern const struct ms_analysis ms_analyses[]; /* terminated by a {NULL} entry */

/* Finds an analysis by name; NULL when unknown. */
const struct ms_analysis *ms_analysis_find(const char *name);

/* Opens the database at path read-only (read-write when writable is set) and checks that it is
 * a memscope database of a format version this build knows. Returns 0 or a negative code with
 * a reason in err ("no such file", "not a memscope database", "format version N is newer than
 * this memscope (M)"). The caller closes *db with sqlite3_close(). */
int ms_analyze_open(const char *path, int writable, sqlite3 **db, char *err, size_t errlen);

/* Describes a stack by its first frame outside the runtime libraries (libc, the loader,
 * libstdc++, libgcc, the agent): "function (file:line)", "function (module+0xoff)", or
 * "(no stack)" for stack_id <= 0. Writes at most len bytes to out. */
void ms_stack_site(sqlite3 *db, int64_t stack_id, char *out, size_t len);

/* Formats bytes as "123 B", "12.3 KiB", "4.5 MiB" or "1.2 GiB". */
void ms_human_bytes(char *out, size_t len, long long bytes);

/* A minimal streaming JSON writer: the caller nests begin/end calls correctly; keys and
 * strings are escaped. */
struct ms_json {
    FILE *f;
    int depth;
    unsigned char first[64]; /* per depth: no element written yet */
};
void ms_json_init(struct ms_json *j, FILE *f);
void ms_json_begin_object(struct ms_json *j, const char *key); /* key NULL inside arrays/top */
void ms_json_end_object(struct ms_json *j);
void ms_json_begin_array(struct ms_json *j, const char *key);
void ms_json_end_array(struct ms_json *j);
void ms_json_str(struct ms_json *j, const char *key, const char *v); /* v NULL writes null */
void ms_json_int(struct ms_json *j, const char *key, long long v);
void ms_json_double(struct ms_json *j, const char *key, double v);
void ms_json_bool(struct ms_json *j, const char *key, int v);
void ms_json_null(struct ms_json *j, const char *key);
/* Ends the document with a newline. */
void ms_json_finish(struct ms_json *j);

#endif
