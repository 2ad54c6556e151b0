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
 *   - Everything is written in one transaction with prepared statements into db_path + ".tmp",
 *     the events and blocks rows 64 to a statement (batch.c), blocks rows in about allocation
 *     order (write_block), indexes are created before loading (open_db), and the file is renamed
 *     over db_path on success only.
 *   - Symbolization is convert_symbols.c's; the annotation records (steps, owners, marks and
 *     their tags, ranges, accesses, pools) convert_annotations.c's; the CUDA driver records
 *     and PyTorch's allocator history convert_cuda.c's; what the compact database adds (o->compact: the blocks it
 *     keeps, the tables computed in pass 2, the packed traces) convert_compact.c's; a replay
 *     (o->sink) hands the events rows to a callback instead of writing them. The state these
 *     files share is in convert_internal.h.
 * Caps (MAX_*) bound what a hostile or corrupt trace can make us allocate. */
#include "convert_internal.h"

#include <math.h>
#include <signal.h>

int sbuf__add(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return MS_ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int sbuf__str(struct sbuf *b, const char *s)
{
    return sbuf__add(b, s, strlen(s));
}

int sbuf__fmt(struct sbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return MS_EINVAL;
    return sbuf__add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Appends s as a JSON string literal. */
int sbuf__json(struct sbuf *b, const char *s, size_t n)
{
    int rc = sbuf__add(b, "\"", 1);
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = sbuf__add(b, e, 2);
        } else if (c < 0x20) {
            rc = sbuf__fmt(b, "\\u%04x", c);
        } else {
            rc = sbuf__add(b, (const char *)&s[i], 1);
        }
    }
    return rc ? rc : sbuf__add(b, "\"", 1);
}

int conv__fail(struct conv *c, int rc, const char *fmt, ...)
{
    pthread_mutex_lock(&c->err_mu); /* the conversion's threads may fail at once */
    if (c->err && c->errlen && !c->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&c->err_mu);
    return rc;
}

static int db_fail(struct conv *c, const char *what)
{
    return conv__fail(c, MS_EDB, "database %s: %s: %s", c->tmp_path, what, sqlite3_errmsg(c->db));
}

int conv__oom(struct conv *c, const char *what)
{
    return conv__fail(c, MS_ENOMEM, "out of memory or over a size cap (%s)", what);
}

int conv__batch_fail(struct conv *c, int rc, const char *what)
{
    return rc == MS_EDB ? db_fail(c, what) : conv__oom(c, what);
}

/* Runs one prepared insert that has its parameters bound. */
int conv__step_reset(struct conv *c, sqlite3_stmt *st, const char *what)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : db_fail(c, what);
}

int conv__exec(struct conv *c, const char *sql, const char *what)
{
    return sqlite3_exec(c->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : db_fail(c, what);
}

int conv__prepare(struct conv *c, sqlite3_stmt **st, const char *sql)
{
    return sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) == SQLITE_OK
               ? 0
               : db_fail(c, "prepare");
}

