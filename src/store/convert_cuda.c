/* convert_cuda.c: the converter's CUDA part (ms_store_convert, convert.c): the CUDA driver
 * records of src/agent/cuda.c as events and blocks of the per-device layers, the OOM rows, and
 * PyTorch's caching-allocator history (<pid>.pta.pickle) merged by time as pseudo records
 * (docs/cuda.md). Workload: as convert.c's pass 2; per event, a hash lookup. */
#include "convert_internal.h"

/* Loads <trace dir>/<pid>.pta.pickle, PyTorch's allocator history that memscope's Python
 * package saved when the process exited. A file that cannot be read is a warning: the rest of
 * the run converts without it. */
void conv__load_pta(struct conv *c, struct proc *p)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%llu.pta.pickle", c->o->trace_dir,
             (unsigned long long)p->tr.hdr.pid);
    if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    struct ms_snapshot *s = calloc(1, sizeof *s);
    if (!s)
        return;
    ms_snapshot_init(s, NULL);
    if (ms_snapshot_load_file(s, path) < 0) {
        if (!c->res->warning[0])
            snprintf(c->res->warning, sizeof c->res->warning,
                     "%.200s: PyTorch's allocator history is unreadable and left out: %.250s", path,
                     s->err);
        ms_snapshot_release(s);
        free(s);
        return;
    }
    p->pta = s;
}

/* The PyTorch allocator's actions that are memory events (docs/cuda.md), as pseudo records:
 * fn = PTA_FN + the action. */
#define PTA_FN 0x1000

/* The blocks and segments of device trace t (of snapshot sn) allocated before the trace began,
 * as import.c finds them: freed in the trace without an alloc there, or live in the final state
 * without one. Fills s->pre; 0 or an error (set). */
int conv__pta_find_pre(struct conv *c, const struct ms_snapshot *sn, const struct ms_snap_trace *t,
                       struct stream *s)
{
    struct ms_u64map live[2];
    size_t cap = 0, scap = 0;
    int rc = 0;
    ms_u64map_init(&live[0], sizeof(uint32_t), MAX_LIVE);
    ms_u64map_init(&live[1], sizeof(uint32_t), MAX_LIVE);
#define PRE(a_, n_, st_, seg_)                                                           \
    do {                                                                                 \
        if (conv__grow((void **)&s->pre, &cap, s->npre, sizeof *s->pre, MAX_LIVE) < 0) { \
            rc = conv__oom(c, "PyTorch allocator");                                      \
            goto out;                                                                    \
        }                                                                                \
        s->pre[s->npre++] = (struct pta_pre){(a_), (n_), (st_), (seg_)};                 \
    } while (0)
    for (uint64_t i = 0; i < t->nevents; i++) {
        const struct ms_snap_event *e = &t->events[i];
        int seg = e->action >= MS_SA_SEGMENT_ALLOC && e->action <= MS_SA_SEGMENT_UNMAP;
        uint32_t v;
        if (e->action == MS_SA_ALLOC || e->action == MS_SA_SEGMENT_ALLOC ||
            e->action == MS_SA_SEGMENT_MAP) {
            if (i >= UINT32_MAX || ms_u64map_set32(&live[seg], e->addr, (uint32_t)i) < 0) {
                rc = conv__oom(c, "PyTorch allocator");
                goto out;
            }
        } else if (e->action == MS_SA_FREE_COMPLETED || e->action == MS_SA_SEGMENT_FREE ||
                   e->action == MS_SA_SEGMENT_UNMAP) {
            if (!ms_u64map_del(&live[seg], e->addr, &v))
                PRE(e->addr, e->size, e->stack, seg);
        }
    }
    for (uint64_t i = 0; i < sn->nsegs; i++) {
        const struct ms_snap_segment *g = &sn->segs[i];
        uint32_t v;
        if (g->device != t->device)
            continue;
        if (!ms_u64map_get32(&live[1], g->addr, &v))
            PRE(g->addr, g->total, g->stack, 1);
        for (uint64_t j = 0; j < g->nblocks; j++) {
            const struct ms_snap_block *b = &sn->blocks[g->first_block + j];
            if (b->state != MS_SB_ACTIVE_ALLOCATED && b->state != MS_SB_ACTIVE_PENDING_FREE)
                continue;
            if (!ms_u64map_get32(&live[0], b->addr, &v)) {
                PRE(b->addr, b->size, b->stack, 0);
            } else { /* allocated in the trace: its rounded size */
                if (conv__grow((void **)&s->sizes, &scap, s->nsizes, sizeof *s->sizes, MAX_LIVE) <
                    0) {
                    rc = conv__oom(c, "PyTorch allocator");
                    goto out;
                }
                s->sizes[s->nsizes++] = (struct pta_size){v, b->size};
            }
        }
    }
    if (s->nsizes) /* by event (the first member) */
        qsort(s->sizes, s->nsizes, sizeof *s->sizes, conv__cmp_u64);
#undef PRE
out:
    ms_u64map_release(&live[0]);
    ms_u64map_release(&live[1]);
    return rc;
}

