/* u64map.c: the open-addressing map from 64-bit keys to fixed-size values (see u64map.h).
 *
 * Workload: the converter's hottest structure (one get/put/del per traced event), the snapshot
 * replays and the analyses' per-site tables. Keys are heap addresses (16-byte aligned), page
 * addresses and small ids, so the hash is a Fibonacci multiply that spreads low-entropy low bits.
 * Invariant: every key in slots 0..mask is non-zero and reachable from its home slot without
 * crossing a free slot (backward-shift deletion keeps it so). */
#include "u64map.h"

#include <stdlib.h>

#define MIN_SLOTS 64u

static size_t home_of(const struct ms_u64map *m, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 29)) & m->mask;
}

static unsigned char *val_at(const struct ms_u64map *m, size_t slot)
{
    return m->vals + slot * m->vsize;
}

void ms_u64map_init(struct ms_u64map *m, size_t vsize, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->vsize = vsize ? vsize : 1;
    m->cap = cap;
}

void ms_u64map_release(struct ms_u64map *m)
{
    if (!m)
        return;
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->mask = 0;
    m->count = 0;
    m->has_zero = 0;
}

void ms_u64map_clear(struct ms_u64map *m)
{
    if (m->mask)
        memset(m->keys, 0, (m->mask + 2) * sizeof *m->keys);
    m->count = 0;
    m->has_zero = 0;
}

/* Returns the slot of key, or SIZE_MAX when absent. */
static size_t find(const struct ms_u64map *m, uint64_t key)
{
    if (!m->mask)
        return SIZE_MAX;
    if (!key)
        return m->has_zero ? m->mask + 1 : SIZE_MAX;
    for (size_t i = home_of(m, key);; i = (i + 1) & m->mask) {
        if (m->keys[i] == key)
            return i;
        if (!m->keys[i])
            return SIZE_MAX;
    }
}

void *ms_u64map_get(const struct ms_u64map *m, uint64_t key)
{
    size_t i = find(m, key);
    return i == SIZE_MAX ? NULL : val_at(m, i);
}

/* Doubles the table (or makes the first one) and moves every entry over. */
static int grow(struct ms_u64map *m)
{
    size_t old = m->mask ? m->mask + 1 : 0;
    size_t slots = old ? old * 2 : MIN_SLOTS;
    if (slots > (SIZE_MAX / 2) / (m->vsize > 8 ? m->vsize : 8))
        return MS_ENOMEM;
    uint64_t *keys = calloc(slots + 1, sizeof *keys);
    unsigned char *vals = malloc((slots + 1) * m->vsize);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return MS_ENOMEM;
    }
    struct ms_u64map o = *m;
    m->keys = keys;
    m->vals = vals;
    m->mask = slots - 1;
    for (size_t i = 0; i < old; i++) {
        if (!o.keys[i])
            continue;
        size_t j = home_of(m, o.keys[i]);
        while (keys[j])
            j = (j + 1) & m->mask;
        keys[j] = o.keys[i];
        memcpy(val_at(m, j), o.vals + i * o.vsize, m->vsize);
    }
    if (o.has_zero)
        memcpy(val_at(m, slots), o.vals + old * o.vsize, m->vsize);
    free(o.keys);
    free(o.vals);
    return 0;
}

void *ms_u64map_put(struct ms_u64map *m, uint64_t key, int *isnew)
{
    if (isnew)
        *isnew = 0;
    size_t i = SIZE_MAX; /* a key's probe ends at the free slot where it would go */
    if (m->mask && key) {
        for (i = home_of(m, key); m->keys[i]; i = (i + 1) & m->mask)
            if (m->keys[i] == key)
                return val_at(m, i);
    } else if (m->mask && m->has_zero) {
        return val_at(m, m->mask + 1);
    }
    if (m->count >= m->cap)
        return NULL;
    if (!m->mask || (m->count + 1) * 2 > m->mask + 1) {
        if (grow(m) < 0)
            return NULL;
        i = SIZE_MAX; /* the table changed: probe again */
    }
    if (key) {
        if (i == SIZE_MAX)
            for (i = home_of(m, key); m->keys[i];)
                i = (i + 1) & m->mask;
        m->keys[i] = key;
    } else {
        i = m->mask + 1;
        m->has_zero = 1;
    }
    m->count++;
    memset(val_at(m, i), 0, m->vsize);
    if (isnew)
        *isnew = 1;
    return val_at(m, i);
}

int ms_u64map_del(struct ms_u64map *m, uint64_t key, void *out)
{
    size_t i = find(m, key);
    if (i == SIZE_MAX)
        return 0;
    if (out)
        memcpy(out, val_at(m, i), m->vsize);
    m->count--;
    if (!key) {
        m->has_zero = 0;
        return 1;
    }
    /* Backward shift: pull later members of the probe run into the hole when the hole lies
     * cyclically in [home, j). */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
        size_t home = home_of(m, m->keys[j]);
        if (((j - home) & m->mask) >= ((j - hole) & m->mask)) {
            m->keys[hole] = m->keys[j];
            memcpy(val_at(m, hole), val_at(m, j), m->vsize);
            hole = j;
        }
    }
    m->keys[hole] = 0;
    return 1;
}

int ms_u64map_next(const struct ms_u64map *m, size_t *pos, uint64_t *key, void **val)
{
    if (!m->mask)
        return 0;
    for (size_t i = *pos; i <= m->mask; i++) {
        if (m->keys[i]) {
            *key = m->keys[i];
            *val = val_at(m, i);
            *pos = i + 1;
            return 1;
        }
    }
    if (*pos <= m->mask + 1 && m->has_zero) {
        *key = 0;
        *val = val_at(m, m->mask + 1);
        *pos = m->mask + 2;
        return 1;
    }
    *pos = m->mask + 2;
    return 0;
}
