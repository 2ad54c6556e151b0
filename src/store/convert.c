/* convert.c: the traces of a run -> the SQLite database of docs/database.md (ms_store_convert).
 *
 * Called by `memscope run` after the traced program exits and by `memscope import`. Workload:
 * one to a few hundred trace files, millions to hundreds of millions of events; must stream.
 *
 * Design:
 *   - Pass 1 reads every chunk of every file for the records that describe rather than happen:
 *     STACK, MODULE, PROCESS. Stacks get database-unique ids (trace ids are per file) and are
 *     symbolized per process, each distinct pc once.
 *   - Pass 2 merges the per-thread streams of all files by wall-clock time with a binary heap
 *     (ties: file, then thread serial, then the thread's own order), numbers the events in that
 *     order and matches blocks per (process, layer) with a hash map of live addresses.
 *     Memory is proportional to live blocks + stacks + threads, never to the event count.
 *   - Where the rows go is the sink's (convert_sink.h): one implementation per output, the
 *     full database (sink_full.c), the compact one (sink_compact.c) and a replay's callback
 *     (sink_replay.c), chosen here once; the passes and their parts know none of them.
 *     A database is written in one transaction with prepared statements into db_path + ".tmp"
 *     (convert_rows.c), the events and blocks rows 64 to a statement (batch.c), blocks rows in
 *     about allocation order (convert_blocks.c), indexes created before loading, and the file
 *     is renamed over db_path on success only.
 *   - The parts, above the sink and below this driver: matching the allocations and frees
 *     (convert_match.c), symbolization (convert_symbols.c), the annotation records (steps,
 *     owners, marks and their tags, ranges, accesses, pools: convert_annotations.c), the CUDA
 *     driver records and PyTorch's allocator history (convert_cuda.c), reservations
 *     (convert_mmap.c), the computed tables and the compact database's kept blocks
 *     (convert_compact.c), the usage samples and copy-on-write (convert_usage.c,
 *     convert_cow.c), the threads, processes and meta rows (convert_meta.c). The row code they
 *     share is convert_rows.c's, below them all; the state is in convert_internal.h.
 * Caps (MAX_*) bound what a hostile or corrupt trace can make us allocate. */
#include "convert_internal.h"

/* ---- Finding the trace files --------------------------------------------------------------- */

/* Parses "<pid>.<n>.mst"; returns 0 when the name does not have that form. */
static int parse_name(const char *name, unsigned long long *pid, unsigned long long *n)
{
    char *end;
    errno = 0;
    *pid = strtoull(name, &end, 10);
    if (end == name || *end != '.' || errno)
        return 0;
    const char *s = end + 1;
    *n = strtoull(s, &end, 10);
    return end != s && !errno && !strcmp(end, ".mst");
}

static int cmp_proc(const void *a, const void *b)
{
    const struct proc *x = a, *y = b;
    unsigned long long px, nx, py, ny;
    int okx = parse_name(x->name, &px, &nx), oky = parse_name(y->name, &py, &ny);
    if (okx != oky)
        return okx ? -1 : 1;
    if (okx && (px != py || nx != ny))
        return px != py ? (px < py ? -1 : 1) : (nx < ny ? -1 : 1);
    return strcmp(x->name, y->name);
}

