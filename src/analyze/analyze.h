/* analyze.h: the analyses of a memscope database (`memscope analyze <kind>`, `--analysis=`).
 *
 * One file per analysis, each exporting one entry of ms_analyses[]. An analysis reads the
 * database through SQL (docs/database.md), streams over events or blocks in time order where it
 * must, and writes a readable report or, with opts->json, a JSON document whose keys are
 * documented in docs/cli.md. Analyses never modify the database, except `inefficient`, which
 * also records its findings when opts->write_back is set. */
#ifndef MS_ANALYZE_H
#define MS_ANALYZE_H

#include "store/stack_text.h"
#include "common/u64map.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

struct ms_analyze_opts {
    int json;                /* JSON instead of text */
    int top;                 /* rows per ranking (default 10) */
    int warmup;              /* leaks: steps <= warmup are ignored (default 1: steps 0 and 1) */
    int step_a, step_b;      /* compare --steps A,B (0 = not given) */
    const char *other_db;    /* compare: a second database (NULL: compare steps of one) */
    uint64_t limit;          /* trend --limit BYTES (0 = none) */
    int64_t at_ns;           /* decompose --at NS (epoch ns; 0 = not given) */
    int at_step;             /* decompose --step N (0 = not given) */
    uint64_t idle_threshold; /* inefficient: API count for temporary idleness (default 3000) */
    uint64_t lazy_ns, delayed_ns, idle_ns;  /* inefficient: Insight thresholds, ns (0 = off) */
    double lazy_pct, delayed_pct, idle_pct; /* ... and percent of lifetime (0 or 100 = off) */
    int write_back;                         /* inefficient: store findings in the database */
    int layer;                              /* restrict to one layer id (0 = all memory layers) */
    const char *csv_path; /* compare --csv FILE: msMemScope's op-sequence compare CSV */
    int csv_no_ops_ok;    /* compare: with no op on either side, csv_path gets the header
                             lines only (memscope --compare) instead of an error (--csv) */
    int by_stack;         /* decompose --by=stack: the tree's levels are stack frames */
    int accessed_only;    /* inefficient --accessed-only: only blocks with accesses (the
                                 tensors) take part, as msMemScope scopes to its tensor pools */
    int leak_rule;        /* leaks: MS_LEAKS_GROWTH (default) or MS_LEAKS_MSMEMSCOPE */
    /* Selectors only the exports read so far (docs/exports.md): */
    int64_t pid;            /* --process=PID: that process's images only (0 = every one) */
    const char *device;     /* --device=cpu|N: the layers of that device only (NULL = all) */
    int64_t from_ns, to_ns; /* --from=NS, --to=NS: a time window (epoch ns; 0 = not given) */
};

/* The rule of `analyze leaks` (docs/analyses.md): a call site whose live bytes keep growing
 * from step to step (the default), or msMemScope's step-aware check and console lines (`analyze
 * leaks --rule=msmemscope`, and `--analysis=leaks` on a run, msMemScope's option). */
enum { MS_LEAKS_GROWTH = 0, MS_LEAKS_MSMEMSCOPE = 1 };

/* Fills opts with the defaults. */
void ms_analyze_opts_init(struct ms_analyze_opts *o);

struct ms_actx; /* one analysis run: below */

/* An analysis: run() computes its result from x->db, then renders it on x->out as text or, with
 * x->o->json, JSON (nothing is written when it fails). Returns 0, or a negative MS_E* code with a
 * one-line reason in x->err. */
struct ms_analysis {
    const char *name;
    const char *summary; /* one line for --help */
    int (*run)(struct ms_actx *x);
    /* Whether it reads a compact database as it is with these options (its tables have what
     * the analysis needs); else ms_analyze_run_list gives it the full database. NULL: never. */
    int (*compact)(sqlite3 *db, const struct ms_analyze_opts *o);
};

extern const struct ms_analysis ms_analyses[]; /* terminated by a {NULL} entry */

/* Finds an analysis by name; NULL when unknown. */
const struct ms_analysis *ms_analysis_find(const char *name);

/* The K of an --analysis item "oom" (10) or "oom:K" (K in 1..1000, msMemScope's form): rows per
 * OOM in OOM_RECENT_ALLOC and OOM_TOP_ALLOC; 0 when item is neither. */
