/* convert_mmap.c: address-space reservations in the conversion (docs/database.md, "The mmap
 * layer"): the MMAP_RESERVE, MMAP_COMMIT and MMAP_DECOMMIT records, and the MMAP_ALLOC and
 * MUNMAP records of a process that has reservations.
 *
 * Called by pass 2 (convert_match.c). Workload: a few to a few thousand reservations per process
 * (V8's code range and heap pages, JVMs, Go), and from a few commits per reservation to many
 * thousands of mprotect calls (a JIT switching its code pages between write and execute).
 *
 * Design: per process, two sorted arrays of disjoint address ranges: the reservations, each a
 * live block of layer MS_LAYER_MMAP_RESERVE, and the commits, each a live block of the mmap
 * layer. A commit (mprotect with access) adds blocks for the parts of the reservations in its
 * range that no commit covers yet, so that giving access twice counts once; an mmap with access
 * that overlaps a reservation is a commit of its own range. A decommit (mprotect to PROT_NONE),
 * an munmap, or a new mapping over a range ends the blocks of the ranges it overlaps and starts
 * new ones (same stack and function) for what is left of them outside it: live bytes stay exact
 * under partial calls, as V8 trims its aligned reservations. A commit outside every reservation
 * changes nothing (mprotect of an ordinary mapping: it was counted when it was mapped).
 * Invariant: every range of either array is the live block of its layer that starts at the
 * range's start, with the range's size. The arrays grow by doubling up to MAX_LIVE ranges.
 * NEEDSWORK: insertion and removal move the array's tail: a process with 10^5 live committed
 * ranges would want a balanced tree. A reservation moved by mremap becomes an ordinary
 * mapping (the agent records mremap as munmap + MMAP_ALLOC, not knowing the access). Memory
 * committed but never touched (a JVM commits its initial heap with mmap MAP_FIXED) is counted
 * as committed: telling it apart needs the pages' residency (mincore), not the calls. */
#include "convert_internal.h"

struct mm_range {
    uint64_t lo, hi;
};

enum { RESV, COMMIT };

struct conv_mm {
    struct mm_range *r[2];
    size_t n[2], a[2];
};

static const int layer_of[2] = {MS_LAYER_MMAP_RESERVE, MS_LAYER_MMAP};

/* The end of [addr, addr + len), capped at the top of the address space. */
static uint64_t range_end(uint64_t addr, uint64_t len)
{
    return addr + len < addr ? UINT64_MAX : addr + len;
}