static int list_traces(struct conv *c)
{
    const char *dir = c->o->trace_dir;
    DIR *d = opendir(dir);
    if (!d)
        return conv__fail(c, -errno, "cannot open trace directory %s: %s", dir, strerror(errno));
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".mst") != 0)
            continue;
        struct stat st;
        char full[PATH_MAX];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, e->d_name) < sizeof full &&
            lstat(full, &st) == 0 && !S_ISREG(st.st_mode)) {
            if (!c->res->warning[0]) /* a FIFO, a device, a link: never opened */
                snprintf(c->res->warning, sizeof c->res->warning,
                         "%.400s: not a regular file; skipped", e->d_name);
            continue;
        }
        if (c->nprocs >= MAX_FILES) {
            rc = conv__fail(c, MS_ELIMIT, "more than %u trace files in %s", MAX_FILES, dir);
            break;
        }
        if (ms_grow((void **)&c->procs, &cap, c->nprocs, sizeof *c->procs, 16, MAX_FILES) < 0) {
            rc = conv__oom(c, "trace list");
            break;
        }
        struct proc *p = &c->procs[c->nprocs];
        memset(p, 0, sizeof *p);
        size_t dl = strlen(dir);
        p->path = malloc(dl + len + 2);
        if (!p->path) {
            rc = conv__oom(c, "trace list");
            break;
        }
        memcpy(p->path, dir, dl);
        p->path[dl] = '/';
        memcpy(p->path + dl + 1, e->d_name, len + 1);
        p->name = p->path + dl + 1;
        c->nprocs++;
    }
    closedir(d);
    if (rc < 0)
        return rc;
    if (!c->nprocs)
        return conv__fail(c, MS_ENOTFOUND, "no trace files (*.mst) in %s", dir);
    qsort(c->procs, c->nprocs, sizeof *c->procs, cmp_proc);
    return 0;
}

/* Reads the version field of a trace the reader refused as newer, for the message. */
static unsigned trace_version(const char *path)
{
    uint32_t v = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (pread(fd, &v, 4, 8) != 4)
            v = 0;
        close(fd);
    }
    return v;
}

static int open_traces(struct conv *c)
{
    size_t kept = 0;
    for (size_t i = 0; i < c->nprocs; i++) {
        struct proc *p = &c->procs[i];
        int rc = ms_trace_open(&p->tr, p->path);
        if (rc == MS_ETRUNC) {
            /* A process killed while creating its trace: nothing to convert, not an error. */
            if (!c->res->warning[0])
                snprintf(c->res->warning, sizeof c->res->warning,
                         "%s: shorter than a trace header; skipped", p->name);
            free(p->path);
            continue;
        }
        if (rc == MS_EFORMAT)
            return conv__fail(c, rc, "%s: not a memscope trace", p->path);
        if (rc == MS_EVERSION)
            return conv__fail(c, rc,
                              "%s: written by trace format version %u; this memscope reads "
                              "version %u or older",
                              p->path, trace_version(p->path), MS_TRACE_MAX_VERSION);
        if (rc < 0)
            return conv__fail(c, rc, "cannot read %s: %s", p->path, ms_strerror(rc));
        c->procs[kept++] = *p;
    }
    c->nprocs = kept;
    if (!kept)
        return conv__fail(c, MS_ENOTFOUND, "no readable trace in %s", c->o->trace_dir);
    for (size_t i = 0; i < c->nprocs; i++) {
        struct proc *p = &c->procs[i];
        p->id = (int64_t)i + 1;
        ms_u64map_init(&p->stack_ids, sizeof(uint32_t), MAX_STACKS);
        ms_u64map_init(&p->pyframe_ids, sizeof(uint32_t), MAX_STACKS);
        ms_u64map_init(&p->pystack_ids, sizeof(uint32_t), MAX_STACKS);
        ms_u64map_init(&p->kernels, sizeof(uint32_t), MAX_STACKS);
    }
    for (size_t i = 0; i < c->nprocs; i++)
        if (i + 1 == c->nprocs || c->procs[i + 1].tr.hdr.pid != c->procs[i].tr.hdr.pid)
            conv__load_pta(c, &c->procs[i]); /* the pid's last image: the one that exited */
    return 0;
}

/* Every process has heap and mmap statistics, even when empty. */
static int init_layers(struct conv *c)
{
    for (size_t i = 0; i < c->nprocs; i++)
        if (!conv__proc_layer(c, &c->procs[i], MS_LAYER_HEAP) ||
            !conv__proc_layer(c, &c->procs[i], MS_LAYER_MMAP))
            return MS_ENOMEM;
    return 0;
}

/* ---- Pass 1: stacks, modules, process info -------------------------------------------------- */

