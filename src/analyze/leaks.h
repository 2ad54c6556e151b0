/* leaks.h: the parts of `memscope analyze leaks` (docs/analyses.md), private to src/analyze:
 * leaks.c computes what was live at exit and msMemScope's step check and holds the entry points;
 * leaks_growth.c the growth rule, from step end to step end (part c) or, in a run without steps,
 * by the tenth of the run each block live at a peak was allocated in (part d); leaks_render.c
 * writes the result as text or JSON. The result of all parts is one struct leaks. */
#ifndef MS_ANALYZE_LEAKS_H
#define MS_ANALYZE_LEAKS_H

#include "analyze.h"
#include "leak_rule.h"

#include <stddef.h>
#include <stdint.h>

#define MAX_OWNERS 4               /* owners listed per call site */
#define MAX_GROWTH_CELLS (1 << 24) /* groups x step ends kept by the growth part */

/* One row of the live-at-exit table: a call site (or, before merging, a stack). */
struct site_row {
    int64_t process_id, layer;
    const char *site;
    int64_t owners[MAX_OWNERS];
    int nowners, more_owners;
    int64_t bytes, blocks;
};

/* Part (d), without steps: a call site's or owner's blocks live at a peak, by the slice of the
 * run (NSLICES from the run's start to the peak) they were allocated in; after finishing,
 * live[k] is the bytes of them allocated up to the end of slice k. */
#define NSLICES 10
#define GROW_FROM 4 /* the growth is measured from the end of the fifth tenth ... */
#define GROW_TO 8   /* ... to the end of the ninth */
struct tgroup {
    int64_t key; /* stack id, then (merged by site) kept; owner id */
    const char *site;
    int64_t live[NSLICES];
    double per_slice; /* growth: (live[GROW_TO] - live[GROW_FROM]) / (GROW_TO - GROW_FROM) */
    /* The growth rule without steps: the same blocks by the tenth of the allocations (by
     * allocation id, from the process's first to the peak's) they were allocated in, a
     * running total as live: a count of allocations is not stretched by a slow start-up or a
     * loaded machine as time is. Tenths 2..9 in which held rose; the verdict (small: as in
     * struct ggroup); (held[GROW_TO] - held[0]) / GROW_TO. */
    int64_t held[NSLICES];
    size_t rises;
    int leak, small;
    double held_per_slice;
};

/* The part (d) result of one (process, layer) peak. */
struct tpeak {
    int64_t process_id, layer, peak_bytes, peak_ns, start_ns;
    int64_t first_alloc; /* the first allocation id of the process and layer */
    struct tgroup *sites, *owners;
    size_t nsites, nowners;
};

/* One block of msMemScope's step-aware check. */
struct flagged {
    int64_t allocation_id, process_id, layer, size, step, flagged_at, owner;
    uint64_t addr;
    const char *site;
};

struct step_end {
    int64_t step, event_id, ns;
};

/* One process's ended steps. */
struct proc_steps {
    int64_t process_id;
    struct step_end *ends;
    size_t n, aends;
};

/* A growth group: one stack or owner in one (process, layer); after merging, one call site. */
struct ggroup {
    int64_t process_id, layer, key; /* key: stack id or owner id */
    const char *site;               /* by-site groups, after resolving */
    size_t nends;
    int64_t *live; /* nends + 1 cells: differences, then live bytes */
    int64_t *kept; /* nends + 1 cells: the same for the blocks still live at the last step end:
                      after finishing, kept[k] is the bytes of them allocated by step end k */
    double per_step;
    /* The growth rule's verdict (docs/analyses.md, leaks part 1): over the judged step ends
     * (those after the warm-up), the intervals in which kept rose, of judged; leak when the
     * rule holds; kept_per_step: (kept at the last end - kept at the first judged end) /
     * (steps between). */
    size_t rises, judged;
    int leak, small; /* small: steady growth, but below MS_LEAK_MIN_GROWTH_PCT of the peak */
    double kept_per_step;
};

struct gset {
    struct ms_u64map map; /* (key, layer, process) -> index + 1 */
    struct ggroup *g;
    size_t n, cap, cells;
};

/* The computation and its result, part by part. */
struct leaks {
    struct ms_actx *x;
    char *layer_sql; /* ms__layer_filter's */
    int has_owner, has_steps;
    /* (a) blocks live at exit, by (process, layer, call site) */
    struct site_row *live;
    size_t nlive;
    /* (b) the step-aware check's blocks, by process and allocation */
    struct flagged *flagged;
    size_t nflagged, aflagged;
    int64_t flagged_bytes;
    /* (c) the ended steps of each process, and the growth groups by site and by owner, each
     * sorted by (process, layer) then growth */
    struct proc_steps *ps;
    size_t nps, aps;
    struct gset gsites, gowners;
    /* (d) without steps: each (process, layer) peak's live blocks by allocation time */
    struct tpeak *tpeaks;
    size_t ntpeaks, atpeaks;
};

/* The growth rule's findings over the whole run: leaking sites, their growth in bytes per
 * step (or per tenth without steps), and the processes judged. */
struct verdict {
    size_t leaks, small, judged, too_few;
    double per_step;
};

/* The context's reasons: "leaks: WHAT: SQLite's message" (MS_EDB), "leaks: out of memory". */
static inline int db_fail(struct leaks *L, const char *what)
{
    return ms__actx_db_fail(L->x, what);
}

static inline int oom(struct leaks *L)
{
    return ms__actx_oom(L->x);
}

/* leaks_growth.c. Part (c): the ended steps of each process and the growth groups by site and
 * by owner (L->ps, L->gsites, L->gowners), judged by the growth rule; nothing without steps.
 * 0, or a negative code with L->x->err set. */
int ms__leaks_growth(struct leaks *L);
/* Part (d), in a run without steps: each (process, layer) peak's live blocks by the tenth of the
 * run they were allocated in (L->tpeaks), judged by the growth rule. 0, or a negative code. */
int ms__leaks_growth_without_steps(struct leaks *L);
/* Frees s's contents. */
void ms__leaks_gset_release(struct gset *s);
/* The first step end of p the growth rule judges (after the warm-up steps). */
size_t ms__leaks_first_judged_end(const struct proc_steps *p, int warmup);
/* The growth rule's findings over the whole run (parts c or d). */
struct verdict ms__leaks_verdict_of(const struct leaks *L);

/* leaks_render.c: the report on L->x->out, as text or JSON. */
void ms__leaks_render_text(const struct leaks *L);
void ms__leaks_render_json(const struct leaks *L);

#endif
