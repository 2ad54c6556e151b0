/* convert_cow.c: copy-on-write traced to the objects (docs/usage.md): the pages a forked image
 * held alone (the sampler's pagemap walks, usage-<pid>.msp, common/usage_pages.h) mapped onto
 * the blocks its parent had live at the fork, into the usage_cow and usage_cow_stacks tables
 * (docs/database.md), from which `analyze usage` names the call sites and owners.
 *
 * For each image whose trace header says it began as a fork (MS_TRACE_F_FORKED) and that has
 * walks, the walk with the most private bytes is kept (the sampler writes it last). In pass 2,
 * when the merge reaches the image's start (the fork), its parent's live heap and mmap blocks are
 * exactly those live at the fork: each block's bytes lying in the walk's pages are counted to
 * its stack and owner. Their total is also noted as the image's inherited live bytes (struct
 * proc), which its usage samples count as live: they are in its address space too (an upper
 * bound: a child that frees an inherited block frees what the conversion cannot size). The blocks' bytes, not the pages': a page a block shares with a
 * neighbour or a chunk header counts for each only its own part, so a block written whole
 * counts its size exactly.
 *
 * Workload: a few forked images; per image, one pass over its parent's live blocks with a
 * binary search in the walk's ranges per block. */
#include "convert_internal.h"

#include <stdint.h>

struct cow_stack {
    int64_t stack_id, owner_id, blocks, bytes;
};

struct cow_child {
    size_t proc, parent; /* indexes in c->procs */
    int64_t fork_ns;     /* epoch ns: the child's start */
    struct ms_pages_walk walk;
    int walked;      /* walk holds one (else only its inherited live bytes are noted) */
    int64_t walk_ns; /* its time, epoch ns */
    int done;
    int64_t cow_bytes, blocks;
    struct cow_stack *stacks;
    size_t nstacks;
};

static int cmp_child(const void *a, const void *b)
{
    const struct cow_child *x = a, *y = b;
    if (x->fork_ns != y->fork_ns)
        return x->fork_ns < y->fork_ns ? -1 : 1;
    return x->proc < y->proc ? -1 : x->proc > y->proc;
}

/* The child entry of image k, made when new; NULL when out of memory. */
static struct cow_child *child_of(struct conv *c, size_t k, size_t *cap)
{
    for (size_t i = 0; i < c->ncow; i++)
        if (c->cow[i].proc == k)
            return &c->cow[i];
    if (ms_grow((void **)&c->cow, cap, c->ncow, sizeof *c->cow, 8, MAX_FILES) < 0)
        return NULL;
    struct cow_child *ch = &c->cow[c->ncow++];
    memset(ch, 0, sizeof *ch);
    ch->proc = k;
    ch->parent = SIZE_MAX;
    return ch;
}