static int add_stack(struct conv *c, struct proc *p, const struct ms_record *r)
{
    uint32_t have;
    if (ms_u64map_get32(&p->stack_ids, r->stack_id, &have))
        return 0; /* first definition wins */
    if (c->stack_pcs + r->depth > MAX_STACK_PCS ||
        ms_grow((void **)&c->stacks, &c->astacks, c->nstacks, sizeof *c->stacks, 1024, MAX_STACKS) <
            0)
        return conv__oom(c, "stacks");
    struct stack_def *s = &c->stacks[c->nstacks];
    s->depth = r->depth;
    s->trace_id = r->stack_id;
    s->epoch = p->mod_epoch;
    s->pcs = NULL;
    if (r->depth) {
        s->pcs = malloc(r->depth * sizeof *s->pcs);
        if (!s->pcs)
            return conv__oom(c, "stacks");
        memcpy(s->pcs, r->pcs, r->depth * sizeof *s->pcs);
    }
    c->stack_pcs += r->depth;
    c->nstacks++;
    if (ms_u64map_set32(&p->stack_ids, r->stack_id, (uint32_t)c->nstacks) < 0)
        return conv__oom(c, "stack ids");
    return 0;
}

static int add_pyframe(struct conv *c, struct proc *p, const struct ms_record *r)
{
    uint32_t have;
    if (ms_u64map_get32(&p->pyframe_ids, r->addr, &have))
        return 0;
    if (conv__grow((void **)&c->pyframes, &c->apyframes, c->npyframes, sizeof *c->pyframes,
                   MAX_STACKS) < 0)
        return conv__oom(c, "Python frames");
    const char *nul = memchr(r->str1, 0, r->len1);
    size_t fl = nul ? (size_t)(nul - r->str1) : r->len1;
    size_t nl = nul ? r->len1 - fl - 1 : 0;
    struct pyframe *f = &c->pyframes[c->npyframes];
    f->file = strndup(r->str1, fl);
    f->func = strndup(nul ? nul + 1 : "", nl);
    f->firstline = (int64_t)r->size;
    if (!f->file || !f->func) {
        free(f->file);
        free(f->func);
        return conv__oom(c, "Python frames");
    }
    c->npyframes++;
    if (ms_u64map_set32(&p->pyframe_ids, r->addr, (uint32_t)c->npyframes) < 0)
        return conv__oom(c, "Python frames");
    return 0;
}

static int add_pystack(struct conv *c, struct proc *p, const struct ms_record *r)
{
    uint32_t have;
    if (ms_u64map_get32(&p->pystack_ids, r->stack_id, &have))
        return 0;
    if (conv__grow((void **)&c->pystacks, &c->apystacks, c->npystacks, sizeof *c->pystacks,
                   MAX_STACKS) < 0)
        return conv__oom(c, "Python stacks");
    struct pystack *ps = &c->pystacks[c->npystacks];
    ps->depth = r->depth;
    ps->pairs = malloc((2 * (size_t)r->depth + 1) * sizeof *ps->pairs);
    if (!ps->pairs)
        return conv__oom(c, "Python stacks");
    for (size_t i = 0; i < 2 * (size_t)r->depth; i++)
        ps->pairs[i] = (uint32_t)r->pcs[i];
    c->npystacks++;
    if (ms_u64map_set32(&p->pystack_ids, r->stack_id, (uint32_t)c->npystacks) < 0)
        return conv__oom(c, "Python stacks");
    return 0;
}