unsigned ms_oom_k(const char *item);

/* Opens the database at path read-only (read-write when writable is set) and checks that it is
 * a memscope database of a format version this build knows. Returns 0 or a negative code with
 * a reason in err ("no such file", "not a memscope database", "format version N is newer than
 * this memscope (M)"). The caller closes *db with sqlite3_close(). */
int ms_analyze_open(const char *path, int writable, sqlite3 **db, char *err, size_t errlen);

/* site.c: call sites (docs/analyses.md, "Call sites").
 *
 * One native frame of a stack as the call-site rule reads it: strings owned by the struct
 * ms_stack_frames that holds it. */
struct ms_frame_info {
    const char *function; /* demangled name; NULL when unknown */
    const char *linkage;  /* a C++ function's mangled name; NULL for C or unknown */
    const char *file;     /* source file; NULL without line information */
    int line;
    const char *module; /* the module's path; NULL for an address in no module */
    uint64_t offset;    /* the return address minus the module's load bias */
};
/* A stack's native frames, innermost first (inline levels expanded). */
struct ms_stack_frames {
    struct ms_frame_info *f;
    size_t n, fcap;
};
void ms_stack_frames_init(struct ms_stack_frames *s);
void ms_stack_frames_release(struct ms_stack_frames *s);
/* Loads stack_id's native frames into s through the stack tree's reader t (replacing what it
 * held; n = 0 for stack_id <= 0 or a stack without native frames). The one reader of the
 * stored frames for the call sites. Strings belong to t (valid until it is released). 0, or
 * MS_EDB / MS_ENOMEM (s then holds no frames). */
int ms_stack_frames_load(struct ms_stack_text *t, int64_t stack_id, struct ms_stack_frames *s);

/* What the rule takes from the options: --site=innermost (a Python site: the innermost frame,
 * library or not) and the program's own allocation wrappers (--site-skip, MEMSCOPE_SITE_SKIP). */
struct ms_site_rule {
    int py_innermost;
    char **skip; /* function names; "NAME*": every name that starts with NAME */
    size_t nskip, askip;
};
/* The rule the analyses and the viewer use; the CLI fills it from the options. */
extern struct ms_site_rule ms_site_rule;
/* Adds the comma list of function names to r->skip. 0, or MS_EINVAL (an empty or blank name,
 * a lone "*") / MS_ENOMEM with a one-line reason in err. */
int ms_site_rule_add(struct ms_site_rule *r, const char *list, char *err, size_t errlen);
void ms_site_rule_release(struct ms_site_rule *r);
/* A frame's class under rule r (NULL: the built-in lists only): 2 an allocator entry point or
 * wrapper (operator new/new[], malloc & co., the documented wrappers, r->skip), 1 runtime
 * library code (libc, the loader, libstdc++, libgcc, the agent, an allocator library; C++ and
 * Rust standard library functions; memscope.h), 0 the program's own code. */
int ms_site_frame_class(const struct ms_site_rule *r, const struct ms_frame_info *f);
/* The call-site rule: the index of the site among f[0..n) (innermost first): the first frame
 * of class 0 (when it has no symbol: the first named frame of its module right above it, if
 * that one is of class 0), else the first of class 1, else 0; -1 when n is 0. Pure: reads
 * only its arguments. */
long ms_site_pick(const struct ms_site_rule *r, const struct ms_frame_info *f, size_t n);
/* A site frame as text: "function (file:line)"; without line information "function
 * (module)" (the module's file name); without a symbol "?? (module+0xoffset)"; in no module
 * "function" or "?? (0xaddress)". */
void ms_site_frame_format(const struct ms_frame_info *f, char *out, size_t len);

/* Call sites of one database, the queries kept between stacks (many stacks: the analyses'
 * and the viewer's caches). Release before the database closes. */