/* Advances a PyTorch allocator stream to its next memory event; 1, or 0 at its end. */
int conv__pta_fill(struct conv *c, struct stream *s)
{
    struct proc *p = &c->procs[s->proc];
    if (s->pre_next < s->npre) { /* older than the trace: at its first time */
        const struct pta_pre *x = &s->pre[s->pre_next++];
        for (uint64_t i = 0; !s->ts && i < s->pta->nevents; i++)
            if (s->pta->events[i].time_us != MS_SNAP_NO_TIME && s->pta->events[i].time_us > 0 &&
                s->pta->events[i].time_us < INT64_MAX / 1000)
                s->ts = ms_ns_clamp(s->pta->events[i].time_us * 1000);
        if (!s->ts)
            s->ts = conv__epoch_ns(p, p->tr.hdr.start_mono_ns);
        memset(&s->r, 0, sizeof s->r);
        s->r.type = MS_REC_EXTENSION;
        s->r.fn = PTA_FN + (x->seg ? MS_SA_SEGMENT_ALLOC : MS_SA_ALLOC);
        s->r.addr = x->addr;
        s->r.size = x->size;
        s->r.stack_id = x->stack ? PTA_STACK_BASE + x->stack : 0;
        s->func = "pre_trace";
        s->requested = 0;
        return 1;
    }
    s->func = NULL;
    while (s->pta_next < s->pta->nevents) {
        const struct ms_snap_event *e = &s->pta->events[s->pta_next++];
        if (e->time_us != MS_SNAP_NO_TIME && e->time_us > INT64_MIN / 1000 &&
            e->time_us < INT64_MAX / 1000)
            s->ts = ms_ns_clamp(e->time_us * 1000); /* epoch us (PyTorch's approximate clock) */
        else if (!s->ts)
            s->ts = conv__epoch_ns(p, p->tr.hdr.start_mono_ns); /* no time yet: its start */
        switch (e->action) {
        case MS_SA_ALLOC:
        case MS_SA_FREE_COMPLETED:
        case MS_SA_SEGMENT_ALLOC:
        case MS_SA_SEGMENT_MAP:
        case MS_SA_SEGMENT_FREE:
        case MS_SA_SEGMENT_UNMAP:
            memset(&s->r, 0, sizeof s->r);
            s->r.type = MS_REC_EXTENSION;
            s->r.fn = PTA_FN + e->action;
            s->r.addr = e->addr;
            s->r.size = e->size;
            s->r.stack_id = e->stack ? PTA_STACK_BASE + e->stack : 0;
            s->requested = 0;
            if (e->action == MS_SA_ALLOC) {
                /* PyTorch's trace has the size asked for; blocks are the allocator's rounded
                 * size (what torch.cuda.memory_allocated() counts): the final state's for a
                 * block live at the end, else the allocator's rounding to 512 bytes. */
                uint64_t i = s->pta_next - 1;
                while (s->size_next < s->nsizes && s->sizes[s->size_next].event < i)
                    s->size_next++;
                s->requested = e->size;
                if (s->size_next < s->nsizes && s->sizes[s->size_next].event == i)
                    s->r.size = s->sizes[s->size_next].size;
                else
                    s->r.size = ms_snap_round_size(e->size);
            }
            return 1;
        default: break; /* free_requested (the block ends at free_completed), oom, snapshot, ... */
        }
    }
    return 0;
}

/* ---- CUDA driver records (src/agent/cuda.c; docs/cuda.md) ---- */

