/* test_blockstore.c: the viewer's encoded blocks (src/view/blockstore.c) against a plain array:
 * random blocks (times that go back, sizes up to 2^62, addresses anywhere, the widest stack,
 * owner and track words), read while written, then in order, at random and after their frees,
 * each field as pushed, from chunks kept decoded and from chunks past the cache's budget. */
#include "test.h"

#include "view/blockstore.h"

#include <stdint.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void same(struct ms_vblock a, const struct ms_vblock *b)
{
    CHECK_EQ(a.alloc_ns, b->alloc_ns);
    CHECK_EQ(a.free_ns, b->free_ns);
    CHECK_EQ(a.size, b->size);
    CHECK_EQ(a.stack_id, b->stack_id);
    CHECK_EQ(a.owner_track, b->owner_track);
    CHECK(a.addr == b->addr);
}

static void run(size_t n)
{
    struct ms_vblock *ref = malloc((n ? n : 1) * sizeof *ref);
    CHECK(ref);
    struct ms_vblocks s = {0};
    int64_t t = 1000;
    for (size_t i = 0; i < n; i++) {
        t += next() % 10 == 0 ? -(int64_t)(next() % 100) : (int64_t)(next() % 5000);
        ref[i] = (struct ms_vblock){
            .alloc_ns = t,
            .free_ns = INT64_MAX,
            .size = next() % 16 == 0 ? (int64_t)(next() >> 2) : (int64_t)(next() % 4096),
            .stack_id = next() % 32 == 0 ? UINT32_MAX : (uint32_t)(next() % 5000),
            .owner_track = next() % 32 == 0 ? UINT32_MAX : (uint32_t)(next() % 3) << 8 | 1,
            .addr = next() % 8 == 0 ? next() : 0x7f0000000000ull + next() % 100000};
        CHECK_EQ(ms_vblocks_push(&s, &ref[i]), 0);
        size_t k = next() % (i + 1); /* read while written */
        same(ms_vblocks_get(&s, k), &ref[k]);
    }
    CHECK_EQ(ms_vblocks_finish(&s), 0);
    CHECK_EQ(s.n, n);
    if (n > 1000) /* a budget for 3 decoded chunks: the others decoded at each read */
        s.dec_budget = 3 * MS_VBLOCK_CHUNK * sizeof(struct ms_vblock);
    for (size_t i = 0; i < n; i++)
        if (next() % 2) {
            ref[i].free_ns = ref[i].alloc_ns + (int64_t)(next() % 100000);
            ms_vblocks_set_free(&s, i, ref[i].free_ns);
        }
    for (size_t i = 0; i < n; i++)
        same(ms_vblocks_get(&s, i), &ref[i]);
    for (size_t q = 0; n && q < 5000; q++) {
        size_t k = next() % n;
        same(ms_vblocks_get(&s, k), &ref[k]);
    }
    if (n >= 5000) /* encoded: half the 32 bytes a decoded block takes besides its free time */
        CHECK(s.len < 16 * n);
    if (n > 1000)
        CHECK_EQ(s.dec_bytes, 3 * MS_VBLOCK_CHUNK * sizeof(struct ms_vblock));
    ms_vblocks_release(&s);
    ms_vblocks_release(&s);
    free(ref);
}

int main(void)
{
    size_t sizes[] = {0, 1, 63, 64, 65, 128, 1000, 20000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        run(sizes[i]);
    return 0;
}