struct ms_site_reader {
    sqlite3 *db;
    struct ms_stack_text t; /* the stack tree's reader (the stacks' frames and Python text) */
    int t_ok;               /* 1 started, -1 could not start, 0 not yet */
    struct ms_stack_frames frames;
};
void ms_site_reader_init(struct ms_site_reader *r, sqlite3 *db);
void ms_site_reader_release(struct ms_site_reader *r);
/* ms_stack_site's text of stack_id, through r. Returns 0, or MS_ENOMEM / MS_EDB when the stack
 * cannot be read (out then says "(no stack)": callers fail rather than print it). */
int ms_site_reader_site(struct ms_site_reader *r, int64_t stack_id, char *out, size_t len);

/* Describes a stack by its call site: with a Python stack, its innermost frame in the
 * program's own code (not the standard library, site-packages or dist-packages; else the
 * innermost library frame; memscope's own frames never); else the native frame that
 * ms_site_pick chooses under ms_site_rule, formatted by ms_site_frame_format; "(no stack)"
 * for stack_id <= 0 or a stack without frames. Writes at most len bytes to out. */
void ms_stack_site(sqlite3 *db, int64_t stack_id, char *out, size_t len);
/* 1 when a Python stack line ("file(line): function", as stacks.py_text holds them) is a frame
 * of memscope's own package (its import hook, its hooks): not the program's code. */
int ms_py_frame_own(const char *line, size_t len);
/* 1 for a native frame (its function name, or its line, len bytes) of the Python interpreter:
 * under a Python stack those frames are the Python frames themselves, which the flame graphs
 * and the exports draw from the Python part instead (the native frames inside the innermost
 * interpreter frame stay). */
int ms_py_interpreter_frame(const char *s, size_t len);
/* A Python frame's file f (n bytes) as the site rule sees it: 2 memscope's own (never a site),
 * 1 a library (the standard library, site-packages, frozen modules), 0 the program's own code. */
int ms_py_file_kind(const char *f, size_t n);

/* Live bytes over time as `analyze trend` computes them (its series, for `memscope plot`): the
 * selected layers' total at MS_TREND_POINTS + 1 evenly spaced times from the first event (t0)
 * to the last (t1), and the extremes. */
#define MS_TREND_POINTS 100
struct ms_live_series {
    int64_t t0, t1, start_ns; /* start_ns: the run's start (meta), for offsets */
    int64_t final_live, max_live;
    int64_t samples[MS_TREND_POINTS + 1];
};
/* Fills *s from database db with options o (o->layer). 0, or a negative code with err set. */
int ms_analyze_live_series(sqlite3 *db, const struct ms_analyze_opts *o, struct ms_live_series *s,
                           char *err, size_t errlen);

/* summary.c: prints a run's summary (memscope run's closing lines) from database db_path on
 * out; 0, or -1 when the database cannot be opened. */
int ms_analyze_summary(const char *db_path, FILE *out);

/* Formats bytes as "123 B", "12.3 KiB", "4.5 MiB" or "1.2 GiB". */
void ms_human_bytes(char *out, size_t len, long long bytes);

/* Sampling mode (docs/production.md, "Sampling"): what a database's meta says of it. */
struct ms_sampling {
    uint64_t bytes;                      /* mean bytes between samples; 0: an exact run */
    uint64_t allocs, alloc_bytes, frees; /* the exact heap counts */
};
/* Reads db's sampling keys into *s (all zero for an exact run or when they cannot be read). */
void ms_sampling_read(sqlite3 *db, struct ms_sampling *s);
/* The note every report of a sampled run carries, one line without its newline:
 * "sampled at 512.0 KiB: figures per site are estimates (weighted bytes)". */
void ms_sampling_note(const struct ms_sampling *s, char *out, size_t len);

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
/* v thousandths as a decimal number with three digits after the point (ns as us: 1234.567) */
void ms_json_milli(struct ms_json *j, const char *key, long long v);
void ms_json_bool(struct ms_json *j, const char *key, int v);
void ms_json_null(struct ms_json *j, const char *key);
/* Ends the document with a newline. */
void ms_json_finish(struct ms_json *j);

/* Helpers shared by the analyses (common.c, decompose_at.c, site.c): the database's shape, the
 * layers an analysis covers, the names of processes, layers and owners, and call sites. */

/* Returns 1 when table has a column named column, 0 otherwise (also for a missing table). */
int ms__has_column(sqlite3 *db, const char *table, const char *column);

