/* blockstore.c: the viewer's blocks, encoded in chunks of zigzag varints (blockstore.h).
 * Written by the model's loader (model.c) once per MALLOC and FREE, read by the queries
 * (api*.c, report.c) through ms_vblocks_get(). */
#include "blockstore.h"

#include "vcode.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define DATA_MAX ((size_t)1 << 38)
#define PER_BLOCK_MAX 50 /* 5 varints of at most 10 bytes */

static atomic_ulong next_id = 1;

/* The chunk a thread decoded last, of which store. */
static _Thread_local struct {
    uint64_t id;
    size_t chunk;
    struct ms_vblock b[MS_VBLOCK_CHUNK];
} memo;

static int flush(struct ms_vblocks *s)
{
    if (!s->npend)
        return 0;
    if (ms_grow((void **)&s->off, &s->capoff, s->noff, sizeof *s->off, 256, MS_GROW_MAX) < 0)
        return MS_ENOMEM;
    if (ms_grow((void **)&s->data, &s->capdata, s->len + s->npend * PER_BLOCK_MAX - 1, 1, 4096,
                DATA_MAX) < 0)
        return MS_ENOMEM;
    s->off[s->noff++] = s->len;
    struct ms_vblock prev = {0};
    for (size_t i = 0; i < s->npend; i++) {
        const struct ms_vblock *b = &s->pend[i];
        uint8_t *p = s->data + s->len;
        size_t k = ms_vput(p, ms_zigzag(b->alloc_ns - prev.alloc_ns));
        k += ms_vput(p + k, ms_zigzag(b->size));
        k += ms_vput(p + k, b->stack_id);
        k += ms_vput(p + k, b->owner_track);
        k += ms_vput(p + k, ms_zigzag((int64_t)(b->addr - prev.addr)));
        s->len += k;
        prev = *b;
    }
    s->npend = 0;
    return 0;
}

int ms_vblocks_push(struct ms_vblocks *s, const struct ms_vblock *b)
{
    if (!s->id)
        s->id = atomic_fetch_add(&next_id, 1);
    if (!s->pend && !(s->pend = malloc(MS_VBLOCK_CHUNK * sizeof *s->pend)))
        return MS_ENOMEM;
    if (s->n >= UINT32_MAX || ms_grow((void **)&s->free_ns, &s->capfree, s->n, sizeof *s->free_ns,
                                      4096, (size_t)1 << 34) < 0)
        return MS_ENOMEM;
    if (s->npend == MS_VBLOCK_CHUNK && flush(s) < 0)
        return MS_ENOMEM;
    s->pend[s->npend++] = *b;
    s->free_ns[s->n++] = b->free_ns;
    return 0;
}

int ms_vblocks_finish(struct ms_vblocks *s)
{
    int rc = flush(s);
    if (rc == 0 && s->noff && !s->dec) {
        s->dec = calloc(s->noff, sizeof *s->dec); /* NULL: no chunk kept, each read decodes */
        s->dec_budget = MS_VBLOCK_CACHE;
    }
    free(s->pend);
    s->pend = NULL;
    if (rc == 0 && s->len && s->len < s->capdata) { /* give back the doubling's slack */
        uint8_t *p = realloc(s->data, s->len);
        if (p) {
            s->data = p;
            s->capdata = s->len;
        }
    }
    return rc;
}

void ms_vblocks_release(struct ms_vblocks *s)
{
    if (!s)
        return;
    if (memo.id == s->id)
        memo.id = 0;
    for (size_t c = 0; s->dec && c < s->noff; c++)
        free(atomic_load(&s->dec[c]));
    free((void *)s->dec);
    free(s->free_ns);
    free(s->off);
    free(s->data);
    free(s->pend);
    memset(s, 0, sizeof *s);
}

size_t ms_vblocks_bytes(const struct ms_vblocks *s)
{
    return s->capfree * sizeof *s->free_ns + s->capoff * sizeof *s->off + s->capdata +
           (s->dec ? s->noff * sizeof *s->dec + atomic_load(&s->dec_bytes) : 0);
}

/* Keeps the thread's decoded chunk c (n blocks) for every thread, while the budget lasts. The
 * store's cache is its only part written after finish: hence the cast in the caller. */
static void keep(struct ms_vblocks *s, size_t c, size_t n)
{
    size_t bytes = n * sizeof *memo.b;
    if (!s->dec ||
        atomic_load_explicit(&s->dec_bytes, memory_order_relaxed) + bytes > s->dec_budget)
        return;
    if (atomic_fetch_add(&s->dec_bytes, bytes) + bytes > s->dec_budget) {
        atomic_fetch_sub(&s->dec_bytes, bytes);
        return;
    }
    struct ms_vblock *d = malloc(bytes);
    struct ms_vblock *none = NULL;
    if (d)
        memcpy(d, memo.b, bytes);
    if (!d || !atomic_compare_exchange_strong(&s->dec[c], &none, d)) {
        free(d); /* out of memory, or another thread kept it first */
        atomic_fetch_sub(&s->dec_bytes, bytes);
    }
}

struct ms_vblock ms_vblocks_get(const struct ms_vblocks *s, size_t i)
{
    size_t c = i / MS_VBLOCK_CHUNK;
    struct ms_vblock b;
    struct ms_vblock *kept = s->dec ? atomic_load_explicit(&s->dec[c], memory_order_acquire) : NULL;
    if (kept) {
        b = kept[i % MS_VBLOCK_CHUNK];
    } else if (c >= s->noff) { /* still being written */
        b = s->pend[i % MS_VBLOCK_CHUNK];
    } else {
        if (memo.id != s->id || memo.chunk != c) {
            const uint8_t *p = s->data + s->off[c];
            size_t n = s->n - c * MS_VBLOCK_CHUNK; /* the last chunk may be short */
            if (n > MS_VBLOCK_CHUNK)
                n = MS_VBLOCK_CHUNK;
            struct ms_vblock prev = {0};
            for (size_t k = 0; k < n; k++) {
                struct ms_vblock *d = &memo.b[k];
                d->alloc_ns = prev.alloc_ns + ms_unzigzag(ms_vget(&p));
                d->size = ms_unzigzag(ms_vget(&p));
                d->stack_id = (uint32_t)ms_vget(&p);
                d->owner_track = (uint32_t)ms_vget(&p);
                d->addr = prev.addr + (uint64_t)ms_unzigzag(ms_vget(&p));
                prev = *d;
            }
            memo.id = s->id;
            memo.chunk = c;
            keep((struct ms_vblocks *)s, c, n);
        }
        b = memo.b[i % MS_VBLOCK_CHUNK];
    }
    b.free_ns = s->free_ns[i];
    return b;
}
