/* follow.c: the trace follower (follow.h): raw traces read while their writers run.
 *
 * Called by the live monitor's thread (src/cli/monitor.c) a few times a second. Each file is read
 * with pread only (never mapped: it grows, and a mapping would have to follow it), its chunk
 * headers once, its chunks' `used` words at each poll until a later chunk of the same thread shows
 * that the writer moved on. Damage ends the damaged chunk only, as in reader.c. */
#include "follow.h"
#include "common/bytes.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HOLES 4096 /* zero pages remembered per file (a chunk whose header is coming) */
#define MAX_FILE_CHUNKS (1u << 26)
#define OWNER_DEPTH 64
#define TAG_PREFIX "memscope-tag:" /* docs/torch.md, "Tag marks" */

struct fchunk {
    uint64_t off, prev_ns, prev_addr;
    uint32_t size, serial, seq, consumed;
    uint32_t thread; /* index in the process's threads */
    int done;
};

struct ms_follow_file {
    int fd;
    uint64_t pid;
    uint32_t image;
    size_t proc;
    int done;   /* not a raw trace, or an older image of its pid */
    int retire; /* its process ended: read once more, then closed */
    uint64_t scan_off;
    struct fchunk *chunks;
    size_t nchunks, achunks;
    uint64_t *holes;
    size_t nholes, aholes;
    uint64_t hdr_lost;
};

struct ms_follow_thread {
    uint32_t depth, overflow;
    uint8_t cat[OWNER_DEPTH];
};

enum {
    EV_ALLOC,
    EV_FREE,
    EV_MUNMAP,
    EV_STEP,
    EV_PUSH,
    EV_POP,
    EV_TAG,
    EV_LOST,
    EV_POOL_ALLOC, /* layer: the pool's index */
    EV_POOL_FREE,
    EV_POOL_RESERVE,
    EV_POOL_RELEASE
};

struct ms_follow_event {
    uint64_t ns, addr, size, order;
    uint32_t stack, thread;
    uint8_t kind, layer, cat;
};

struct block {
    uint64_t size;
    uint32_t site; /* index in the process's sites: a free needs no lookup of its stack */
    uint8_t layer, cat;
};

struct stack {
    uint32_t off, depth;
};

static int pool_of(struct ms_follow_proc *p, const char *s, size_t n);

static const char *const owner_names[MS_OWNER_COUNT] = {"weight", "gradient", "optimizer_state",
                                                        "activation", "other"};

const char *ms_follow_owner_name(int cat)
{
    return cat >= 0 && cat < MS_OWNER_COUNT ? owner_names[cat] : "other";
}

int ms_follow_owner_category(const char *s, size_t len)
{
    size_t i = 0;
    while (i <= len) {
        size_t j = i;
        while (j < len && s[j] != '@')
            j++;
        for (int c = 0; c < MS_OWNER_OTHER; c++)
            if (strlen(owner_names[c]) == j - i && memcmp(owner_names[c], s + i, j - i) == 0)
                return c;
        i = j + 1;
    }
    return MS_OWNER_OTHER;
}