/* Formats the statement fmt (sqlite3_mprintf's format: %q and %w for text from outside) and
 * prepares it into *st: no SQL text of a fixed size. SQLite's code (SQLITE_OK on success);
 * *st is NULL on failure. */
int ms__prepare(sqlite3 *db, sqlite3_stmt **st, const char *fmt, ...);

/* An SQL condition on the layer column col that selects the layers an analysis covers:
 * o->layer when set, else every memory layer: all but the annotation layer 0 and the regions
 * that pools carve from (pools.reserve_layer, a subquery: any number of pools). The caller frees
 * it with sqlite3_free; NULL when out of memory. */
char *ms__layer_filter(sqlite3 *db, const struct ms_analyze_opts *o, const char *col);

/* The layers ms__layer_filter selects, as a test in C (for rows that do not come from SQL). */
struct ms_layer_set {
    int layer;    /* o->layer, 0: every memory layer but ... */
    int *reserve; /* ... the regions pools carve from (pools.reserve_layer), sorted */
    int nreserve;
};
/* Loads the set for o (the caller releases it with ms__layer_set_release); 0, MS_EDB or
 * MS_ENOMEM (nothing to release then). */
int ms__layer_set_load(sqlite3 *db, const struct ms_analyze_opts *o, struct ms_layer_set *s);
/* Frees s's contents; s may be zeroed or released already. */
void ms__layer_set_release(struct ms_layer_set *s);
/* 1 when layer is selected. */
int ms__layer_selected(const struct ms_layer_set *s, int64_t layer);

/* 1 when table (one the conversion computes: site_stats, live_samples, decompose_points ...)
 * has rows; databases of an older memscope, and made by hand, have none: the analysis then
 * computes its answer from the events. */
int ms__computed(sqlite3 *db, const char *table);

/* 1 when the database says a tag changed a block's owner after its allocation (its site_stats
 * then name the owners blocks had when allocated, not their last). */
int ms__retagged(sqlite3 *db);

/* decompose_at.c: the blocks of a compact database live at time at, from a replay of its
 * traces, in a new temporary table named blocks (allocation_id, layer, process_id, size,
 * stack_id, owner_id (the last), alloc_event_id, free_ns, free_event_id) that queries then read
 * instead of the database's; *eid: the last event at or before at. The caller drops the table
 * (DROP TABLE temp.blocks); on error there is none. 0 or a negative code with err set. */
int ms__blocks_at(sqlite3 *db, int has_owner, int64_t at, int64_t *eid, char *err, size_t errlen);

/* The run's start (meta.start_time_ns, else the first event), for relative times. */
int64_t ms__run_start_ns(sqlite3 *db);

/* Names of a database's processes, layers and owners, loaded once (small tables). */
struct ms_names {
    struct ms_name_proc {
        int64_t id, pid;
        char *exe;
    } * procs; /* exe: basename */
    size_t nprocs;
    char **layers; /* by layer id; NULL where no row */
    size_t nlayers;
    char **owners; /* by owner id; NULL where no row */
    size_t nowners;
    int term; /* a text report: names come back escaped for a terminal (common/term_text.h) */
};
/* Loads the names; 0 or a negative code with err set. Release with ms__names_release. */
int ms__names_load(sqlite3 *db, struct ms_names *n, char *err, size_t errlen);
void ms__names_release(struct ms_names *n);
/* The process row with that id, or NULL. */
const struct ms_name_proc *ms__names_proc(const struct ms_names *n, int64_t id);
/* The layer's name ("heap", "mmap", "pool:NAME"), or "layer<N>" in a static buffer. In a text
 * report (n->term) this and the owner's label are escaped for a terminal (ms_term_text's
 * buffers: valid for the next 7 calls), and each process's exe is escaped when loaded. */
const char *ms__names_layer(const struct ms_names *n, int64_t id);
/* The owner label, or NULL for id <= 0 or unknown. */
const char *ms__names_owner(const struct ms_names *n, int64_t id);

/* Call-site descriptions by stack id (ms_stack_site's text), computed once per stack and
 * interned: two stacks with the same site get the same pointer, so callers group by pointer.
 * Strings live until ms__sites_release. */