static int add_module(struct conv *c, struct proc *p, const struct ms_record *r)
{
    for (size_t i = 0; i < p->nmods; i++) /* the agent may report an object again */
        if (p->mods[i].lo == r->lo && p->mods[i].hi == r->hi && p->mods[i].bias == r->bias &&
            p->mods[i].epoch_to == UINT32_MAX && strlen(p->mods[i].path) == r->len1 &&
            !memcmp(p->mods[i].path, r->str1, r->len1))
            return 0;
    int overlaps = 0; /* another library where a closed one was: a new epoch */
    for (size_t i = 0; i < p->nmods; i++)
        if (p->mods[i].epoch_to == UINT32_MAX && r->lo < p->mods[i].hi && p->mods[i].lo < r->hi)
            overlaps = 1;
    if (overlaps) {
        p->mod_epoch++;
        for (size_t i = 0; i < p->nmods; i++)
            if (p->mods[i].epoch_to == UINT32_MAX && r->lo < p->mods[i].hi && p->mods[i].lo < r->hi)
                p->mods[i].epoch_to = p->mod_epoch;
    }
    if (ms_grow((void **)&p->mods, &p->amods, p->nmods, sizeof *p->mods, 32, MAX_MODULES) < 0)
        return conv__oom(c, "modules");
    struct module *m = &p->mods[p->nmods];
    m->path = strndup(r->str1, r->len1);
    if (!m->path)
        return conv__oom(c, "modules");
    m->bias = r->bias;
    m->lo = r->lo;
    m->hi = r->hi;
    m->epoch_from = p->mod_epoch;
    m->epoch_to = UINT32_MAX;
    p->nmods++;
    return 0;
}

static int add_process(struct conv *c, struct proc *p, const struct ms_record *r)
{
    if (p->have_process)
        return 0;
    p->exe = strndup(r->str1, r->len1);
    p->cmdline = malloc(r->len2 + 1);
    if (!p->exe || !p->cmdline)
        return conv__oom(c, "process record");
    memcpy(p->cmdline, r->str2, r->len2);
    p->cmdline[r->len2] = 0;
    p->cmdlen = r->len2;
    p->ppid = r->ppid;
    p->have_process = 1;
    return 0;
}

/* A CUDA_FUNC record: the name of a kernel handle (a later one for the same handle wins). */
static int add_kernel(struct conv *c, struct proc *p, const struct ms_record *r)
{
    if (c->nkernels >= MAX_STACKS)
        return conv__fail(c, MS_ELIMIT, "more than %u kernel names", MAX_STACKS);
    if (conv__grow((void **)&c->kernels, &c->akernels, c->nkernels, sizeof *c->kernels,
                   MAX_STACKS) < 0)
        return conv__oom(c, "kernel names");
    char *name = malloc(r->len1 + 1);
    if (!name)
        return conv__oom(c, "kernel names");
    memcpy(name, r->str1, r->len1);
    name[r->len1] = 0;
    c->kernels[c->nkernels++] = name;
    if (ms_u64map_set32(&p->kernels, r->addr, (uint32_t)c->nkernels) < 0)
        return conv__oom(c, "kernel names");
    return 0;
}

/* A record pass 2 reads as an event (stream_fill). */
static int event_record(const struct ms_record *r)
{
    switch (r->type) {
    case MS_REC_HEAP_ALLOC:
    case MS_REC_HEAP_FREE:
    case MS_REC_MMAP_ALLOC:
    case MS_REC_MUNMAP: return 1;
    case MS_REC_EXTENSION:
        return (r->fn >= MS_EXT_STEP && r->fn <= MS_EXT_POOL_RELEASE) || r->fn == MS_EXT_PYCALL ||
               r->fn == MS_EXT_PYRETURN || r->fn == MS_EXT_CUDA_MEM || r->fn == MS_EXT_CUDA_OOM ||
               r->fn == MS_EXT_CUDA_LAUNCH || r->fn == MS_EXT_CUDA_USAGE ||
               (r->fn >= MS_EXT_MMAP_RESERVE && r->fn <= MS_EXT_MMAP_DECOMMIT) ||
               r->fn == MS_EXT_EXEC || r->fn == MS_EXT_EXEC_FAILED;
    default: return 0;
    }
}

