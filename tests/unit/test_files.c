/* test_files.c: the leaf helpers issue 37 added to src/common: how outputs are opened (files.c:
 * a link at the output is replaced, never followed; a FIFO at the path itself and the names of
 * the process's own descriptors are written in place), temporary names (the pid and 64 random
 * bits, O_EXCL), the cleanup list a fatal signal empties (ms_cleanup_run, called here directly),
 * the UTF-8 test of the JSON writers (utf8.h) and the saturating time arithmetic (ns.h). */
#include "test.h"

#include "common/files.h"
#include "common/ns.h"
#include "common/utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/ms-test-files-XXXXXX";

static char *at(const char *name)
{
    static char buf[4][256];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs(text, f);
    fclose(f);
}

static void get(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    CHECK(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
}

static void test_output_link_replaced(void)
{
    char buf[64];
    put(at("victim"), "precious");
    CHECK_EQ(symlink(at("victim"), at("out")), 0);
    struct ms_output o;
    CHECK_EQ(ms_output_open(&o, at("out")), 0);
    CHECK(o.tmp[0]); /* a new file, not the link's target */
    CHECK_EQ(write(o.fd, "new", 3), 3);
    CHECK_EQ(ms_output_commit(&o), 0);
    get(at("victim"), buf, sizeof buf);
    CHECK_STREQ(buf, "precious");
    struct stat st;
    CHECK_EQ(lstat(at("out"), &st), 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK_EQ(st.st_mode & 0777, 0600);
    get(at("out"), buf, sizeof buf);
    CHECK_STREQ(buf, "new");
    /* a link to a FIFO: replaced as well (opening it would block or write into it) */
    CHECK_EQ(mkfifo(at("fifo"), 0600), 0);
    CHECK_EQ(symlink(at("fifo"), at("out2")), 0);
    CHECK_EQ(ms_output_open(&o, at("out2")), 0);
    CHECK(o.tmp[0]);
    ms_output_abort(&o);
    CHECK_EQ(lstat(at("out2"), &st), 0);
    CHECK(S_ISLNK(st.st_mode)); /* abort: left as it was */
}

static void test_output_in_place(void)
{
    /* a FIFO named directly: in place (a reader holds it open, so the open does not block) */
    int rd = open(at("fifo"), O_RDONLY | O_NONBLOCK);
    CHECK(rd >= 0);
    struct ms_output o;
    CHECK_EQ(ms_output_open(&o, at("fifo")), 0);
    CHECK_EQ(o.tmp[0], 0);
    CHECK_EQ(write(o.fd, "x", 1), 1);
    CHECK_EQ(ms_output_commit(&o), 0);
    char c = 0;
    CHECK_EQ(read(rd, &c, 1), 1);
    CHECK_EQ(c, 'x');
    close(rd);
    /* the process's own descriptors, by name: duplicated, never replaced */
    int fd = open(at("fd3"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    char name[64];
    snprintf(name, sizeof name, "/dev/fd/%d", fd);
    CHECK_EQ(ms_output_open(&o, name), 0);
    CHECK_EQ(o.tmp[0], 0);
    CHECK(o.fd != fd);
    CHECK_EQ(write(o.fd, "via fd", 6), 6);
    CHECK_EQ(ms_output_commit(&o), 0);
    close(fd);
    char buf[64];
    get(at("fd3"), buf, sizeof buf);
    CHECK_STREQ(buf, "via fd");
    /* a directory: refused */
    CHECK_EQ(ms_output_open(&o, dir), -EISDIR);
}

static void test_temp_names(void)
{
    char a[256], b[256], prefix[256];
    int fa = ms_temp_create(a, sizeof a, at("db"), ".tmp.");
    int fb = ms_temp_create(b, sizeof b, at("db"), ".tmp.");
    CHECK(fa >= 0 && fb >= 0);
    snprintf(prefix, sizeof prefix, "%s.tmp.%ld.", at("db"), (long)getpid());
    CHECK_EQ(strncmp(a, prefix, strlen(prefix)), 0);
    CHECK_EQ(strlen(a), strlen(prefix) + 16); /* 16 hex digits */
    CHECK(strcmp(a, b) != 0);
    struct stat st;
    CHECK_EQ(fstat(fa, &st), 0);
    CHECK_EQ(st.st_mode & 0777, 0600);
    close(fa);
    close(fb);
    CHECK_EQ(ms_temp_create(a, 20, at("db"), ".tmp."), -ENAMETOOLONG);
    /* both on the cleanup list: ms_cleanup_run removes them, but not what was forgotten */
    ms_cleanup_forget(b);
    char d[256];
    snprintf(d, sizeof d, "%s", at("tmpdir-XXXXXX"));
    CHECK(ms_temp_dir_create(d));
    char inner[300];
    snprintf(inner, sizeof inner, "%s/file", d);
    put(inner, "x");
    ms_cleanup_run();
    CHECK_EQ(access(a, F_OK), -1);
    CHECK_EQ(access(d, F_OK), -1);
    CHECK_EQ(access(b, F_OK), 0);
    unlink(b);
}

static void test_db_path(void)
{
    char p[600];
    memset(p, 'a', sizeof p);
    p[0] = '/';
    p[470] = 0; /* 470 + ".tmp.<7>.<16>" (29) + "-journal" (8) = 507 <= 512 */
    CHECK_EQ(ms_db_path_check(p), 0);
    p[470] = 'a';
    p[476] = 0; /* 513 */
    CHECK_EQ(ms_db_path_check(p), -ENAMETOOLONG);
}

static size_t u8(const char *s)
{
    return ms_utf8_len((const unsigned char *)s, strlen(s));
}

static void test_utf8(void)
{
    CHECK_EQ(u8("a"), 1);
    CHECK_EQ(u8("\xc3\xa9"), 2);         /* é */
    CHECK_EQ(u8("\xe2\x82\xac"), 3);     /* € */
    CHECK_EQ(u8("\xf0\x9f\x98\x80"), 4); /* U+1F600 */
    CHECK_EQ(u8("\xff"), 0);
    CHECK_EQ(u8("\x80"), 0);             /* a continuation byte first */
    CHECK_EQ(u8("\xc0\xaf"), 0);         /* overlong '/' */
    CHECK_EQ(u8("\xe0\x80\xaf"), 0);     /* overlong */
    CHECK_EQ(u8("\xed\xa0\x80"), 0);     /* a surrogate, U+D800 */
    CHECK_EQ(u8("\xf4\x90\x80\x80"), 0); /* past U+10FFFF */
    CHECK_EQ(u8("\xe2\x82"), 0);         /* cut short */
    CHECK_EQ(u8("\xc3("), 0);            /* not a continuation */
}

static void test_ns(void)
{
    CHECK_EQ(ms_ns_clamp(-5), 0);
    CHECK_EQ(ms_ns_clamp(INT64_MAX), MS_NS_MAX);
    CHECK_EQ(ms_ns_clamp(1795870000000000000LL), 1795870000000000000LL);
    CHECK_EQ(ms_ns_sub(INT64_MIN, 1), INT64_MIN);
    CHECK_EQ(ms_ns_sub(1, INT64_MIN), INT64_MAX);
    CHECK_EQ(ms_ns_sub(10, 3), 7);
    CHECK_EQ(ms_ns_add(INT64_MAX, 1), INT64_MAX);
    CHECK_EQ(ms_ns_add(INT64_MIN, -1), INT64_MIN);
    /* any two clamped times: their difference and sum fit */
    CHECK_EQ(ms_ns_clamp(INT64_MAX) - ms_ns_clamp(INT64_MIN), MS_NS_MAX);
    CHECK_EQ(ms_ns_clamp(INT64_MAX) + ms_ns_clamp(INT64_MAX), INT64_MAX - 1);
}

int main(void)
{
    CHECK(mkdtemp(dir));
    test_output_link_replaced();
    test_output_in_place();
    test_temp_names();
    test_db_path();
    test_utf8();
    test_ns();
    const char *names[] = {"victim", "out", "out2", "fifo", "fd3"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        unlink(at(names[i]));
    CHECK_EQ(rmdir(dir), 0);
    puts("test_files ok");
    return 0;
}