struct ms_sites {
    sqlite3 *db;
    struct ms_site_reader reader;
    struct ms_u64map by_stack; /* stack id -> char * */
    char **texts;              /* interned strings, sorted on demand */
    size_t ntexts, atexts;
    int term; /* a text report: sites are escaped for a terminal (common/term_text.h) */
};
void ms__sites_init(struct ms_sites *s, sqlite3 *db);
void ms__sites_release(struct ms_sites *s);
/* The site of stack_id ("(no stack)" for <= 0); NULL only when out of memory. */
const char *ms__sites_get(struct ms_sites *s, int64_t stack_id);

/* The context of one analysis run, the same for every analysis: the database and options, where
 * the report goes, where a failure's reason goes, and the database's names and call sites
 * (loaded once, shared by the analysis's parts). ms_analyze_run_list() makes one per analysis
 * it runs. An analysis computes a result first and renders it after (text or JSON), so that a
 * failure writes nothing and the two renderings read the same numbers. */
struct ms_actx {
    sqlite3 *db;
    const struct ms_analyze_opts *o;
    FILE *out;
    const char *name; /* the analysis's name: the prefix of its messages */
    char *err;        /* the reason of a failure, errlen bytes */
    size_t errlen;
    struct ms_names names;
    struct ms_sites sites;
};

/* Starts x for analysis `name` on db (loads the names). 0, or a negative code with err set. The
 * caller releases x with ms__actx_release() in either case. */
int ms__actx_init(struct ms_actx *x, const char *name, sqlite3 *db, const struct ms_analyze_opts *o,
                  FILE *out, char *err, size_t errlen);
void ms__actx_release(struct ms_actx *x);

/* Sets x->err to "<name>: <what>: <SQLite's message>" and returns MS_EDB. */
int ms__actx_db_fail(struct ms_actx *x, const char *what);
/* Sets x->err to "<name>: out of memory" and returns MS_ENOMEM. */
int ms__actx_oom(struct ms_actx *x);
/* Between an analysis's computation (which returned rc) and its rendering: rc, or MS_ENOMEM
 * with x->err set when an allocation failed inside SQLite meanwhile (ms_oom_seen: a query may
 * have looked shorter than it is), so that such a result is never written. */
int ms__actx_computed(struct ms_actx *x, int rc);

/* peak.c: the first moment of maximum live bytes of every (process, layer) of the selected
 * layers, as `analyze peak` finds it (process_stats, checked against the blocks, else a replay
 * of the events): the MALLOC that reached it (event_id, alloc_id), its time and bytes. *out
 * (n of them, by process and layer) is the caller's to free; 0 or a negative code (x->err). */
struct ms_peak_at {
    int64_t process_id, layer, bytes, ns, event_id, alloc_id;
};
int ms__peaks_find(struct ms_actx *x, struct ms_peak_at **out, size_t *n);

/* peak.c: the same peaks with the call sites live at each, largest first (at most
 * MS_PEAK_TOP and x->o->top of them; nsites: how many there were), for the budgets (`memscope
 * run --max-peak`). Sites are x->sites' strings; *out is the caller's to free. */
#define MS_PEAK_TOP 16
struct ms_peak_site {
    const char *site;
    int64_t bytes, blocks;
};
struct ms_peak_top {
    int64_t process_id, layer, bytes, blocks;
    struct ms_peak_site top[MS_PEAK_TOP];
    size_t ntop, nsites;
};
int ms__peaks_top(struct ms_actx *x, struct ms_peak_top **out, size_t *n);

/* MindStudio Insight's time rules of inefficient memory (reference §5) for one block allocated
 * at alloc_ns and freed (or seen last) at end_ns, accessed first at first_ns (0: never), last
 * at last_ns, with max_gap ns at most between two accesses: MS_INEFF_LAZY, MS_INEFF_DELAYED
 * and MS_INEFF_LONG_IDLE bits. A rule fires over its ns (0: off) or its percent of the
 * lifetime (0 or 100: off). inefficient.c and the viewer share it. */