/* Each CUDA layer kind's name (layers.name is "<name>:<ordinal>") and event type. */
static const char *const cuda_layer_names[MS_CUDA_LAYERS][2] = {
    [MS_CUDA_L_HAL] = {"cuda", "HAL"},
    [MS_CUDA_L_POOL] = {"cuda_pool", "HAL"},
    [MS_CUDA_L_PHYS] = {"cuda_vmm", "HAL"},
    [MS_CUDA_L_VA] = {"cuda_va", "VMM_RESERVE"},
    [MS_CUDA_L_MAP] = {"cuda_map", "VMM_MAP"},
    [MS_CUDA_L_PTA] = {"pta", "PTA"},
    [MS_CUDA_L_PTA_SEG] = {"pta_segment", "PTA_SEGMENT"},
    [7] = {"cuda_other", "HAL"}};

/* The layer of kind k (MS_CUDA_L_*) on recorded device dev (ordinal + 1, 0: unknown). */
/* The layer id of kind k on device dev (the record's: ordinal + 1, 0 unknown), without marking
 * it used (cuda_layer does). */
static int cuda_layer_id(int k, uint64_t dev)
{
    uint64_t d = dev == 0 || dev > MS_CUDA_NODEV ? MS_CUDA_NODEV : dev - 1;
    return MS_LAYER_CUDA0 + (int)(d * MS_CUDA_LAYERS) + k;
}

static int cuda_layer(struct conv *c, int k, uint64_t dev)
{
    uint64_t d = dev == 0 || dev > MS_CUDA_NODEV ? MS_CUDA_NODEV : dev - 1;
    c->cuda_layers[d * MS_CUDA_LAYERS + (uint64_t)k] = 1;
    return cuda_layer_id(k, dev);
}

/* What a CUDA_MEM op does: allocates (1) or frees (0), in which layer kind (-1: pinned host). */
static void cuda_op_class(uint64_t op, int *alloc, int *kind)
{
    *alloc = 1;
    switch (op) {
    case MS_CU_MEM_FREE:
    case MS_CU_IPC_CLOSE: *alloc = 0; /* fallthrough */
    case MS_CU_MEM_ALLOC:
    case MS_CU_MEM_ALLOC_PITCH:
    case MS_CU_MEM_ALLOC_MANAGED:
    case MS_CU_IPC_OPEN: *kind = MS_CUDA_L_HAL; break;
    case MS_CU_MEM_FREE_ASYNC: *alloc = 0; /* fallthrough */
    case MS_CU_MEM_ALLOC_ASYNC:
    case MS_CU_MEM_ALLOC_FROM_POOL_ASYNC: *kind = MS_CUDA_L_POOL; break;
    case MS_CU_MEM_RELEASE: *alloc = 0; /* fallthrough */
    case MS_CU_MEM_CREATE: *kind = MS_CUDA_L_PHYS; break;
    case MS_CU_MEM_ADDRESS_FREE: *alloc = 0; /* fallthrough */
    case MS_CU_MEM_ADDRESS_RESERVE: *kind = MS_CUDA_L_VA; break;
    case MS_CU_MEM_UNMAP: *alloc = 0; /* fallthrough */
    case MS_CU_MEM_MAP: *kind = MS_CUDA_L_MAP; break;
    case MS_CU_MEM_FREE_HOST:
    case MS_CU_MEM_HOST_UNREGISTER: *alloc = 0; /* fallthrough */
    default: *kind = -1; break;                 /* host alloc, alloc host, host register */
    }
}

/* The live block at addr in a layer of kind k of process p: the recorded device's layer first,
 * then the other devices' (a free names no device; the current context's may differ). A free
 * of device memory also looks in the pools' layers (cuMemFree of a stream-ordered block). */
static int cuda_find(struct conv *c, struct proc *p, int k, uint64_t dev, uint64_t addr, int *layer,
                     uint32_t *slot)
{
    if (k < 0) {
        *layer = MS_LAYER_PINNED;
        return (size_t)MS_LAYER_PINNED < p->nls && p->ls[MS_LAYER_PINNED].used &&
               ms_u64map_del(&p->ls[MS_LAYER_PINNED].live, addr, slot);
    }
    int first = cuda_layer(c, k, dev);
    *layer = first;
    for (int kk = 0; kk < 2; kk++) {
        int kind = kk ? (k == MS_CUDA_L_HAL    ? MS_CUDA_L_POOL
                         : k == MS_CUDA_L_POOL ? MS_CUDA_L_HAL
                                               : -1)
                      : k;
        if (kind < 0)
            break;
        for (int d = -1; d <= MS_CUDA_NODEV; d++) {
            int l = d < 0 ? first - k + kind : MS_LAYER_CUDA0 + d * MS_CUDA_LAYERS + kind;
            if (d >= 0 && l == first - k + kind)
                continue;
            if ((size_t)l < p->nls && p->ls[l].used && ms_u64map_del(&p->ls[l].live, addr, slot)) {
                *layer = l;
                return 1;
            }
        }
    }
    return 0;
}

