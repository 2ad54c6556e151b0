/* convert_annotations.c: the annotation API's records (include/memscope.h) in the conversion:
 * steps, owners pushed and popped, marks (and the owner tags they carry, applied to the block
 * live at their address), ranges, tensor accesses, pools and the Python tracer's calls; and
 * the rows written at the end for what was still open (ranges, the last step, the pools).
 * Workload: one call per annotation record, in time order. */
#include "convert_internal.h"

/* The pool named by the record's string: its index, added on first use. -1: error (set). */
static int pool_index(struct conv *c, const struct ms_record *r)
{
    for (size_t i = 0; i < c->npools; i++)
        if (strlen(c->pools[i]) == r->len1 && !memcmp(c->pools[i], r->str1, r->len1))
            return (int)i;
    if (c->npools >= MAX_POOLS)
        return conv__fail(c, MS_ELIMIT, "more than %u pools", MAX_POOLS), -1;
    char **pools = realloc(c->pools, (c->npools + 1) * sizeof *pools);
    char *name = malloc(r->len1 + 1);
    if (pools)
        c->pools = pools;
    if (!pools || !name) {
        free(name);
        return conv__oom(c, "pools"), -1;
    }
    memcpy(name, r->str1, r->len1);
    name[r->len1] = 0;
    c->pools[c->npools] = name;
    return (int)c->npools++;
}

/* Sets the thread's owner_id to the owners row of its current label join. */
static int owner_update(struct conv *c, struct thread *t)
{
    if (t->owner_depth == 0) {
        t->owner_id = 0;
        return 0;
    }
    int is_new = 0;
    if (ms_strtab_intern(&c->owners, t->owner, t->owner_len, &t->owner_id, &is_new) < 0)
        return conv__oom(c, "owners");
    if (!is_new)
        return 0;
    sqlite3_bind_int64(c->ins_owner, 1, t->owner_id);
    sqlite3_bind_text(c->ins_owner, 2, t->owner, (int)t->owner_len, SQLITE_STATIC);
    return conv__step_reset(c, c->ins_owner, "insert owner");
}

static int owner_push(struct conv *c, struct thread *t, const char *label, size_t len)
{
    size_t need = t->owner_len + (t->owner_depth ? 1 : 0) + len;
    if (t->owner_depth >= MAX_OWNER_DEPTH || need > MAX_OWNER_BYTES) {
        t->owner_overflow++; /* labels beyond the caps are ignored, their pops too */
        return 0;
    }
    if (need + 1 > t->owner_cap) {
        char *b = realloc(t->owner, MAX_OWNER_BYTES + 1);
        if (!b)
            return conv__oom(c, "owner labels");
        t->owner = b;
        t->owner_cap = MAX_OWNER_BYTES + 1;
    }
    if (t->owner_depth)
        t->owner[t->owner_len++] = '@';
    memcpy(t->owner + t->owner_len, label, len);
    t->owner_len += len;
    t->owner_ends[t->owner_depth++] = t->owner_len;
    return owner_update(c, t);
}

static int owner_pop(struct conv *c, struct thread *t)
{
    if (t->owner_overflow) {
        t->owner_overflow--;
        return 0;
    }
    if (t->owner_depth == 0)
        return 0; /* a pop without a push: ignored */
    t->owner_depth--;
    t->owner_len = t->owner_depth ? t->owner_ends[t->owner_depth - 1] : 0;
    return owner_update(c, t);
}

/* Writes the ranges row of open range i of thread t (end_event 0: never popped). */
static int range_write(struct conv *c, struct thread *t, int i, int64_t end_ns, int64_t end_event)
{
    struct open_range *o = &t->ranges[i];
    struct conv_range r = {.id = o->id,
                           .process_id = c->procs[t->proc].id,
                           .thread_id = (int64_t)(t - c->threads) + 1,
                           .depth = i,
                           .parent = i ? t->ranges[i - 1].id : 0,
                           .start_ns = o->start_ns,
                           .end_ns = end_ns,
                           .start_event = o->start_event,
                           .end_event = end_event,
                           .name = o->name};
    int rc = c->sink->range(c, &r);
    free(o->name);
    o->name = NULL;
    return rc;
}

