/* snap_addrmap.h: a small open-addressing map from 64-bit addresses to 64-bit values, internal to
 * the snapshot module (summary.c, state.c, import.c). Linear probing with backward-shift
 * deletion, so no tombstones pile up while a replay inserts and deletes millions of times. */
#ifndef MS_SNAPSHOT_SNAP_ADDRMAP_H
#define MS_SNAPSHOT_SNAP_ADDRMAP_H

#include "common/ms_error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct addrmap {
    uint64_t *keys, *vals;
    uint8_t *used;
    uint64_t cap, n; /* cap is a power of two */
};

static inline uint64_t addrmap_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static inline void addrmap_release(struct addrmap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

static inline int addrmap_rehash(struct addrmap *m, uint64_t cap)
{
    struct addrmap o = *m;
    m->keys = malloc((size_t)cap * sizeof *m->keys);
    m->vals = malloc((size_t)cap * sizeof *m->vals);
    m->used = calloc((size_t)cap, 1);
    if (!m->keys || !m->vals || !m->used) {
        free(m->keys);
        free(m->vals);
        free(m->used);
        *m = o;
        return MS_ENOMEM;
    }
    m->cap = cap;
    m->n = 0;
    for (uint64_t i = 0; i < o.cap; i++) {
        if (!o.used[i])
            continue;
        uint64_t j = addrmap_hash(o.keys[i]) & (cap - 1);
        while (m->used[j])
            j = (j + 1) & (cap - 1);
        m->used[j] = 1;
        m->keys[j] = o.keys[i];
        m->vals[j] = o.vals[i];
        m->n++;
    }
    free(o.keys);
    free(o.vals);
    free(o.used);
    return 0;
}

/* Returns the slot of k, or UINT64_MAX when absent. */
static inline uint64_t addrmap_find(const struct addrmap *m, uint64_t k)
{
    if (!m->cap)
        return UINT64_MAX;
    for (uint64_t j = addrmap_hash(k) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        if (!m->used[j])
            return UINT64_MAX;
        if (m->keys[j] == k)
            return j;
    }
}

/* Sets k to v. Returns 0 or MS_ENOMEM. */
static inline int addrmap_put(struct addrmap *m, uint64_t k, uint64_t v)
{
    if ((m->n + 1) * 2 > m->cap && addrmap_rehash(m, m->cap ? m->cap * 2 : 1024))
        return MS_ENOMEM;
    uint64_t j = addrmap_hash(k) & (m->cap - 1);
    while (m->used[j] && m->keys[j] != k)
        j = (j + 1) & (m->cap - 1);
    if (!m->used[j]) {
        m->used[j] = 1;
        m->keys[j] = k;
        m->n++;
    }
    m->vals[j] = v;
    return 0;
}

/* Removes k if present. */
static inline void addrmap_del(struct addrmap *m, uint64_t k)
{
    uint64_t j = addrmap_find(m, k);
    if (j == UINT64_MAX)
        return;
    m->used[j] = 0;
    m->n--;
    uint64_t mask = m->cap - 1;
    for (uint64_t i = (j + 1) & mask; m->used[i]; i = (i + 1) & mask) {
        uint64_t home = addrmap_hash(m->keys[i]) & mask;
        /* Move i back to j when j lies cyclically in [home, i). */
        if (((i - home) & mask) >= ((i - j) & mask)) {
            m->keys[j] = m->keys[i];
            m->vals[j] = m->vals[i];
            m->used[j] = 1;
            m->used[i] = 0;
            j = i;
        }
    }
}

#endif
