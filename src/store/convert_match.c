/* convert_match.c: pass 2's matching, above the sinks (convert_sink.h): each event record of a
 * traced thread (conv__on_event) becomes an events row, and allocations and frees are matched
 * per (process, layer) with a hash map of live addresses; a block that closes (freed, replaced
 * at its address, or live at the end) goes to the sink with its layer's statistics updated
 * here. The annotation, CUDA and mmap records have their own files and use the functions
 * here for their blocks and rows. */
#include "convert_internal.h"

#include <math.h>

/* The state of layer id in process p, created on first use; NULL when out of memory. */
struct layer_state *conv__proc_layer(struct conv *c, struct proc *p, int layer)
{
    if ((size_t)layer >= p->nls) {
        size_t n = (size_t)layer + 1 < MS_LAYER_POOL0 ? MS_LAYER_POOL0 : (size_t)layer + 8;
        struct layer_state *ls = realloc(p->ls, n * sizeof *ls);
        if (!ls) {
            conv__oom(c, "layers");
            return NULL;
        }
        for (size_t i = p->nls; i < n; i++) {
            memset(&ls[i], 0, sizeof ls[i]);
            ms_u64map_init(&ls[i].live, sizeof(uint32_t), MAX_LIVE);
        }
        p->ls = ls;
        p->nls = n;
    }
    p->ls[layer].used = 1;
    return &p->ls[layer];
}

static int block_alloc(struct conv *c, uint32_t *slot)
{
    if (c->free_block != UINT32_MAX) {
        *slot = c->free_block;
        c->free_block = c->blocks[*slot].next_free;
        return 0;
    }
    if (ms_grow((void **)&c->blocks, &c->ablocks, c->nblocks, sizeof *c->blocks, 4096, MAX_LIVE) <
        0)
        return conv__oom(c, "live blocks");
    *slot = (uint32_t)c->nblocks++;
    return 0;
}

/* Writes the blocks row of the block in slot and frees the slot. free_event 0: no free event
 * (replaced by an allocation at the same address); have_free 0: still live at the end. */
int conv__block_close(struct conv *c, struct proc *p, int layer, uint32_t slot, int have_free,
                      int64_t free_ns, int64_t free_event)
{
    struct block *b = &c->blocks[slot];
    struct closed_block cb = {*b, p->id, free_ns, free_event, layer, have_free};
    if (c->win && (layer == MS_LAYER_HEAP || layer == MS_LAYER_MMAP)) {
        int wrc = conv__windows_close(c, b->alloc_id, b->size, b->stack_id);
        if (wrc < 0)
            return wrc;
    }
    int rc = c->sink->block(c, p, &cb);
    if (have_free) {
        struct layer_stats *ls = &p->ls[layer].st;
        if (layer == MS_LAYER_HEAP || layer == MS_LAYER_MMAP)
            p->host_live -= b->size;
        ls->live_bytes -= b->size;
        ls->live_blocks--;
        if (c->trend_ok && conv__default_layer(layer))
            conv__compact_live(c, -b->size);
        b->next_free = c->free_block;
        c->free_block = slot;
        c->live_total--;
    }
    return rc;
}

/* Writes an events row; name and flags are the annotation columns (NULL / -1 for none). */
int conv__write_event_full(struct conv *c, const struct stream *s, int kind, int layer,
                           int64_t addr, int have_addr, int64_t size, int have_size,
                           const char *func, int64_t stack, int64_t alloc_id, const char *name,
                           size_t name_len, int flags)
{
    if (!c->next_event)
        c->first_event_ns = s->ts;
    c->last_event_ns = s->ts;
    struct conv_event e = {kind, layer, have_addr, have_size, flags, addr,
                           size, stack, alloc_id,  func,      name,  name_len};
    return c->sink->event(c, s, &e);
}

