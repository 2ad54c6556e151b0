/* test_usage_pages: the pagemap walk of a forked child (the pages it copied, exactly) and the
 * pages file's round trip and bounded reader (common/usage_pages.h). */
#include "common/ms_error.h"
#include "common/usage_pages.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/ms-test-usage-pages.XXXXXX";
static char path[256];

static void write_file(const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, p, n) == (ssize_t)n);
    close(fd);
}

/* Bytes of w's ranges within [lo, hi). */
static uint64_t within(const struct ms_pages_walk *w, uint64_t lo, uint64_t hi)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < w->n; i++) {
        uint64_t a = w->r[i].start > lo ? w->r[i].start : lo;
        uint64_t b = w->r[i].start + w->r[i].len < hi ? w->r[i].start + w->r[i].len : hi;
        if (b > a)
            sum += b - a;
    }
    return sum;
}

/* A child that writes 100 of the 256 pages of a mapping its parent wrote before the fork holds
 * exactly those 100 alone; the parent's other pages are shared; a page the child never wrote
 * and the parent never touched is not present. */
static void test_walk(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t len = 256 * (size_t)ps;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    memset(m, 1, 200 * (size_t)ps); /* the last 56 pages never touched */
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
        for (int i = 0; i < 100; i++)
            ((volatile unsigned char *)m)[(size_t)i * 2 * (size_t)ps] = 2; /* even pages 0..198 */
        char x = 'x';
        if (write(p[1], &x, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char x;
    CHECK(read(p[0], &x, 1) == 1);
    struct ms_pages_walk w = {0};
    CHECK_EQ(ms_pages_walk(c, &w), 0);
    CHECK_EQ(w.pid, c);
    CHECK_EQ(within(&w, (uint64_t)(uintptr_t)m, (uint64_t)(uintptr_t)m + len), 100 * (uint64_t)ps);
    /* ranges ascending, not overlapping, summing to bytes */
    uint64_t sum = 0;
    for (size_t i = 0; i < w.n; i++) {
        CHECK(i == 0 || w.r[i].start > w.r[i - 1].start + w.r[i - 1].len - 1);
        sum += w.r[i].len;
    }
    CHECK_EQ(sum, w.bytes);
    kill(c, SIGKILL);
    CHECK_EQ(waitpid(c, NULL, 0), c);
    CHECK_EQ(ms_pages_walk(c, &w), -ESRCH);

    /* round trip through the file */
    struct ms_pages_walk a = {0};
    a.ts_ns = 123;
    a.pid = 45;
    CHECK_EQ(ms_pages_walk(getpid(), &a), 0);
    a.ts_ns = 123;
    a.pid = 45;
    size_t n1 = MS_PAGES_HEADER + MS_PAGES_RECORD + a.n * 16;
    unsigned char *buf = malloc(n1 * 2);
    CHECK(buf != NULL);
    ms_pages_header(buf);
    ms_pages_encode(&a, buf + MS_PAGES_HEADER);
    memcpy(buf + MS_PAGES_HEADER + MS_PAGES_RECORD, a.r, a.n * 16);
    /* a second record, cut short: dropped */
    memcpy(buf + n1, buf + MS_PAGES_HEADER, MS_PAGES_RECORD + 8);
    write_file(buf, n1 + MS_PAGES_RECORD + (a.n ? 8 : 0));
    struct ms_pages_walk *v;
    size_t n;
    CHECK_EQ(ms_pages_load(path, &v, &n), 0);
    CHECK_EQ(n, 1);
    CHECK(v[0].ts_ns == 123 && v[0].pid == 45 && v[0].n == a.n && v[0].bytes == a.bytes);
    CHECK(a.n == 0 || memcmp(v[0].r, a.r, a.n * 16) == 0);
    ms_pages_walk_release(&v[0]);
    free(v);
    /* ranges out of order, or a sum that does not match: the record and what follows end */
    if (a.n >= 2) {
        unsigned char *r = buf + MS_PAGES_HEADER + MS_PAGES_RECORD;
        unsigned char t[16];
        memcpy(t, r, 16);
        memcpy(r, r + 16, 16);
        memcpy(r + 16, t, 16);
        write_file(buf, n1);
        CHECK_EQ(ms_pages_load(path, &v, &n), 0);
        CHECK_EQ(n, 0);
        free(v);
    }
    buf[MS_PAGES_HEADER + 16] ^= 1; /* bytes */
    write_file(buf, n1);
    CHECK_EQ(ms_pages_load(path, &v, &n), 0);
    CHECK_EQ(n, 0);
    free(v);
    /* wrong magic, newer version, wrong range size, missing file */
    buf[0] = 'X';
    write_file(buf, n1);
    CHECK_EQ(ms_pages_load(path, &v, &n), MS_EFORMAT);
    ms_pages_header(buf);
    buf[8] = 2;
    write_file(buf, n1);
    CHECK_EQ(ms_pages_load(path, &v, &n), MS_EVERSION);
    ms_pages_header(buf);
    buf[12] = 8;
    write_file(buf, n1);
    CHECK_EQ(ms_pages_load(path, &v, &n), MS_EFORMAT);
    unlink(path);
    CHECK_EQ(ms_pages_load(path, &v, &n), -ENOENT);
    free(buf);
    ms_pages_walk_release(&a);
    ms_pages_walk_release(&w);
    munmap(m, len);
}

/* Random bytes after a valid header: never a crash, never more walks than records fit. */
static void test_random(void)
{
    static unsigned char buf[4096];
    srand(56);
    for (int round = 0; round < 500; round++) {
        size_t len = MS_PAGES_HEADER + (size_t)rand() % (sizeof buf - MS_PAGES_HEADER);
        for (size_t i = 0; i < len; i++)
            buf[i] = (unsigned char)(rand() % 4 ? 0 : rand());
        ms_pages_header(buf);
        write_file(buf, len);
        struct ms_pages_walk *v;
        size_t n;
        CHECK_EQ(ms_pages_load(path, &v, &n), 0);
        CHECK(n <= (len - MS_PAGES_HEADER) / MS_PAGES_RECORD);
        for (size_t i = 0; i < n; i++)
            ms_pages_walk_release(&v[i]);
        free(v);
    }
    unlink(path);
}

static void test_names(void)
{
    CHECK(ms_pages_is_file("usage-123.msp"));
    CHECK(!ms_pages_is_file("usage-123.msu"));
    CHECK(!ms_pages_is_file("usage-.msp"));
    CHECK(!ms_pages_is_file("123.0.mst"));
}

int main(void)
{
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/usage-1.msp", dir);
    test_walk();
    test_random();
    test_names();
    rmdir(dir);
    printf("test_usage_pages ok\n");
    return 0;
}