int ms_follow_init(struct ms_follow *f, const char *dir)
{
    memset(f, 0, sizeof *f);
    struct stat st;
    if (stat(dir, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    if (access(dir, R_OK | X_OK) < 0)
        return -errno;
    if (strlen(dir) >= sizeof f->dir)
        return -ENAMETOOLONG;
    strcpy(f->dir, dir);
    ms_u64map_init(&f->fmap, sizeof(uint32_t), MS_FOLLOW_MAX_PROCS * 4);
    ms_u64map_init(&f->pmap, sizeof(uint32_t), MS_FOLLOW_MAX_PROCS);
    return 0;
}

static void pools_release(struct ms_follow_proc *p)
{
    for (size_t i = 0; i < p->npools; i++) {
        ms_u64map_release(&p->pools[i].used);
        ms_u64map_release(&p->pools[i].regions);
    }
    free(p->pools);
    p->pools = NULL;
    p->npools = 0;
}

static void proc_release(struct ms_follow_proc *p)
{
    for (int i = 0; i < 3; i++)
        ms_u64map_release(&p->blocks[i]);
    pools_release(p);
    free(p->site);
    free(p->steps);
    ms_u64map_release(&p->sites);
    ms_u64map_release(&p->stacks);
    ms_u64map_release(&p->tmap);
    free(p->pcs);
    for (size_t i = 0; i < p->nmods; i++)
        free(p->mods[i].path);
    free(p->mods);
    free(p->threads);
    free(p->ev);
}

void ms_follow_release(struct ms_follow *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nfiles; i++) {
        if (f->files[i].fd >= 0)
            close(f->files[i].fd);
        free(f->files[i].chunks);
        free(f->files[i].holes);
    }
    free(f->files);
    for (size_t i = 0; i < f->nprocs; i++)
        proc_release(&f->procs[i]);
    free(f->procs);
    ms_u64map_release(&f->fmap);
    ms_u64map_release(&f->pmap);
    free(f->buf);
    free(f->cur);
    memset(f, 0, sizeof *f);
}

static void proc_init(struct ms_follow_proc *p, uint64_t pid)
{
    memset(p, 0, sizeof *p);
    p->pid = pid;
    for (int i = 0; i < 3; i++)
        ms_u64map_init(&p->blocks[i], sizeof(struct block), MS_FOLLOW_MAX_BLOCKS);
    ms_u64map_init(&p->sites, sizeof(uint32_t), MS_FOLLOW_MAX_STACKS);
    ms_u64map_init(&p->stacks, sizeof(struct stack), MS_FOLLOW_MAX_STACKS);
    ms_u64map_init(&p->tmap, sizeof(uint32_t), MS_FOLLOW_MAX_STACKS);
}

/* A new image of a process (an exec): what the old image held is gone with it. */
static void proc_new_image(struct ms_follow_proc *p)
{
    for (int i = 0; i < 3; i++)
        ms_u64map_clear(&p->blocks[i]);
    ms_u64map_clear(&p->sites);
    p->nsite = 0;
    memset(p->scache, 0, sizeof p->scache);
    pools_release(p);
    for (int l = 0; l < MS_FOLLOW_LAYERS; l++)
        p->layer[l].live = 0;
    memset(p->owner_live, 0, sizeof p->owner_live);
    p->host_live = 0;
    p->step_host_hw = 0;
    memset(p->step_dev_hw, 0, sizeof p->step_dev_hw);
}

/* Parses "<pid>.<n>.mst"; 0 when name is one. */
static int parse_name(const char *name, uint64_t *pid, uint32_t *image)
{
    unsigned long long a;
    unsigned b;
    int end = 0;
    if (sscanf(name, "%llu.%u.mst%n", &a, &b, &end) != 2 || name[end] || a == 0 ||
        a >= (1ull << 39) || b >= (1u << 24) || !strchr("0123456789", name[0]))
        return -1;
    *pid = a;
    *image = b;
    return 0;
}

static int add_file(struct ms_follow *f, const char *name, uint64_t pid, uint32_t image)
{
    char path[4096 + 300];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0; /* gone already, or not ours to read: skipped */
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    uint32_t pi;
    if (!ms_u64map_get32(&f->pmap, pid, &pi)) {
        if (f->nprocs >= MS_FOLLOW_MAX_PROCS ||
            ms_grow((void **)&f->procs, &f->aprocs, f->nprocs, sizeof *f->procs, 16,
                    MS_FOLLOW_MAX_PROCS) < 0 ||
            ms_u64map_set32(&f->pmap, pid, (uint32_t)f->nprocs) < 0) {
            close(fd);
            return MS_ENOMEM;
        }
        pi = (uint32_t)f->nprocs++;
        proc_init(&f->procs[pi], pid);
        f->procs[pi].image = image;
    }
    if (ms_grow((void **)&f->files, &f->afiles, f->nfiles, sizeof *f->files, 16,
                MS_FOLLOW_MAX_PROCS * 4) < 0 ||
        ms_u64map_set32(&f->fmap, pid << 24 | image, (uint32_t)f->nfiles + 1) < 0) {
        close(fd);
        return MS_ENOMEM;
    }
    struct ms_follow_file *ff = &f->files[f->nfiles++];
    memset(ff, 0, sizeof *ff);
    ff->fd = fd;
    ff->pid = pid;
    ff->image = image;
    ff->proc = pi;
    ff->scan_off = MS_TRACE_HEADER_SIZE;
    struct ms_follow_proc *p = &f->procs[pi];
    if (image > p->image) { /* the older images' files are done */
        for (size_t i = 0; i + 1 < f->nfiles; i++)
            if (f->files[i].pid == pid)
                f->files[i].done = 1;
        p->image = image;
        proc_new_image(p);
    } else if (image < p->image)
        ff->done = 1;
    return 0;
}

static int list_dir(struct ms_follow *f)
{
    DIR *d = opendir(f->dir);
    if (!d)
        return 0; /* removed under us: nothing new */
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) && rc == 0) {
        uint64_t pid;
        uint32_t image, k;
        if (parse_name(e->d_name, &pid, &image) < 0 ||
            ms_u64map_get32(&f->fmap, pid << 24 | image, &k))
            continue;
        rc = add_file(f, e->d_name, pid, image);
    }
    closedir(d);
    return rc;
}

static int thread_of(struct ms_follow_proc *p, uint32_t image, uint32_t serial, uint32_t *out)
{
    uint64_t key = (uint64_t)image << 32 | serial;
    if (ms_u64map_get32(&p->tmap, key, out))
        return 0;
    if (ms_grow((void **)&p->threads, &p->athreads, p->nthreads, sizeof *p->threads, 8,
                MS_FOLLOW_MAX_STACKS) < 0 ||
        ms_u64map_set32(&p->tmap, key, (uint32_t)p->nthreads) < 0)
        return MS_ENOMEM;
    memset(&p->threads[p->nthreads], 0, sizeof *p->threads);
    *out = (uint32_t)p->nthreads++;
    return 0;
}

/* Reads the chunk header at off: 1 a chunk (added), 0 zeros (a chunk to come, or none), -1
 * damage. */