static int pass1(struct conv *c)
{
    c->trend_ok = c->sink->file;
    for (size_t i = 0; i < c->nprocs; i++) /* meta.start_time_ns */
        if (i == 0 ||
            conv__epoch_ns(&c->procs[i], c->procs[i].tr.hdr.start_mono_ns) < c->run_start_ns)
            c->run_start_ns = conv__epoch_ns(&c->procs[i], c->procs[i].tr.hdr.start_mono_ns);
    struct ms_trace_cursor *cur = calloc(1, sizeof *cur);
    if (!cur)
        return conv__oom(c, "cursor");
    int rc = 0;
    for (size_t i = 0; i < c->nprocs && rc == 0; i++) {
        struct proc *p = &c->procs[i];
        p->stack_first = (uint32_t)c->nstacks;
        for (size_t k = 0; k < p->tr.nchunks && rc == 0; k++) {
            struct ms_record r;
            if (p->tr.chunks[k].packed) {
                c->trend_ok = 0; /* its events' times are not read here */
                continue;        /* events only: a packed trace keeps descriptions in raw chunks */
            }
            ms_trace_cursor_init(cur, &p->tr, k);
            /* Damage is counted in pass 2, by the streams; here it just ends the chunk. */
            for (;;) {
                struct ms_heap_record h; /* most records: passed over on the fast path */
                int64_t last = -1;
                uint64_t last_raw = 0;
                int any = 0;
                while (ms_trace_cursor_next_heap(cur, &h))
                    last_raw = h.ns, any = 1;
                if (any)
                    last = conv__epoch_ns(p, last_raw);
                if (last > c->t1_guess)
                    c->t1_guess = last; /* the time of the last event, probably */
                if (rc != 0 || ms_trace_cursor_next(cur, &r) != 1)
                    break;
                if (event_record(&r)) {
                    int64_t ts = conv__epoch_ns(p, r.ns);
                    if (ts > c->t1_guess)
                        c->t1_guess = ts;
                } else if (r.type == MS_REC_STACK)
                    rc = add_stack(c, p, &r);
                else if (r.type == MS_REC_MODULE)
                    rc = add_module(c, p, &r);
                else if (r.type == MS_REC_PROCESS)
                    rc = add_process(c, p, &r);
                else if (r.type == MS_REC_EXTENSION && r.fn == MS_EXT_PYFRAME)
                    rc = add_pyframe(c, p, &r);
                else if (r.type == MS_REC_EXTENSION && r.fn == MS_EXT_PYSTACK)
                    rc = add_pystack(c, p, &r);
                else if (r.type == MS_REC_EXTENSION && r.fn == MS_EXT_CUDA_FUNC)
                    rc = add_kernel(c, p, &r);
            }
            ms_trace_drop_chunk(&p->tr, k); /* pass 2 reads it again, from the page cache */
        }
        if (p->pta)
            c->trend_ok = 0; /* its events come from the pickle */
        for (uint32_t k = 1; rc == 0 && p->pta && k < p->pta->nstacks; k++) {
            struct ms_record r = {.stack_id = PTA_STACK_BASE + k}; /* depth 0: Python only */
            rc = add_stack(c, p, &r);
        }
        p->stack_end = (uint32_t)c->nstacks;
    }
    ms_trace_cursor_release(cur);
    free(cur);
    return rc;
}

/* ---- Pass 2: the merged event stream -------------------------------------------------------- */

static int stream_less(const struct stream *a, const struct stream *b)
{
    if (a->ts != b->ts)
        return a->ts < b->ts;
    if (a->proc != b->proc)
        return a->proc < b->proc;
    return a->serial < b->serial;
}

static void heap_down(struct stream **h, size_t n, size_t i)
{
    struct stream *x = h[i];
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        struct stream *best = x;
        if (l < n && stream_less(h[l], best))
            m = l, best = h[l];
        if (l + 1 < n && stream_less(h[l + 1], best))
            m = l + 1, best = h[l + 1];
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = x;
}

