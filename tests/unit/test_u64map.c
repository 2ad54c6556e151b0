/* test_u64map.c: src/common/u64map.c, the map from 64-bit keys to fixed-size values that the
 * store, the follower, the snapshot module, the analyses and the viewer use: puts and gets
 * (key 0 and all-ones included, keys that share their low bits), values kept across the
 * table's doublings, backward-shift deletion (every other key deleted, the rest still found),
 * iteration over exactly the entries, the entry cap, clear and reuse. Checked against a plain
 * array of the expected contents. */
#include "test.h"

#include "common/u64map.h"

#include <stdint.h>

#define N 20000

static uint64_t key_of(size_t i)
{
    /* keys that share their low 16 bits, so that a table indexed by low bits would collide */
    return i == 0 ? 0 : i == 1 ? UINT64_MAX : (uint64_t)i << 16;
}

static void test_put_get_del(void)
{
    struct ms_u64map m;
    ms_u64map_init(&m, sizeof(uint64_t), MS_U64MAP_MAX);
    CHECK(ms_u64map_get(&m, 0) == NULL);
    CHECK(ms_u64map_get(&m, 42) == NULL);
    for (size_t i = 0; i < N; i++) {
        int isnew = -1;
        uint64_t *v = ms_u64map_put(&m, key_of(i), &isnew);
        CHECK(v != NULL);
        CHECK_EQ(isnew, 1);
        CHECK_EQ(*v, 0); /* a new slot is zeroed */
        *v = i * 3 + 1;
    }
    CHECK_EQ(m.count, N);
    /* a second put of a present key: the same value, not new */
    int isnew = -1;
    uint64_t *v = ms_u64map_put(&m, key_of(7), &isnew);
    CHECK(v != NULL);
    CHECK_EQ(isnew, 0);
    CHECK_EQ(*v, 7 * 3 + 1);
    CHECK_EQ(m.count, N);
    for (size_t i = 0; i < N; i++) {
        uint64_t got = 0;
        CHECK(ms_u64map_get64(&m, key_of(i), &got));
        CHECK_EQ(got, i * 3 + 1);
    }
    CHECK(ms_u64map_get(&m, (uint64_t)N << 16) == NULL);
    CHECK(ms_u64map_get(&m, 1) == NULL);

    /* delete every even i (key 0 among them) */
    for (size_t i = 0; i < N; i += 2) {
        uint64_t out = 0;
        CHECK_EQ(ms_u64map_del(&m, key_of(i), &out), 1);
        CHECK_EQ(out, i * 3 + 1);
        CHECK_EQ(ms_u64map_del(&m, key_of(i), &out), 0);
    }
    CHECK_EQ(m.count, N / 2);
    for (size_t i = 0; i < N; i++) {
        uint64_t got = 0;
        int present = ms_u64map_get64(&m, key_of(i), &got);
        CHECK_EQ(present, i % 2);
        if (present)
            CHECK_EQ(got, i * 3 + 1);
    }

    /* iteration: each remaining entry once, with its value */
    static unsigned char seen[N];
    memset(seen, 0, sizeof seen);
    size_t pos = 0, n = 0;
    uint64_t key, val;
    void *vp;
    while (ms_u64map_next(&m, &pos, &key, &vp)) {
        memcpy(&val, vp, sizeof val);
        size_t i = key == UINT64_MAX ? 1 : (size_t)(key >> 16);
        CHECK(i < N && i % 2 == 1);
        CHECK_EQ(key, key_of(i));
        CHECK_EQ(val, i * 3 + 1);
        CHECK_EQ(seen[i], 0);
        seen[i] = 1;
        n++;
    }
    CHECK_EQ(n, N / 2);

    /* put key 0 back: it lives apart from the table */
    CHECK_EQ(ms_u64map_set64(&m, 0, 99), 0);
    uint64_t got = 0;
    CHECK(ms_u64map_get64(&m, 0, &got));
    CHECK_EQ(got, 99);
    CHECK_EQ(m.count, N / 2 + 1);

    /* clear keeps nothing; the map is used again */
    ms_u64map_clear(&m);
    CHECK_EQ(m.count, 0);
    CHECK(ms_u64map_get(&m, 0) == NULL);
    CHECK(ms_u64map_get(&m, key_of(3)) == NULL);
    pos = 0;
    CHECK_EQ(ms_u64map_next(&m, &pos, &key, &vp), 0);
    CHECK_EQ(ms_u64map_set64(&m, key_of(3), 5), 0);
    CHECK(ms_u64map_get64(&m, key_of(3), &got));
    CHECK_EQ(got, 5);
    ms_u64map_release(&m);
    CHECK_EQ(m.count, 0);
    CHECK(ms_u64map_get(&m, key_of(3)) == NULL);
    ms_u64map_release(&m); /* twice is allowed */
}

/* the cap: a put beyond it fails, a put of a present key does not */
static void test_cap(void)
{
    struct ms_u64map m;
    ms_u64map_init(&m, sizeof(uint32_t), 3);
    CHECK_EQ(ms_u64map_set32(&m, 10, 1), 0);
    CHECK_EQ(ms_u64map_set32(&m, 0, 2), 0);
    CHECK_EQ(ms_u64map_set32(&m, 30, 3), 0);
    CHECK(ms_u64map_put(&m, 40, NULL) == NULL);
    CHECK_EQ(ms_u64map_set32(&m, 40, 4), MS_ENOMEM);
    CHECK_EQ(ms_u64map_set32(&m, 30, 33), 0);
    uint32_t v = 0;
    CHECK(ms_u64map_get32(&m, 30, &v));
    CHECK_EQ(v, 33);
    CHECK_EQ(m.count, 3);
    /* a deleted entry frees its place under the cap */
    CHECK_EQ(ms_u64map_del(&m, 10, NULL), 1);
    CHECK_EQ(ms_u64map_set32(&m, 40, 4), 0);
    CHECK(ms_u64map_get32(&m, 40, &v));
    CHECK_EQ(v, 4);
    ms_u64map_release(&m);
}

/* values wider than a word keep all their bytes */
static void test_wide_values(void)
{
    struct ms_u64map m;
    ms_u64map_init(&m, 24, 1000);
    for (uint64_t k = 1; k <= 500; k++) {
        unsigned char *p = ms_u64map_put(&m, k * 0x9e3779b97f4a7c15ull, NULL);
        CHECK(p != NULL);
        for (int b = 0; b < 24; b++)
            p[b] = (unsigned char)(k + b);
    }
    for (uint64_t k = 1; k <= 500; k++) {
        const unsigned char *p = ms_u64map_get(&m, k * 0x9e3779b97f4a7c15ull);
        CHECK(p != NULL);
        for (int b = 0; b < 24; b++)
            CHECK_EQ(p[b], (unsigned char)(k + b));
    }
    ms_u64map_release(&m);
}

int main(void)
{
    test_put_get_del();
    test_cap();
    test_wide_values();
    return 0;
}
