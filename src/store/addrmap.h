/* addrmap.h: an open-addressing hash map from 64-bit keys to 32-bit values.
 *
 * Used by the store for the live blocks of each (process, layer) (address -> block slot), the
 * stack ids of each trace file (trace id -> database id) and the symbolized pcs of each process
 * (pc -> frame info). Linear probing with backward-shift deletion, so there are no tombstones
 * and a map that churns millions of keys stays fast. The entry count is capped at init: a hostile
 * trace cannot make it grow without bound. Any 64-bit key is allowed, 0 included. */
#ifndef MS_STORE_ADDRMAP_H
#define MS_STORE_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

struct ms_addrmap {
    uint64_t *keys;
    uint32_t *vals; /* MS_ADDRMAP_EMPTY marks a free slot */
    size_t mask;    /* slots - 1 (slots is a power of two), 0 before the first put */
    size_t count;
    size_t cap; /* most entries ever held; a put beyond it fails with MS_ENOMEM */
};

#define MS_ADDRMAP_EMPTY UINT32_MAX

/* Starts an empty map that will hold at most cap entries. Allocates nothing yet. */
void ms_addrmap_init(struct ms_addrmap *m, size_t cap);

/* Frees the map's arrays; the map is empty (and reusable) after. Accepts NULL. */
void ms_addrmap_release(struct ms_addrmap *m);

/* Returns 1 and sets *val when key is present, 0 when not. */
int ms_addrmap_get(const struct ms_addrmap *m, uint64_t key, uint32_t *val);

/* Sets key to val (val != MS_ADDRMAP_EMPTY), replacing any old value. Returns 0 or MS_ENOMEM
 * (allocation failed or the cap is reached). */
int ms_addrmap_put(struct ms_addrmap *m, uint64_t key, uint32_t val);

/* Removes key. Returns 1 and sets *val (if val is non-NULL) when it was present, else 0. */
int ms_addrmap_del(struct ms_addrmap *m, uint64_t key, uint32_t *val);

/* Iterates: start with *pos = 0; returns 1 with the next entry, 0 at the end. The map must not
 * change during an iteration. */
int ms_addrmap_next(const struct ms_addrmap *m, size_t *pos, uint64_t *key, uint32_t *val);

#endif