static int take_chunk(struct ms_follow *f, struct ms_follow_file *ff, uint64_t off, uint64_t end)
{
    unsigned char h[MS_TRACE_CHUNK_HEADER_SIZE];
    if (pread(ff->fd, h, sizeof h, (off_t)off) != (ssize_t)sizeof h)
        return 0;
    uint32_t magic = ms_get32(h), size = ms_get32(h + 4);
    if (magic == 0)
        return 0;
    if (magic != MS_TRACE_CHUNK_MAGIC || size < MS_TRACE_CHUNK_ALIGN ||
        size % MS_TRACE_CHUNK_ALIGN || size > MS_TRACE_MAX_CHUNK || off + size > end)
        return -1;
    struct ms_follow_proc *p = &f->procs[ff->proc];
    if (ff->nchunks >= MAX_FILE_CHUNKS || ms_grow((void **)&ff->chunks, &ff->achunks, ff->nchunks,
                                                  sizeof *ff->chunks, 16, MAX_FILE_CHUNKS) < 0)
        return MS_ENOMEM;
    struct fchunk *c = &ff->chunks[ff->nchunks];
    memset(c, 0, sizeof *c);
    c->off = off;
    c->size = size;
    c->serial = ms_get32(h + 12);
    c->seq = ms_get32(h + 16);
    c->prev_ns = ms_get64(h + 24);
    if (thread_of(p, ff->image, c->serial, &c->thread) < 0)
        return MS_ENOMEM;
    ff->nchunks++;
    return 1;
}

