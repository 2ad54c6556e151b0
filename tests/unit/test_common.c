/* test_common.c: src/common's growth and error helpers: the byte buffer (buf.h: appends, the NUL
 * after the bytes, formatted appends longer than its stack scratch, the cap that sets oom and
 * keeps it, take), ms_grow (doubling from the first size, the cap) and ms_errf (writes the
 * reason, returns the code, accepts no buffer). */
#include "test.h"

#include "common/buf.h"
#include "common/grow.h"
#include "common/ms_error.h"

#include <stdint.h>

static void test_buf(void)
{
    struct ms_buf b;
    ms_buf_init(&b, 4, 1000);
    CHECK(b.p == NULL);
    ms_buf_str(&b, "abc");
    ms_buf_byte(&b, 'd');
    ms_buf_add(&b, "ef", 2);
    CHECK_EQ(b.len, 6);
    CHECK_STREQ(b.p, "abcdef");
    CHECK(b.cap >= 7);
    ms_buf_addf(&b, "-%d-%s", 42, "x");
    CHECK_STREQ(b.p, "abcdef-42-x");
    char big[600];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = 0;
    ms_buf_addf(&b, "<%s>", big); /* longer than the formatter's scratch */
    CHECK_EQ(b.len, 11 + 601);
    CHECK(b.p[11] == '<' && b.p[610] == 'z' && b.p[611] == '>' && b.p[612] == 0);
    CHECK(!b.oom);
    /* past the cap: nothing added, oom set and kept */
    ms_buf_add(&b, big, 500);
    CHECK(b.oom);
    CHECK_EQ(b.len, 612);
    ms_buf_str(&b, "a");
    CHECK_EQ(b.len, 612);
    CHECK(ms_buf_take(&b) == NULL);
    CHECK(b.p == NULL && b.len == 0 && !b.oom);
    /* exactly the cap fits */
    ms_buf_add(&b, big, 599);
    ms_buf_add(&b, "0123456789", 10);
    CHECK(!b.oom);
    ms_buf_add(&b, big, 391);
    CHECK(!b.oom);
    CHECK_EQ(b.len, 1000);
    ms_buf_byte(&b, 'x');
    CHECK(b.oom);
    ms_buf_release(&b);
    ms_buf_init(&b, 0, 100);
    ms_buf_str(&b, "");
    char *s = ms_buf_take(&b);
    CHECK_STREQ(s, "");
    free(s);
}

static void test_grow(void)
{
    int *a = NULL;
    size_t cap = 0;
    CHECK_EQ(ms_grow((void **)&a, &cap, 0, sizeof *a, 4, 10), 0);
    CHECK_EQ(cap, 4);
    CHECK_EQ(ms_grow((void **)&a, &cap, 3, sizeof *a, 4, 10), 0);
    CHECK_EQ(cap, 4);
    CHECK_EQ(ms_grow((void **)&a, &cap, 4, sizeof *a, 4, 10), 0);
    CHECK_EQ(cap, 8);
    CHECK_EQ(ms_grow((void **)&a, &cap, 9, sizeof *a, 4, 10), 0);
    CHECK_EQ(cap, 10); /* doubled to 16, clamped to the cap */
    CHECK_EQ(ms_grow((void **)&a, &cap, 10, sizeof *a, 4, 10), MS_ENOMEM);
    CHECK_EQ(cap, 10);
    a[9] = 7;
    CHECK_EQ(a[9], 7);
    free(a);
    void *p = NULL;
    size_t c = 0;
    CHECK_EQ(ms_grow(&p, &c, 1, SIZE_MAX / 2, 1, 100), MS_ENOMEM);     /* over PTRDIFF_MAX bytes */
    CHECK_EQ(ms_grow(&p, &c, 1, SIZE_MAX / 2 + 1, 1, 100), MS_ENOMEM); /* bytes overflow */
    CHECK(p == NULL && c == 0);
}

static void test_errf(void)
{
    char err[16];
    CHECK_EQ(ms_errf(err, sizeof err, MS_EIO, "cannot read %s", "x.db"), MS_EIO);
    CHECK_STREQ(err, "cannot read x.d"); /* cut to the buffer, NUL-terminated */
    CHECK_EQ(ms_errf(NULL, 0, MS_EINVAL, "%s", "ignored"), MS_EINVAL);
    CHECK_EQ(ms_errf(err, sizeof err, 0, "ok"), 0);
    CHECK_STREQ(err, "ok");
}

int main(void)
{
    test_buf();
    test_grow();
    test_errf();
    puts("test_common: ok");
    return 0;
}
