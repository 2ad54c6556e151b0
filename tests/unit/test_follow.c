/* test_follow.c: the trace follower (trace/follow.h) over a trace file that grows between polls
 * as the agent's does (records committed by `used`, chunks published by their magic, a chunk
 * reserved before its header is written, a free committed on one thread before the allocation it
 * frees on another), and the live forecaster (common/forecast.h) on known series. */
#include "test.h"
#include "tracegen.h"

#include "analyze/analyze.h"
#include "common/forecast.h"
#include "common/ms_error.h"
#include "trace/follow.h"

#include <errno.h>
#include <math.h>
#include <sys/stat.h>
#include <stdint.h>
#include <unistd.h>

static char dir[] = "/tmp/memscope-test-follow.XXXXXX";
static char path[128];

static void save(const struct tg *g)
{
    CHECK(tg_write(g, path) == 0);
}

static const struct ms_follow_proc *proc0(const struct ms_follow *f)
{
    CHECK_EQ(f->nprocs, 1);
    return &f->procs[0];
}

static void test_grow(void)
{
    struct tg g;
    tg_init(&g, 100, 1, 0, 0);
    tg_reserve(&g, 1 << 20); /* no realloc below: chunk pointers stay valid */
    struct ms_follow f;
    CHECK(ms_follow_init(&f, dir) == 0);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 0); /* empty directory */
    CHECK_EQ(f.nprocs, 0);

    /* thread A: a stack and an allocation */
    struct tg_chunk a;
    tg_chunk_begin(&g, &a, 11, 1, 0, 0, 4096);
    uint64_t pcs[2] = {0x401000, 0x402000};
    a.p = ms_enc_stack(a.p, 1, pcs, 2);
    a.p = ms_enc_alloc(a.p, &a.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 10, 0x1000, 100, 1);
    tg_chunk_end(&g, &a);
    save(&g);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 1);
    const struct ms_follow_proc *p = proc0(&f);
    CHECK_EQ(p->pid, 100);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 100);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].allocs, 1);
    const uint64_t *got;
    CHECK_EQ(ms_follow_stack(p, 1, &got), 2);
    CHECK_EQ(got[1], 0x402000);

    /* a page reserved for thread B whose header is not written yet, then thread C's chunk */
    size_t hole = g.len;
    tg_zero_pages(&g, 4096);
    struct tg_chunk c;
    tg_chunk_begin(&g, &c, 13, 3, 0, 0, 4096);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 30, 0x3000, 300, 0);
    tg_chunk_end(&g, &c);
    save(&g);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 1);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 400);

    /* thread B's header lands in the hole: its free of A's block is found */
    struct tg g2 = g; /* write the chunk at the hole's offset */
    size_t end = g.len;
    g2.len = hole;
    struct tg_chunk b;
    tg_chunk_begin(&g2, &b, 12, 2, 0, 0, 4096);
    b.p = ms_enc_free(b.p, &b.st, 20, 0x1000);
    tg_chunk_end(&g2, &b);
    g.len = end;
    tg_header(&g)->file_end = end;
    save(&g);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 1);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 300);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].frees, 1);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].peak, 400);

    /* B frees 0x5000 at 110 before A's allocation of it at 100 is committed: the free waits
     * behind the horizon (the lag), and the two apply in time order */
    b.p = ms_enc_free(b.p, &b.st, 110, 0x5000);
    tg_chunk_end(&g2, &b);
    tg_header(&g)->file_end = g.len;
    save(&g);
    CHECK_EQ(ms_follow_poll(&f, 105), 0);
    CHECK_EQ(ms_follow_lag(&f), 1);
    a.p = ms_enc_alloc(a.p, &a.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 100, 0x5000, 50, 1);
    tg_chunk_end(&g, &a);
    save(&g);
    CHECK_EQ(ms_follow_poll(&f, 105), 1); /* the allocation; the free still waits */
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 350);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 1);
    CHECK_EQ(ms_follow_lag(&f), 0);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 300);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].allocs, 3);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].frees, 2);

    /* owners: pushed labels, and a tag mark that names a block's owner afterwards; a step */
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_OWNER_PUSH, 200, NULL, 0, "PTA", 3);
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_OWNER_PUSH, 200, NULL, 0, "weight", 6);
    a.p = ms_enc_alloc(a.p, &a.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 201, 0x6000, 64, 1);
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_OWNER_POP, 202, NULL, 0, NULL, 0);
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_OWNER_POP, 202, NULL, 0, NULL, 0);
    const char *tag = "memscope-tag:ptr=0x3000;size=300;owner=PTA@gradient";
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_MARK, 203, NULL, 0, tag, strlen(tag));
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_STEP, 204, NULL, 0, NULL, 0);
    uint64_t mm = 0x7f0000000000;
    a.p = ms_enc_alloc(a.p, &a.st, MS_REC_MMAP_ALLOC + MS_FN_MMAP, 205, mm, 8192, 0);
    a.p = ms_enc_munmap(a.p, &a.st, 206, mm, 4096); /* the head: the tail stays */
    tg_chunk_end(&g, &a);
    save(&g);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 9);
    CHECK_EQ(p->owner_live[MS_OWNER_WEIGHT], 64);
    CHECK_EQ(p->owner_live[MS_OWNER_GRADIENT], 300);
    CHECK_EQ(p->owner_live[MS_OWNER_OTHER], 4096);
    CHECK_EQ(p->step, 1);
    CHECK_EQ(p->layer[MS_FOLLOW_MMAP].live, 4096);
    CHECK_EQ(p->host_live, 364 + 4096);

    /* thread A moves to its next chunk: the first is read to its end once more, then left */
    a.p = ms_enc_alloc(a.p, &a.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 300, 0x8000, 8, 1);
    tg_chunk_end(&g, &a);
    struct tg_chunk a2;
    tg_chunk_begin(&g, &a2, 11, 1, 1, 300, 4096);
    a2.p = ms_enc_alloc(a2.p, &a2.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 301, 0x9000, 9, 1);
    tg_chunk_end(&g, &a2);
    /* a damaged chunk of thread D: its bad record ends it, nothing else */
    struct tg_chunk d;
    tg_chunk_begin(&g, &d, 14, 4, 0, 0, 4096);
    *d.p++ = 0x0f;
    tg_chunk_end(&g, &d);
    save(&g);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 2);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 364 + 17);
    CHECK_EQ(p->damaged, 1);

    /* the stacks holding the most */
    struct ms_follow_stack_live top[2];
    CHECK_EQ(ms_follow_top_stacks(p, top, 2), 2);
    CHECK_EQ(top[0].stack_id, 0);
    CHECK_EQ(top[0].live, 300 + 4096); /* 0x3000 and the mapping's tail */
    CHECK_EQ(top[1].stack_id, 1);
    CHECK_EQ(top[1].live, 64 + 17);
    CHECK_EQ(top[1].allocs, 5);

    /* an exec: a new image of the same pid starts from nothing */
    struct tg h;
    tg_init(&h, 100, 1, 0, 0);
    struct tg_chunk e;
    tg_chunk_begin(&h, &e, 11, 1, 0, 400, 4096);
    e.p = ms_enc_alloc(e.p, &e.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 401, 0x1000, 5, 0);
    tg_chunk_end(&h, &e);
    char path1[160];
    snprintf(path1, sizeof path1, "%s/100.1.mst", dir);
    CHECK(tg_write(&h, path1) == 0);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 1);
    p = proc0(&f);
    CHECK_EQ(p->image, 1);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 5);
    CHECK_EQ(p->layer[MS_FOLLOW_MMAP].live, 0);

    /* the process ended: what it committed is read by the next poll, then its files close */
    e.p = ms_enc_alloc(e.p, &e.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 402, 0x2000, 6, 0);
    tg_chunk_end(&h, &e);
    CHECK(tg_write(&h, path1) == 0);
    ms_follow_retire(&f, 100);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 1);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 11);
    e.p = ms_enc_alloc(e.p, &e.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, 403, 0x3000, 7, 0);
    tg_chunk_end(&h, &e);
    CHECK(tg_write(&h, path1) == 0);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 0);
    CHECK_EQ(p->layer[MS_FOLLOW_HEAP].live, 11);
    unlink(path1);
    tg_release(&h);

    ms_follow_release(&f);
    tg_release(&g);
}

