/* test_timeline.c: the viewer's encoded timeline (src/view/timeline.c) against a plain-array
 * reference: random changes (sizes from 1 byte to 2^40, frees, repeated ns, gaps of up to
 * 2^40 ns), then every query at random and edge times, answered exactly as the arrays would. */
#include "test.h"

#include "view/timeline.h"

#include <stdint.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

struct ref {
    int64_t *ts, *live;
    size_t n;
};

static void ref_push(struct ref *r, int64_t ts, int64_t delta)
{
    int64_t live = (r->n ? r->live[r->n - 1] : 0) + delta;
    if (r->n && r->ts[r->n - 1] == ts) {
        r->live[r->n - 1] = live;
        return;
    }
    r->ts[r->n] = ts;
    r->live[r->n++] = live;
}

static long ref_last_at(const struct ref *r, int64_t t)
{
    long i = -1;
    for (size_t k = 0; k < r->n && r->ts[k] <= t; k++)
        i = (long)k;
    return i;
}

static void ref_minmax(const struct ref *r, int64_t a, int64_t b, int64_t *mn, int64_t *mx)
{
    long f = ref_last_at(r, a);
    *mn = *mx = f < 0 ? 0 : r->live[f];
    for (size_t k = (size_t)(f + 1); k < r->n && r->ts[k] < b; k++) {
        *mn = r->live[k] < *mn ? r->live[k] : *mn;
        *mx = r->live[k] > *mx ? r->live[k] : *mx;
    }
}

static int64_t pick_time(const struct ref *r)
{
    if (!r->n)
        return (int64_t)(next() % 100) - 50;
    size_t k = next() % r->n;
    switch (next() % 4) {
    case 0: return r->ts[k];
    case 1: return r->ts[k] - 1;
    case 2: return r->ts[k] + 1;
    default: return r->ts[0] + (int64_t)(next() % (uint64_t)(r->ts[r->n - 1] - r->ts[0] + 3)) - 1;
    }
}

static void run(size_t changes)
{
    struct ref r = {malloc(changes * sizeof *r.ts), malloc(changes * sizeof *r.live), 0};
    CHECK(r.ts && r.live);
    struct ms_vline l = {0};
    int64_t ts = 1000;
    for (size_t i = 0; i < changes; i++) {
        uint64_t g = next() % 16;
        ts += g == 0 ? 0 : g == 1 ? (int64_t)(next() % ((uint64_t)1 << 40)) : (int64_t)g;
        int64_t size = next() % 8 == 0 ? (int64_t)(next() % ((uint64_t)1 << 40))
                                       : (int64_t)(next() % 4096) + 1;
        int64_t delta = next() % 3 == 0 ? -size : size;
        ref_push(&r, ts, delta);
        CHECK_EQ(ms_vline_push(&l, ts, delta), 0);
    }
    CHECK_EQ(ms_vline_finish(&l), 0);
    CHECK_EQ(l.n, r.n);
    CHECK_EQ(l.last_live, r.n ? r.live[r.n - 1] : 0);
    struct ms_vcur *c = malloc(sizeof *c);
    CHECK(c);
    ms_vcur_init(c, &l);
    for (size_t i = 0; i < r.n; i++) { /* every change, in order */
        CHECK_EQ(ms_vline_ts(c, i), r.ts[i]);
        CHECK_EQ(ms_vline_live(c, i), r.live[i]);
    }
    for (int q = 0; q < 3000; q++) {
        int64_t a = pick_time(&r), b = pick_time(&r);
        if (b <= a)
            b = a + 1 + (int64_t)(next() % 3);
        CHECK_EQ(ms_vline_last_at(c, a), ref_last_at(&r, a));
        long f = ref_last_at(&r, a);
        CHECK_EQ(ms_vline_live_at(c, a), f < 0 ? 0 : r.live[f]);
        int64_t mn, mx, rmn, rmx;
        ms_vline_minmax(c, a, b, &mn, &mx);
        ref_minmax(&r, a, b, &rmn, &rmx);
        CHECK_EQ(mn, rmn);
        CHECK_EQ(mx, rmx);
    }
    if (r.n >= 5000) /* encoded: at most half the arrays' 16 bytes a change */
        CHECK(ms_vline_bytes(&l) < 8 * r.n);
    free(c);
    ms_vline_release(&l);
    ms_vline_release(&l); /* a released line is a zeroed one */
    free(r.ts);
    free(r.live);
}

int main(void)
{
    size_t sizes[] = {0, 1, 2, 63, 64, 65, 255, 256, 257, 511, 512, 513, 5000, 20000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        run(sizes[i]);
    return 0;
}