/* The index of the first range of array k that ends after a. */
static size_t first_after(const struct conv_mm *m, int k, uint64_t a)
{
    size_t lo = 0, hi = m->n[k];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->r[k][mid].hi <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int insert_at(struct conv *c, struct conv_mm *m, int k, size_t i, uint64_t lo, uint64_t hi)
{
    if (ms_grow((void **)&m->r[k], &m->a[k], m->n[k], sizeof *m->r[k], 64, MAX_LIVE) < 0)
        return conv__oom(c, "reservations");
    memmove(&m->r[k][i + 1], &m->r[k][i], (m->n[k] - i) * sizeof *m->r[k]);
    m->r[k][i] = (struct mm_range){lo, hi};
    m->n[k]++;
    return 0;
}

/* A block of array k's layer for [lo, hi), inserted at index i. */
static int add_range(struct conv *c, const struct stream *s, struct conv_mm *m, int k, size_t i,
                     uint64_t lo, uint64_t hi, uint32_t stack, const char *func)
{
    int rc = conv__alloc_block(c, s, layer_of[k], lo, hi - lo, stack, func);
    return rc < 0 ? rc : insert_at(c, m, k, i, lo, hi);
}

/* Ends the ranges of array k that overlap [a, b) with a FREE event by func, and starts blocks
 * for their parts outside it. *hit is set when there was one. */
static int cut(struct conv *c, const struct stream *s, struct conv_mm *m, int k, uint64_t a,
               uint64_t b, const char *func, int *hit)
{
    struct proc *p = &c->procs[s->proc];
    size_t i = first_after(m, k, a);
    int rc = 0;
    while (rc == 0 && i < m->n[k] && m->r[k][i].lo < b) {
        struct mm_range g = m->r[k][i];
        memmove(&m->r[k][i], &m->r[k][i + 1], (m->n[k] - i - 1) * sizeof *m->r[k]);
        m->n[k]--;
        *hit = 1;
        uint32_t slot;
        if (!ms_u64map_del(&p->ls[layer_of[k]].live, g.lo, &slot))
            continue; /* not live: an allocation at its address closed it (convert_match.c) */
        uint32_t stack = c->blocks[slot].stack_id;
        const char *bfunc = c->blocks[slot].func;
        rc = conv__free_block(c, s, layer_of[k], slot, func);
        if (rc == 0 && g.lo < a && (rc = add_range(c, s, m, k, i, g.lo, a, stack, bfunc)) == 0)
            i++;
        if (rc == 0 && b < g.hi && (rc = add_range(c, s, m, k, i, b, g.hi, stack, bfunc)) == 0)
            i++;
    }
    return rc;
}

/* Adds blocks to array k for the parts of [a, b) that none of its ranges covers. */
static int fill(struct conv *c, const struct stream *s, struct conv_mm *m, int k, uint64_t a,
                uint64_t b, uint32_t stack, const char *func)
{
    size_t i = first_after(m, k, a);
    int rc = 0;
    for (uint64_t x = a; x < b && rc == 0;) {
        if (i < m->n[k] && m->r[k][i].lo <= x) {
            x = m->r[k][i++].hi;
            continue;
        }
        uint64_t e = i < m->n[k] && m->r[k][i].lo < b ? m->r[k][i].lo : b;
        rc = add_range(c, s, m, k, i++, x, e, stack, func);
        x = e;
    }
    return rc;
}

static struct conv_mm *mm_of(struct conv *c, struct proc *p)
{
    if (!p->mm && !(p->mm = calloc(1, sizeof *p->mm)))
        conv__oom(c, "reservations");
    return p->mm;
}

/* Commits the parts of the reservations in [a, b) that are not committed yet. */
static int commit(struct conv *c, const struct stream *s, struct conv_mm *m, uint64_t a, uint64_t b,
                  uint32_t stack, const char *func)
{
    int rc = 0;
    for (size_t i = first_after(m, RESV, a); rc == 0 && i < m->n[RESV] && m->r[RESV][i].lo < b;
         i++) {
        uint64_t lo = m->r[RESV][i].lo > a ? m->r[RESV][i].lo : a;
        uint64_t hi = m->r[RESV][i].hi < b ? m->r[RESV][i].hi : b;
        rc = fill(c, s, m, COMMIT, lo, hi, stack, func);
    }
    return rc;
}

int conv__mmap_record(struct conv *c, struct stream *s)
{
    struct proc *p = &c->procs[s->proc];
    const struct ms_record *r = &s->r;
    uint64_t a = r->addr, b = range_end(r->addr, r->size);
    if (a >= b)
        return 0;
    if (r->fn != MS_EXT_MMAP_RESERVE && !p->mm)
        return 0; /* mprotect of an ordinary mapping: no reservation in this process */
    struct conv_mm *m = mm_of(c, p);
    if (!m || !conv__proc_layer(c, p, MS_LAYER_MMAP) ||
        !conv__proc_layer(c, p, MS_LAYER_MMAP_RESERVE))
        return MS_ENOMEM;
    int hit = 0, rc;
    size_t nhits;
    switch (r->fn) {
    case MS_EXT_MMAP_RESERVE:
        /* over a mapping (mmap MAP_FIXED, PROT_NONE): what was there is gone */
        rc = cut(c, s, m, COMMIT, a, b, "mmap", &hit);
        if (rc == 0)
            rc = conv__mmap_end_blocks(c, s, a, b - a, "mmap", &nhits);
        return rc ? rc : fill(c, s, m, RESV, a, b, conv__stack_of(c, s), "mmap");
    case MS_EXT_MMAP_COMMIT: return commit(c, s, m, a, b, conv__stack_of(c, s), "mprotect");
    default: return cut(c, s, m, COMMIT, a, b, "mprotect", &hit);
    }
}

int conv__mmap_alloc(struct conv *c, struct stream *s)
{
    struct proc *p = &c->procs[s->proc];
    struct conv_mm *m = p->mm;
    uint64_t a = s->r.addr, b = range_end(s->r.addr, s->r.size);
    int hit = 0;
    int rc = cut(c, s, m, COMMIT, a, b, "mmap", &hit); /* a new mapping replaces them */
    size_t i = first_after(m, RESV, a);
    if (rc < 0 || i >= m->n[RESV] || m->r[RESV][i].lo >= b || a >= b)
        return rc < 0 ? rc : conv__on_alloc(c, s, MS_LAYER_MMAP, NULL);
    /* with access over a reservation (mmap MAP_FIXED): a commit of its range */
    return fill(c, s, m, COMMIT, a, b, conv__stack_of(c, s), ms_fn_name(s->r.type, s->r.fn));
}

int conv__mmap_munmap(struct conv *c, const struct stream *s, int *hit)
{
    struct conv_mm *m = c->procs[s->proc].mm;
    uint64_t a = s->r.addr, b = range_end(s->r.addr, s->r.size);
    int rc = cut(c, s, m, COMMIT, a, b, "munmap", hit);
    return rc ? rc : cut(c, s, m, RESV, a, b, "munmap", hit);
}

int conv__mmap_write_layers(struct conv *c)
{
    int used = 0;
    for (size_t i = 0; i < c->nprocs; i++)
        used |= c->procs[i].mm != NULL;
    if (!used || !c->sink->file)
        return 0;
    /* a pool of the mmap layer's blocks carved from the reservations: analyses leave its
     * reserve layer out of their default layers, fragmentation shows it */
    int rc = conv__exec(c,
                        "INSERT INTO layers VALUES (" MS_SQL_LAYER_MMAP_RESERVE
                        ", 'mmap_reserved', 'MMAP_RESERVE', 'cpu');"
                        "INSERT INTO pools VALUES ((SELECT coalesce(max(id), 0) + 1 FROM pools), "
                        "'mmap', 2, " MS_SQL_LAYER_MMAP_RESERVE ");",
                        "insert the reservations' layer");
    return rc;
}

void conv__mmap_release(struct proc *p)
{
    if (p->mm) {
        free(p->mm->r[RESV]);
        free(p->mm->r[COMMIT]);
        free(p->mm);
        p->mm = NULL;
    }
}