static void test_inputs(void)
{
    struct ms_follow f;
    CHECK_EQ(ms_follow_init(&f, path), -ENOTDIR);
    CHECK_EQ(ms_follow_init(&f, "/nonexistent/memscope"), -ENOENT);
    CHECK_EQ(ms_follow_owner_category("PTA@activation@model@layers@0", 29), MS_OWNER_ACTIVATION);
    CHECK_EQ(ms_follow_owner_category("PTA@optimizer_state", 19), MS_OWNER_OPTIMIZER_STATE);
    CHECK_EQ(ms_follow_owner_category("weights", 7), MS_OWNER_OTHER);
    CHECK_EQ(ms_follow_owner_category("", 0), MS_OWNER_OTHER);
    CHECK_STREQ(ms_follow_owner_name(MS_OWNER_OPTIMIZER_STATE), "optimizer_state");
}

static void test_forecast(void)
{
    const double MiB = 1048576;
    struct ms_forecast fc;
    double eta;
    struct ms_fit fit;
    /* 10 MiB/s from 0, four samples a second for 3 s: 200 MiB is 17 s after t = 3 s */
    ms_forecast_init(&fc);
    uint64_t t0 = 1000000000000ull;
    for (int k = 0; k <= 12; k++)
        ms_forecast_add(&fc, t0 + (uint64_t)k * 250000000u, (int64_t)(k * 2.5 * MiB));
    int why = ms_forecast_eta(&fc, 200 * MiB, t0 + 3000000000ull, &eta, &fit);
    CHECK_EQ(why, MS_LIMIT_PREDICTED);
    CHECK(fabs(fit.slope - 10 * MiB) < 1);
    /* the seconds' high-waters are 7.5, 17.5 and 27.5 MiB (samples at 0.75, 1.75, 2.75 s):
     * the line reaches 200 MiB at 20.25 s, 17.25 s after now */
    CHECK(fabs(eta - 17.25) < 1e-6);
    /* flat: not growing */
    ms_forecast_init(&fc);
    for (int k = 0; k <= 40; k++)
        ms_forecast_add(&fc, t0 + (uint64_t)k * 250000000u, 5 * (int64_t)MiB);
    CHECK_EQ(ms_forecast_eta(&fc, 200 * MiB, t0 + 10000000000ull, &eta, &fit),
             MS_LIMIT_NOT_GROWING);
    CHECK(eta < 0);
    /* a high-water between samples counts: the limit was reached */
    ms_forecast_add(&fc, t0 + 10100000000ull, 250 * (int64_t)MiB);
    ms_forecast_add(&fc, t0 + 10200000000ull, 5 * (int64_t)MiB);
    CHECK_EQ(ms_forecast_eta(&fc, 200 * MiB, t0 + 10300000000ull, &eta, &fit), MS_LIMIT_REACHED);
    CHECK_EQ(eta, 0);
    /* the shared limit rule: too far beyond the span fitted */
    struct ms_fit slow = {10, 1, 0, 1, 0};
    double at = -1;
    CHECK_EQ(ms_forecast_limit(&slow, 0, 1000, 10, 10, &at), MS_LIMIT_TOO_SHORT);
    CHECK_EQ(ms_forecast_limit(&slow, 0, 100, 10, 10, &at), MS_LIMIT_PREDICTED);
    CHECK_EQ(at, 100);
}