enum { MS_INEFF_LAZY = 1, MS_INEFF_DELAYED = 2, MS_INEFF_LONG_IDLE = 4 };
struct ms_insight_thresholds {
    uint64_t lazy_ns, delayed_ns, idle_ns;
    double lazy_pct, delayed_pct, idle_pct;
};
unsigned ms_analyze_insight_flags(const struct ms_insight_thresholds *t, int64_t alloc_ns,
                                  int64_t end_ns, int64_t first_ns, int64_t last_ns,
                                  int64_t max_gap);

/* The analyses (ms_analyses[] lists them), one file each. */
int ms_analyze_leaks(struct ms_actx *x);
int ms_analyze_peak(struct ms_actx *x);
int ms_analyze_compare(struct ms_actx *x);
int ms_analyze_inefficient(struct ms_actx *x);
int ms_analyze_decompose(struct ms_actx *x);
int ms_analyze_temporary(struct ms_actx *x);
int ms_analyze_trend(struct ms_actx *x);
int ms_analyze_fragmentation(struct ms_actx *x);

/* A pool's free space (fragmentation.c's rule, shared with the live monitor's warning report):
 * used and regions map a block's or region's address to its int64_t size; *free gets the bytes
 * inside the regions that no block covers, *largest the largest such extent inside one region
 * (the largest block the pool could hand out without reserving more). The fragmentation is
 * (free - largest) / free. Returns 0 or MS_ENOMEM. */
int ms_pool_free_extents(const struct ms_u64map *used, const struct ms_u64map *regions,
                         long long *free_bytes, long long *largest);
int ms_analyze_oom(struct ms_actx *x);
int ms_analyze_usage(struct ms_actx *x);

/* leaks.c: the verdict of `analyze leaks`' default rule (the growth rule, docs/analyses.md),
 * for the budgets (`memscope run --fail-on-step-leak`): the leaking call sites of the selected
 * layers, their growth per step (per tenth of the allocations in a run without steps) and the
 * bytes they hold at the last step end (at the peak). Sites are x->sites' strings. */
struct ms_leak_site {
    int64_t process_id, layer;
    const char *site;
    double per_step;
    int64_t held_bytes;
};
struct ms_leak_verdict {
    int on_steps;  /* judged on steps (else on tenths of the allocations) */
    size_t judged; /* processes (peaks, without steps) judged; 0: too few steps */
    double per_step;
    struct ms_leak_site *sites; /* the caller frees */
    size_t n;
};
/* Fills *v (the caller frees v->sites). 0, or a negative code with x->err set. */
int ms__leaks_verdict(struct ms_actx *x, struct ms_leak_verdict *v);

/* Live bytes per (process, layer) while replaying MALLOC and FREE events in id order, as the
 * converter counted them (process_stats): a FREE with an allocation_id ends its block; a MALLOC
 * at an address that is still live first ends the old block (the "replaced" blocks of
 * docs/database.md, which have no FREE event). Keeps one address map per (process, layer). */
struct ms_live_pl {
    int64_t process_id, layer;
    int64_t live, blocks;   /* now */
    struct ms_u64map addrs; /* addr -> size of the live blocks */
};
struct ms_live {
    struct ms_live_pl *pl;
    size_t n, cap, last;
};
void ms__live_init(struct ms_live *l);
void ms__live_release(struct ms_live *l);
/* Applies one event (kind 1 MALLOC, 2 FREE; others are ignored). Returns the entry of its
 * (process, layer), or NULL when out of memory. */
struct ms_live_pl *ms__live_apply(struct ms_live *l, int kind, int64_t process_id, int64_t layer,
                                  int64_t addr, int64_t size, int has_alloc_id);

/* Runs the analyses named in names (a comma list, or "all" for every available one) on the
 * database at db_path and writes one report to out: text sections one after the other, or with
 * o->json a single document (one analysis: its own document; several: an object with a key per
 * analysis, a failed one as {"error": "..."}). Used by `memscope analyze` and `memscope run
 * --analysis=`. Returns 0; MS_EINVAL for an empty list or an unknown name (nothing run);
 * the opening error of ms_analyze_open; or the first failing analysis's code (the others still
 * run). err gets a one-line reason. */
int ms_analyze_run_list(const char *db_path, const char *names, const struct ms_analyze_opts *o,
                        FILE *out, char *err, size_t errlen);

#endif