/* The block of process p live at addr (an ACCESS, a tag): the heap, then mmap, then the pools.
 * Returns its conv.blocks slot, or -1. */
static int64_t live_block_at(const struct proc *p, uint64_t addr, int *layer)
{
    uint32_t slot;
    for (size_t l = 1; l < p->nls; l++) {
        if (l > MS_LAYER_MMAP && l < MS_LAYER_POOL0)
            continue;
        if (p->ls[l].used && ms_u64map_get32(&p->ls[l].live, addr, &slot)) {
            *layer = (int)l;
            return slot;
        }
    }
    return -1;
}

static int access_block(struct proc *p, uint64_t addr, int *layer, int64_t *alloc_id,
                        struct block *blocks)
{
    int64_t slot = live_block_at(p, addr, layer);
    if (slot < 0)
        return 0;
    *alloc_id = blocks[slot].alloc_id;
    blocks[slot].keep = 1; /* the compact database keeps an accessed block's row */
    return 1;
}

/* Reads "0x<hex>" at *s (n bytes left); returns 0 and advances, or -1. */
static int parse_hex(const char **s, size_t *n, uint64_t *v)
{
    const char *p = *s;
    size_t k = 0;
    if (*n < 3 || p[0] != '0' || p[1] != 'x')
        return -1;
    uint64_t x = 0;
    for (k = 2; k < *n && k < 18; k++) {
        char ch = p[k];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0)
            break;
        x = x << 4 | (uint64_t)d;
    }
    if (k == 2)
        return -1;
    *v = x;
    *s += k;
    *n -= k;
    return 0;
}

/* Owner tags after the fact, written as MARKs by the Python package (docs/database.md
 * "Owner tags"):
 *   "memscope-tag:ptr=0x<hex>;size=<n>;owner=<owner>"  the block's owner becomes <owner>;
 *   "describe addr=0x<hex> owner=<label>"               it becomes <owner at allocation>@<label>.
 * The block is the one of this process live at exactly that address; none: nothing happens. */
static int apply_tag(struct conv *c, struct proc *p, const char *m, size_t n)
{
    static const char tag[] = "memscope-tag:ptr=", desc[] = "describe addr=";
    const char *s = m, *owner = NULL;
    size_t left = n, olen = 0;
    uint64_t addr;
    int extend;
    if (n > sizeof tag - 1 && !memcmp(m, tag, sizeof tag - 1)) {
        extend = 0;
        s += sizeof tag - 1;
        left -= sizeof tag - 1;
        const char *o = memmem(s, left, ";owner=", 7);
        if (!o)
            return 0;
        owner = o + 7;
        olen = n - (size_t)(owner - m);
    } else if (n > sizeof desc - 1 && !memcmp(m, desc, sizeof desc - 1)) {
        extend = 1;
        s += sizeof desc - 1;
        left -= sizeof desc - 1;
        const char *o = memmem(s, left, " owner=", 7);
        if (!o)
            return 0;
        owner = o + 7;
        olen = n - (size_t)(owner - m);
    } else {
        return 0;
    }
    if (parse_hex(&s, &left, &addr) < 0 || olen == 0 || olen > MAX_OWNER_BYTES)
        return 0;
    int layer;
    int64_t slot = live_block_at(p, addr, &layer);
    if (slot < 0)
        return 0;
    struct block *b = &c->blocks[slot];
    char buf[2 * MAX_OWNER_BYTES + 2];
    size_t len = 0;
    if (extend && b->base_owner_id) {
        const char *base = ms_strtab_text(&c->owners, b->base_owner_id);
        len = strlen(base);
        memcpy(buf, base, len);
        buf[len++] = '@';
    }
    memcpy(buf + len, owner, olen);
    len += olen;
    int64_t id;
    int is_new = 0;
    if (ms_strtab_intern(&c->owners, buf, len, &id, &is_new) < 0)
        return conv__oom(c, "owners");
    if (is_new) {
        sqlite3_bind_int64(c->ins_owner, 1, id);
        sqlite3_bind_text(c->ins_owner, 2, buf, (int)len, SQLITE_STATIC);
        int rc = conv__step_reset(c, c->ins_owner, "insert owner");
        if (rc < 0)
            return rc;
    }
    b->owner_id = id;
    c->retagged = 1;
    b->keep = 1; /* retagged: the compact database keeps its row (its owner is not the one
                  * its MALLOC had) */
    return 0;
}

