/* api_internal.h: what the viewer's query files share (api.c: loading, stacks, summary,
 * series, owners, analyses and the routing; api_request.c: a request's parameters and time
 * window; api_tables.c: blocks, events, ranges;
 * api_flame.c: the flame graphs of allocation stacks and of the Python call trace;
 * api_pool.c: a pool's allocator state; api_usage.c: the usage monitor's series). */
#ifndef MS_VIEW_API_INTERNAL_H
#define MS_VIEW_API_INTERNAL_H

#include "api.h"
#include "analyze/analyze.h"

#include <stdint.h>

#define MAX_POINTS 4000 /* a series' buckets, a chart's pixels at most */
#define MAX_ROWS 5000
#define MAX_OFFSET 1000000 /* rows a page may start at: deeper, narrow the filters */

/* One request: how to read its parameters, the first bad one's message. */
struct req {
    ms_view_param_fn param;
    void *ctx;
    char bad[160];  /* the first bad parameter's message */
    int64_t origin; /* times in and out are ns from here (the first event): exact in a
                       JavaScript number, which an epoch in ns is not */
    struct ms_insight_thresholds th; /* inefficient blocks (lazy, delayed, idle parameters) */
};

/* A request read through param(ctx, name), times from origin, the inefficiency thresholds
 * its lazy, delayed and idle parameters say (each 50% of a block's lifetime when absent). */
void ms__vreq_init(struct req *r, ms_view_param_fn param, void *ctx, int64_t origin);
/* Parameter name as an integer in [lo, hi]; def when absent; sets r->bad when malformed. */
int64_t ms__vnum(struct req *r, const char *name, int64_t def, int64_t lo, int64_t hi);
/* Time parameter name (ns from r->origin) as an absolute time; def (absolute) when absent. */
int64_t ms__vtnum(struct req *r, const char *name, int64_t def);
/* A stack's call site (ms_stack_site: the analyses' rule), cached; at most len
 * bytes into out. */
void ms__vstack_site(struct ms_view *v, uint32_t id, char *out, size_t len);
/* Insight's inefficiency flags of block i under r's thresholds (0: not accessed, efficient). */
unsigned ms__vineff_flags(const struct ms_view *v, const struct req *r, size_t i);
/* 1 when block b counts for track t (0: every memory layer; else that track only). */
int ms__vin_track(const struct ms_view *v, const struct ms_vblock *b, int64_t t);
/* The blocks of track (0: every memory layer) alive in [a, b) into v->live_idx, cached (see
 * struct ms_view): 0 or MS_ENOMEM. */
int ms__valive_set(struct ms_view *v, int64_t a, int64_t b, int64_t track);
/* The cached text of a stack: C lines, a '\x1f' line, Python lines ("" when none). */
const char *ms__vstack_text(struct ms_view *v, uint32_t id);

/* Bytes and blocks of one stack's selected blocks. */
struct site_sum {
    uint32_t stack;
    int64_t bytes, blocks;
};

/* The blocks of mode 0 (live at a), 1 (allocated in [a, b)) or 2 (never freed) in track,
 * summed by stack, largest first (caller frees); NULL when out of memory. */
struct site_sum *ms__vsum_by_stack(struct ms_view *v, int mode, int64_t a, int64_t b, int64_t track,
                                   size_t *n, int64_t *total);

/* The queries of the other files: 0, MS_EINVAL (r->bad says why) or another negative code. */
int ms__vapi_blocks(struct ms_view *v, struct req *r, struct ms_json *j);
int ms__vapi_events(struct ms_view *v, struct req *r, struct ms_json *j);
int ms__vapi_ranges(struct ms_view *v, struct req *r, struct ms_json *j);
int ms__vapi_flame(struct ms_view *v, struct req *r, struct ms_json *j);
int ms__vapi_pytrace(struct ms_view *v, struct req *r, struct ms_json *j);
int ms__vapi_segments(struct ms_view *v, struct req *r, struct ms_json *j);
/* /api/series' part from the usage monitor (api_usage.c): the arrays "usage" (each process's
 * RSS, PSS, USS) and "devices" (each CUDA device's memory used) over the nb buckets of [a, b),
 * step ns each. */
void ms__vapi_usage_series(const struct ms_view_model *m, int64_t a, int64_t b, int64_t step,
                           size_t nb, struct ms_json *j);

#endif