int conv__cow_load(struct conv *c)
{
    if (!c->sink->file)
        return 0;
    size_t cap = 0;
    int rc = 0;
    for (size_t f = 0; rc == 0 && f < c->nusage_paths; f++) {
        const char *path = c->usage_paths[f], *name = strrchr(path, '/') + 1;
        if (!ms_pages_is_file(name))
            continue;
        struct ms_pages_walk *v = NULL;
        size_t n = 0;
        struct stat st;
        int lrc = lstat(path, &st) == 0 && !S_ISREG(st.st_mode) ? MS_EFORMAT
                                                                : ms_pages_load(path, &v, &n);
        if (lrc == MS_ENOMEM)
            return conv__oom(c, "copy-on-write walks");
        if (lrc < 0) {
            if (!c->res->warning[0])
                snprintf(c->res->warning, sizeof c->res->warning,
                         "%.400s: %s; no copy-on-write figures", name, ms_strerror(lrc));
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            ptrdiff_t k = conv__proc_at(c, v[i].pid, v[i].ts_ns);
            if (k < 0 || !(c->procs[k].tr.hdr.flags & MS_TRACE_F_FORKED))
                continue; /* not a forked image: an exec'd program copied nothing */
            struct cow_child *ch = child_of(c, (size_t)k, &cap);
            if (!ch) {
                rc = conv__oom(c, "copy-on-write walks");
                break;
            }
            if (ch->walked && ch->walk.bytes >= v[i].bytes)
                continue;
            ms_pages_walk_release(&ch->walk);
            ch->walk = v[i];
            ch->walked = 1;
            v[i].r = NULL; /* moved */
        }
        for (size_t i = 0; i < n; i++)
            ms_pages_walk_release(&v[i]);
        free(v);
    }
    /* every forked image (walked or not: its samples' live bytes count what it inherited) */
    for (size_t k = 0; rc == 0 && k < c->nprocs; k++)
        if ((c->procs[k].tr.hdr.flags & MS_TRACE_F_FORKED) && !child_of(c, k, &cap))
            rc = conv__oom(c, "copy-on-write walks");
    /* each child's parent: the image of its ppid running at the fork */
    for (size_t i = 0; rc == 0 && i < c->ncow; i++) {
        struct cow_child *ch = &c->cow[i];
        const struct proc *p = &c->procs[ch->proc];
        ch->fork_ns = conv__epoch_ns(p, p->tr.hdr.start_mono_ns);
        ch->walk_ns = conv__epoch_ns(p, ch->walk.ts_ns);
        ptrdiff_t k = conv__proc_at(c, (uint32_t)p->tr.hdr.ppid, p->tr.hdr.start_mono_ns);
        if (k >= 0 && (size_t)k != ch->proc)
            ch->parent = (size_t)k;
    }
    if (c->ncow)
        qsort(c->cow, c->ncow, sizeof *c->cow, cmp_child);
    return rc;
}

/* The bytes of [addr, addr + size) that lie in w's ranges. */
static uint64_t overlap(const struct ms_pages_walk *w, uint64_t addr, uint64_t size)
{
    uint64_t end = addr + size;
    if (!size || end < addr)
        return 0;
    size_t lo = 0, hi = w->n; /* the first range that ends after addr */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->r[mid].start + w->r[mid].len <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t sum = 0;
    for (size_t i = lo; i < w->n && w->r[i].start < end; i++) {
        uint64_t a = w->r[i].start > addr ? w->r[i].start : addr;
        uint64_t b = w->r[i].start + w->r[i].len < end ? w->r[i].start + w->r[i].len : end;
        sum += b - a;
    }
    return sum;
}

static int cmp_stack(const void *a, const void *b)
{
    const struct cow_stack *x = a, *y = b;
    if (x->stack_id != y->stack_id)
        return x->stack_id < y->stack_id ? -1 : 1;
    return x->owner_id < y->owner_id ? -1 : x->owner_id > y->owner_id;
}

/* Counts the parent's live blocks (now: the fork) in ch's walk, by stack and owner. */
static int attribute(struct conv *c, struct cow_child *ch)
{
    ch->done = 1;
    if (ch->parent == SIZE_MAX)
        return 0;
    const struct proc *p = &c->procs[ch->parent];
    if (p->nls > MS_LAYER_MMAP)
        c->procs[ch->proc].inherited_live =
            p->ls[MS_LAYER_HEAP].st.live_bytes + p->ls[MS_LAYER_MMAP].st.live_bytes;
    if (!ch->walk.n)
        return 0;
    size_t cap = 0;
    const int layers[2] = {MS_LAYER_HEAP, MS_LAYER_MMAP};
    for (int li = 0; li < 2; li++) {
        if ((size_t)layers[li] >= p->nls)
            continue;
        const struct ms_u64map *live = &p->ls[layers[li]].live;
        size_t pos = 0;
        uint64_t key;
        uint32_t slot;
        while (ms_u64map_next32(live, &pos, &key, &slot)) {
            const struct block *b = &c->blocks[slot];
            uint64_t ov = overlap(&ch->walk, (uint64_t)b->addr, (uint64_t)b->size);
            if (!ov)
                continue;
            if (ms_grow((void **)&ch->stacks, &cap, ch->nstacks, sizeof *ch->stacks, 64, MAX_LIVE) <
                0)
                return conv__oom(c, "copy-on-write blocks");
            ch->stacks[ch->nstacks++] =
                (struct cow_stack){b->stack_id, b->owner_id, 1, (int64_t)ov};
            ch->cow_bytes += (int64_t)ov;
            ch->blocks++;
        }
    }
    if (!ch->nstacks)
        return 0;
    qsort(ch->stacks, ch->nstacks, sizeof *ch->stacks, cmp_stack);
    size_t n = 0;
    for (size_t i = 0; i < ch->nstacks; i++) {
        if (n && !cmp_stack(&ch->stacks[n - 1], &ch->stacks[i])) {
            ch->stacks[n - 1].blocks += ch->stacks[i].blocks;
            ch->stacks[n - 1].bytes += ch->stacks[i].bytes;
        } else {
            ch->stacks[n++] = ch->stacks[i];
        }
    }
    ch->nstacks = n;
    return 0;
}