/* Writes the python_trace row of thread t's innermost open tracer call, ending at end_ns. */
static int pytrace_write(struct conv *c, struct thread *t, int64_t end_ns)
{
    struct proc *p = &c->procs[t->proc];
    struct pycall *pc = &t->calls[--t->ncalls];
    uint32_t fi;
    char info[2 * MS_TRACE_MAX_LABEL + 32];
    if (ms_u64map_get32(&p->pyframe_ids, pc->frame, &fi))
        snprintf(info, sizeof info, "%s(%lld): %s", c->pyframes[fi - 1].file,
                 (long long)c->pyframes[fi - 1].firstline, c->pyframes[fi - 1].func);
    else
        snprintf(info, sizeof info, "?? (frame %u)", pc->frame);
    sqlite3_stmt *st = c->ins_pytrace;
    sqlite3_bind_text(st, 1, info, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, pc->start_ns);
    sqlite3_bind_int64(st, 3, end_ns);
    sqlite3_bind_int64(st, 4, t->tid);
    sqlite3_bind_int64(st, 5, (int64_t)p->tr.hdr.pid);
    sqlite3_bind_int64(st, 6, t->ncalls);
    return conv__step_reset(c, st, "insert python trace");
}

int conv__on_annotation(struct conv *c, struct stream *s)
{
    struct proc *p = &c->procs[s->proc];
    struct thread *t = &c->threads[s->thread - 1];
    const struct ms_record *r = &s->r;
    int rc, pool;
    char num[24];
    switch (r->fn) {
    case MS_EXT_STEP: {
        p->steps++;
        p->moments++;
        snprintf(num, sizeof num, "%lld", (long long)p->steps);
        rc = conv__write_event_full(c, s, MS_KIND_STEP, MS_LAYER_ANNOTATION, 0, 0, 0, 0, NULL, 0, 0,
                                    num, strlen(num), -1);
        if (rc < 0)
            return rc;
        struct conv_step st = {.process_id = p->id,
                               .step = p->steps,
                               .start_ns = p->steps == 1 ? p->first_ns : p->step_start_ns,
                               .end_ns = s->ts,
                               .end_event = c->next_event};
        p->step_start_ns = s->ts;
        if (c->trend_ok && (rc = conv__compact_step(c, p, s->ts)) < 0)
            return rc;
        return c->sink->step(c, &st);
    }
    case MS_EXT_OWNER_PUSH: return owner_push(c, t, r->str1, r->len1);
    case MS_EXT_OWNER_POP: return owner_pop(c, t);
    case MS_EXT_MARK:
        rc = conv__write_event_full(c, s, MS_KIND_MARK, MS_LAYER_ANNOTATION, 0, 0, 0, 0, NULL, 0, 0,
                                    r->str1, r->len1, -1);
        if (rc == 0)
            rc = conv__windows_mark(c, r->str1, r->len1);
        return rc < 0 ? rc : apply_tag(c, p, r->str1, r->len1);
    case MS_EXT_RANGE_PUSH: {
        if (t->nranges >= MAX_OPEN_RANGES)
            return conv__fail(c, MS_ELIMIT, "more than %d nested ranges on one thread",
                              MAX_OPEN_RANGES);
        if (ms_grow((void **)&t->ranges, &t->aranges, (size_t)t->nranges, sizeof *t->ranges, 16,
                    MAX_OPEN_RANGES) < 0)
            return conv__oom(c, "ranges");
        rc = conv__write_event_full(c, s, MS_KIND_RANGE_START, MS_LAYER_ANNOTATION, 0, 0, 0, 0,
                                    NULL, 0, 0, r->str1, r->len1, -1);
        if (rc < 0)
            return rc;
        struct open_range *o = &t->ranges[t->nranges];
        o->name = malloc(r->len1 + 1);
        if (!o->name)
            return conv__oom(c, "ranges");
        memcpy(o->name, r->str1, r->len1);
        o->name[r->len1] = 0;
        o->id = ++c->next_range;
        o->start_ns = s->ts;
        o->start_event = c->next_event;
        t->nranges++;
        return 0;
    }
    case MS_EXT_RANGE_POP: {
        if (t->nranges == 0)
            return 0; /* a pop without a push: ignored */
        struct open_range *o = &t->ranges[t->nranges - 1];
        rc = conv__write_event_full(c, s, MS_KIND_RANGE_END, MS_LAYER_ANNOTATION, 0, 0, 0, 0, NULL,
                                    0, 0, o->name, strlen(o->name), -1);
        if (rc == 0)
            rc = range_write(c, t, t->nranges - 1, s->ts, c->next_event);
        t->nranges--;
        return rc;
    }
    case MS_EXT_ACCESS: {
        int layer = MS_LAYER_HEAP;
        int64_t alloc_id = 0;
        access_block(p, r->addr, &layer, &alloc_id, c->blocks);
        /* "op" or "op\x1fkey=value;key=value" (the tensor's dtype, shape, format from
         * memscope.torch): the name is the op, the rest msMemScope's ACCESS Attr members */
        const char *sep = memchr(r->str1, MS_ACCESS_ATTR_SEP, r->len1);
        size_t nlen = sep ? (size_t)(sep - r->str1) : r->len1;
        struct ms_buf b = {0};
        if (sep) {
            const char *q = sep + 1, *end = r->str1 + r->len1;
            ms_buf_add(&b, "{", 1);
            int first = 1;
            while (q < end && !b.oom) {
                const char *semi = memchr(q, ';', (size_t)(end - q)), *stop = semi ? semi : end;
                const char *eq = memchr(q, '=', (size_t)(stop - q));
                if (eq && eq > q) {
                    ms_buf_add(&b, first ? "" : ",", first ? 0 : 1);
                    ms_buf_json(&b, q, (size_t)(eq - q));
                    ms_buf_add(&b, ":", 1);
                    ms_buf_json(&b, eq + 1, (size_t)(stop - eq - 1));
                    first = 0;
                }
                q = stop + 1;
            }
            ms_buf_add(&b, "}", 1);
            if (b.oom) {
                free(b.p);
                return conv__oom(c, "access attributes");
            }
            c->attr = b.p;
            c->attr_len = b.len;
        }
        rc = conv__write_event_full(c, s, MS_KIND_ACCESS, layer, (int64_t)r->addr, 1,
                                    (int64_t)r->size, 1, NULL, 0, alloc_id, r->str1, nlen,
                                    (int)r->flags);
        c->attr = NULL;
        free(b.p);
        return rc;
    }
    case MS_EXT_POOL_ALLOC:
    case MS_EXT_POOL_RESERVE:
        if ((pool = pool_index(c, r)) < 0)
            return MS_ENOMEM;
        return conv__on_alloc(c, s, MS_LAYER_POOL0 + 2 * pool + (r->fn == MS_EXT_POOL_RESERVE),
                              r->fn == MS_EXT_POOL_RESERVE ? "pool_reserve" : "pool_alloc");
    case MS_EXT_PYCALL:
        if (t->ncalls >= MS_TRACE_MAX_DEPTH * 64)
            return 0; /* deeper than any real recursion limit: ignored */
        if (conv__grow((void **)&t->calls, &t->acalls_sz, t->ncalls, sizeof *t->calls,
                       MS_TRACE_MAX_DEPTH * 64) < 0)
            return conv__oom(c, "tracer calls");
        t->calls[t->ncalls].frame = (uint32_t)r->addr;
        t->calls[t->ncalls].start_ns = s->ts;
        t->ncalls++;
        return 0;
    case MS_EXT_PYRETURN: return t->ncalls ? pytrace_write(c, t, s->ts) : 0;
    case MS_EXT_CUDA_MEM:
    case MS_EXT_CUDA_OOM:
    case MS_EXT_CUDA_LAUNCH:
    case MS_EXT_CUDA_USAGE: return conv__on_cuda(c, s);
    case MS_EXT_POOL_FREE:
    case MS_EXT_POOL_RELEASE:
        if ((pool = pool_index(c, r)) < 0)
            return MS_ENOMEM;
        return conv__on_free(c, s, MS_LAYER_POOL0 + 2 * pool + (r->fn == MS_EXT_POOL_RELEASE),
                             r->fn == MS_EXT_POOL_RELEASE ? "pool_release" : "pool_free");
    default: return 0;
    }
}

