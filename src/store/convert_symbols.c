/* convert_symbols.c: the conversion's symbolization: each distinct return address of a process
 * looked up once with libdw (symbolize.c: inlined frames included, C++ names demangled), its
 * modules, strings, frames, stack_nodes and stacks rows (a stack's native and Python parts as
 * paths in the tree of frames; their text is made from the tree by stack_text.c), on a thread of its own beside
 * pass 2 in a compact conversion. Workload: once per process after pass 1; per distinct pc a
 * lookup, per stack a hash probe per frame. */
#include "convert_internal.h"
#include "demangle.h"

/* ---- Symbolization: modules, strings, frames, stacks ---------------------------------------- */

struct pcinfo {
    int64_t first_frame; /* frames.id of its innermost line */
    uint32_t nframes;
};

static int intern(struct conv *c, const char *s, int64_t *id)
{
    int is_new;
    if (!s) {
        *id = 0;
        return 0;
    }
    if (ms_strtab_intern(&c->strings, s, strlen(s), id, &is_new) < 0)
        return conv__oom(c, "strings");
    if (!is_new)
        return 0;
    sqlite3_bind_int64(c->ins_string, 1, *id);
    sqlite3_bind_text(c->ins_string, 2, s, -1, SQLITE_STATIC);
    return conv__step_reset(c, c->ins_string, "insert string");
}

/* The readable name of a C++ or Rust symbol (demangle.h), malloc'd, or NULL when name is not
 * a mangled name (or is damaged, or memory ran out). */
static char *demangle(const char *name)
{
    return ms_demangle(name);
}

/* Symbolizes pc and writes its frames rows. */
static int symbolize_pc(struct conv *c, struct ms_symbolizer *sym, uint64_t pc, struct pcinfo *pi)
{
    struct ms_sym_frame fr[MS_SYM_MAX_INLINE];
    int n = ms_symbolizer_lookup(sym, pc, fr);
    if (n < 0)
        return conv__oom(c, "symbols");
    const struct ms_sym_module *m = ms_symbolizer_module(sym, pc);
    pi->first_frame = c->next_frame + 1;
    pi->nframes = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        int64_t fid, sid, lid = 0;
        /* C++ names read demangled; the linkage (mangled) name is kept beside */
        char *readable = demangle(fr[i].func);
        const char *linkage = fr[i].func;
        if (readable)
            fr[i].func = readable;
        int rc = intern(c, fr[i].func, &fid);
        if (rc == 0 && readable)
            rc = intern(c, linkage, &lid);
        if (rc == 0)
            rc = intern(c, fr[i].file, &sid);
        free(readable);
        if (rc < 0)
            return rc;
        sqlite3_stmt *st = c->ins_frame;
        sqlite3_bind_int64(st, 1, ++c->next_frame);
        conv__bind_opt(st, 2, m ? m->db_id : 0, m != NULL);
        sqlite3_bind_int64(st, 3, (int64_t)pc);
        sqlite3_bind_int64(st, 4, i == n - 1 ? 0 : i + 1);
        conv__bind_opt(st, 5, fid, fid != 0);
        conv__bind_opt(st, 6, sid, sid != 0);
        conv__bind_opt(st, 7, fr[i].line, fr[i].file && fr[i].line > 0);
        conv__bind_opt(st, 8, lid, lid != 0);
        if ((rc = conv__step_reset(c, st, "insert frame")) < 0)
            return rc;
    }
    return 0;
}

static int write_modules(struct conv *c, struct proc *p, struct ms_sym_module *out)
{
    sqlite3_stmt *st;
    int rc = conv__prepare(c, &st, "INSERT INTO modules VALUES (?,?,?,?,?,?)");
    for (size_t i = 0; i < p->nmods && rc == 0; i++) {
        struct module *m = &p->mods[i];
        /* The main program may be reported without a path (dl_iterate_phdr's ""). */
        const char *path = !m->path[0] && p->exe ? p->exe : m->path;
        out[i] = (struct ms_sym_module){m->bias, m->lo, m->hi, path, ++c->next_module};
        sqlite3_bind_int64(st, 1, out[i].db_id);
        sqlite3_bind_int64(st, 2, p->id);
        sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, (int64_t)m->bias);
        sqlite3_bind_int64(st, 5, (int64_t)m->lo);
        sqlite3_bind_int64(st, 6, (int64_t)m->hi);
        rc = conv__step_reset(c, st, "insert module");
    }
    sqlite3_finalize(st);
    return rc;
}

