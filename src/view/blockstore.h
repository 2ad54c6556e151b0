/* blockstore.h: the viewer's blocks (one per MALLOC), held encoded: about 18 bytes a block
 * instead of 40.
 *
 * Each block's free time is an array of its own (written when the FREE comes, read by every
 * lifetime scan first); the rest (allocation time, size, stack, owner and track, address) is
 * cut into chunks of MS_VBLOCK_CHUNK blocks, each a run of zigzag varints of the differences
 * from the block before (a chunk's first block from zero), so that a chunk decodes alone.
 * ms_vblocks_get() decodes a block's chunk into a decoded chunk kept per thread, so a pass in
 * index order decodes each chunk once and a random access costs one chunk's decoding (about a
 * microsecond); and, after the store is finished, keeps each chunk it decodes, decoded, while
 * a budget of bytes lasts (MS_VBLOCK_CACHE): a run whose decoded blocks fit in it is read as
 * fast as an array once each chunk has been read, a larger one keeps the chunks read first
 * and decodes the others each time. Written once (push, set_free, finish), then read by any
 * number of threads. */
#ifndef MS_VIEW_BLOCKSTORE_H
#define MS_VIEW_BLOCKSTORE_H

#include <stddef.h>
#include <stdint.h>

/* One allocation: alloc_ns..free_ns (INT64_MAX: never freed), in one track, as decoded. The
 * owner id (below 2^24) and the track (below MS_VIEW_MAX_TRACKS) share a word. */
struct ms_vblock {
    int64_t alloc_ns, free_ns;
    int64_t size;
    uint32_t stack_id;
    uint32_t owner_track; /* owner id << 8 | track */
    uint64_t addr;
};

#define MS_VBLOCK_CHUNK 64
#define MS_VBLOCK_CACHE ((size_t)256 << 20) /* bytes of decoded chunks kept, at most */

struct ms_vblocks {
    int64_t *free_ns; /* per block */
    size_t capfree;
    uint64_t *off; /* per encoded chunk: where its bytes start in data */
    size_t noff, capoff;
    uint8_t *data;
    size_t len, capdata;
    size_t n; /* blocks */
    /* after finish: each chunk decoded once and kept, while the budget lasts (NULL: not
     * kept); set once with a compare-and-swap, freed by release */
    struct ms_vblock *_Atomic *dec;
    _Atomic size_t dec_bytes;
    size_t dec_budget;
    struct ms_vblock *pend; /* while written: the last chunk's blocks, not yet encoded */
    size_t npend;
    uint64_t id; /* this store's, for the threads' decoded chunks */
};

/* Appends a block (its free_ns is taken as its free time). 0 or MS_ENOMEM. */
int ms_vblocks_push(struct ms_vblocks *s, const struct ms_vblock *b);

static inline void ms_vblocks_set_free(struct ms_vblocks *s, size_t i, int64_t ts)
{
    s->free_ns[i] = ts;
}

static inline int64_t ms_vblocks_free_ns(const struct ms_vblocks *s, size_t i)
{
    return s->free_ns[i];
}

/* Encodes the last chunk: the store is only read after (set_free still works). 0 or
 * MS_ENOMEM. */
int ms_vblocks_finish(struct ms_vblocks *s);

/* Frees the store's memory; accepts a zeroed store. */
void ms_vblocks_release(struct ms_vblocks *s);

/* Block i (< n), decoded. */
struct ms_vblock ms_vblocks_get(const struct ms_vblocks *s, size_t i);

/* Bytes the store holds. */
size_t ms_vblocks_bytes(const struct ms_vblocks *s);

#endif