/* Advances s to its next event record; returns 1, or 0 at the end of the thread. */
static int stream_fill(struct conv *c, struct stream *s)
{
    struct proc *p = &c->procs[s->proc];
    if (s->pta)
        return conv__pta_fill(c, s);
    int got;
    while ((got = ms_trace_stream_next(&s->s, &s->r)) == 1) {
        switch (s->r.type) {
        case MS_REC_HEAP_ALLOC:
        case MS_REC_HEAP_FREE:
        case MS_REC_MMAP_ALLOC:
        case MS_REC_MUNMAP: s->ts = conv__epoch_ns(p, s->r.ns); return 1;
        case MS_REC_EXTENSION:
            if (!event_record(&s->r))
                break; /* pass 1's records, or a later version's: skipped */
            s->ts = conv__epoch_ns(p, s->r.ns);
            return 1;
        case MS_REC_LOST: p->lost += s->r.size; break;
        default: break; /* descriptions (pass 1) */
        }
    }
    if (got < 0 && c->fill_rc == 0) /* not damage: events would be missing without a word */
        c->fill_rc = conv__oom(c, "decoding a packed trace");
    return 0;
}

static int pass2(struct conv *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->nprocs; i++) {
        struct ms_trace *t = &c->procs[i].tr;
        for (size_t k = 0; k < t->nchunks; n++) {
            if (n >= MAX_THREADS)
                return conv__fail(c, MS_ELIMIT, "more than %u threads in the traces", MAX_THREADS);
            size_t e = k + 1;
            while (e < t->nchunks && t->chunks[e].thread_serial == t->chunks[k].thread_serial)
                e++;
            k = e;
        }
        n += c->procs[i].pta ? c->procs[i].pta->ntraces : 0;
    }
    c->threads = calloc(n + 1, sizeof *c->threads);
    struct stream *streams = calloc(n + 1, sizeof *streams);
    struct stream **heap = calloc(n + 1, sizeof *heap);
    int rc = 0;
    if (!c->threads || !streams || !heap)
        rc = conv__oom(c, "threads");
    size_t nheap = 0;
    for (size_t i = 0, ti = 0; i < c->nprocs && rc == 0; i++) {
        struct ms_trace *t = &c->procs[i].tr;
        size_t proc_first = ti; /* this process's first traced thread */
        for (size_t k = 0; k < t->nchunks; ti++) {
            struct stream *s = &streams[ti];
            struct thread *th = &c->threads[ti];
            th->proc = (uint32_t)i;
            th->serial = t->chunks[k].thread_serial;
            th->tid = t->chunks[k].tid;
            s->proc = (uint32_t)i;
            s->serial = th->serial;
            s->thread = (uint32_t)ti + 1;
            k = ms_trace_stream_init(&s->s, t, k);
            if (stream_fill(c, s))
                heap[nheap++] = s;
        }
        /* the PyTorch allocator: a thread per device (tid 0: events of no thread) */
        const struct ms_snapshot *pta = c->procs[i].pta;
        uint32_t first_thread = ti > proc_first ? (uint32_t)proc_first + 1 : 0;
        for (uint64_t d = 0; pta && d < pta->ntraces; d++, ti++) {
            struct stream *s = &streams[ti];
            struct thread *th = &c->threads[ti];
            th->proc = (uint32_t)i;
            th->serial = UINT32_MAX - (uint32_t)d;
            th->tid = 0;
            s->proc = (uint32_t)i;
            s->serial = th->serial;
            s->thread = (uint32_t)ti + 1;
            s->pta = &pta->traces[d];
            s->owner_thread = first_thread ? first_thread : s->thread;
            if ((rc = conv__pta_find_pre(c, pta, s->pta, s)) < 0)
                break;
            if (stream_fill(c, s))
                heap[nheap++] = s;
        }
    }
    c->nthreads = n;
    for (size_t i = nheap / 2; i-- > 0;)
        heap_down(heap, nheap, i);
    if (rc == 0)
        rc = c->fill_rc;
    for (uint64_t n_ev = 0; nheap && rc == 0; n_ev++) {
        struct stream *s = heap[0];
        if ((n_ev & 4095) == 0 && c->o->stop && *c->o->stop) {
            rc = conv__fail(c, -EINTR, "interrupted");
            break;
        }
        if (c->trend_ok && (rc = conv__compact_sample(c, s->ts)) < 0)
            break;
        if (c->cow_next < c->ncow && (rc = conv__cow_until(c, s->ts)) < 0)
            break; /* the parents' blocks at the forks before s (before the children's samples) */
        if (c->usage_next < c->nusage && (int64_t)c->usage[c->usage_next].ts_ns < s->ts)
            conv__usage_until(c, s->ts); /* the live bytes at the samples taken before s */
        rc = conv__on_event(c, s);
        if (!stream_fill(c, s))
            heap[0] = heap[--nheap];
        if (rc == 0)
            rc = c->fill_rc;
        if (nheap)
            heap_down(heap, nheap, 0);
    }
    if (rc == 0)
        rc = conv__cow_until(c, INT64_MAX); /* forks after the last event */
    free(heap);
    for (size_t i = 0; streams && i < n; i++) {
        free(streams[i].pre);
        free(streams[i].sizes);
        ms_trace_cursor_release(&streams[i].s.cur); /* a stream left before its end (a failure) */
    }
    free(streams);
    return rc;
}