/* Makes b the next events row's Attr additions (a failed append: out of memory). */
static int cuda_attr(struct conv *c, struct ms_buf *b)
{
    if (b->oom || !b->p)
        return conv__oom(c, "event attributes");
    c->attr = b->p;
    c->attr_len = b->len;
    return 0;
}

/* Live bytes of a process's layer (0 when it has none yet; not creating it). */
static int64_t layer_live(const struct proc *p, int layer)
{
    return layer >= 0 && (size_t)layer < p->nls && p->ls[layer].used ? p->ls[layer].st.live_bytes
                                                                     : 0;
}

static int on_cuda_mem(struct conv *c, struct stream *s, struct ms_buf *b)
{
    struct proc *p = &c->procs[s->proc];
    const struct ms_record *r = &s->r;
    uint64_t op = r->flags, dev = r->pcs[1], aux1 = r->pcs[5], aux2 = r->pcs[6], aux3 = r->pcs[7];
    const char *api = ms_cu_op_name(op) ? ms_cu_op_name(op) : "?"; /* op checked by the reader */
    int alloc, kind, rc;
    cuda_op_class(op, &alloc, &kind);
    ms_buf_addf(b, "{\"api\":\"%s\"", api);
    if (alloc) {
        if (kind == MS_CUDA_L_HAL || kind == MS_CUDA_L_POOL || kind == MS_CUDA_L_PHYS)
            ms_buf_addf(b, ",\"alloc_type\":\"%s\"", kind == MS_CUDA_L_PHYS ? "create" : "alloc");
        if (op == MS_CU_MEM_ALLOC_MANAGED)
            ms_buf_addf(b, ",\"managed\":\"true\"");
        if (op == MS_CU_MEM_ALLOC_PITCH)
            ms_buf_addf(b, ",\"pitch\":\"%llu\"", (unsigned long long)aux1);
        if (kind == MS_CUDA_L_POOL)
            ms_buf_addf(b, ",\"stream\":\"0x%llx\",\"pool\":\"0x%llx\"", (unsigned long long)aux1,
                        (unsigned long long)aux2);
        if (kind == MS_CUDA_L_POOL && aux3)
            ms_buf_addf(b, ",\"pool_reserved\":\"%llu\"", (unsigned long long)aux3);
        if (op == MS_CU_IPC_OPEN)
            ms_buf_addf(b, ",\"ipc\":\"true\"");
        if (op == MS_CU_MEM_MAP)
            ms_buf_addf(b, ",\"handle\":\"0x%llx\",\"offset\":\"%llu\"", (unsigned long long)aux1,
                        (unsigned long long)aux2);
        if (kind < 0)
            ms_buf_addf(b, ",\"pinned\":\"true\"");
        if (kind == MS_CUDA_L_HAL || kind == MS_CUDA_L_POOL || kind == MS_CUDA_L_PHYS) {
            /* msMemScope's HAL used: the process's device memory on this device with it */
            int64_t used = (int64_t)r->size + layer_live(p, cuda_layer_id(MS_CUDA_L_HAL, dev)) +
                           layer_live(p, cuda_layer_id(MS_CUDA_L_POOL, dev)) +
                           layer_live(p, cuda_layer_id(MS_CUDA_L_PHYS, dev));
            ms_buf_addf(b, ",\"used\":\"%lld\"", (long long)used);
        }
        ms_buf_add(b, "}", 1);
        if ((rc = cuda_attr(c, b)) < 0)
            return rc;
        rc = conv__on_alloc(c, s, kind < 0 ? MS_LAYER_PINNED : cuda_layer(c, kind, dev), api);
        c->attr = NULL;
        return rc;
    }
    if (op == MS_CU_MEM_FREE_ASYNC)
        ms_buf_addf(b, ",\"stream\":\"0x%llx\"", (unsigned long long)aux1);
    if (aux2) /* the driver refused it: recorded, nothing ends */
        ms_buf_addf(b, ",\"result\":\"%llu\"", (unsigned long long)aux2);
    ms_buf_add(b, "}", 1);
    if ((rc = cuda_attr(c, b)) < 0)
        return rc;
    int layer = kind < 0 ? MS_LAYER_PINNED : cuda_layer(c, kind, dev);
    uint32_t slot;
    if (!aux2 && cuda_find(c, p, kind, dev, r->addr, &layer, &slot)) {
        rc = conv__free_block(c, s, layer, slot, api);
    } else {
        struct layer_state *lst = conv__proc_layer(c, p, layer);
        if (!lst)
            return MS_ENOMEM;
        lst->st.unmatched++;
        rc = conv__write_event(c, s, MS_KIND_FREE, layer, (int64_t)r->addr, (int64_t)r->size,
                               r->size != 0, api, 0, 0);
    }
    c->attr = NULL;
    return rc;
}