/* A follower of one file of pid 300 in a directory of its own. */
static const struct ms_follow_proc *steps_proc(const struct ms_follow *f)
{
    CHECK_EQ(f->nprocs, 1);
    CHECK_EQ(f->procs[0].pid, 300);
    return &f->procs[0];
}

/* Per-step peaks and the forecast by step, a pool's free extents, the call sites' growth. */
static void test_steps(void)
{
    char sub[160], fp[200];
    snprintf(sub, sizeof sub, "%s/steps", dir);
    CHECK(mkdir(sub, 0700) == 0);
    snprintf(fp, sizeof fp, "%s/300.0.mst", sub);
    struct tg g;
    tg_init(&g, 300, 1, 0, 0);
    tg_reserve(&g, 1 << 20);
    struct tg_chunk a;
    tg_chunk_begin(&g, &a, 11, 1, 0, 0, 65536);
    const uint64_t t0 = 1000000000000ull, half_s = 500000000ull;
    /* stack 3 holds 20000 B from the start and never grows */
    a.p = ms_enc_alloc(a.p, &a.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t0, 0x800000, 20000, 3);
    /* a pool: a region of 4096 B, blocks at +0 (1024 B) and +2048 (512 B) */
    uint64_t v[3] = {0x100000, 4096, 0};
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_POOL_RESERVE, t0, v, 3, "P", 1);
    v[1] = 1024;
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_POOL_ALLOC, t0, v, 3, "P", 1);
    v[0] = 0x100800, v[1] = 512;
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_POOL_ALLOC, t0, v, 3, "P", 1);
    /* 8 steps of 0.5 s: step k keeps 1000 B (stack 1) and uses a temporary of 5000 B (stack 2):
     * its peak is 20000 + 1000 k + 5000 */
    for (uint64_t k = 1; k <= 8; k++) {
        uint64_t ns = t0 + (k - 1) * half_s;
        a.p = ms_enc_alloc(a.p, &a.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, ns + 1,
                           0x10000 + k * 0x1000, 1000, 1);
        a.p = ms_enc_alloc(a.p, &a.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, ns + 2, 0x90000, 5000, 2);
        a.p = ms_enc_free(a.p, &a.st, ns + 3, 0x90000);
        a.p = ms_enc_ext(a.p, &a.st, MS_EXT_STEP, t0 + k * half_s, NULL, 0, NULL, 0);
    }
    tg_chunk_end(&g, &a);
    CHECK(tg_write(&g, fp) == 0);
    struct ms_follow f;
    CHECK(ms_follow_init(&f, sub) == 0);
    /* up to the end of step 4; the sites marked twice there (the window starts at step 4) */
    CHECK(ms_follow_poll(&f, t0 + 4 * half_s) > 0);
    const struct ms_follow_proc *p = steps_proc(&f);
    CHECK_EQ(p->step, 4);
    ms_follow_mark_sites(&f.procs[0]);
    ms_follow_mark_sites(&f.procs[0]);
    CHECK(ms_follow_poll(&f, UINT64_MAX) > 0);
    CHECK_EQ(p->step, 8);
    CHECK(ms_follow_step_peak(p, 0) == NULL);
    CHECK(ms_follow_step_peak(p, 9) == NULL);
    double x[8], y[8], t[8];
    for (uint64_t k = 1; k <= 8; k++) {
        const struct ms_follow_step_peak *sp = ms_follow_step_peak(p, k);
        CHECK(sp != NULL);
        CHECK_EQ(sp->step, k);
        CHECK_EQ(sp->ns, t0 + k * half_s);
        CHECK_EQ(sp->host, (int64_t)(25000 + 1000 * k));
        x[k - 1] = (double)k;
        y[k - 1] = (double)sp->host;
        t[k - 1] = (double)(k * half_s) / 1e9;
    }
    CHECK_EQ(p->host_live, 28000);
    /* the forecast by step: 1000 B a step from 25000 B, a limit of 65000 B at step 40, 16 s
     * after step 8 at 0.5 s a step */
    struct ms_step_forecast sf;
    ms_forecast_steps(x, y, t, 8, 65000, 4.0, &sf);
    CHECK_EQ(sf.s.status, MS_LIMIT_PREDICTED);
    CHECK(fabs(sf.s.fit.slope - 1000) < 1e-9);
    CHECK(fabs(sf.s.at - 40) < 1e-9);
    CHECK(fabs(sf.sec_per_step - 0.5) < 1e-9);
    CHECK(fabs(sf.eta_s - 16) < 1e-9);
    ms_forecast_steps(x, y, t, 8, 30000, 4.0, &sf); /* step 5's peak was 30000 */
    CHECK_EQ(sf.s.status, MS_LIMIT_REACHED);
    CHECK_EQ(sf.eta_s, 0);

    /* growth since the mark: stack 1 gained 4000 B; stack 3 holds the most but did not grow */
    struct ms_follow_stack_live top[3];
    CHECK_EQ(ms_follow_top_stacks(p, top, 3), 2);
    CHECK_EQ(top[0].stack_id, 3);
    CHECK_EQ(top[1].stack_id, 1);
    CHECK_EQ(ms_follow_top_growing(p, top, 3), 1);
    CHECK_EQ(top[0].stack_id, 1);
    CHECK_EQ(top[0].growth, 4000);
    CHECK_EQ(top[0].live, 8000);
    CHECK_EQ(top[0].allocs, 8);

    /* the pool: 4096 reserved, 1536 used; free 1024 + 1536, the largest 1536 */
    CHECK_EQ(p->npools, 1);
    CHECK_STREQ(p->pools[0].name, "P");
    CHECK_EQ(p->pools[0].reserved_bytes, 4096);
    CHECK_EQ(p->pools[0].used_bytes, 1536);
    long long fr = 0, big = 0;
    CHECK_EQ(ms_pool_free_extents(&p->pools[0].used, &p->pools[0].regions, &fr, &big), 0);
    CHECK_EQ(fr, 2560);
    CHECK_EQ(big, 1536);
    /* the block at +0 freed: [0, 2048) is one free extent */
    v[0] = 0x100000;
    a.p = ms_enc_ext(a.p, &a.st, MS_EXT_POOL_FREE, t0 + 9 * half_s, v, 1, "P", 1);
    tg_chunk_end(&g, &a);
    CHECK(tg_write(&g, fp) == 0);
    CHECK_EQ(ms_follow_poll(&f, UINT64_MAX), 1);
    CHECK_EQ(p->pools[0].used_bytes, 512);
    CHECK_EQ(ms_pool_free_extents(&p->pools[0].used, &p->pools[0].regions, &fr, &big), 0);
    CHECK_EQ(fr, 3584);
    CHECK_EQ(big, 2048);
    ms_follow_release(&f);
    tg_release(&g);
    unlink(fp);
    rmdir(sub);
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/100.0.mst", dir);
    test_grow();
    test_inputs();
    test_forecast();
    test_steps();
    unlink(path);
    rmdir(dir);
    puts("test_follow ok");
    return 0;
}