static int cmp_chunk(const void *a, const void *b)
{
    const struct fchunk *x = a, *y = b;
    if (x->serial != y->serial)
        return x->serial < y->serial ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Finds the chunks written since the last poll (and the holes that became chunks). */
static int scan_chunks(struct ms_follow *f, struct ms_follow_file *ff, uint64_t end)
{
    size_t before = ff->nchunks;
    for (size_t i = 0; i < ff->nholes;) {
        int rc = take_chunk(f, ff, ff->holes[i], end);
        if (rc < 0 && rc != -1)
            return rc;
        if (rc == 0) {
            i++;
            continue;
        }
        uint64_t lo = ff->holes[i], hi = rc == 1 ? lo + ff->chunks[ff->nchunks - 1].size : lo + 1;
        size_t k = 0;
        for (size_t j = 0; j < ff->nholes; j++)
            if (ff->holes[j] < lo || ff->holes[j] >= hi)
                ff->holes[k++] = ff->holes[j];
        ff->nholes = k;
    }
    while (ff->scan_off + MS_TRACE_CHUNK_HEADER_SIZE <= end) {
        int rc = take_chunk(f, ff, ff->scan_off, end);
        if (rc == 1) {
            ff->scan_off += ff->chunks[ff->nchunks - 1].size;
            continue;
        }
        if (rc < -1)
            return rc;
        if (rc == 0) { /* reserved, header not yet written: looked at again next poll */
            if (ff->nholes < MAX_HOLES && ms_grow((void **)&ff->holes, &ff->aholes, ff->nholes,
                                                  sizeof *ff->holes, 16, MAX_HOLES) == 0)
                ff->holes[ff->nholes++] = ff->scan_off;
        } else
            f->procs[ff->proc].damaged++;
        ff->scan_off += MS_TRACE_CHUNK_ALIGN;
    }
    if (ff->nchunks != before)
        qsort(ff->chunks, ff->nchunks, sizeof *ff->chunks, cmp_chunk);
    return 0;
}

/* The queue's next slot (room made: the applied head's first, else grown), or NULL when out of
 * memory. The caller fills it, then calls queued(). */
static struct ms_follow_event *queue_slot(struct ms_follow_proc *p)
{
    /* the applied head's room first when it is at least half the array (each event is then
     * moved at most once on average), else the array grows */
    if (p->nev == p->aev && p->ev0 && p->ev0 >= p->nev / 2) {
        memmove(p->ev, p->ev + p->ev0, (p->nev - p->ev0) * sizeof *p->ev);
        p->nev -= p->ev0;
        p->ev0 = 0;
    }
    if (p->nev == p->aev &&
        ms_grow((void **)&p->ev, &p->aev, p->nev, sizeof *p->ev, 1024, MS_GROW_MAX) < 0)
        return NULL;
    return &p->ev[p->nev];
}

/* Adds the filled slot e (queue_slot's) to the queue. */
static void queued(struct ms_follow_proc *p, struct ms_follow_event *e)
{
    if (p->nev > p->ev0 && e->ns < e[-1].ns)
        p->unsorted = 1; /* threads' events interleave: drain sorts */
    e->order = p->order++;
    p->nev++;
}

static int push_event(struct ms_follow_proc *p, const struct ms_follow_event *e)
{
    struct ms_follow_event *slot = queue_slot(p);
    if (!slot)
        return MS_ENOMEM;
    *slot = *e;
    queued(p, slot);
    return 0;
}

static int add_stack(struct ms_follow_proc *p, const struct ms_record *r)
{
    int isnew;
    struct stack *s = ms_u64map_put(&p->stacks, r->stack_id, &isnew);
    if (!s)
        return MS_ENOMEM;
    if (!isnew)
        return 0;
    uint32_t d = r->depth < MS_FOLLOW_STACK_FRAMES ? r->depth : MS_FOLLOW_STACK_FRAMES;
    if (p->npcs + d > UINT32_MAX ||
        (p->npcs + d > p->apcs &&
         ms_grow((void **)&p->pcs, &p->apcs, p->npcs + d, sizeof *p->pcs, 1024, MS_GROW_MAX) < 0)) {
        ms_u64map_del(&p->stacks, r->stack_id, NULL);
        return MS_ENOMEM;
    }
    s->off = (uint32_t)p->npcs;
    s->depth = d;
    memcpy(p->pcs + p->npcs, r->pcs, d * sizeof *p->pcs);
    p->npcs += d;
    return 0;
}

static int add_module(struct ms_follow_proc *p, const struct ms_record *r)
{
    if (ms_grow((void **)&p->mods, &p->amods, p->nmods, sizeof *p->mods, 16, 1u << 20) < 0)
        return MS_ENOMEM;
    struct ms_follow_module *m = &p->mods[p->nmods];
    m->path = strndup(r->str1, r->len1);
    if (!m->path)
        return MS_ENOMEM;
    m->bias = r->bias;
    m->lo = r->lo;
    m->hi = r->hi;
    p->nmods++;
    return 0;
}

/* "memscope-tag:ptr=0x<hex>;size=<n>;owner=<owner>" -> the address and the owner's category. */
static int parse_tag(const char *m, size_t n, uint64_t *ptr, int *cat)
{
    size_t lp = sizeof TAG_PREFIX - 1;
    if (n < lp + 7 || memcmp(m, TAG_PREFIX, lp) != 0 || memcmp(m + lp, "ptr=0x", 6) != 0)
        return -1;
    uint64_t v = 0;
    size_t i = lp + 6;
    for (; i < n && i < lp + 6 + 16; i++) {
        char ch = m[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0)
            break;
        v = v << 4 | (uint64_t)d;
    }
    const char *o = memmem(m, n, ";owner=", 7);
    if (!o)
        return -1;
    o += 7;
    *ptr = v;
    *cat = ms_follow_owner_category(o, n - (size_t)(o - m));
    return 0;
}

/* Turns one record into state (stacks, modules, the process) or a queued event. */
static int take_record(struct ms_follow_proc *p, uint32_t thread, const struct ms_record *r)
{
    struct ms_follow_event e = {
        .ns = r->ns, .addr = r->addr, .size = r->size, .stack = r->stack_id, .thread = thread};
    switch (r->type) {
    case MS_REC_HEAP_ALLOC:
        e.kind = EV_ALLOC;
        e.layer = MS_FOLLOW_HEAP;
        break;
    case MS_REC_HEAP_FREE:
        e.kind = EV_FREE;
        e.layer = MS_FOLLOW_HEAP;
        break;
    case MS_REC_MMAP_ALLOC:
        e.kind = EV_ALLOC;
        e.layer = MS_FOLLOW_MMAP;
        break;
    case MS_REC_MUNMAP:
        e.kind = EV_MUNMAP;
        e.layer = MS_FOLLOW_MMAP;
        break;
    case MS_REC_LOST: e.kind = EV_LOST; break;
    case MS_REC_STACK: return add_stack(p, r);
    case MS_REC_MODULE: return add_module(p, r);
    case MS_REC_PROCESS: {
        p->ppid = r->ppid;
        size_t n = r->len1 < sizeof p->exe - 1 ? r->len1 : sizeof p->exe - 1;
        memcpy(p->exe, r->str1, n);
        p->exe[n] = 0;
        return 0;
    }
    case MS_REC_EXTENSION:
        switch (r->fn) {
        case MS_EXT_STEP: e.kind = EV_STEP; break;
        case MS_EXT_OWNER_PUSH:
            e.kind = EV_PUSH;
            e.cat = (uint8_t)ms_follow_owner_category(r->str1, r->len1);
            break;
        case MS_EXT_OWNER_POP: e.kind = EV_POP; break;
        case MS_EXT_MARK: {
            int cat;
            if (parse_tag(r->str1, r->len1, &e.addr, &cat) < 0)
                return 0;
            e.kind = EV_TAG;
            e.cat = (uint8_t)cat;
            break;
        }
        case MS_EXT_CUDA_MEM: {
            uint64_t op = r->flags, dev = r->pcs[1];
            dev = dev ? dev - 1 : 0;
            if (dev >= MS_FOLLOW_MAX_DEVICES)
                return 0;
            e.layer = (uint8_t)(MS_FOLLOW_DEVICE0 + dev);
            if (op == MS_CU_MEM_ALLOC || op == MS_CU_MEM_ALLOC_PITCH ||
                op == MS_CU_MEM_ALLOC_MANAGED || op == MS_CU_MEM_ALLOC_ASYNC ||
                op == MS_CU_MEM_ALLOC_FROM_POOL_ASYNC)
                e.kind = EV_ALLOC;
            else if ((op == MS_CU_MEM_FREE || op == MS_CU_MEM_FREE_ASYNC) && r->pcs[6] == 0)
                e.kind = EV_FREE;
            else
                return 0;
            break;
        }
        case MS_EXT_POOL_ALLOC:
        case MS_EXT_POOL_FREE:
        case MS_EXT_POOL_RESERVE:
        case MS_EXT_POOL_RELEASE: {
            int k = pool_of(p, r->str1, r->len1);
            if (k < 0)
                return 0;
            e.layer = (uint8_t)k;
            e.kind = r->fn == MS_EXT_POOL_ALLOC     ? EV_POOL_ALLOC
                     : r->fn == MS_EXT_POOL_FREE    ? EV_POOL_FREE
                     : r->fn == MS_EXT_POOL_RESERVE ? EV_POOL_RESERVE
                                                    : EV_POOL_RELEASE;
            break;
        }
        case MS_EXT_CUDA_USAGE: {
            uint64_t dev = r->pcs[0] ? r->pcs[0] - 1 : 0;
            if (dev < MS_FOLLOW_MAX_DEVICES) {
                p->dev_seen |= 1u << dev;
                p->dev_proc_used[dev] = r->pcs[1];
                p->dev_used[dev] = r->pcs[2];
                p->dev_total[dev] = r->pcs[3];
            }
            return 0;
        }
        default: return 0;
        }
        break;
    default: return 0;
    }
    return push_event(p, &e);
}

/* Decodes chunk c's records committed since the last poll. Returns the bytes read or an error. */
static long read_chunk(struct ms_follow *f, struct ms_follow_file *ff, struct fchunk *c)
{
    unsigned char u[4];
    if (pread(ff->fd, u, 4, (off_t)(c->off + 20)) != 4)
        return 0;
    uint32_t used = ms_get32(u);
    if (used > c->size - MS_TRACE_CHUNK_HEADER_SIZE) {
        c->done = 1;
        f->procs[ff->proc].damaged++;
        return 0;
    }
    if (used <= c->consumed)
        return 0;
    size_t n = used - c->consumed;
    if (n > f->abuf) {
        unsigned char *b = realloc(f->buf, n);
        if (!b)
            return MS_ENOMEM;
        f->buf = b;
        f->abuf = n;
    }
    ssize_t got =
        pread(ff->fd, f->buf, n, (off_t)(c->off + MS_TRACE_CHUNK_HEADER_SIZE + c->consumed));
    if (got != (ssize_t)n)
        return 0; /* truncated under us: tried again next poll */
    struct ms_trace_cursor *cur = f->cur;
    cur->p = f->buf;
    cur->end = f->buf + n;
    cur->prev_ns = c->prev_ns;
    cur->prev_addr = c->prev_addr;
    cur->failed = 0;
    cur->damaged_tail = 0;
    cur->own = NULL;
    struct ms_follow_proc *p = &f->procs[ff->proc];
    struct ms_record r;
    struct ms_heap_record h;
    int rc;
    for (;;) {
        int e;
        if (ms_trace_cursor_next_heap(cur, &h)) {       /* most records: no general decode */
            struct ms_follow_event *ev = queue_slot(p); /* filled in place */
            if (!ev)
                return MS_ENOMEM;
            ev->ns = h.ns;
            ev->addr = h.addr;
            ev->size = h.size;
            ev->stack = h.stack_id;
            ev->thread = c->thread;
            ev->kind = h.type == MS_REC_HEAP_FREE ? EV_FREE : EV_ALLOC;
            ev->layer = MS_FOLLOW_HEAP;
            ev->cat = 0;
            queued(p, ev);
            e = 0;
        } else if ((rc = ms_trace_cursor_next(cur, &r)) == 1)
            e = take_record(p, c->thread, &r);
        else
            break;
        if (e < 0)
            return e;
    }
    if (rc < 0) { /* damage: the rest of this chunk is lost */
        c->done = 1;
        p->damaged++;
    }
    c->consumed = used;
    c->prev_ns = cur->prev_ns;
    c->prev_addr = cur->prev_addr;
    return (long)n;
}

static int read_file(struct ms_follow *f, struct ms_follow_file *ff)
{
    struct ms_trace_file_header h;
    if (pread(ff->fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return 0; /* the agent has not written its header yet */
    if (memcmp(h.magic, MS_TRACE_MAGIC, 8) != 0) {
        if (h.magic[0])
            ff->done = 1; /* not a trace */
        return 0;
    }
    if (h.version != MS_TRACE_VERSION || h.header_size != MS_TRACE_HEADER_SIZE ||
        h.chunk_align != MS_TRACE_CHUNK_ALIGN) {
        ff->done = 1; /* packed already, or not a raw trace: nothing to follow */
        return 0;
    }
    struct ms_follow_proc *p = &f->procs[ff->proc];
    if (h.lost_events > ff->hdr_lost) {
        p->lost_events += h.lost_events - ff->hdr_lost;
        ff->hdr_lost = h.lost_events;
    }
    struct stat st;
    if (fstat(ff->fd, &st) < 0)
        return 0;
    uint64_t end = h.file_end < (uint64_t)st.st_size ? h.file_end : (uint64_t)st.st_size;
    int rc = scan_chunks(f, ff, end);
    if (rc < 0)
        return rc;
    uint64_t budget = MS_FOLLOW_POLL_BYTES;
    p->unread_bytes = 0;
    for (size_t i = 0; i < ff->nchunks; i++) {
        struct fchunk *c = &ff->chunks[i];
        if (c->done)
            continue;
        /* a later chunk of the same thread: this one is final after this read */
        int last = i + 1 < ff->nchunks && ff->chunks[i + 1].serial == c->serial;
        if (budget == 0) {
            p->unread_bytes += c->size; /* an upper bound: read next poll */
            continue;
        }
        long n = read_chunk(f, ff, c);
        if (n < 0)
            return (int)n;
        f->bytes_read += (uint64_t)n;
        budget = (uint64_t)n >= budget ? 0 : budget - (uint64_t)n;
        if (last)
            c->done = 1;
    }
    /* forget finished chunks, keeping the array small for long runs */
    size_t k = 0;
    for (size_t i = 0; i < ff->nchunks; i++)
        if (!ff->chunks[i].done)
            ff->chunks[k++] = ff->chunks[i];
    ff->nchunks = k;
    return 0;
}

static struct block *block_get(struct ms_follow_proc *p, int layer, uint64_t addr)
{
    return ms_u64map_get(&p->blocks[layer >= MS_FOLLOW_DEVICE0 ? 2 : layer], addr);
}

static void account(struct ms_follow_proc *p, const struct block *b, int sign)
{
    int64_t d = sign * (int64_t)b->size;
    struct ms_follow_layer *l = &p->layer[b->layer];
    l->live += d;
    if (l->live > l->peak)
        l->peak = l->live;
    p->owner_live[b->cat] += d;
    if (b->layer >= MS_FOLLOW_DEVICE0 && l->live > p->dev_hw[b->layer - MS_FOLLOW_DEVICE0])
        p->dev_hw[b->layer - MS_FOLLOW_DEVICE0] = l->live;
    if (b->layer >= MS_FOLLOW_DEVICE0 && l->live > p->step_dev_hw[b->layer - MS_FOLLOW_DEVICE0])
        p->step_dev_hw[b->layer - MS_FOLLOW_DEVICE0] = l->live;
    if (b->layer < MS_FOLLOW_DEVICE0) {
        p->host_live += d;
        if (p->host_live > p->host_peak)
            p->host_peak = p->host_live;
        if (p->host_live > p->host_hw)
            p->host_hw = p->host_live;
        if (p->host_live > p->step_host_hw)
            p->step_host_hw = p->host_live;
    }
    p->site[b->site].live += d;
}

/* The index of stack's site, made when new: a direct-mapped cache in front of the map (a
 * program allocates from a few hot stacks). MS_ENOMEM at the cap or out of memory. */
static long site_of(struct ms_follow_proc *p, uint32_t stack)
{
    uint64_t *slot = &p->scache[(stack ^ stack >> 8) % MS_FOLLOW_SITE_CACHE];
    if (*slot && (uint32_t)(*slot >> 32) == stack)
        return (long)(uint32_t)(*slot - 1);
    uint32_t i;
    if (!ms_u64map_get32(&p->sites, stack, &i)) {
        if (ms_grow((void **)&p->site, &p->asite, p->nsite, sizeof *p->site, 64,
                    MS_FOLLOW_MAX_STACKS) < 0 ||
            ms_u64map_set32(&p->sites, stack, (uint32_t)p->nsite) < 0)
            return MS_ENOMEM;
        i = (uint32_t)p->nsite++;
        p->site[i] = (struct ms_follow_site){.stack_id = stack};
    }
    *slot = (uint64_t)stack << 32 | ((uint64_t)i + 1);
    return (long)i;
}

/* The pool named s (n bytes), made when new; -1 beyond MS_FOLLOW_MAX_POOLS (its records are
 * then ignored) or out of memory. */
static int pool_of(struct ms_follow_proc *p, const char *s, size_t n)
{
    if (n >= sizeof p->pools[0].name)
        n = sizeof p->pools[0].name - 1;
    for (size_t i = 0; i < p->npools; i++)
        if (strncmp(p->pools[i].name, s, n) == 0 && p->pools[i].name[n] == 0)
            return (int)i;
    if (p->npools >= MS_FOLLOW_MAX_POOLS)
        return -1;
    if (!p->pools && !(p->pools = calloc(MS_FOLLOW_MAX_POOLS, sizeof *p->pools)))
        return -1;
    struct ms_follow_pool *q = &p->pools[p->npools];
    memset(q, 0, sizeof *q);
    memcpy(q->name, s, n);
    ms_u64map_init(&q->used, sizeof(int64_t), MS_FOLLOW_MAX_BLOCKS);
    ms_u64map_init(&q->regions, sizeof(int64_t), MS_FOLLOW_MAX_BLOCKS);
    return (int)p->npools++;
}

/* A pool's block or region, placed or removed (a placement over a live one replaces it). */
static int apply_pool(struct ms_follow_proc *p, const struct ms_follow_event *e)
{
    if (e->layer >= p->npools)
        return 0; /* queued before an exec dropped the old image's pools */
    struct ms_follow_pool *q = &p->pools[e->layer];
    int region = e->kind == EV_POOL_RESERVE || e->kind == EV_POOL_RELEASE;
    struct ms_u64map *m = region ? &q->regions : &q->used;
    int64_t *total = region ? &q->reserved_bytes : &q->used_bytes, old;
    if (ms_u64map_del(m, e->addr, &old))
        *total -= old;
    if (e->kind == EV_POOL_FREE || e->kind == EV_POOL_RELEASE)
        return 0;
    int64_t *v = ms_u64map_put(m, e->addr, NULL);
    if (!v)
        return MS_ENOMEM;
    *v = (int64_t)e->size;
    *total += *v;
    return 0;
}

/* The end of a step: its peaks kept, the next step's started at the live bytes now. */
static int end_step(struct ms_follow_proc *p, uint64_t ns)
{
    if (!p->steps && !(p->steps = calloc(MS_FOLLOW_STEP_RING, sizeof *p->steps)))
        return MS_ENOMEM; /* not counted: the event is applied again by the next poll */
    p->step++;
    struct ms_follow_step_peak *s = &p->steps[(p->step - 1) % MS_FOLLOW_STEP_RING];
    s->step = p->step;
    s->ns = ns;
    s->host = p->step_host_hw;
    p->step_host_hw = p->host_live;
    for (int d = 0; d < MS_FOLLOW_MAX_DEVICES; d++) {
        s->dev[d] = p->step_dev_hw[d];
        p->step_dev_hw[d] = p->layer[MS_FOLLOW_DEVICE0 + d].live;
    }
    return 0;
}

static int apply_free(struct ms_follow_proc *p, int layer, uint64_t addr)
{
    struct block b;
    if (!ms_u64map_del(&p->blocks[layer >= MS_FOLLOW_DEVICE0 ? 2 : layer], addr, &b))
        return 0; /* allocated before the trace began, or a free of a bad pointer */
    account(p, &b, -1);
    p->layer[b.layer].frees++;
    return 0;
}

static int apply(struct ms_follow_proc *p, const struct ms_follow_event *e)
{
    struct ms_follow_thread *t = &p->threads[e->thread];
    switch (e->kind) {
    case EV_ALLOC: {
        struct ms_u64map *m = &p->blocks[e->layer >= MS_FOLLOW_DEVICE0 ? 2 : e->layer];
        long si = site_of(p, e->stack);
        if (si < 0)
            return (int)si;
        int isnew;
        struct block *slot = ms_u64map_put(m, e->addr, &isnew);
        if (!slot)
            return MS_ENOMEM;
        if (!isnew) /* its free was lost: gone now */
            account(p, slot, -1);
        *slot = (struct block){.size = e->size,
                               .site = (uint32_t)si,
                               .layer = e->layer,
                               .cat = t->depth ? t->cat[t->depth - 1] : MS_OWNER_OTHER};
        p->site[si].allocs++;
        account(p, slot, 1);
        p->layer[e->layer].allocs++;
        return 0;
    }
    case EV_FREE: return apply_free(p, e->layer, e->addr);
    case EV_MUNMAP: {
        struct block b;
        if (!ms_u64map_del(&p->blocks[MS_FOLLOW_MMAP], e->addr, &b))
            return 0; /* NEEDSWORK: an unmap inside a mapping, as the store splits them */
        account(p, &b, -1);
        if (e->size >= b.size) {
            p->layer[MS_FOLLOW_MMAP].frees++;
            return 0;
        }
        b.size -= e->size; /* the head went: the tail stays live */
        struct block *slot = ms_u64map_put(&p->blocks[MS_FOLLOW_MMAP], e->addr + e->size, NULL);
        if (!slot)
            return MS_ENOMEM;
        *slot = b;
        account(p, &b, 1);
        return 0;
    }
    case EV_STEP: return end_step(p, e->ns);
    case EV_POOL_ALLOC:
    case EV_POOL_FREE:
    case EV_POOL_RESERVE:
    case EV_POOL_RELEASE: return apply_pool(p, e);
    case EV_PUSH:
        if (t->depth >= OWNER_DEPTH) {
            t->overflow++;
            return 0;
        }
        t->cat[t->depth] =
            t->depth && t->cat[t->depth - 1] != MS_OWNER_OTHER ? t->cat[t->depth - 1] : e->cat;
        t->depth++;
        return 0;
    case EV_POP:
        if (t->overflow)
            t->overflow--;
        else if (t->depth)
            t->depth--;
        return 0;
    case EV_TAG: {
        static const int order[] = {MS_FOLLOW_HEAP, MS_FOLLOW_MMAP};
        for (int i = 0; i < 2; i++) {
            struct block *b = block_get(p, order[i], e->addr);
            if (b) {
                account(p, b, -1);
                b->cat = e->cat;
                account(p, b, 1);
                break;
            }
        }
        return 0;
    }
    case EV_LOST: p->lost_events += e->size; return 0;
    }
    return 0;
}

static int cmp_event(const void *a, const void *b)
{
    const struct ms_follow_event *x = a, *y = b;
    if (x->ns != y->ns)
        return x->ns < y->ns ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Applies p's queued events up to horizon, in time order. */
static long drain(struct ms_follow_proc *p, uint64_t horizon)
{
    if (p->nev == p->ev0)
        return 0;
    if (p->unsorted) /* one thread's events arrive in order: no sort then */
        qsort(p->ev + p->ev0, p->nev - p->ev0, sizeof *p->ev, cmp_event);
    p->unsorted = 0;
    if (p->nev - p->ev0 > MS_FOLLOW_MAX_PENDING)
        horizon = UINT64_MAX; /* too far behind to wait: applied as they are */
    size_t i = p->ev0;
    for (; i < p->nev && p->ev[i].ns <= horizon; i++) {
        if (!p->first_ns)
            p->first_ns = p->ev[i].ns;
        if (p->ev[i].ns > p->last_ns)
            p->last_ns = p->ev[i].ns;
        int rc = apply(p, &p->ev[i]);
        if (rc < 0) {
            p->pending = p->nev - (p->ev0 = i);
            return rc;
        }
    }
    long applied = (long)(i - p->ev0);
    p->ev0 = i;
    if (p->ev0 >= p->nev - p->ev0) { /* the waiting ones to the front: no more than applied */
        memmove(p->ev, p->ev + p->ev0, (p->nev - p->ev0) * sizeof *p->ev);
        p->nev -= p->ev0;
        p->ev0 = 0;
    }
    p->pending = p->nev - p->ev0;
    return applied;
}

long ms_follow_poll(struct ms_follow *f, uint64_t horizon_ns)
{
    if (!f->cur && !(f->cur = calloc(1, sizeof *f->cur)))
        return MS_ENOMEM;
    f->polls++;
    int rc = list_dir(f);
    for (size_t i = 0; i < f->nfiles && rc == 0; i++) {
        struct ms_follow_file *ff = &f->files[i];
        if (!ff->done)
            rc = read_file(f, ff);
        if (ff->retire && ff->fd >= 0 && rc == 0) {
            close(ff->fd);
            ff->fd = -1;
            ff->done = 1;
            free(ff->chunks);
            free(ff->holes);
            ff->chunks = NULL;
            ff->holes = NULL;
            ff->nchunks = ff->achunks = ff->nholes = ff->aholes = 0;
        }
    }
    long applied = 0;
    for (size_t i = 0; i < f->nprocs; i++) {
        long n = drain(&f->procs[i], horizon_ns);
        if (n < 0)
            return n;
        applied += n;
    }
    f->events += (uint64_t)applied;
    return rc < 0 ? rc : applied;
}

size_t ms_follow_stack(const struct ms_follow_proc *p, uint32_t stack_id, const uint64_t **pcs)
{
    const struct stack *s = ms_u64map_get(&p->stacks, stack_id);
    if (!s)
        return 0;
    *pcs = p->pcs + s->off;
    return s->depth;
}

/* The k sites of p with the highest positive key (live, or growth), most first. */
static size_t top_sites(const struct ms_follow_proc *p, struct ms_follow_stack_live *out, size_t k,
                        int growth)
{
    size_t n = 0;
    for (size_t j = 0; k && j < p->nsite; j++) {
        const struct ms_follow_site *s = &p->site[j];
        int64_t g = s->live - s->mark[0], v = growth ? g : s->live;
        if (v <= 0 || (n == k && v <= (growth ? out[n - 1].growth : out[n - 1].live)))
            continue;
        size_t i = n < k ? n++ : n - 1;
        while (i > 0 && (growth ? out[i - 1].growth : out[i - 1].live) < v) {
            out[i] = out[i - 1];
            i--;
        }
        out[i] = (struct ms_follow_stack_live){s->stack_id, s->live, s->allocs, g};
    }
    return n;
}

size_t ms_follow_top_stacks(const struct ms_follow_proc *p, struct ms_follow_stack_live *out,
                            size_t k)
{
    return top_sites(p, out, k, 0);
}

size_t ms_follow_top_growing(const struct ms_follow_proc *p, struct ms_follow_stack_live *out,
                             size_t k)
{
    return top_sites(p, out, k, 1);
}

void ms_follow_mark_sites(struct ms_follow_proc *p)
{
    for (size_t j = 0; j < p->nsite; j++) {
        p->site[j].mark[0] = p->site[j].mark[1];
        p->site[j].mark[1] = p->site[j].live;
    }
}

const struct ms_follow_step_peak *ms_follow_step_peak(const struct ms_follow_proc *p, uint64_t k)
{
    if (!p->steps || k == 0 || k > p->step || p->step - k >= MS_FOLLOW_STEP_RING)
        return NULL;
    const struct ms_follow_step_peak *s = &p->steps[(k - 1) % MS_FOLLOW_STEP_RING];
    return s->step == k ? s : NULL; /* not kept: the ring was allocated after it */
}

void ms_follow_retire(struct ms_follow *f, uint64_t pid)
{
    for (size_t i = 0; i < f->nfiles; i++)
        if (f->files[i].pid == pid)
            f->files[i].retire = 1;
}

uint64_t ms_follow_lag(const struct ms_follow *f)
{
    uint64_t n = 0;
    for (size_t i = 0; i < f->nprocs; i++)
        n += f->procs[i].pending;
    return n;
}