/* The name a layer gets in the layers table (pools: their first name; CUDA: write_cuda_layers). */
static void layer_label(const struct conv *c, int layer, char *buf, size_t len)
{
    const char *const(*kinds)[2] = cuda_layer_names;
    if (layer == MS_LAYER_HEAP || layer == MS_LAYER_MMAP) {
        snprintf(buf, len, "%s", layer == MS_LAYER_HEAP ? "heap" : "mmap");
    } else if (layer == MS_LAYER_PINNED) {
        snprintf(buf, len, "cuda_pinned");
    } else if (layer >= MS_LAYER_CUDA0) {
        int d = (layer - MS_LAYER_CUDA0) / MS_CUDA_LAYERS,
            k = (layer - MS_LAYER_CUDA0) % MS_CUDA_LAYERS;
        if (d == MS_CUDA_NODEV)
            snprintf(buf, len, "%s:?", kinds[k][0]);
        else
            snprintf(buf, len, "%s:%d", kinds[k][0], d);
    } else if (layer >= MS_LAYER_POOL0 && (size_t)(layer - MS_LAYER_POOL0) / 2 < c->npools) {
        snprintf(buf, len, "pool:%s%s", c->pools[(layer - MS_LAYER_POOL0) / 2],
                 (layer - MS_LAYER_POOL0) % 2 ? ":reserved" : "");
    } else {
        snprintf(buf, len, "layer%d", layer);
    }
}

struct oom_cand {
    int64_t alloc_id, size;
    uint32_t slot;
    int layer;
};

static int cmp_recent(const void *a, const void *b)
{
    const struct oom_cand *x = a, *y = b;
    return x->alloc_id < y->alloc_id ? 1 : x->alloc_id > y->alloc_id ? -1 : 0;
}

static int cmp_largest(const void *a, const void *b)
{
    const struct oom_cand *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return cmp_recent(a, b);
}

/* After an OOM on device dev (recorded: ordinal + 1) in process p, msMemScope's
 * --analysis=oom rows: up to K blocks live then, newest first (OOM_RECENT_ALLOC), and up to K,
 * largest first (OOM_TOP_ALLOC), from the device's memory layers, PyTorch's allocator blocks on
 * it and the process's pools. The
 * rows are in the trigger's layer (so their Device Id is the device's); the block's layer is
 * their Attr's pool, their allocation_id the block's. */