/* The symbolizer of the process's modules in epoch e (struct module). */
static int epoch_symbolizer(struct conv *c, struct proc *p, const struct ms_sym_module *all,
                            uint32_t e, struct ms_symbolizer *sym)
{
    struct ms_sym_module *mods = calloc(p->nmods + 1, sizeof *mods);
    if (!mods)
        return conv__oom(c, "modules");
    size_t n = 0;
    for (size_t i = 0; i < p->nmods; i++)
        if (p->mods[i].epoch_from <= e && e < p->mods[i].epoch_to)
            mods[n++] = all[i];
    int rc = ms_symbolizer_init(sym, c->o->symbolize ? &c->symcache : NULL, mods, n) < 0
                 ? conv__oom(c, "symbolizer")
                 : 0;
    free(mods);
    return rc;
}

/* Forgets the symbolized pcs (a new epoch's modules give them other names). */
static void pcs_reset(struct ms_u64map *pcs, size_t *ninfo)
{
    *ninfo = 0;
    ms_u64map_release(pcs);
    ms_u64map_init(pcs, sizeof(uint32_t), MAX_PCS_PER_PROCESS);
}

/* Writes the path of a stack's frames (frame ids fids[0..nf), innermost first) in the stack
 * tree: from the outermost frame, a node per (caller node, frame), each written once (nodes maps
 * parent << 32 | frame id to the node's id: both below 2^32, MAX_NODES). *leaf is the innermost
 * frame's node, 0 when nf is 0. */
static int tree_path(struct conv *c, struct ms_u64map *nodes, const int64_t *fids, size_t nf,
                     int64_t *leaf)
{
    int64_t node = 0;
    int rc = 0;
    for (size_t i = nf; i-- > 0 && rc == 0;) {
        if (fids[i] >= ((int64_t)1 << 32))
            return conv__oom(c, "frames");
        int isnew;
        uint32_t *slot = ms_u64map_put(nodes, (uint64_t)node << 32 | (uint64_t)fids[i], &isnew);
        if (!slot || (isnew && c->next_node + 1 >= MAX_NODES))
            return conv__oom(c, "stack nodes");
        if (isnew) {
            *slot = (uint32_t)++c->next_node;
            sqlite3_bind_int64(c->ins_stack_node, 1, c->next_node);
            conv__bind_opt(c->ins_stack_node, 2, node, node != 0);
            sqlite3_bind_int64(c->ins_stack_node, 3, fids[i]);
            rc = conv__step_reset(c, c->ins_stack_node, "insert stack node");
        }
        node = *slot;
    }
    *leaf = node;
    return rc;
}

/* The Python part of stack sd as frames rows (module NULL, pc 0, the function, file and line
 * of each (code, line) pair, each written once: pyf maps code index << 32 | line to its id),
 * innermost first, into *fids (*nf of them). An unknown code object has no function and file
 * (its line reads "??(line): ??"). */
