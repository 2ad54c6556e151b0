/* state.c: the allocator state just after trace event N (`memscope snapshot --state-at N`).
 *
 * Starts from the final `segments` of the device and undoes events from the last one back to
 * N + 1, as PyTorch's viewer (MemoryViz.js simulate_memory) does: alloc -> the block goes,
 * free_requested -> the block is active_allocated again, free_completed -> the block comes
 * back as active_pending_free, segment_free/unmap -> the range comes back, segment_alloc/map
 * -> the range goes. Only active blocks are tracked; inactive space is what is left. A block
 * brought back from the trace has the allocator's rounding of the request as its size and the
 * request as requested_size (the trace has only the request), as the import does
 * (ms_snap_round_size), so the two agree; a block live at the end keeps its segment's sizes.
 * Workload: O(events after N) hash operations plus a sort, so stepping interactively through
 * a million-event trace costs milliseconds per step once the snapshot is loaded. */
#include "snapshot.h"

#include "common/grow.h"
#include "common/u64map.h"
#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

#define DEAD 0xff

struct seg {
    uint64_t addr, size;
    int64_t stream;
    uint8_t expandable, dead;
};

struct vec {
    void *v;
    size_t n, cap;
};

static void *vec_add(struct vec *x, size_t elem)
{
    if (ms_grow(&x->v, &x->cap, x->n, elem, 256, MS_GROW_MAX) < 0)
        return NULL;
    return (char *)x->v + (x->n++) * elem;
}

