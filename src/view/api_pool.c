/* api_pool.c: a pool's allocator state (/api/segments, api_internal.h): its regions and its
 * blocks in them at a time, and the pool's neighbouring events to step through. */
#include "api_internal.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

/* ---- Allocator state ------------------------------------------------------------------------- */

#define MAX_SEGMENTS 500
#define MAX_SEG_BLOCKS 5000

struct seg_ent {
    uint64_t addr;
    uint32_t idx;
};

static int seg_by_addr(const void *a, const void *b)
{
    const struct seg_ent *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* The previous (dir < 0: last before t) or next (first after t) change of a track; def when
 * none. */
static int64_t track_neighbour(const struct ms_vtrack *tr, int64_t t, int dir, int64_t def)
{
    struct ms_vcur *c = malloc(sizeof *c); /* 4 KiB: off the server thread's stack */
    if (!c)
        return def; /* no neighbour to step to: the page's buttons stay off */
    ms_vcur_init(c, tr->line);
    int64_t r = def;
    if (dir > 0) { /* the first change after t */
        size_t i = (size_t)(ms_vline_last_at(c, t) + 1);
        if (i < tr->line->n)
            r = ms_vline_ts(c, i);
    } else if (t > INT64_MIN) { /* the last change before t */
        long i = ms_vline_last_at(c, t - 1);
        if (i >= 0)
            r = ms_vline_ts(c, (size_t)i);
    }
    free(c);
    return r;
}

/* A pool's state at t (memory_viz's allocator state): the regions it had reserved (its
 * reserve layer's live blocks), by address, each with the pool's live blocks inside it, the
 * bytes used and the largest free extent; and the times of the pool's previous and next
 * events, to step through them. NEEDSWORK: regions and blocks are matched by address only, so
 * two processes with the same pool (each its own address space) are drawn as one. */
int ms__vapi_segments(struct ms_view *v, struct req *r, struct ms_json *j)
{
    const struct ms_view_model *m = &v->m;
    int64_t pool = ms__vnum(r, "pool", 0, 0, m->npools ? (int64_t)m->npools - 1 : 0);
    int64_t at = ms__vtnum(r, "t", m->total_peak_ns);
    if (!m->npools && !r->bad[0])
        snprintf(r->bad, sizeof r->bad, "parameter 'pool': this run has no pool");
    if (r->bad[0])
        return MS_EINVAL;
    const struct ms_vpool *p = &m->pools[pool];
    struct seg_ent *segs = NULL, *blks = NULL;
    size_t nseg = 0, nblk = 0, capseg = 0, capblk = 0;
    int rc = 0;
    int64_t prev = INT64_MIN, next = INT64_MAX;
    for (size_t t = 1; t < m->ntracks; t++) {
        const struct ms_vtrack *tr = &m->tracks[t];
        if (tr->layer != p->layer && tr->layer != p->reserve_layer)
            continue;
        int64_t a = track_neighbour(tr, at, -1, INT64_MIN),
                b = track_neighbour(tr, at, 1, INT64_MAX);
        prev = a > prev ? a : prev;
        next = b < next ? b : next;
    }
    for (size_t i = 0; rc == 0 && i < m->nblocks; i++) {
        if (ms_vblocks_free_ns(&m->blocks, i) <= at)
            continue; /* freed by then: not decoded */
        const struct ms_vblock k_ = ms_view_block(m, i), *k = &k_;
        if (!ms_vblock_live_at(k, at))
            continue;
        int64_t layer = m->tracks[ms_vblock_track(k)].layer;
        if (layer == p->reserve_layer) {
            if (ms_grow((void **)&segs, &capseg, nseg, sizeof *segs, 64, 1u << 24) < 0)
                rc = MS_ENOMEM;
            else
                segs[nseg++] = (struct seg_ent){k->addr, (uint32_t)i};
        } else if (layer == p->layer) {
            if (ms_grow((void **)&blks, &capblk, nblk, sizeof *blks, 256, 1u << 26) < 0)
                rc = MS_ENOMEM;
            else
                blks[nblk++] = (struct seg_ent){k->addr, (uint32_t)i};
        }
    }
    if (rc < 0) {
        free(segs);
        free(blks);
        return rc;
    }
    if (nseg > 1) /* qsort takes no NULL array, even empty: none was made then */
        qsort(segs, nseg, sizeof *segs, seg_by_addr);
    if (nblk > 1)
        qsort(blks, nblk, sizeof *blks, seg_by_addr);
    ms_json_begin_object(j, NULL);
    ms_json_str(j, "pool", p->name);
    ms_json_int(j, "t", at - r->origin);
    if (prev == INT64_MIN)
        ms_json_null(j, "prev_t");
    else
        ms_json_int(j, "prev_t", prev - r->origin);
    if (next == INT64_MAX)
        ms_json_null(j, "next_t");
    else
        ms_json_int(j, "next_t", next - r->origin);
    ms_json_int(j, "segment_count", (long long)nseg);
    ms_json_int(j, "block_count", (long long)nblk);
    int64_t reserved = 0, used = 0;
    for (size_t s = 0; s < nseg; s++)
        reserved += ms_view_block(m, segs[s].idx).size;
    for (size_t b = 0; b < nblk; b++)
        used += ms_view_block(m, blks[b].idx).size;
    ms_json_int(j, "reserved_bytes", reserved);
    ms_json_int(j, "used_bytes", used);
    ms_json_begin_array(j, "segments");
    size_t b = 0, shown = 0;
    for (size_t s = 0; s < nseg && s < MAX_SEGMENTS; s++) {
        uint64_t lo = segs[s].addr, hi = lo + (uint64_t)ms_view_block(m, segs[s].idx).size;
        while (b < nblk && blks[b].addr < lo) /* blocks outside every region: not drawn */
            b++;
        ms_json_begin_object(j, NULL);
        char hex[32];
        snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)lo);
        ms_json_str(j, "addr", hex);
        ms_json_int(j, "size", (long long)(hi - lo));
        ms_json_int(j, "alloc_ns", ms_view_block(m, segs[s].idx).alloc_ns - r->origin);
        int64_t seg_used = 0, largest_free = 0;
        uint64_t end = lo; /* the end of the last block, for the free extents */
        ms_json_begin_array(j, "blocks");
        for (; b < nblk && blks[b].addr < hi; b++) {
            const struct ms_vblock k_ = ms_view_block(m, blks[b].idx), *k = &k_;
            if (blks[b].addr > end && (int64_t)(blks[b].addr - end) > largest_free)
                largest_free = (int64_t)(blks[b].addr - end);
            uint64_t bend = blks[b].addr + (uint64_t)k->size;
            end = bend > end ? bend : end;
            seg_used += k->size;
            if (shown++ >= MAX_SEG_BLOCKS)
                continue;
            /* no call site here: thousands of blocks of as many stacks would each need one
             * (the page asks /api/stack for the block clicked) */
            if (v->seen_stacks && k->stack_id) /* a report carries the stacks it names */
                ms_u64map_put(v->seen_stacks, k->stack_id, NULL);
            uint32_t owner = ms_vblock_owner(k);
            ms_json_begin_object(j, NULL);
            ms_json_int(j, "offset", (long long)(blks[b].addr - lo));
            ms_json_int(j, "size", k->size);
            ms_json_int(j, "alloc_ns", k->alloc_ns - r->origin);
            ms_json_int(j, "stack_id", k->stack_id);
            ms_json_str(j, "owner", owner && owner < v->nowners ? v->owners[owner] : NULL);
            ms_json_end_object(j);
        }
        ms_json_end_array(j);
        if (hi > end && (int64_t)(hi - end) > largest_free)
            largest_free = (int64_t)(hi - end);
        ms_json_int(j, "used_bytes", seg_used);
        ms_json_int(j, "largest_free", largest_free);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_bool(j, "truncated", nseg > MAX_SEGMENTS || shown > MAX_SEG_BLOCKS);
    ms_json_end_object(j);
    free(segs);
    free(blks);
    return 0;
}