int conv__write_event(struct conv *c, const struct stream *s, int kind, int layer, int64_t addr,
                      int64_t size, int have_size, const char *func, int64_t stack,
                      int64_t alloc_id)
{
    return conv__write_event_full(c, s, kind, layer, addr, 1, size, have_size, func, stack,
                                  alloc_id, NULL, 0, -1);
}

/* Ends the live block in slot with a FREE event by s. */
int conv__free_block(struct conv *c, const struct stream *s, int layer, uint32_t slot,
                     const char *func)
{
    struct proc *p = &c->procs[s->proc];
    struct block *b = &c->blocks[slot];
    c->row_owner = b->owner_id;
    int rc =
        conv__write_event(c, s, MS_KIND_FREE, layer, b->addr, b->size, 1, func, 0, b->alloc_id);
    if (rc == 0) {
        p->ls[layer].st.frees++;
        rc = conv__block_close(c, p, layer, slot, 1, s->ts, c->next_event);
    }
    return rc;
}

/* func: the allocating function's name (NULL: from the record type). */
int conv__on_alloc(struct conv *c, const struct stream *s, int layer, const char *func)
{
    const struct ms_record *r = &s->r;
    if (!func)
        func = ms_fn_name(r->type, r->fn);
    return conv__alloc_block(c, s, layer, r->addr, r->size, conv__stack_of(c, s), func);
}

uint32_t conv__stack_of(struct conv *c, const struct stream *s)
{
    uint32_t stack = 0;
    if (s->r.stack_id && !ms_u64map_get32(&c->procs[s->proc].stack_ids, s->r.stack_id, &stack))
        stack = 0; /* its STACK record was lost to damage */
    return stack;
}

int conv__alloc_block(struct conv *c, const struct stream *s, int layer, uint64_t addr,
                      uint64_t size, uint32_t stack, const char *func)
{
    struct proc *p = &c->procs[s->proc];
    struct layer_state *lst = conv__proc_layer(c, p, layer);
    if (!lst)
        return MS_ENOMEM;
    int is_new, rc;
    uint32_t *live = ms_u64map_put(&lst->live, addr, &is_new); /* valid: no put or del
                                                                * on the map below */
    if (!live)
        return conv__oom(c, "live blocks");
    if (!is_new) {
        /* The free was not recorded (or happened before recording resumed): close the old
         * block at this moment, without a free event. */
        if ((rc = conv__block_close(c, p, layer, *live, 1, s->ts, 0)) < 0)
            return rc;
    }
    uint32_t slot = 0;
    if ((rc = block_alloc(c, &slot)) < 0)
        return rc;
    *live = slot;
    c->live_total++;
    int64_t alloc_id = ++c->next_alloc;
    /* PyTorch's allocator events name no thread: they take the owner of the process's first
     * thread (the Python main thread, where a training loop runs), as it is at that time */
    int64_t owner = c->threads[(s->pta ? s->owner_thread : s->thread) - 1].owner_id;
    c->row_owner = owner;
    if ((rc = conv__write_event(c, s, MS_KIND_MALLOC, layer, (int64_t)addr, (int64_t)size, 1, func,
                                stack, alloc_id)) < 0)
        return rc;
    struct block *b = &c->blocks[slot];
    b->alloc_id = alloc_id;
    b->addr = (int64_t)addr;
    b->size = (int64_t)size;
    b->alloc_ns = s->ts;
    b->alloc_event_id = c->next_event;
    b->stack_id = stack;
    b->thread_id = s->thread;
    b->func = func;
    b->owner_id = owner;
    b->base_owner_id = b->owner_id;
    b->step = p->steps + 1;
    b->moments = p->moments;
    b->keep = 0;
    struct layer_stats *ls = &lst->st;
    ls->allocs++;
    ls->alloc_bytes += (int64_t)size;
    ls->live_bytes += (int64_t)size;
    ls->live_blocks++;
    if (c->trend_ok && conv__default_layer(layer))
        conv__compact_live(c, (int64_t)size);
    if (ls->live_bytes > ls->peak_bytes) {
        ls->peak_bytes = ls->live_bytes;
        ls->peak_ns = s->ts;
        ls->peak_event = c->next_event;
        ls->peak_alloc = alloc_id;
        lst->peak_from = c->ncand; /* closed before this peak: not live at it */
    }
    if (layer == MS_LAYER_HEAP || layer == MS_LAYER_MMAP) {
        p->host_live += (int64_t)size;
        if (p->host_live > p->host_peak) {
            p->host_peak = p->host_live;
            p->host_peak_ns = s->ts;
            p->host_peak_event = c->next_event;
            p->host_peak_alloc = alloc_id;
            p->host_from = c->ncand;
        }
        if (c->win)
            return conv__windows_alloc(c, alloc_id, (int64_t)size);
    }
    return 0;
}

