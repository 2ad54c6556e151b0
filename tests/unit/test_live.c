/* test_live.c: src/analyze/live.c, the live heap of a process read from its own trace, on a
 * trace built by hand with known answers: two threads whose frees and reuses interleave (the
 * streams must be merged by time), Python sites by the site rule (the program's own frame, else
 * a library's, memscope's never), a native site, an owner, and the leak rule's count. */
#include "test.h"
#include "tracegen.h"

#include "analyze/live.h"
#include "common/ms_error.h"

#include <unistd.h>

static void frame(struct tg_chunk *c, uint64_t ns, uint64_t id, const char *file, const char *fn)
{
    char s[256];
    size_t n = (size_t)snprintf(s, sizeof s, "%s%c%s", file, 0, fn);
    uint64_t v[2] = {id, 1};
    c->p = ms_enc_ext(c->p, &c->st, MS_EXT_PYFRAME, ns, v, 2, s, n);
}

static void build(struct tg *g)
{
    struct tg_chunk c;
    const uint64_t T = 1000;
    static const uint32_t py1[] = {3, 50, 2, 42}; /* json's decode:50 in train.py's step:42 */
    static const uint32_t py2[] = {4, 7, 3, 60};  /* memscope's own frame in json's decode:60 */
    static const uint64_t nat[] = {0x1234};       /* no module: "?? (0x1234)" */
    tg_init(g, 4242, 1, T, 0);
    tg_chunk_begin(g, &c, 4242, 1, 0, T, 16384);
    frame(&c, T, 2, "/app/train.py", "step");
    frame(&c, T, 3, "/usr/lib/python3.11/json/decoder.py", "decode");
    frame(&c, T, 4, "/opt/x/memscope/monitor.py", "check");
    c.p = ms_enc_pystack(c.p, &c.st, T, 1, py1, 2);
    c.p = ms_enc_pystack(c.p, &c.st, T, 2, py2, 2);
    c.p = ms_enc_stack(c.p, 3, nat, 1);
    for (uint64_t i = 0; i < 100; i++) { /* ordinals 2i (kept) and 2i + 1 (a temporary) */
        uint64_t t = T + 1000 + 10 * i;
        c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t, 0x10000 + i * 0x1000,
                           1000, 1);
        c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, t + 1, 0x900000, 50, 2);
        c.p = ms_enc_free(c.p, &c.st, t + 2, 0x900000);
    }
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_OWNER_PUSH, T + 2000, NULL, 0, "weights", 7);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, T + 2001, 0x800000, 4096, 3);
    c.p = ms_enc_ext(c.p, &c.st, MS_EXT_OWNER_POP, T + 2002, NULL, 0, NULL, 0);
    /* 0x10000 again, after thread 2 freed it at T + 2050 */
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, T + 2100, 0x10000, 77, 3);
    c.p = ms_enc_alloc(c.p, &c.st, MS_REC_HEAP_ALLOC + MS_FN_MALLOC, T + 2200, 0x900000, 50, 2);
    tg_chunk_end(g, &c);

    tg_chunk_begin(g, &c, 4243, 2, 0, T, 4096);
    c.p = ms_enc_free(c.p, &c.st, T + 2050, 0x10000);
    tg_chunk_end(g, &c);
}

int main(void)
{
    char path[] = "/tmp/memscope-test-live-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    struct tg g;
    build(&g);
    CHECK_EQ(tg_write(&g, path), 0);
    tg_release(&g);

    struct ms_live_report r;
    char err[256];
    CHECK_EQ(ms_live_read(path, 10, &r, err, sizeof err), 0);
    CHECK_EQ(r.allocations, 203);
    CHECK_EQ(r.live_bytes, 99 * 1000 + 4096 + 77 + 50);
    CHECK_EQ(r.live_blocks, 102);
    CHECK_EQ(r.peak_live_bytes, 100 * 1000 + 4096);
    CHECK_EQ(r.python, 1);
    CHECK_EQ(r.nsites, 3);
    CHECK_EQ(r.sites_total, 3);
    CHECK_STREQ(r.sites[0].name, "step (/app/train.py:42)");
    CHECK_EQ(r.sites[0].bytes, 99000);
    CHECK_EQ(r.sites[0].blocks, 99);
    CHECK_EQ(r.sites[0].leak, 1); /* kept from all along */
    CHECK_STREQ(r.sites[1].name, "?? (0x1234)");
    CHECK_EQ(r.sites[1].bytes, 4096 + 77);
    CHECK_EQ(r.sites[1].blocks, 2);
    CHECK_EQ(r.sites[1].leak, 0); /* allocated in the last tenth only */
    CHECK_STREQ(r.sites[2].name, "decode (/usr/lib/python3.11/json/decoder.py:60)");
    CHECK_EQ(r.sites[2].bytes, 50);
    CHECK_EQ(r.sites[2].leak, 0);
    CHECK_EQ(r.leaks, 1);
    CHECK_EQ(r.nowners, 2);
    CHECK_STREQ(r.owners[0].name, "(no owner)");
    CHECK_EQ(r.owners[0].bytes, 99000 + 77 + 50);
    CHECK_EQ(r.owners[0].blocks, 101);
    CHECK_STREQ(r.owners[1].name, "weights");
    CHECK_EQ(r.owners[1].bytes, 4096);
    ms_live_report_release(&r);

    /* the top one only: the count still covers every site */
    CHECK_EQ(ms_live_read(path, 1, &r, err, sizeof err), 0);
    CHECK_EQ(r.nsites, 1);
    CHECK_EQ(r.sites_total, 3);
    CHECK_EQ(r.leaks, 1);
    ms_live_report_release(&r);
    ms_live_report_release(&r); /* twice: a released report is a zeroed one */

    unlink(path);
    CHECK(ms_live_read(path, 5, &r, err, sizeof err) < 0);
    CHECK(strstr(err, path) != NULL);
    printf("test_live: ok\n");
    return 0;
}