static int cmp_seg(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_blk(const void *a, const void *b)
{
    const struct ms_snap_state_block *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int set_block(struct vec *bl, struct ms_u64map *bm, uint64_t addr, uint64_t size,
                     uint64_t req, uint32_t stack, uint8_t state)
{
    uint64_t j;
    struct ms_snap_state_block *b;
    if (ms_u64map_get64(bm, addr, &j)) {
        b = (struct ms_snap_state_block *)bl->v + j;
    } else {
        b = vec_add(bl, sizeof *b);
        if (!b || ms_u64map_set64(bm, addr, bl->n - 1))
            return MS_ENOMEM;
    }
    *b = (struct ms_snap_state_block){addr, size, req, stack, state};
    return 0;
}

static int add_seg(struct vec *sg, struct ms_u64map *sm, uint64_t addr, uint64_t size,
                   int64_t stream, int expandable)
{
    struct seg *g = vec_add(sg, sizeof *g);
    if (!g || ms_u64map_set64(sm, addr, sg->n - 1))
        return MS_ENOMEM;
    *g = (struct seg){addr, size, stream, (uint8_t)expandable, 0};
    return 0;
}

/* Removes [addr, addr+size) from the live segment containing it (segment_alloc/map undone). */
static int remove_range(struct vec *sg, struct ms_u64map *sm, uint64_t addr, uint64_t size)
{
    struct seg *v = sg->v;
    uint64_t j;
    if (ms_u64map_get64(sm, addr, &j) && !v[j].dead && v[j].size <= size) {
        v[j].dead = 1;
        ms_u64map_del(sm, addr, NULL);
        return 0;
    }
    for (uint64_t i = 0; i < sg->n; i++) {
        struct seg *g = &v[i];
        if (g->dead || addr < g->addr || addr >= g->addr + g->size)
            continue;
        uint64_t end = addr + size, gend = g->addr + g->size;
        if (end > gend)
            end = gend;
        if (addr == g->addr) { /* prefix */
            ms_u64map_del(sm, g->addr, NULL);
            g->addr = end;
            g->size = gend - end;
            if (!g->size)
                g->dead = 1;
            else if (ms_u64map_set64(sm, g->addr, i))
                return MS_ENOMEM;
        } else {
            g->size = addr - g->addr;
            if (end < gend) { /* split: the tail becomes its own segment */
                struct seg tail = {end, gend - end, g->stream, g->expandable, 0};
                if (add_seg(sg, sm, tail.addr, tail.size, tail.stream, tail.expandable))
                    return MS_ENOMEM;
            }
        }
        return 0;
    }
    return 0;
}

void ms_snap_state_release(struct ms_snap_state *st)
{
    if (!st)
        return;
    free(st->segs);
    free(st->blocks);
    free(st->orphans);
    memset(st, 0, sizeof *st);
}

int ms_snapshot_state_at(const struct ms_snapshot *s, int64_t device, int64_t event,
                         struct ms_snap_state *st)
{
    memset(st, 0, sizeof *st);
    const struct ms_snap_trace *t = ms__snap_trace(s, device);
    uint64_t nev = t ? t->nevents : 0;
    int have_seg = 0;
    for (uint64_t i = 0; i < s->nsegs && !have_seg; i++)
        have_seg = s->segs[i].device == device;
    if (!t && !have_seg)
        return MS_EINVAL;
    if (event < -1 || (nev && event >= (int64_t)nev) || (!nev && event > -1))
        return MS_EINVAL;
    st->device = device;
    st->event = event;

    struct vec bl = {0}, sg = {0};
    struct ms_u64map bm, sm; /* block and segment address -> index in bl, sg */
    ms_u64map_init(&bm, sizeof(uint64_t), MS_U64MAP_MAX);
    ms_u64map_init(&sm, sizeof(uint64_t), MS_U64MAP_MAX);
    int rc = MS_ENOMEM;
    for (uint64_t i = 0; i < s->nsegs; i++) {
        const struct ms_snap_segment *g = &s->segs[i];
        if (g->device != device)
            continue;
        if (add_seg(&sg, &sm, g->addr, g->total, g->stream, g->expandable))
            goto out;
        for (uint64_t j = 0; j < g->nblocks; j++) {
            const struct ms_snap_block *b = &s->blocks[g->first_block + j];
            if (b->state != MS_SB_ACTIVE_ALLOCATED && b->state != MS_SB_ACTIVE_PENDING_FREE)
                continue;
            if (set_block(&bl, &bm, b->addr, b->size, b->requested, b->stack, b->state))
                goto out;
        }
    }
    for (int64_t i = (int64_t)nev - 1; i > event; i--) {
        const struct ms_snap_event *e = &t->events[i];
        uint64_t j;
        switch (e->action) {
        case MS_SA_ALLOC:
            if (ms_u64map_del(&bm, e->addr, &j))
                ((struct ms_snap_state_block *)bl.v)[j].state = DEAD;
            break;
        case MS_SA_FREE_REQUESTED:
            if (ms_u64map_get64(&bm, e->addr, &j))
                ((struct ms_snap_state_block *)bl.v)[j].state = MS_SB_ACTIVE_ALLOCATED;
            else if (set_block(&bl, &bm, e->addr, ms_snap_round_size(e->size), e->size, e->stack,
                               MS_SB_ACTIVE_ALLOCATED))
                goto out;
            break;
        case MS_SA_FREE_COMPLETED:
            if (set_block(&bl, &bm, e->addr, ms_snap_round_size(e->size), e->size, e->stack,
                          MS_SB_ACTIVE_PENDING_FREE))
                goto out;
            break;
        case MS_SA_SEGMENT_FREE:
        case MS_SA_SEGMENT_UNMAP:
            if (add_seg(&sg, &sm, e->addr, e->size, e->stream, e->action == MS_SA_SEGMENT_UNMAP))
                goto out;
            break;
        case MS_SA_SEGMENT_ALLOC:
        case MS_SA_SEGMENT_MAP:
            if (remove_range(&sg, &sm, e->addr, e->size))
                goto out;
            break;
        default: break;
        }
    }

    /* Live segments sorted, adjacent expandable pieces merged; blocks assigned by a sweep. */
    struct seg *segs = sg.v;
    uint64_t ns = 0;
    for (uint64_t i = 0; i < sg.n; i++)
        if (!segs[i].dead)
            segs[ns++] = segs[i];
    if (ns)
        qsort(segs, (size_t)ns, sizeof *segs, cmp_seg);
    uint64_t k = 0;
    for (uint64_t i = 0; i < ns; i++) {
        if (k && segs[k - 1].expandable && segs[i].expandable &&
            segs[k - 1].addr + segs[k - 1].size == segs[i].addr) {
            segs[k - 1].size += segs[i].size;
            continue;
        }
        segs[k++] = segs[i];
    }
    ns = k;
    struct ms_snap_state_block *blocks = bl.v;
    uint64_t nb = 0;
    for (uint64_t i = 0; i < bl.n; i++)
        if (blocks[i].state != DEAD)
            blocks[nb++] = blocks[i];
    if (nb)
        qsort(blocks, (size_t)nb, sizeof *blocks, cmp_blk);
    st->segs = calloc(ns ? (size_t)ns : 1, sizeof *st->segs);
    st->blocks = calloc(nb ? (size_t)nb : 1, sizeof *st->blocks);
    st->orphans = calloc(nb ? (size_t)nb : 1, sizeof *st->orphans);
    if (!st->segs || !st->blocks || !st->orphans)
        goto out;
    uint64_t bi = 0;
    for (uint64_t i = 0; i < ns; i++) {
        struct ms_snap_state_segment *o = &st->segs[st->nsegs++];
        o->addr = segs[i].addr;
        o->size = segs[i].size;
        o->stream = segs[i].stream;
        while (bi < nb && blocks[bi].addr < o->addr)
            st->orphans[st->norphans++] = blocks[bi++];
        o->first_block = st->nblocks;
        while (bi < nb && blocks[bi].addr < o->addr + o->size)
            st->blocks[st->nblocks++] = blocks[bi++];
        o->nblocks = st->nblocks - o->first_block;
    }
    while (bi < nb)
        st->orphans[st->norphans++] = blocks[bi++];
    rc = 0;
out:
    free(bl.v);
    free(sg.v);
    ms_u64map_release(&bm);
    ms_u64map_release(&sm);
    if (rc)
        ms_snap_state_release(st);
    return rc;
}

static void block_json(FILE *out, uint64_t addr, uint64_t size, uint64_t req, const char *state)
{
    fprintf(out, "{\"address\":%llu,\"size\":%llu,\"requested_size\":%llu,\"state\":\"%s\"}",
            (unsigned long long)addr, (unsigned long long)size, (unsigned long long)req, state);
}

int ms_snap_state_write_json(const struct ms_snapshot *s, const struct ms_snap_state *st, FILE *out)
{
    const struct ms_snap_trace *t = ms__snap_trace(s, st->device);
    uint64_t nev = t ? t->nevents : 0;
    fprintf(out, "{\"device\":%lld,\"event\":%lld,\"events\":%llu,", (long long)st->device,
            (long long)st->event, (unsigned long long)nev);
    if (st->event >= 0) {
        const struct ms_snap_event *e = &t->events[st->event];
        fprintf(out, "\"action\":\"%s\",\"addr\":%llu,\"size\":%llu,",
                ms_snap_action_names[e->action], (unsigned long long)e->addr,
                (unsigned long long)e->size);
        if (e->time_us != MS_SNAP_NO_TIME)
            fprintf(out, "\"time_us\":%lld,", (long long)e->time_us);
    }
    uint64_t reserved = 0, active = 0;
    fputs("\"segments\":[", out);
    for (uint64_t i = 0; i < st->nsegs; i++) {
        const struct ms_snap_state_segment *g = &st->segs[i];
        reserved += g->size;
        fprintf(out, "%s{\"address\":%llu,\"total_size\":%llu,\"stream\":%lld,\"blocks\":[",
                i ? "," : "", (unsigned long long)g->addr, (unsigned long long)g->size,
                (long long)g->stream);
        uint64_t cur = g->addr;
        int first = 1;
        for (uint64_t j = 0; j < g->nblocks; j++) {
            const struct ms_snap_state_block *b = &st->blocks[g->first_block + j];
            if (b->addr > cur) {
                fputs(first ? "" : ",", out);
                block_json(out, cur, b->addr - cur, 0, "inactive");
                first = 0;
            }
            fputs(first ? "" : ",", out);
            block_json(out, b->addr, b->size, b->requested, ms_snap_state_names[b->state]);
            first = 0;
            active += b->size;
            if (b->addr + b->size > cur)
                cur = b->addr + b->size;
        }
        if (cur < g->addr + g->size) {
            fputs(first ? "" : ",", out);
            block_json(out, cur, g->addr + g->size - cur, 0, "inactive");
        }
        fputs("]}", out);
    }
    fputs("],\"orphan_blocks\":[", out);
    for (uint64_t i = 0; i < st->norphans; i++) {
        const struct ms_snap_state_block *b = &st->orphans[i];
        fputs(i ? "," : "", out);
        block_json(out, b->addr, b->size, b->requested, ms_snap_state_names[b->state]);
    }
    fprintf(out, "],\"reserved_bytes\":%llu,\"active_bytes\":%llu}\n", (unsigned long long)reserved,
            (unsigned long long)active);
    return ferror(out) ? MS_EIO : 0;
}