/* A free of the block at s->r.addr in layer (heap free, pool free, pool release). */
int conv__on_free(struct conv *c, const struct stream *s, int layer, const char *func)
{
    struct proc *p = &c->procs[s->proc];
    struct layer_state *lst = conv__proc_layer(c, p, layer);
    uint32_t slot;
    if (!lst)
        return MS_ENOMEM;
    if (ms_u64map_del(&lst->live, s->r.addr, &slot))
        return conv__free_block(c, s, layer, slot, func);
    lst->st.unmatched++;
    return conv__write_event(c, s, MS_KIND_FREE, layer, (int64_t)s->r.addr, 0, 0, func, 0, 0);
}

/* Ends with a FREE event by func every live mmap block that starts in [addr, addr + len);
 * *nhits: how many. */
int conv__mmap_end_blocks(struct conv *c, const struct stream *s, uint64_t addr, uint64_t len,
                          const char *func, size_t *nhits_out)
{
    struct proc *p = &c->procs[s->proc];
    struct layer_state *lst = conv__proc_layer(c, p, MS_LAYER_MMAP);
    if (!lst)
        return MS_ENOMEM;
    struct ms_u64map *live = &lst->live;
    uint64_t end = addr + len < addr ? UINT64_MAX : addr + len;
    uint64_t *hits = NULL;
    size_t nhits = 0;
    int rc = 0;
    if (live->count && len) {
        hits = malloc(live->count * sizeof *hits);
        if (!hits)
            return conv__oom(c, func);
        uint64_t key;
        uint32_t val;
        if (len / 4096 <= 4 * live->count) {
            /* mmap blocks start on page boundaries: probe each page of the range. */
            for (uint64_t a = addr; a < end && nhits < live->count; a += 4096) {
                if (ms_u64map_get32(live, a, &val))
                    hits[nhits++] = a;
                if (a + 4096 < a)
                    break;
            }
        } else {
            for (size_t pos = 0; ms_u64map_next32(live, &pos, &key, &val);)
                if (key >= addr && key < end)
                    hits[nhits++] = key;
            if (nhits)
                qsort(hits, nhits, sizeof *hits, conv__cmp_u64);
        }
    }
    for (size_t i = 0; i < nhits && rc == 0; i++) {
        uint32_t slot;
        ms_u64map_del(live, hits[i], &slot);
        rc = conv__free_block(c, s, MS_LAYER_MMAP, slot, func);
    }
    free(hits);
    *nhits_out = nhits;
    return rc;
}

/* munmap(addr, len) ends every live mmap block that starts in [addr, addr + len), and the parts
 * of reservations and of their commits in it (convert_mmap.c).
 * NEEDSWORK: outside reservations, an unmap of a block's head ends the whole block, and an
 * unmap of its tail or middle (no block starts in the range) is recorded as an unmatched free
 * while the block stays live with its old size; convert_mmap.c's ranges could track every
 * mapping the same way. */