static void conv_release(struct conv *c)
{
    conv__sym_join(c);
    conv__kept_join(c, 1);
    ms_embed_release(&c->embed);
    sqlite3_stmt *sts[] = {c->ins_string,     c->ins_frame,   c->ins_stack,
                           c->ins_stack_node, c->ins_owner,   c->ins_step,
                           c->ins_range,      c->ins_pytrace, c->ins_usage};
    for (size_t i = 0; i < sizeof sts / sizeof sts[0]; i++)
        sqlite3_finalize(sts[i]);
    ms_batch_release(&c->events_ins);
    ms_batch_release(&c->blocks_ins);
    if (c->db)
        sqlite3_close(c->db);
    for (size_t i = 0; i < c->nprocs; i++) {
        struct proc *p = &c->procs[i];
        ms_trace_release(&p->tr);
        free(p->path);
        free(p->exe);
        free(p->cmdline);
        for (size_t k = 0; k < p->nmods; k++)
            free(p->mods[k].path);
        free(p->mods);
        ms_u64map_release(&p->stack_ids);
        ms_u64map_release(&p->pyframe_ids);
        ms_u64map_release(&p->pystack_ids);
        ms_u64map_release(&p->kernels);
        if (p->pta) {
            ms_snapshot_release(p->pta);
            free(p->pta);
        }
        for (size_t l = 0; l < p->nls; l++) {
            ms_u64map_release(&p->ls[l].live);
        }
        free(p->ls);
        conv__mmap_release(p);
    }
    free(c->procs);
    for (size_t i = 0; i < c->nthreads; i++) {
        struct thread *t = &c->threads[i];
        for (int k = 0; k < t->nranges; k++)
            free(t->ranges[k].name);
        free(t->ranges);
        free(t->owner);
        free(t->calls);
    }
    for (size_t i = 0; i < c->npyframes; i++) {
        free(c->pyframes[i].file);
        free(c->pyframes[i].func);
    }
    free(c->pyframes);
    for (size_t i = 0; i < c->npystacks; i++)
        free(c->pystacks[i].pairs);
    free(c->pystacks);
    for (size_t i = 0; i < c->npools; i++)
        free(c->pools[i]);
    free(c->pools);
    conv__execs_release(c);
    for (size_t i = 0; i < c->nkernels; i++)
        free(c->kernels[i]);
    free(c->kernels);
    ms_strtab_release(&c->owners);
    ms_symcache_release(&c->symcache);
    for (size_t i = 0; i < c->nstacks; i++)
        free(c->stacks[i].pcs);
    free(c->stacks);
    free(c->threads);
    free(c->blocks);
    free(c->closed);
    free(c->cand);
    free(c->step_lives);
    free(c->own_live);
    free(c->usage);
    free(c->usage_live);
    for (size_t i = 0; i < c->nusage_paths; i++)
        free(c->usage_paths[i]);
    free(c->usage_paths);
    conv__cow_release(c);
    free(c->devusage);
    free(c->own_peak);
    free(c->dpoints);
    free(c->dpairs);
    free(c->sites);
    ms_u64map_release(&c->site_ids);
    conv__windows_release(c);
    ms_strtab_release(&c->strings);
    free(c->tmp_path);
}