void conv__bind_opt(sqlite3_stmt *st, int i, int64_t v, int present)
{
    if (present)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

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

/* Grows array *a of n elements of size sz to hold one more (cap: max elements). */
int conv__grow(void **a, size_t *alloc, size_t n, size_t sz, size_t max)
{
    return ms_grow(a, alloc, n, sz, 256, max);
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

/* The text of a PyTorch allocator stack (a snapshot's frames, Python and C++) as msMemScope's
 * Call Stack(Python): "file(line): func" per frame, innermost first, lines joined by newlines.
 * Empty for other stacks (their Python part is a path in the stack tree: convert_symbols.c). */
int conv__py_text(struct conv *c, struct proc *p, const struct stack_def *sd, struct sbuf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = 0;
    if (!(sd->trace_id > PTA_STACK_BASE && p->pta))
        return 0;
    uint32_t st = sd->trace_id - PTA_STACK_BASE;
    for (uint32_t k = 0, f; (f = ms_snapshot_stack_frame(p->pta, st, k)) != 0; k++) {
        const struct ms_snap_frame *fr = &p->pta->frames[f];
        if (sbuf__fmt(b, "%s%.*s(%lld): %.*s", k ? "\n" : "", (int)fr->file.n, fr->file.p,
                      (long long)fr->line, (int)fr->func.n, fr->func.p) < 0)
            return conv__oom(c, "Python stack text");
    }
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
    c->trend_ok = !c->o->sink;
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
static int block_close(struct conv *c, struct proc *p, int layer, uint32_t slot, int have_free,
                       int64_t free_ns, int64_t free_event)
{
    struct block *b = &c->blocks[slot];
    struct closed_block cb = {*b, p->id, free_ns, free_event, layer, have_free};
    if (c->win && (layer == MS_LAYER_HEAP || layer == MS_LAYER_MMAP)) {
        int wrc = conv__windows_close(c, b->alloc_id, b->size, b->stack_id);
        if (wrc < 0)
            return wrc;
    }
    int rc = c->o->sink      ? 0 /* a replay writes no rows */
             : c->o->compact ? conv__compact_block(c, p, &cb)
                             : conv__live_at_end(c, &cb);
    if (rc == 0 && !c->o->sink && !c->o->compact)
        rc = conv__write_block(c, &cb);
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
    if (c->o->sink) {
        struct ms_store_row row = {.id = ++c->next_event,
                                   .ts_ns = s->ts,
                                   .process_id = c->procs[s->proc].id,
                                   .thread_id = s->thread,
                                   .addr = addr,
                                   .size = size,
                                   .stack_id = stack,
                                   .allocation_id = alloc_id,
                                   .kind = kind,
                                   .layer = layer,
                                   .flags = flags,
                                   .has_addr = have_addr,
                                   .has_size = have_size,
                                   .func = func,
                                   .name = name,
                                   .name_len = name_len,
                                   .owner_id = c->row_owner};
        c->attr = NULL;
        c->row_owner = 0;
        int rc = c->o->sink(c->o->sink_ctx, &row);
        return rc < 0 ? conv__fail(c, rc, "stopped by the replay's reader") : 0;
    }
    if (kind == MS_KIND_MALLOC || kind == MS_KIND_FREE) {
        /* counted for the computed tables (site_stats, the series) in both kinds of database */
        int rc = conv__compact_event(c, s, kind, layer, have_size ? size : 0, stack, alloc_id,
                                     c->next_event + 1);
        if (rc < 0)
            return rc;
        if (c->o->compact) { /* in the packed trace only; the id is taken as in a full one */
            c->next_event++;
            c->attr = NULL;
            return 0;
        }
    }
    struct ms_cell *row;
    int rc = ms_batch_row(&c->events_ins, &row);
    if (rc < 0)
        return conv__batch_fail(c, rc, "insert event");
    ms_cell_int(&row[0], ++c->next_event);
    ms_cell_int(&row[1], s->ts);
    ms_cell_int(&row[2], kind);
    ms_cell_int(&row[3], layer);
    ms_cell_int(&row[4], c->procs[s->proc].id);
    ms_cell_int(&row[5], s->thread);
    ms_cell_opt(&row[6], addr, have_addr);
    ms_cell_opt(&row[7], size, have_size);
    ms_cell_static(&row[8], func);
    ms_cell_opt(&row[9], stack, stack != 0);
    ms_cell_opt(&row[10], alloc_id, alloc_id != 0);
    ms_cell_null(&row[11]);
    if (name && (rc = ms_batch_copy(&c->events_ins, &row[11], name, name_len)) < 0)
        return conv__batch_fail(c, rc, "insert event");
    ms_cell_opt(&row[12], flags, flags >= 0);
    ms_cell_null(&row[13]);
    if (c->attr && (rc = ms_batch_copy(&c->events_ins, &row[13], c->attr, c->attr_len)) < 0)
        return conv__batch_fail(c, rc, "insert event");
    c->attr = NULL;
    return 0;
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
        rc = block_close(c, p, layer, slot, 1, s->ts, c->next_event);
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
        if ((rc = block_close(c, p, layer, *live, 1, s->ts, 0)) < 0)
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

int conv__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
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
static int on_munmap(struct conv *c, const struct stream *s)
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

static int on_event(struct conv *c, struct stream *s)
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
    default: return on_munmap(c, s);
    }
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
        rc = on_event(c, s);
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

/* ---- Final rows ------------------------------------------------------------------------------ */

static int write_threads(struct conv *c)
{
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st, "INSERT INTO threads VALUES (?,?,?,?,?,?)");
    for (size_t i = 0; i < c->nthreads && rc == 0; i++) {
        struct thread *t = &c->threads[i];
        sqlite3_bind_int64(st, 1, (int64_t)i + 1);
        sqlite3_bind_int64(st, 2, c->procs[t->proc].id);
        sqlite3_bind_int64(st, 3, t->tid);
        conv__bind_opt(st, 4, t->first_ns, t->events != 0);
        conv__bind_opt(st, 5, t->last_ns, t->events != 0);
        sqlite3_bind_int64(st, 6, (int64_t)t->events);
        rc = conv__step_reset(c, st, "insert thread");
    }
    sqlite3_finalize(st);
    return rc;
}

static int cmp_slot(const void *x, const void *y, void *ctx)
{
    const struct block *b = ctx;
    int64_t u = b[*(const uint32_t *)x].alloc_id, v = b[*(const uint32_t *)y].alloc_id;
    return u < v ? -1 : u > v;
}

/* processes rows, process_stats rows and the blocks still live; fills res. */
static int write_processes(struct conv *c)
{
    sqlite3_stmt *st = NULL, *ps = NULL, *hp = NULL;
    int rc = conv__prepare(c, &st, "INSERT INTO processes VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &ps, "INSERT INTO process_stats VALUES (?,?,?,?,?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &hp, "INSERT INTO host_peaks VALUES (?,?,?,?,?)");
    for (size_t i = 0; i < c->nprocs && rc == 0; i++) {
        struct proc *p = &c->procs[i];
        const struct ms_trace_file_header *h = &p->tr.hdr;
        for (size_t k = 0; p->cmdline && k < p->cmdlen; k++) /* argv joined by spaces */
            if (!p->cmdline[k])
                p->cmdline[k] = ' ';
        size_t cl = p->cmdlen;
        while (p->cmdline && cl && p->cmdline[cl - 1] == ' ')
            cl--;
        uint64_t lost = h->lost_events + p->lost;
        sqlite3_bind_int64(st, 1, p->id);
        sqlite3_bind_int64(st, 2, (int64_t)h->pid);
        sqlite3_bind_int64(st, 3, (int64_t)(p->have_process ? p->ppid : h->ppid));
        sqlite3_bind_int64(st, 4, h->image_seq);
        if (p->exe)
            sqlite3_bind_text(st, 5, p->exe, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 5);
        if (p->cmdline)
            sqlite3_bind_text(st, 6, p->cmdline, (int)cl, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 6);
        conv__bind_opt(st, 7, p->first_ns, p->have_events);
        conv__bind_opt(st, 8, p->last_ns, p->have_events);
        sqlite3_bind_text(st, 9, p->path, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 10, (int64_t)lost);
        sqlite3_bind_int64(st, 11, (int64_t)h->stopped_errno);
        if (p->tr.warning[0])
            sqlite3_bind_text(st, 12, p->tr.warning, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 12);
        rc = conv__step_reset(c, st, "insert process");

        /* Blocks live at the end, in allocation order. */
        for (size_t l = 0; l < p->nls && rc == 0; l++) {
            if (!p->ls[l].used)
                continue;
            struct ms_u64map *live = &p->ls[l].live;
            uint32_t *slots = malloc((live->count + 1) * sizeof *slots);
            size_t ns = 0, pos = 0;
            uint64_t key;
            uint32_t val;
            if (!slots) {
                rc = conv__oom(c, "live blocks");
                break;
            }
            while (ms_u64map_next32(live, &pos, &key, &val))
                slots[ns++] = val;
            qsort_r(slots, ns, sizeof *slots, cmp_slot, c->blocks);
            for (size_t k = 0; k < ns && rc == 0; k++)
                rc = block_close(c, p, (int)l, slots[k], 0, 0, 0);
            free(slots);
        }
        for (size_t l = 0; l < p->nls && rc == 0; l++) {
            if (!p->ls[l].used)
                continue;
            struct layer_stats *ls = &p->ls[l].st;
            sqlite3_bind_int64(ps, 1, p->id);
            sqlite3_bind_int64(ps, 2, (int64_t)l);
            sqlite3_bind_int64(ps, 3, ls->allocs);
            sqlite3_bind_int64(ps, 4, ls->frees);
            sqlite3_bind_int64(ps, 5, ls->alloc_bytes);
            sqlite3_bind_int64(ps, 6, ls->peak_bytes);
            conv__bind_opt(ps, 7, ls->peak_ns, ls->peak_bytes > 0);
            sqlite3_bind_int64(ps, 8, ls->live_bytes);
            sqlite3_bind_int64(ps, 9, ls->live_blocks);
            sqlite3_bind_int64(ps, 10, ls->unmatched);
            conv__bind_opt(ps, 11, ls->peak_event, ls->peak_bytes > 0);
            conv__bind_opt(ps, 12, ls->peak_alloc, ls->peak_bytes > 0);
            rc = conv__step_reset(c, ps, "insert process stats");
        }
        if (rc == 0) { /* the heap and the mmap layer together */
            sqlite3_bind_int64(hp, 1, p->id);
            sqlite3_bind_int64(hp, 2, p->host_peak);
            conv__bind_opt(hp, 3, p->host_peak_ns, p->host_peak > 0);
            conv__bind_opt(hp, 4, p->host_peak_event, p->host_peak > 0);
            conv__bind_opt(hp, 5, p->host_peak_alloc, p->host_peak > 0);
            rc = conv__step_reset(c, hp, "insert host peak");
        }
        c->res->damaged_chunks += p->tr.damaged_chunks;
        c->res->lost_events += lost;
        if (p->tr.warning[0] && !c->res->warning[0])
            snprintf(c->res->warning, sizeof c->res->warning, "%s: %s", p->name, p->tr.warning);
    }
    c->res->processes = c->nprocs;
    sqlite3_finalize(st);
    sqlite3_finalize(ps);
    sqlite3_finalize(hp);
    return rc;
}

/* Text is bound SQLITE_STATIC here and wherever the step follows at once, the buffer still
 * live: a copy (SQLITE_TRANSIENT) allocates, and a bind that fails leaves NULL silently. */
static int put_meta(struct conv *c, sqlite3_stmt *st, const char *key, const char *value)
{
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (value)
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 2);
    return conv__step_reset(c, st, "insert meta");
}

static int put_meta_int(struct conv *c, sqlite3_stmt *st, const char *key, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    return put_meta(c, st, key, buf);
}

/* The traced command line as a JSON array: from the options, else from the PROCESS record of
 * the first process whose parent was not traced (the root of the run). */
static int command_json(struct conv *c, struct sbuf *b)
{
    int rc = sbuf__add(b, "[", 1);
    if (c->o->argv) {
        for (size_t i = 0; c->o->argv[i] && rc == 0; i++) {
            if (i)
                rc = sbuf__add(b, ",", 1);
            if (rc == 0)
                rc = sbuf__json(b, c->o->argv[i], strlen(c->o->argv[i]));
        }
    } else {
        const struct proc *root = NULL;
        for (size_t i = 0; i < c->nprocs && !root; i++) {
            const struct proc *p = &c->procs[i];
            int traced_parent = 0;
            for (size_t k = 0; k < c->nprocs && p->have_process; k++)
                traced_parent |= c->procs[k].tr.hdr.pid == p->ppid;
            if (p->have_process && !traced_parent)
                root = p;
        }
        if (!root && c->procs[0].have_process)
            root = &c->procs[0];
        size_t k = 0, n = root ? root->cmdlen : 0;
        for (int first = 1; k < n && rc == 0; first = 0) {
            size_t e = k;
            while (e < n && root->cmdline[e])
                e++;
            if (!first)
                rc = sbuf__add(b, ",", 1);
            if (rc == 0)
                rc = sbuf__json(b, root->cmdline + k, e - k);
            k = e + 1;
        }
    }
    return rc ? rc : sbuf__add(b, "]", 1);
}

/* Sampling mode: meta sampling_bytes (B; the largest over the processes, which share the
 * environment that sets it) and the exact heap counts summed over the sampled processes'
 * headers (docs/database.md). Nothing for an exact run. */
static int write_sampling_meta(struct conv *c, sqlite3_stmt *st)
{
    uint64_t b = 0, allocs = 0, bytes = 0, frees = 0;
    for (size_t i = 0; i < c->nprocs; i++)
        if (c->procs[i].tr.hdr.sample_bytes > b)
            b = c->procs[i].tr.hdr.sample_bytes;
    if (!b)
        return 0;
    for (size_t i = 0; i < c->nprocs; i++) {
        const struct ms_trace_file_header *h = &c->procs[i].tr.hdr;
        if (!h->sample_bytes)
            continue;
        allocs += h->heap_allocs;
        bytes += h->heap_bytes;
        frees += h->heap_frees;
    }
    int rc = put_meta_int(c, st, "sampling_bytes", (long long)b);
    if (rc == 0)
        rc = put_meta_int(c, st, "heap_allocs_exact", (long long)allocs);
    if (rc == 0)
        rc = put_meta_int(c, st, "heap_alloc_bytes_exact", (long long)bytes);
    if (rc == 0)
        rc = put_meta_int(c, st, "heap_frees_exact", (long long)frees);
    return rc;
}

static int write_meta(struct conv *c)
{
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st, "INSERT INTO meta VALUES (?,?)");
    if (rc < 0)
        return rc;
    struct sbuf cmd = {0};
    char cwd[PATH_MAX], host[256], dir[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = 0;
    if (gethostname(host, sizeof host) < 0)
        host[0] = 0;
    host[sizeof host - 1] = 0;
    if (!realpath(c->o->trace_dir, dir))
        snprintf(dir, sizeof dir, "%s", c->o->trace_dir);
    int64_t start = 0, end = 0;
    unsigned depth = c->o->call_stack_c;
    for (size_t i = 0; i < c->nprocs; i++) {
        const struct proc *p = &c->procs[i];
        int64_t s = conv__epoch_ns(p, p->tr.hdr.start_mono_ns);
        if (i == 0 || s < start)
            start = s;
        if (p->have_events && p->last_ns > end)
            end = p->last_ns;
        if (!depth && (p->tr.hdr.flags & MS_TRACE_F_STACKS) && p->tr.hdr.max_depth > depth)
            depth = p->tr.hdr.max_depth;
    }
    if (end < start)
        end = start;
    if (command_json(c, &cmd) < 0)
        rc = conv__oom(c, "command line");
    if (rc == 0)
        rc = put_meta_int(c, st, "format_version", MS_DB_FORMAT_VERSION);
    if (rc == 0)
        rc = put_meta(c, st, "memscope_version", MEMSCOPE_VERSION);
    if (rc == 0)
        rc = put_meta(c, st, "command_line", cmd.p);
    if (rc == 0)
        rc = put_meta(c, st, "cwd", cwd);
    if (rc == 0)
        rc = put_meta(c, st, "hostname", host);
    if (rc == 0)
        rc = put_meta_int(c, st, "start_time_ns", start);
    if (rc == 0)
        rc = put_meta_int(c, st, "end_time_ns", end);
    if (rc == 0 && c->o->exit_status >= 0)
        rc = put_meta_int(c, st, "exit_status", c->o->exit_status);
    else if (rc == 0)
        rc = put_meta(c, st, "exit_status", NULL);
    if (rc == 0)
        rc = put_meta_int(c, st, "call_stack_c", depth);
    if (rc == 0)
        rc = put_meta(c, st, "events", c->o->events);
    if (rc == 0)
        rc = put_meta(c, st, "trace_dir", dir);
    if (rc == 0) /* the compact database has not every events row */
        rc = put_meta_int(c, st, "event_count", c->next_event);
    if (rc == 0 && c->next_event)
        rc = put_meta_int(c, st, "first_event_ns", c->first_event_ns);
    if (rc == 0 && c->next_event)
        rc = put_meta_int(c, st, "last_event_ns", c->last_event_ns);
    if (rc == 0)
        rc = write_sampling_meta(c, st);
    free(cmd.p);
    sqlite3_finalize(st);
    return rc;
}

/* ---- Driver ---------------------------------------------------------------------------------- */

/* Writes the blocks rows still waiting and the events and blocks rows still buffered. */
static int flush_batches(struct conv *c)
{
    int rc = conv__drain_blocks(c);
    if (rc < 0)
        return rc;
    rc = ms_batch_flush(&c->events_ins);
    if (rc < 0)
        return conv__batch_fail(c, rc, "insert event");
    rc = ms_batch_flush(&c->blocks_ins);
    return rc < 0 ? conv__batch_fail(c, rc, "insert block") : 0;
}

static int open_schema(struct conv *c);

static int open_db(struct conv *c)
{
    if (c->o->sink) /* a replay: the small tables in memory, for the code that writes them */
        return sqlite3_open_v2(":memory:", &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY,
                               NULL) == SQLITE_OK
                   ? open_schema(c)
                   : db_fail(c, "open");
    /* A new file of this conversion's own (files.h): two runs converting to the same
     * database never share it, and a link planted at the name is never followed. */
    size_t n = strlen(c->o->db_path) + 64;
    c->tmp_path = malloc(n);
    if (!c->tmp_path)
        return conv__oom(c, "path");
    int fd = ms_temp_create(c->tmp_path, n, c->o->db_path, ".tmp.");
    if (fd < 0) {
        int rc = conv__fail(c, fd, "cannot create a temporary file beside %s: %s", c->o->db_path,
                            strerror(-fd));
        free(c->tmp_path);
        c->tmp_path = NULL; /* not ours: nothing to remove */
        return rc;
    }
    close(fd); /* empty: SQLite opens it as a new database */
    /* One thread uses this connection: no mutexes (7% of the conversion time). */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(c->tmp_path, &c->db, flags, NULL) != SQLITE_OK)
        return db_fail(c, "open");
    return open_schema(c);
}

/* The schema and the prepared inserts, in c->db. */
static int open_schema(struct conv *c)
{
    /* Big pages for the full database's big tables. The compact one has small tables (one
     * page each at least: 0.5 MB for a small program's) beside its blobs, its blocks rows
     * and its stacks rows (a PyTorch script's: 1.8 KB of Python stack text each, two to a
     * 4 KiB page and most of a page left over): 16 KiB pages make it 11% smaller and 3%
     * faster to write than 4 KiB ones (bench/RESULTS.md). Its pages are mostly the traces,
     * written once: a small cache (4 MiB: cc1's conversion 4% faster than with 16, 12 MB
     * smaller; 64 MiB was 12% slower: memory first touched costs more than pages read again). */
    int rc = conv__exec(c,
                        c->o->compact ? "PRAGMA page_size=16384; PRAGMA cache_size=-4096;"
                                      : "PRAGMA page_size=65536; PRAGMA cache_size=-262144;",
                        "setup");
    if (rc == 0)
        rc = conv__exec(c,
                        "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                        "PRAGMA locking_mode=EXCLUSIVE; PRAGMA temp_store=MEMORY;"
                        "PRAGMA threads=2; BEGIN;",
                        "setup");
    if (rc == 0)
        rc = conv__exec(c, ms_schema_sql, "create schema");
    /* Before loading: the events indexes are partial (annotation rows only), so keeping them
     * costs a row two comparisons, while building them after would read all of events twice. */
    if (rc == 0)
        rc = conv__exec(c, ms_schema_index_sql, "create indexes");
    if (rc == 0 && (rc = ms_batch_init(&c->events_ins, c->db, "events", 14, 1)) < 0)
        rc = conv__batch_fail(c, rc, "prepare");
    if (rc == 0 && (rc = ms_batch_init(&c->blocks_ins, c->db, "blocks", 14, 1)) < 0)
        rc = conv__batch_fail(c, rc, "prepare");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_owner, "INSERT INTO owners VALUES (?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_step, "INSERT INTO steps VALUES (?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_range, "INSERT INTO ranges VALUES (?,?,?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_pytrace, "INSERT INTO python_trace VALUES (?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_string, "INSERT INTO strings VALUES (?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_frame, "INSERT INTO frames VALUES (?,?,?,?,?,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_stack, "INSERT INTO stacks VALUES (?,?,?,NULL,?,?,?)");
    if (rc == 0)
        rc = conv__prepare(c, &c->ins_stack_node, "INSERT INTO stack_nodes VALUES (?,?,?)");
    return rc;
}

static void conv_release(struct conv *c)
{
    conv__sym_join(c);
    conv__kept_join(c, 1);
    ms_embed_release(&c->embed);
    sqlite3_stmt *sts[] = {c->ins_string, c->ins_frame, c->ins_stack, c->ins_stack_node,
                           c->ins_owner,  c->ins_step,  c->ins_range, c->ins_pytrace};
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
    if (rc == 0 && o->compact && !o->sink)
        rc = conv__compact_start(&c);
    if (rc == 0)
        rc = open_db(&c);
    if (rc == 0)
        rc = conv__symbolize_start(&c);
    if (rc == 0 && !o->sink && getenv("MEMSCOPE_FAULT_CONVERT"))
        raise(SIGSEGV); /* failure injection (tests): a crash with its files half-written */
    if (rc == 0 && o->compact && !o->sink)
        rc = conv__kept_start(&c);
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
        rc = write_meta(&c); /* before write_processes turns cmdline NULs into spaces */
    if (rc == 0)
        rc = write_threads(&c);
    if (rc == 0)
        rc = write_processes(&c);
    if (rc == 0)
        rc = conv__usage_write(&c);
    if (rc == 0)
        rc = conv__windows_write(&c);
    if (rc == 0)
        rc = conv__cow_write(&c);
    if (rc == 0)
        rc = conv__devusage_write(&c);
    if (rc == 0 && o->compact && !o->sink)
        rc = conv__compact_write_blocks(&c);
    if (rc == 0)
        rc = flush_batches(&c);
    if (rc == 0 && !o->sink)
        rc = conv__compact_finish(&c);
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