int conv__on_munmap(struct conv *c, const struct stream *s)
{
    struct proc *p = &c->procs[s->proc];
    uint64_t addr = s->r.addr, len = s->r.size;
    int hit = 0;
    size_t nhits = 0;
    int rc = p->mm ? conv__mmap_munmap(c, s, &hit) : 0;
    if (rc == 0)
        rc = conv__mmap_end_blocks(c, s, addr, len, "munmap", &nhits);
    if (rc == 0 && nhits == 0 && !hit) {
        p->ls[MS_LAYER_MMAP].st.unmatched++;
        rc = conv__write_event(c, s, MS_KIND_FREE, MS_LAYER_MMAP, (int64_t)addr, (int64_t)len, 1,
                               "munmap", 0, 0);
    }
    return rc;
}

/* Sampling mode (docs/production.md, "Sampling"): a recorded heap allocation of S bytes stands
 * for S / (1 - exp(-S/B)) bytes, the inverse of its probability of being sampled: an unbiased
 * estimate of the bytes allocated there. Rounded to whole bytes, at least S. */
static uint64_t sample_weighted(uint64_t size, uint64_t b)
{
    if (!size || !b)
        return size;
    double s = (double)size, p = -expm1(-s / (double)b);
    double w = p > 0 ? s / p : s;
    if (w >= 9.0e18)
        return size;
    uint64_t r = (uint64_t)llround(w);
    return r < size ? size : r;
}

int conv__on_event(struct conv *c, struct stream *s)
{
    if (s->r.type == MS_REC_EXTENSION && (s->r.fn == MS_EXT_EXEC || s->r.fn == MS_EXT_EXEC_FAILED))
        return conv__on_exec(c, s); /* no event: what the process started */
    struct proc *p = &c->procs[s->proc];
    uint64_t b = p->tr.hdr.sample_bytes;
    if (b && s->r.type == MS_REC_HEAP_ALLOC)
        s->r.size = sample_weighted(s->r.size, b);
    else if (b && s->r.type == MS_REC_HEAP_FREE) { /* a free of a block not sampled: dropped */
        struct layer_state *lst = conv__proc_layer(c, p, MS_LAYER_HEAP);
        uint32_t slot;
        if (!lst)
            return MS_ENOMEM;
        if (!ms_u64map_get32(&lst->live, s->r.addr, &slot))
            return 0;
    }
    struct thread *t = &c->threads[s->thread - 1];
    if (!p->have_events) {
        p->first_ns = s->ts;
        p->have_events = 1;
    }
    p->last_ns = s->ts;
    if (!t->events)
        t->first_ns = s->ts;
    t->last_ns = s->ts;
    t->events++;
    c->res->events++;
    switch (s->r.type) {
    case MS_REC_HEAP_ALLOC: return conv__on_alloc(c, s, MS_LAYER_HEAP, NULL);
    case MS_REC_MMAP_ALLOC:
        return p->mm ? conv__mmap_alloc(c, s) : conv__on_alloc(c, s, MS_LAYER_MMAP, NULL);
    case MS_REC_HEAP_FREE: return conv__on_free(c, s, MS_LAYER_HEAP, "free");
    case MS_REC_EXTENSION: {
        if (s->r.fn >= MS_EXT_MMAP_RESERVE && s->r.fn <= MS_EXT_MMAP_DECOMMIT)
            return conv__mmap_record(c, s);
        /* annotations write rows: the symbolization's thread first ends its own */
        int rc = c->sym_running ? conv__sym_join(c) : 0;
        if (rc < 0)
            return rc;
        if (c->kept_running) /* the kept blocks' thread writes rows too */
            pthread_mutex_lock(&c->db_mu);
        rc = s->pta ? conv__on_pta(c, s) : conv__on_annotation(c, s);
        if (c->kept_running)
            pthread_mutex_unlock(&c->db_mu);
        return rc;
    }
    default: return conv__on_munmap(c, s);
    }
}
