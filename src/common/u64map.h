/* u64map.h: the general hash map of memscope, from 64-bit keys to fixed-size values (the few
 * others are special-purpose: docs/ARCHITECTURE.md, section 3).
 *
 * Used by the store (live blocks of each process and layer: address -> block slot; trace ids ->
 * database ids; symbolized pcs), the snapshot module (address -> block or event) and the
 * analyses (stack or site id -> their per-site records, address -> live size). Open addressing
 * with linear probing and backward-shift deletion, so there are no tombstones and a map that
 * churns millions of keys stays fast; the table doubles at 50% load.
 *
 * Any 64-bit key is allowed: 0 marks a free slot in the table, and key 0 itself lives in one
 * extra slot past the table's end. Values are vsize bytes each, in an array parallel to the
 * keys (a probe reads keys only; keys and values interleaved in one array measured slower: 16
 * bytes a slot instead of 12 for the converter's maps); a pointer to a value stays valid until
 * the next put or del on the map.
 *
 * The entry count is capped at init: a hostile trace or pickle cannot make a map grow without
 * bound (a put beyond the cap fails, as a failed allocation does). */
#ifndef MS_COMMON_U64MAP_H
#define MS_COMMON_U64MAP_H

#include "ms_error.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct ms_u64map {
    uint64_t *keys;      /* mask + 2 slots: 0 is free; slot mask + 1 holds key 0 */
    unsigned char *vals; /* vsize bytes per slot, parallel to keys */
    size_t mask;         /* table slots - 1 (a power of two), 0 before the first put */
    size_t count;        /* entries, key 0 included */
    size_t cap;          /* most entries ever held */
    size_t vsize;        /* bytes per value, at least 1 */
    int has_zero;        /* key 0 is present */
};

/* A cap for maps whose size only memory bounds (about a billion entries). */
#define MS_U64MAP_MAX ((size_t)1 << 30)

/* Starts an empty map of values of vsize bytes that will hold at most cap entries. Allocates
 * nothing yet. */
void ms_u64map_init(struct ms_u64map *m, size_t vsize, size_t cap);

/* Frees the map's arrays; the map is empty (and reusable, same vsize and cap) after. Accepts
 * NULL. */
void ms_u64map_release(struct ms_u64map *m);

/* Empties the map and keeps its table: refilling it to the same size allocates nothing. */
void ms_u64map_clear(struct ms_u64map *m);

/* Returns the value of key, or NULL when key is absent. */
void *ms_u64map_get(const struct ms_u64map *m, uint64_t key);

/* Returns the value slot of key, inserting key when absent: a new slot is zeroed and *isnew (if
 * isnew is non-NULL) set to 1, else 0. Returns NULL when out of memory or at the cap. */
void *ms_u64map_put(struct ms_u64map *m, uint64_t key, int *isnew);

/* Removes key. Returns 1 when it was present, after copying its value to out (if out is
 * non-NULL, vsize bytes), else 0. */
int ms_u64map_del(struct ms_u64map *m, uint64_t key, void *out);

/* Iterates: start with *pos = 0; returns 1 with the next entry's key and value, 0 at the end.
 * The map must not change during an iteration. */
int ms_u64map_next(const struct ms_u64map *m, size_t *pos, uint64_t *key, void **val);

/* Typed shorthands for the maps whose values are one uint32_t or one uint64_t (vsize 4 or 8):
 * get and next return 1 and set *val when present; set returns 0 or MS_ENOMEM. */
static inline int ms_u64map_get32(const struct ms_u64map *m, uint64_t key, uint32_t *val)
{
    const void *p = ms_u64map_get(m, key);
    if (p)
        memcpy(val, p, sizeof *val);
    return p != NULL;
}

static inline int ms_u64map_set32(struct ms_u64map *m, uint64_t key, uint32_t val)
{
    void *p = ms_u64map_put(m, key, NULL);
    if (!p)
        return MS_ENOMEM;
    memcpy(p, &val, sizeof val);
    return 0;
}

static inline int ms_u64map_next32(const struct ms_u64map *m, size_t *pos, uint64_t *key,
                                   uint32_t *val)
{
    void *p;
    if (!ms_u64map_next(m, pos, key, &p))
        return 0;
    memcpy(val, p, sizeof *val);
    return 1;
}

static inline int ms_u64map_get64(const struct ms_u64map *m, uint64_t key, uint64_t *val)
{
    const void *p = ms_u64map_get(m, key);
    if (p)
        memcpy(val, p, sizeof *val);
    return p != NULL;
}

static inline int ms_u64map_set64(struct ms_u64map *m, uint64_t key, uint64_t val)
{
    void *p = ms_u64map_put(m, key, NULL);
    if (!p)
        return MS_ENOMEM;
    memcpy(p, &val, sizeof val);
    return 0;
}

#endif