int ms_store_convert(const struct ms_store_options *o, struct ms_store_result *res, char *err,
                     size_t errlen)
{
    struct conv c;
    struct ms_store_result dummy;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.err_mu, NULL);
    pthread_mutex_init(&c.db_mu, NULL);
    pthread_mutex_init(&c.kept_mu, NULL);
    pthread_cond_init(&c.kept_cv, NULL);
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    if (err && errlen)
        err[0] = 0;
    c.o = o;
    c.res = res;
    c.err = err;
    c.errlen = errlen;
    c.free_block = UINT32_MAX;
    ms_strtab_init(&c.strings, MAX_STRINGS, MAX_STRING_BYTES);
    ms_strtab_init(&c.owners, MAX_STRINGS, MAX_STRING_BYTES);
    ms_u64map_init(&c.site_ids, sizeof(uint32_t), MAX_STACKS);
    ms_symcache_init(&c.symcache);
    if (!o || !o->trace_dir || (!o->db_path && !o->sink))
        return conv__fail(&c, MS_EINVAL, "ms_store_convert: trace_dir and db_path are required");
    c.sink = o->sink ? &conv__sink_replay : o->compact ? &conv__sink_compact : &conv__sink_full;

    struct stat st;
    if (o->db_path && lstat(o->db_path, &st) == 0 && !S_ISREG(st.st_mode))
        return conv__fail(&c, MS_EINVAL,
                          "%s exists and is not a regular file: a database is "
                          "written only to a regular file (it is renamed there)",
                          o->db_path);
    int rc = conv__windows_init(&c);
    if (rc == 0)
        rc = list_traces(&c);
    if (rc == 0)
        rc = open_traces(&c);
    if (rc == 0)
        rc = init_layers(&c);
    if (rc == 0)
        rc = conv__usage_load(&c);
    if (rc == 0)
        rc = pass1(&c);
    if (rc == 0)
        rc = c.sink->open(&c);
    if (rc == 0)
        rc = conv__symbolize_start(&c);
    if (rc == 0)
        rc = c.sink->pass2_begin(&c);
    if (rc == 0)
        rc = pass2(&c);
    int sym_rc = conv__sym_join(&c);
    int kept_rc = conv__kept_join(&c, rc < 0 || sym_rc < 0);
    if (rc == 0)
        rc = sym_rc;
    if (rc == 0)
        rc = kept_rc;
    if (rc == 0)
        rc = conv__write_annotations(&c);
    if (rc == 0)
        rc = conv__write_untraced(&c);
    if (rc == 0)
        rc = conv__mmap_write_layers(&c);
    if (rc == 0)
        rc = conv__write_meta(&c); /* before write_processes turns cmdline NULs into spaces */
    if (rc == 0)
        rc = conv__write_threads(&c);
    if (rc == 0)
        rc = conv__write_processes(&c);
    if (rc == 0)
        rc = conv__usage_write(&c);
    if (rc == 0)
        rc = conv__windows_write(&c);
    if (rc == 0)
        rc = conv__cow_write(&c);
    if (rc == 0)
        rc = conv__devusage_write(&c);
    if (rc == 0)
        rc = c.sink->finish(&c);
    if (rc == 0)
        rc = conv__exec(&c, "COMMIT", "commit");
    const char *tmp = c.tmp_path;
    c.tmp_path = NULL;
    conv_release(&c); /* closes the database */
    if (rc == 0 && ms_oom_seen())
        rc = conv__fail(&c, MS_ENOMEM, "out of memory while converting (an allocation failed)");
    if (rc == 0 && tmp && rename(tmp, o->db_path) < 0)
        rc = conv__fail(&c, -errno, "cannot rename %s to %s: %s", tmp, o->db_path, strerror(errno));
    if (rc < 0 && tmp)
        unlink(tmp); /* created by open_db (O_EXCL): ours */
    if (tmp)
        ms_cleanup_forget(tmp);
    free((char *)tmp);
    if (rc < 0)
        memset(res, 0, sizeof *res);
    return rc;
}