static int py_frames(struct conv *c, struct proc *p, const struct stack_def *sd,
                     struct ms_u64map *pyf, int64_t **fids, size_t *afids, size_t *nf)
{
    uint32_t idx;
    *nf = 0;
    if (!ms_u64map_get32(&p->pystack_ids, sd->trace_id, &idx))
        return 0;
    const struct pystack *ps = &c->pystacks[idx - 1];
    for (uint32_t i = 0; i < ps->depth; i++) {
        uint32_t fi = 0, line = ps->pairs[2 * i + 1];
        if (!ms_u64map_get32(&p->pyframe_ids, ps->pairs[2 * i], &fi))
            fi = 0;
        int isnew;
        int64_t *id = ms_u64map_put(pyf, (uint64_t)fi << 32 | line, &isnew);
        if (!id || ms_grow((void **)fids, afids, *nf, sizeof **fids, 64, MAX_STACK_PCS) < 0)
            return conv__oom(c, "Python frames");
        if (isnew) {
            int64_t fn = 0, file = 0;
            int rc = fi ? intern(c, c->pyframes[fi - 1].func, &fn) : 0;
            if (rc == 0 && fi)
                rc = intern(c, c->pyframes[fi - 1].file, &file);
            if (rc < 0)
                return rc;
            *id = ++c->next_frame;
            sqlite3_stmt *st = c->ins_frame;
            sqlite3_bind_int64(st, 1, *id);
            sqlite3_bind_null(st, 2);
            sqlite3_bind_int64(st, 3, 0);
            sqlite3_bind_int64(st, 4, 0);
            conv__bind_opt(st, 5, fn, fn != 0);
            conv__bind_opt(st, 6, file, file != 0);
            sqlite3_bind_int64(st, 7, line);
            sqlite3_bind_null(st, 8);
            if ((rc = conv__step_reset(c, st, "insert Python frame")) < 0)
                return rc;
        }
        (*fids)[(*nf)++] = *id;
    }
    return 0;
}

int conv__symbolize_process(struct conv *c, struct proc *p)
{
    struct ms_sym_module *all = calloc(p->nmods + 1, sizeof *all);
    if (!all)
        return conv__oom(c, "modules");
    int rc = write_modules(c, p, all);
    struct ms_symbolizer sym;
    uint32_t epoch = p->stack_first < p->stack_end ? c->stacks[p->stack_first].epoch : 0;
    if (rc == 0)
        rc = epoch_symbolizer(c, p, all, epoch, &sym);
    if (rc < 0) {
        free(all);
        return rc;
    }

    struct ms_u64map pcs;   /* pc -> index in info */
    struct ms_u64map nodes; /* (parent node << 32 | frame id) -> stack_nodes.id */
    struct ms_u64map pyf;   /* Python (code index << 32 | line) -> frames.id (int64_t) */
    struct pcinfo *info = NULL;
    int64_t *fids = NULL; /* one stack's frame ids, innermost first */
    size_t ninfo = 0, ainfo = 0, afids = 0;
    struct ms_buf pytext = {0};
    ms_u64map_init(&pcs, sizeof(uint32_t), MAX_PCS_PER_PROCESS);
    ms_u64map_init(&nodes, sizeof(uint32_t), MAX_NODES);
    ms_u64map_init(&pyf, sizeof(int64_t), MAX_PCS_PER_PROCESS);
    for (uint32_t s = p->stack_first; s < p->stack_end && rc == 0; s++) {
        if ((s & 255) == 0 && c->o->stop && *c->o->stop) {
            rc = conv__fail(c, -EINTR, "interrupted");
            break;
        }
        struct stack_def *sd = &c->stacks[s];
        if (sd->epoch != epoch) { /* a library loaded where a closed one was */
            ms_symbolizer_release(&sym);
            pcs_reset(&pcs, &ninfo);
            epoch = sd->epoch;
            if ((rc = epoch_symbolizer(c, p, all, epoch, &sym)) < 0) {
                memset(&sym, 0, sizeof sym);
                break;
            }
        }
        size_t nf = 0;
        for (uint32_t k = 0; k < sd->depth && rc == 0; k++) {
            uint64_t pc = sd->pcs[k];
            uint32_t idx;
            if (!ms_u64map_get32(&pcs, pc, &idx)) {
                if (ms_grow((void **)&info, &ainfo, ninfo, sizeof *info, 1024, MAX_STACK_PCS) < 0) {
                    rc = conv__oom(c, "pcs");
                    break;
                }
                idx = (uint32_t)ninfo;
                if (ms_u64map_set32(&pcs, pc, idx) < 0) {
                    rc = conv__oom(c, "pcs");
                    break;
                }
                ninfo++;
                if ((rc = symbolize_pc(c, &sym, pc, &info[idx])) < 0)
                    break;
            }
            const struct pcinfo *pi = &info[idx];
            for (uint32_t f = 0; f < pi->nframes && rc == 0; f++) {
                if (ms_grow((void **)&fids, &afids, nf, sizeof *fids, 64, MAX_STACK_PCS) < 0)
                    rc = conv__oom(c, "stack frames");
                else
                    fids[nf++] = pi->first_frame + f;
            }
        }
        int64_t node = 0, py_node = 0;
        if (rc == 0)
            rc = tree_path(c, &nodes, fids, nf, &node);
        /* the Python part: a path of its own in the same tree; PyTorch's allocator stacks
         * (a snapshot's frames) keep their text */
        int pta = sd->trace_id > PTA_STACK_BASE && p->pta;
        pytext.len = 0;
        if (rc == 0 && pta)
            rc = conv__py_text(c, p, sd, &pytext);
        else if (rc == 0 && (rc = py_frames(c, p, sd, &pyf, &fids, &afids, &nf)) == 0)
            rc = tree_path(c, &nodes, fids, nf, &py_node);
        if (rc < 0)
            break;
        struct conv_stack row = {.id = (int64_t)s + 1,
                                 .process_id = p->id,
                                 .depth = sd->depth,
                                 .node = node,
                                 .py_node = py_node,
                                 .py_text = pytext.len ? pytext.p : NULL,
                                 .py_text_len = pytext.len};
        rc = c->sink->stack(c, &row);
        free(sd->pcs); /* no longer needed: events refer to the stack by id */
        sd->pcs = NULL;
    }
    free(info);
    free(fids);
    free(pytext.p);
    ms_u64map_release(&pcs);
    ms_u64map_release(&nodes);
    ms_u64map_release(&pyf);
    ms_symbolizer_release(&sym);
    free(all);
    return rc;
}