static int oom_rows(struct conv *c, const struct stream *s, uint64_t dev)
{
    struct proc *p = &c->procs[s->proc];
    size_t k = c->o->oom_k ? c->o->oom_k : 10, n = 0, cap = 0;
    struct oom_cand *v = NULL;
    int rc = 0;
    for (size_t l = MS_LAYER_POOL0; l < p->nls && rc == 0; l++) {
        if (!p->ls[l].used)
            continue;
        if (l >= MS_LAYER_CUDA0) {
            size_t d = (l - MS_LAYER_CUDA0) / MS_CUDA_LAYERS,
                   kind = (l - MS_LAYER_CUDA0) % MS_CUDA_LAYERS;
            size_t want = dev == 0 || dev > MS_CUDA_NODEV ? MS_CUDA_NODEV : dev - 1;
            if (d != want || kind == MS_CUDA_L_VA || kind == MS_CUDA_L_MAP ||
                kind == MS_CUDA_L_PTA_SEG)
                continue; /* address space, and segments the driver layer already has */
        } else if ((l - MS_LAYER_POOL0) % 2) {
            continue; /* a pool's reserved regions: the blocks are in its other layer */
        }
        struct ms_u64map *live = &p->ls[l].live;
        uint64_t key;
        uint32_t slot;
        for (size_t pos = 0; ms_u64map_next32(live, &pos, &key, &slot);) {
            if (n == cap && conv__grow((void **)&v, &cap, n, sizeof *v, MAX_LIVE) < 0) {
                rc = conv__oom(c, "OOM rows");
                break;
            }
            v[n++] =
                (struct oom_cand){c->blocks[slot].alloc_id, c->blocks[slot].size, slot, (int)l};
        }
    }
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        if (n)
            qsort(v, n, sizeof *v, pass ? cmp_largest : cmp_recent);
        for (size_t i = 0; i < n && i < k && rc == 0; i++) {
            const struct block *b = &c->blocks[v[i].slot];
            char label[MS_TRACE_MAX_LABEL + 32], attr[MS_TRACE_MAX_LABEL + 200];
            layer_label(c, v[i].layer, label, sizeof label);
            struct ms_buf js = {0};
            ms_buf_json(&js, label, strlen(label));
            int bad = js.oom;
            snprintf(attr, sizeof attr,
                     "{\"pool\":%s,\"ptr\":\"0x%016llx\",\"size\":\"%lld\",\"timestamp\":\"%lld\"}",
                     js.p ? js.p : "\"\"", (unsigned long long)b->addr, (long long)b->size,
                     (long long)b->alloc_ns);
            free(js.p);
            if (bad) {
                rc = conv__oom(c, "OOM rows");
                break;
            }
            c->attr = attr;
            c->attr_len = strlen(attr);
            rc = conv__write_event_full(c, s, pass ? MS_KIND_OOM_TOP : MS_KIND_OOM_RECENT,
                                        cuda_layer(c, MS_CUDA_L_HAL, dev), b->addr, 1, b->size, 1,
                                        b->func, b->stack_id, b->alloc_id, NULL, 0, -1);
        }
    }
    free(v);
    return rc;
}