int conv__cow_until(struct conv *c, int64_t ts)
{
    int rc = 0;
    for (; rc == 0 && c->cow_next < c->ncow && c->cow[c->cow_next].fork_ns < ts; c->cow_next++)
        rc = attribute(c, &c->cow[c->cow_next]);
    return rc;
}

int conv__cow_write(struct conv *c)
{
    if (!c->sink->file)
        return 0;
    sqlite3_stmt *a, *b;
    int rc = conv__prepare(c, &a,
                           "INSERT INTO usage_cow (process_id, parent_id, fork_ns, ts_ns, "
                           "private_bytes, cow_bytes, blocks) VALUES (?, ?, ?, ?, ?, ?, ?)");
    if (rc < 0)
        return rc;
    rc = conv__prepare(c, &b,
                       "INSERT INTO usage_cow_stacks (process_id, stack_id, owner_id, blocks, "
                       "bytes) VALUES (?, ?, ?, ?, ?)");
    if (rc < 0) {
        sqlite3_finalize(a);
        return rc;
    }
    for (size_t i = 0; i < c->ncow && rc == 0; i++) {
        const struct cow_child *ch = &c->cow[i];
        if (!ch->done || ch->parent == SIZE_MAX || !ch->walked)
            continue;
        int64_t id = c->procs[ch->proc].id;
        sqlite3_bind_int64(a, 1, id);
        sqlite3_bind_int64(a, 2, c->procs[ch->parent].id);
        sqlite3_bind_int64(a, 3, ch->fork_ns);
        sqlite3_bind_int64(a, 4, ch->walk_ns);
        sqlite3_bind_int64(a, 5, ch->walk.bytes > INT64_MAX ? INT64_MAX : (int64_t)ch->walk.bytes);
        sqlite3_bind_int64(a, 6, ch->cow_bytes);
        sqlite3_bind_int64(a, 7, ch->blocks);
        rc = conv__step_reset(c, a, "usage_cow");
        for (size_t k = 0; k < ch->nstacks && rc == 0; k++) {
            const struct cow_stack *s = &ch->stacks[k];
            sqlite3_bind_int64(b, 1, id);
            conv__bind_opt(b, 2, s->stack_id, s->stack_id > 0);
            conv__bind_opt(b, 3, s->owner_id, s->owner_id > 0);
            sqlite3_bind_int64(b, 4, s->blocks);
            sqlite3_bind_int64(b, 5, s->bytes);
            rc = conv__step_reset(c, b, "usage_cow_stacks");
        }
    }
    sqlite3_finalize(a);
    sqlite3_finalize(b);
    return rc;
}

void conv__cow_release(struct conv *c)
{
    for (size_t i = 0; i < c->ncow; i++) {
        ms_pages_walk_release(&c->cow[i].walk);
        free(c->cow[i].stacks);
    }
    free(c->cow);
    c->cow = NULL;
    c->ncow = 0;
}
