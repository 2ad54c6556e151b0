/* addrmap.c: open-addressing uint64 -> uint32 hash map (see addrmap.h).
 *
 * Workload: the store's hottest structure; one get/put/del per traced event. Keys are heap
 * addresses (16-byte aligned), page addresses and small ids, so the hash is a Fibonacci
 * multiply that spreads low-entropy low bits. The table doubles at 50% load. */
#include "addrmap.h"

#include "common/ms_error.h"

#include <stdlib.h>

#define MIN_SLOTS 64u

static size_t slot_of(const struct ms_addrmap *m, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 29)) & m->mask;
}

void ms_addrmap_init(struct ms_addrmap *m, size_t cap)
{
    m->keys = NULL;
    m->vals = NULL;
    m->mask = 0;
    m->count = 0;
    m->cap = cap;
}

void ms_addrmap_release(struct ms_addrmap *m)
{
    if (!m)
        return;
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->mask = 0;
    m->count = 0;
}

int ms_addrmap_get(const struct ms_addrmap *m, uint64_t key, uint32_t *val)
{
    if (!m->count)
        return 0;
    for (size_t i = slot_of(m, key);; i = (i + 1) & m->mask) {
        if (m->vals[i] == MS_ADDRMAP_EMPTY)
            return 0;
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return 1;
        }
    }
}

/* Inserts into a table known to have room and not to hold key. */
static void put_new(struct ms_addrmap *m, uint64_t key, uint32_t val)
{
    size_t i = slot_of(m, key);
    while (m->vals[i] != MS_ADDRMAP_EMPTY)
        i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->vals[i] = val;
}

static int grow(struct ms_addrmap *m)
{
    size_t old_slots = m->mask ? m->mask + 1 : 0;
    size_t slots = old_slots ? old_slots * 2 : MIN_SLOTS;
    if (slots > SIZE_MAX / sizeof(uint64_t))
        return MS_ENOMEM;
    uint64_t *keys = malloc(slots * sizeof *keys);
    uint32_t *vals = malloc(slots * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return MS_ENOMEM;
    }
    for (size_t i = 0; i < slots; i++)
        vals[i] = MS_ADDRMAP_EMPTY;
    uint64_t *ok = m->keys;
    uint32_t *ov = m->vals;
    m->keys = keys;
    m->vals = vals;
    m->mask = slots - 1;
    for (size_t i = 0; i < old_slots; i++)
        if (ov[i] != MS_ADDRMAP_EMPTY)
            put_new(m, ok[i], ov[i]);
    free(ok);
    free(ov);
    return 0;
}

int ms_addrmap_put(struct ms_addrmap *m, uint64_t key, uint32_t val)
{
    if (m->count) {
        for (size_t i = slot_of(m, key);; i = (i + 1) & m->mask) {
            if (m->vals[i] == MS_ADDRMAP_EMPTY)
                break;
            if (m->keys[i] == key) {
                m->vals[i] = val;
                return 0;
            }
        }
    }
    if (m->count >= m->cap)
        return MS_ENOMEM;
    if (!m->mask || (m->count + 1) * 2 > m->mask + 1) {
        int rc = grow(m);
        if (rc < 0)
            return rc;
    }
    put_new(m, key, val);
    m->count++;
    return 0;
}

int ms_addrmap_del(struct ms_addrmap *m, uint64_t key, uint32_t *val)
{
    if (!m->count)
        return 0;
    size_t i = slot_of(m, key);
    for (;; i = (i + 1) & m->mask) {
        if (m->vals[i] == MS_ADDRMAP_EMPTY)
            return 0;
        if (m->keys[i] == key)
            break;
    }
    if (val)
        *val = m->vals[i];
    /* Backward-shift: pull later members of the probe run into the hole when their home slot
     * does not lie cyclically in (hole, j]. */
    size_t hole = i;
    for (size_t j = (i + 1) & m->mask; m->vals[j] != MS_ADDRMAP_EMPTY; j = (j + 1) & m->mask) {
        size_t home = slot_of(m, m->keys[j]);
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->vals[hole] = MS_ADDRMAP_EMPTY;
    m->count--;
    return 1;
}

int ms_addrmap_next(const struct ms_addrmap *m, size_t *pos, uint64_t *key, uint32_t *val)
{
    if (!m->mask)
        return 0;
    for (size_t i = *pos; i <= m->mask; i++) {
        if (m->vals[i] != MS_ADDRMAP_EMPTY) {
            *key = m->keys[i];
            *val = m->vals[i];
            *pos = i + 1;
            return 1;
        }
    }
    *pos = m->mask + 1;
    return 0;
}