int conv__on_cuda(struct conv *c, struct stream *s)
{
    struct proc *p = &c->procs[s->proc];
    const struct ms_record *r = &s->r;
    struct ms_buf b = {0};
    int rc;
    uint32_t stack = 0;
    if (r->stack_id && !ms_u64map_get32(&p->stack_ids, r->stack_id, &stack))
        stack = 0;
    if (r->fn == MS_EXT_CUDA_MEM) {
        rc = on_cuda_mem(c, s, &b);
    } else if (r->fn == MS_EXT_CUDA_USAGE) { /* device process_used device_used device_total */
        const uint64_t *v = r->pcs;
        ms_buf_addf(&b,
                    "{\"process_used\":\"%llu\",\"device_used\":\"%llu\","
                    "\"device_total\":\"%llu\"}",
                    (unsigned long long)v[1], (unsigned long long)v[2], (unsigned long long)v[3]);
        /* beside it, for analyze usage's device_unattributed: what the hooked calls explain */
        if (!c->o->sink && v[0] && v[0] <= MS_CUDA_NODEV) {
            if (ms_grow((void **)&c->devusage, &c->adevusage, c->ndevusage, sizeof *c->devusage, 16,
                        1u << 24) < 0)
                return conv__oom(c, "device usage");
            c->devusage[c->ndevusage++] =
                (struct dev_usage){p->id,
                                   s->ts,
                                   v[0] - 1,
                                   v[1],
                                   v[2],
                                   v[3],
                                   layer_live(p, cuda_layer_id(MS_CUDA_L_HAL, v[0])) +
                                       layer_live(p, cuda_layer_id(MS_CUDA_L_POOL, v[0])) +
                                       layer_live(p, cuda_layer_id(MS_CUDA_L_PHYS, v[0]))};
        }
        if ((rc = cuda_attr(c, &b)) == 0)
            rc = conv__write_event_full(c, s, MS_KIND_DEVICE_USAGE,
                                        cuda_layer(c, MS_CUDA_L_HAL, v[0]), 0, 0, (int64_t)v[1], 1,
                                        "nvml", 0, 0, NULL, 0, -1);
    } else if (r->fn == MS_EXT_CUDA_OOM) {
        const uint64_t *v = r->pcs;
        ms_buf_addf(&b, "{\"func\":\"%s\",\"req_size\":\"%llu\"", ms_cu_op_name(r->flags),
                    (unsigned long long)r->size);
        if (v[5])
            ms_buf_addf(&b, ",\"device_free\":\"%llu\",\"device_total\":\"%llu\"",
                        (unsigned long long)v[4], (unsigned long long)v[5]);
        ms_buf_add(&b, "}", 1);
        if ((rc = cuda_attr(c, &b)) == 0)
            rc = conv__write_event_full(c, s, MS_KIND_OOM, cuda_layer(c, MS_CUDA_L_HAL, v[1]), 0, 0,
                                        (int64_t)r->size, 1, ms_cu_op_name(r->flags), stack, 0,
                                        NULL, 0, -1);
        if (rc == 0)
            rc = oom_rows(c, s, v[1]);
        p->moments++; /* what is live now keeps its row in the compact database */
    } else {
        const uint64_t *v = r->pcs; /* op device func stream gx gy gz bx by bz shmem stack */
        uint32_t k = 0;
        char hex[32];
        const char *name = hex;
        if (ms_u64map_get32(&p->kernels, v[2], &k) && k && *c->kernels[k - 1])
            name = c->kernels[k - 1];
        else
            snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)v[2]);
        ms_buf_addf(
            &b,
            "{\"streamId\":\"0x%llx\",\"grid\":\"%llux%llux%llu\",\"block\":\"%llux%llux%llu\","
            "\"shmem\":\"%llu\"}",
            (unsigned long long)v[3], (unsigned long long)v[4], (unsigned long long)v[5],
            (unsigned long long)v[6], (unsigned long long)v[7], (unsigned long long)v[8],
            (unsigned long long)v[9], (unsigned long long)v[10]);
        if ((rc = cuda_attr(c, &b)) == 0)
            rc = conv__write_event_full(c, s, MS_KIND_KERNEL_LAUNCH,
                                        cuda_layer(c, MS_CUDA_L_HAL, v[1]), 0, 0, 0, 0,
                                        ms_cu_op_name(r->flags), stack, 0, name, strlen(name), -1);
    }
    c->attr = NULL;
    free(b.p);
    return rc;
}

/* A PyTorch allocator event: blocks in pta:N, segments in pta_segment:N (a pool of the pools
 * table, so that `analyze fragmentation` reads the caching allocator). */
int conv__on_pta(struct conv *c, struct stream *s)
{
    uint64_t dev = (uint64_t)s->pta->device + 1;
    int action = s->r.fn - PTA_FN;
    const char *func = s->func ? s->func : ms_snap_action_names[action];
    char attr[128];
    int rc;
    struct proc *p = &c->procs[s->proc];
    switch (action) {
    case MS_SA_ALLOC: {
        /* msMemScope's pool Attr: used (the pool's allocated bytes with this block) and total
         * (its reserved bytes) */
        int n = snprintf(
            attr, sizeof attr, "{\"used\":\"%lld\",\"total\":\"%lld\"",
            (long long)((int64_t)s->r.size + layer_live(p, cuda_layer_id(MS_CUDA_L_PTA, dev))),
            (long long)layer_live(p, cuda_layer_id(MS_CUDA_L_PTA_SEG, dev)));
        if (s->requested)
            snprintf(attr + n, sizeof attr - (size_t)n, ",\"requested\":\"%llu\"}",
                     (unsigned long long)s->requested);
        else
            snprintf(attr + n, sizeof attr - (size_t)n, "}");
        c->attr = attr;
        c->attr_len = strlen(attr);
        rc = conv__on_alloc(c, s, cuda_layer(c, MS_CUDA_L_PTA, dev), func);
        c->attr = NULL;
        return rc;
    }
    case MS_SA_FREE_COMPLETED: return conv__on_free(c, s, cuda_layer(c, MS_CUDA_L_PTA, dev), func);
    case MS_SA_SEGMENT_ALLOC:
    case MS_SA_SEGMENT_MAP:
        return conv__on_alloc(c, s, cuda_layer(c, MS_CUDA_L_PTA_SEG, dev), func);
    default: return conv__on_free(c, s, cuda_layer(c, MS_CUDA_L_PTA_SEG, dev), func);
    }
}

