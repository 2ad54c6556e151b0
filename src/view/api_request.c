/* api_request.c: a viewer request's parameters and time window (api_internal.h): every
 * number from the network parsed strictly and bounded, times relative to the run's first
 * event, the thresholds of inefficient blocks, and the blocks alive in a window (cached
 * across requests). The answers are api.c's and its neighbours'. */
#include "api_internal.h"

#include "analyze/analyze.h"
#include "common/grow.h"
#include "common/ms_error.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parameter name as an integer in [lo, hi]; def when absent; sets r->bad when malformed. */
int64_t ms__vnum(struct req *r, const char *name, int64_t def, int64_t lo, int64_t hi)
{
    const char *s = r->param(r->ctx, name);
    if (!s)
        return def;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno || x < lo || x > hi) {
        if (!r->bad[0])
            snprintf(r->bad, sizeof r->bad, "parameter '%s': expected an integer in [%lld, %lld]",
                     name, (long long)lo, (long long)hi);
        return def;
    }
    return x;
}

/* Threshold parameter name: "N" ns or "P%" of a block's lifetime (Insight's valueT, perT). */
static void threshold_param(struct req *r, const char *name, uint64_t *ns, double *pct)
{
    const char *s = r->param(r->ctx, name);
    if (!s)
        return;
    char *end;
    errno = 0;
    if (*s && s[strlen(s) - 1] == '%') {
        double p = strtod(s, &end);
        if (end > s && end == s + strlen(s) - 1 && !errno && p >= 0 && p <= 100) {
            *ns = 0, *pct = p;
            return;
        }
    } else {
        long long x = strtoll(s, &end, 10);
        if (*s && !*end && !errno && x >= 0) {
            *ns = (uint64_t)x, *pct = 0;
            return;
        }
    }
    if (!r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter '%s': expected ns or a percent (e.g. 50%%)",
                 name);
}

/* A request read through param(ctx, name), times from origin; the thresholds of inefficient
 * blocks: each 50% of the block's lifetime unless the request says otherwise (lazy, delayed,
 * idle). */
void ms__vreq_init(struct req *r, ms_view_param_fn param, void *ctx, int64_t origin)
{
    *r = (struct req){.param = param, .ctx = ctx, .origin = origin};
    r->th = (struct ms_insight_thresholds){0, 0, 0, 50, 50, 50};
    threshold_param(r, "lazy", &r->th.lazy_ns, &r->th.lazy_pct);
    threshold_param(r, "delayed", &r->th.delayed_ns, &r->th.delayed_pct);
    threshold_param(r, "idle", &r->th.idle_ns, &r->th.idle_pct);
}

/* Insight's flags of block i under r's thresholds (0: not accessed, or efficient). */
unsigned ms__vineff_flags(const struct ms_view *v, const struct req *r, size_t i)
{
    const struct ms_vaccess *ac = v->m.access.count ? ms_u64map_get(&v->m.access, i) : NULL;
    if (!ac)
        return 0;
    const struct ms_vblock k_ = ms_view_block(&v->m, i), *k = &k_;
    int64_t end = k->free_ns == INT64_MAX ? v->m.t1 : k->free_ns;
    return ms_analyze_insight_flags(&r->th, k->alloc_ns, end, ac->first_ns, ac->last_ns,
                                    ac->max_gap);
}

/* Time parameter name (ns from r->origin) as an absolute time; def (absolute) when absent. */
int64_t ms__vtnum(struct req *r, const char *name, int64_t def)
{
    int64_t lim = (int64_t)1 << 53;
    int64_t x = ms__vnum(r, name, INT64_MIN, -lim, lim);
    return x == INT64_MIN ? def : x + r->origin;
}

/* 1 when block b counts for track t (0: every memory layer; else that track only). */
int ms__vin_track(const struct ms_view *v, const struct ms_vblock *b, int64_t t)
{
    return t ? ms_vblock_track(b) == (uint32_t)t : !v->m.tracks[ms_vblock_track(b)].reserve;
}

static int alive_add(void *ctx, size_t i)
{
    struct ms_view *v = ctx;
    if (v->live_track || v->m.any_reserve) { /* else every block counts: none decoded */
        struct ms_vblock k = ms_view_block(&v->m, i);
        if (!ms__vin_track(v, &k, v->live_track))
            return 0;
    }
    if (ms_grow((void **)&v->live_idx, &v->live_cap, v->live_n, sizeof *v->live_idx, 1024,
                UINT32_MAX) < 0)
        return MS_ENOMEM;
    v->live_idx[v->live_n++] = (uint32_t)i;
    return 0;
}

/* The blocks of track alive in [a, b) into v->live_idx (cached: see struct ms_view); the
 * blocks live at t are the window [t, t + 1). 0 or MS_ENOMEM. */
int ms__valive_set(struct ms_view *v, int64_t a, int64_t b, int64_t track)
{
    if (v->live_ok && v->live_a == a && v->live_b == b && v->live_track == track)
        return 0;
    v->live_ok = 0;
    v->live_n = 0;
    v->live_track = track;
    int rc = ms_view_alive(&v->m, a, b, alive_add, v);
    if (rc < 0)
        return rc;
    v->live_a = a;
    v->live_b = b;
    v->live_ok = 1;
    return 0;
}