/* ---- The symbolization of every process, overlapping pass 2 --------------------------------- */

static void *symbolize_all(void *arg)
{
    struct conv *c = arg;
    int rc = 0;
    pthread_mutex_lock(&c->db_mu); /* the kept blocks' thread waits for the connection */
    for (size_t i = 0; i < c->nprocs && rc == 0; i++)
        rc = conv__symbolize_process(c, &c->procs[i]);
    pthread_mutex_unlock(&c->db_mu);
    c->sym_rc = rc;
    return NULL;
}

/* Symbolizes every process (libdw's lookups, the strings, frames and stacks rows): on a thread
 * of its own when pass 2 writes no row before its first annotation record, so that the two
 * overlap (compact output without PyTorch's allocator pickles, whose streams read stacks);
 * here otherwise. The rows are the same, in the same order: pass 2 waits for the thread
 * (conv__sym_join) before it writes its first row. */
int conv__symbolize_start(struct conv *c)
{
    int overlap = c->sink->sym_thread;
    for (size_t i = 0; i < c->nprocs; i++)
        overlap &= !c->procs[i].pta;
    if (overlap && pthread_create(&c->sym_thread, NULL, symbolize_all, c) == 0) {
        c->sym_running = 1;
        return 0;
    }
    symbolize_all(c);
    return c->sym_rc;
}

/* Waits for the symbolization's thread, if it runs; returns its result. */
int conv__sym_join(struct conv *c)
{
    if (c->sym_running) {
        pthread_join(c->sym_thread, NULL);
        c->sym_running = 0;
    }
    return c->sym_rc;
}

/* The text of a PyTorch allocator stack (a snapshot's frames, Python and C++) as msMemScope's
 * Call Stack(Python): "file(line): func" per frame, innermost first, lines joined by newlines.
 * Empty for other stacks (their Python part is a path in the stack tree, above). */
int conv__py_text(struct conv *c, struct proc *p, const struct stack_def *sd, struct ms_buf *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = 0;
    if (!(sd->trace_id > PTA_STACK_BASE && p->pta))
        return 0;
    uint32_t st = sd->trace_id - PTA_STACK_BASE;
    for (uint32_t k = 0, f; (f = ms_snapshot_stack_frame(p->pta, st, k)) != 0; k++) {
        const struct ms_snap_frame *fr = &p->pta->frames[f];
        ms_buf_addf(b, "%s%.*s(%lld): %.*s", k ? "\n" : "", (int)fr->file.n, fr->file.p,
                    (long long)fr->line, (int)fr->func.n, fr->func.p);
        if (b->oom)
            return conv__oom(c, "Python stack text");
    }
    return 0;
}