/* Ranges never popped, the unfinished last step of each process, and the pools. */
int conv__write_annotations(struct conv *c)
{
    int rc = 0;
    for (size_t i = 0; i < c->nthreads && rc == 0; i++) {
        struct thread *t = &c->threads[i];
        for (int k = 0; k < t->nranges && rc == 0; k++)
            rc = range_write(c, t, k, 0, 0);
        while (t->ncalls && rc == 0) /* calls still running at the end: end them there */
            rc = pytrace_write(c, t, t->last_ns);
    }
    /* msMemScope's per-process tables: real tables in the full database (Insight looks them
     * up with type = 'table', adds a Depth column and updates rows), views in a compact one. */
    for (size_t i = 0; i < c->nprocs && rc == 0; i++) {
        unsigned long long pid = (unsigned long long)c->procs[i].tr.hdr.pid;
        const char *cols = "\"FuncInfo\", \"StartTime(ns)\", \"EndTime(ns)\", \"Thread Id\", "
                           "\"Process Id\"";
        sqlite3_stmt *q;
        if (conv__prepare(c, &q, "SELECT 1 FROM python_trace WHERE \"Process Id\" = ? LIMIT 1") < 0)
            return MS_EDB;
        sqlite3_bind_int64(q, 1, (int64_t)pid);
        int have = sqlite3_step(q) == SQLITE_ROW;
        sqlite3_finalize(q);
        if (!have)
            continue;
        char *sql = c->sink->python_trace_sql(pid, cols);
        rc = sql ? conv__exec(c, sql, "create python_trace_<pid>")
                 : conv__oom(c, "python_trace_<pid>");
        sqlite3_free(sql);
    }
    for (size_t i = 0; i < c->nprocs && rc == 0; i++) {
        struct proc *p = &c->procs[i];
        if (!p->steps)
            continue;
        struct conv_step st = {.process_id = p->id,
                               .step = p->steps + 1,
                               .start_ns = p->step_start_ns,
                               .end_ns = p->last_ns}; /* end_event 0: open at the end */
        rc = c->sink->step(c, &st);
    }
    sqlite3_stmt *pl = NULL, *ly = NULL;
    if (rc == 0 && c->npools) {
        rc = conv__prepare(c, &pl, "INSERT INTO pools VALUES (?,?,?,?)");
        if (rc == 0)
            rc = conv__prepare(c, &ly, "INSERT INTO layers VALUES (?,?,?,NULL)");
    }
    for (size_t i = 0; i < c->npools && rc == 0; i++) {
        int layer = MS_LAYER_POOL0 + 2 * (int)i;
        char name[MS_TRACE_MAX_LABEL + 32], type[MS_TRACE_MAX_LABEL + 32];
        sqlite3_bind_int64(pl, 1, (int64_t)i + 1);
        sqlite3_bind_text(pl, 2, c->pools[i], -1, SQLITE_STATIC);
        sqlite3_bind_int64(pl, 3, layer);
        sqlite3_bind_int64(pl, 4, layer + 1);
        rc = conv__step_reset(c, pl, "insert pool");
        for (int k = 0; k < 2 && rc == 0; k++) {
            snprintf(name, sizeof name, "pool:%s%s", c->pools[i], k ? ":reserved" : "");
            snprintf(type, sizeof type, "%s%s", c->pools[i], k ? "_RESERVED" : "");
            sqlite3_bind_int64(ly, 1, layer + k);
            sqlite3_bind_text(ly, 2, name, -1, SQLITE_STATIC);
            sqlite3_bind_text(ly, 3, type, -1, SQLITE_STATIC);
            rc = conv__step_reset(c, ly, "insert layer");
        }
    }
    sqlite3_finalize(pl);
    sqlite3_finalize(ly);
    return rc ? rc : conv__write_cuda_layers(c);
}