/* The layers rows of the CUDA layers some event used (docs/cuda.md). */
int conv__write_cuda_layers(struct conv *c)
{
    const char *const(*kinds)[2] = cuda_layer_names;
    sqlite3_stmt *ly;
    int rc = conv__prepare(c, &ly, "INSERT INTO layers VALUES (?,?,?,?)");
    int pinned = 0;
    for (size_t i = 0; i < c->nprocs && !pinned; i++)
        pinned = (size_t)MS_LAYER_PINNED < c->procs[i].nls && c->procs[i].ls[MS_LAYER_PINNED].used;
    if (rc == 0 && pinned) {
        sqlite3_bind_int(ly, 1, MS_LAYER_PINNED);
        sqlite3_bind_text(ly, 2, "cuda_pinned", -1, SQLITE_STATIC);
        sqlite3_bind_text(ly, 3, "HOST_PINNED", -1, SQLITE_STATIC);
        sqlite3_bind_text(ly, 4, "cpu", -1, SQLITE_STATIC);
        rc = conv__step_reset(c, ly, "insert layer");
    }
    for (size_t i = 0; i < sizeof c->cuda_layers && rc == 0; i++) {
        size_t d = i / MS_CUDA_LAYERS, k = i % MS_CUDA_LAYERS;
        if (!c->cuda_layers[i])
            continue;
        char name[48], dev[16];
        snprintf(dev, sizeof dev, "%zu", d);
        snprintf(name, sizeof name, "%s:%s", kinds[k][0], d == MS_CUDA_NODEV ? "?" : dev);
        sqlite3_bind_int64(ly, 1, MS_LAYER_CUDA0 + (int64_t)i);
        sqlite3_bind_text(ly, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(ly, 3, kinds[k][1], -1, SQLITE_STATIC);
        if (d == MS_CUDA_NODEV)
            sqlite3_bind_null(ly, 4);
        else
            sqlite3_bind_text(ly, 4, dev, -1, SQLITE_STATIC);
        rc = conv__step_reset(c, ly, "insert layer");
    }
    sqlite3_finalize(ly);
    /* PyTorch's allocator of each device is a pool: its blocks carved from its segments */
    sqlite3_stmt *pl = NULL;
    if (rc == 0)
        rc = conv__prepare(c, &pl, "INSERT INTO pools VALUES (?,?,?,?)");
    for (size_t d = 0, id = c->npools; d <= MS_CUDA_NODEV && rc == 0; d++) {
        size_t base = d * MS_CUDA_LAYERS;
        if (!c->cuda_layers[base + MS_CUDA_L_PTA] && !c->cuda_layers[base + MS_CUDA_L_PTA_SEG])
            continue;
        char name[32];
        snprintf(name, sizeof name, d == MS_CUDA_NODEV ? "PTA:?" : "PTA:%zu", d);
        sqlite3_bind_int64(pl, 1, (int64_t)++id);
        sqlite3_bind_text(pl, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(pl, 3, MS_LAYER_CUDA0 + (int64_t)(base + MS_CUDA_L_PTA));
        sqlite3_bind_int64(pl, 4, MS_LAYER_CUDA0 + (int64_t)(base + MS_CUDA_L_PTA_SEG));
        rc = conv__step_reset(c, pl, "insert pool");
    }
    sqlite3_finalize(pl);
    return rc;
}

int conv__devusage_write(struct conv *c)
{
    if (!c->ndevusage || !c->sink->file)
        return 0;
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st,
                           "INSERT INTO usage_devices (process_id, ts_ns, device, process_used, "
                           "device_used, device_total, hooked_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)");
    for (size_t i = 0; i < c->ndevusage && rc == 0; i++) {
        const struct dev_usage *d = &c->devusage[i];
        const uint64_t v[4] = {d->device, d->process_used, d->device_used, d->device_total};
        sqlite3_bind_int64(st, 1, d->process_id);
        sqlite3_bind_int64(st, 2, d->ts_ns);
        for (int k = 0; k < 4; k++)
            sqlite3_bind_int64(st, 3 + k, v[k] > INT64_MAX ? INT64_MAX : (int64_t)v[k]);
        sqlite3_bind_int64(st, 7, d->hooked);
        rc = conv__step_reset(c, st, "usage_devices");
    }
    sqlite3_finalize(st);
    return rc;
}
