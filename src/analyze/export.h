/* export.h: a run's memory in the formats other tools read (`memscope export --format=pprof,
 * collapsed, speedscope, perfetto`; docs/exports.md).
 *
 * Every format is made from one profile (export_profile.c): the events of the selection
 * (ms_analyze_opts' selectors: process, layer, device, step or time window) read once in id
 * order, from the events table of a full database or a replay of a compact one's traces, and
 * summed per (process, layer, stack). Memory is bounded by the distinct stacks and the blocks
 * live at one time, never by the events: a 100M-event run exports in the memory of its stacks.
 * Writers then turn the profile into their format, reading each stack's frames once
 * (store/stack_text.h). A writer that fails has written part of its output: the CLI writes to a
 * new file renamed over the target only on success (common/files.h). */
#ifndef MS_ANALYZE_EXPORT_H
#define MS_ANALYZE_EXPORT_H

#include "analyze.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>

/* What collapsed and speedscope weigh each stack by (--what). */
enum ms_export_what {
    MS_WHAT_ALLOCATED = 0, /* bytes allocated in the window (default) */
    MS_WHAT_LIVE,          /* bytes live at the window's end (at exit without one) */
    MS_WHAT_PEAK,          /* bytes live at the peak of their process and layer (in the window) */
    MS_WHAT_LEAKED         /* bytes allocated in the window and never freed */
};
/* "allocated", "live-at-exit", "peak", "leaked" -> *what; 0 or -1 for another name. */
int ms_export_what_parse(const char *name, enum ms_export_what *what);

/* One (process, layer, stack) of the selection and its figures. */
struct ms_profile_entry {
    int64_t process_id, layer, stack_id; /* stack_id 0: no stack */
    int64_t allocs, alloc_bytes;         /* allocated in the window */
    int64_t inuse, inuse_bytes;          /* live at the window's end */
    int64_t peak, peak_bytes;            /* live at its (process, layer)'s peak in the window */
    int64_t leaked, leaked_bytes;        /* allocated in the window, live at the end */
    int64_t live, live_bytes;            /* now, during the pass */
    uint32_t next;                       /* the next entry of its (process, layer); UINT32_MAX */
};

/* A counter's point (perfetto): live bytes of one (process, layer). */
struct ms_profile_point {
    int64_t ts_ns, bytes;
};

/* One (process, layer) of the selection. */
struct ms_profile_pl {
    int64_t process_id, layer, pid;
    int64_t live, blocks;   /* now, during the pass */
    int64_t max, peak_eid;  /* pass 1: the first MALLOC that reached the window's maximum */
    uint32_t first;         /* its first entry, UINT32_MAX: none */
    struct ms_u64map stack; /* stack id -> entry index (uint32) */
    struct ms_u64map addrs; /* addr -> live block (struct in export_profile.c) */
    /* the timeline (perfetto): the maximum of each of MS_PROFILE_BUCKETS intervals */
    struct ms_profile_point *pts;
    size_t npts, apts;
    int64_t bucket, bucket_max;
};

#define MS_PROFILE_BUCKETS 2000 /* counter points per (process, layer) at most, plus 2 */

struct ms_profile {
    sqlite3 *db;
    const struct ms_analyze_opts *o;
    int64_t from_ns, to_ns; /* the window (the whole run without one) */
    int64_t run_start_ns;   /* ms__run_start_ns: the origin of relative times */
    int timeline;           /* keep the counters' points (perfetto) */
    int to_end;             /* read on after the window (the leaked figure) */
    struct ms_profile_entry *e;
    size_t ne, ae;
    struct ms_profile_pl *pl;
    size_t npl, apl;
    /* the selection */
    struct ms_layer_set layers;
    int64_t *procs, *dev_layers; /* process ids of --process, layers of --device (sorted) */
    size_t nprocs, ndev;
    int64_t matched; /* MALLOC and FREE rows of the selection inside the window */
    int pass, past_to;
    char *err;
    size_t errlen;
};

/* What ms_profile_collect computes beyond the allocated and in-use figures. */
enum {
    MS_PROFILE_PEAK = 1,    /* peak figures: a first pass finds each (process, layer)'s peak */
    MS_PROFILE_LEAKED = 2,  /* leaked figures: the events after the window are read too */
    MS_PROFILE_TIMELINE = 4 /* the counters' points (perfetto) */
};
/* Reads the selection of o from the database at db_path (db: it, opened) into p: one pass over
 * its events (two for MS_PROFILE_PEAK), up to the window's end (to the run's end for
 * MS_PROFILE_LEAKED). 0, or a negative code with a one-line reason in err: MS_ENOTFOUND when
 * the selection matches nothing (no such process, device or step, no memory event in the
 * window), MS_EINVAL for a window that is reversed or two windows. Release p with
 * ms_profile_release in either case. */
int ms_profile_collect(struct ms_profile *p, sqlite3 *db, const char *db_path,
                       const struct ms_analyze_opts *o, unsigned flags, char *err, size_t errlen);
void ms_profile_release(struct ms_profile *p);
/* The (process, layer) of entry e. */
const struct ms_profile_pl *ms_profile_pl_of(const struct ms_profile *p,
                                             const struct ms_profile_entry *e);

/* The entries' indexes ordered by process, layer and stack (the output does not depend on the
 * order the events came in): p->ne of them, the caller frees; NULL when out of memory. */
uint32_t *ms_profile_sorted(const struct ms_profile *p);

/* An entry's figure for what: bytes, and *count blocks when count is not NULL. */
int64_t ms_profile_value(const struct ms_profile_entry *e, enum ms_export_what what,
                         int64_t *count);

/* A stack's frames as the exports show them, outermost first: the Python frames (but
 * memscope's own) and the native frames inside the innermost interpreter frame, or every
 * native frame without Python frames (the viewer's flame graph's rule). A native frame carries
 * its inline level (frames of one pc: the inlined ones first, innermost first: reversed here,
 * so the containing function comes first). Strings belong to the reader. */
struct ms_export_frame {
    struct ms_stack_frame f; /* function, file, line, module, pc, inline_depth, text */
    int python;
};
struct ms_export_stacks {
    struct ms_stack_text t;
    int t_ok;
    struct ms_export_frame *v;
    size_t n, a;
};
int ms_export_stacks_init(struct ms_export_stacks *s, sqlite3 *db);
void ms_export_stacks_release(struct ms_export_stacks *s);
/* Loads stack_id's frames into s->v[0..s->n) (outermost first; none for 0). 0 or a negative
 * code. Valid until the next call. */
int ms_export_stack_load(struct ms_export_stacks *s, int64_t stack_id);

/* The writers (one file each). 0, or a negative code with a one-line reason in err. */
int ms_export_pprof(const struct ms_profile *p, FILE *out, char *err, size_t errlen);
int ms_export_collapsed(const struct ms_profile *p, enum ms_export_what what, FILE *out, char *err,
                        size_t errlen);
int ms_export_speedscope(const struct ms_profile *p, enum ms_export_what what, const char *name,
                         FILE *out, char *err, size_t errlen);
int ms_export_perfetto(const struct ms_profile *p, FILE *out, char *err, size_t errlen);

#endif
