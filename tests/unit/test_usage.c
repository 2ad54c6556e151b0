/* test_usage.c: the usage monitor's module (src/common/usage.c): the file's encoder and bounded
 * reader with exact answers, damaged and random files (hostile input: refused or read in part,
 * never past the end), and the /proc reader on this process, a zombie and a missing pid. */
#include "common/ms_error.h"
#include "common/usage.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[] = "/tmp/ms-test-usage.XXXXXX";
static char path[256];

static void write_file(const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, p, n) == (ssize_t)n);
    close(fd);
}

/* A file of n samples, sample i with ts 1000 + i, pid 7, rss_anon i * 4096, threads i. */
static size_t make(unsigned char *buf, size_t n)
{
    ms_usage_header(buf);
    for (size_t i = 0; i < n; i++) {
        struct ms_usage_sample s = {.ts_ns = 1000 + i,
                                    .pid = 7,
                                    .flags = MS_USAGE_F_STATUS,
                                    .rss_anon = i * 4096,
                                    .rss_file = 1,
                                    .rss_shmem = 2,
                                    .stack = 3,
                                    .swap = 4,
                                    .pss = 5,
                                    .uss = 6,
                                    .cg_current = 7,
                                    .cg_max = UINT64_MAX - 1,
                                    .threads = (uint32_t)i};
        ms_usage_encode(&s, buf + MS_USAGE_HEADER + i * MS_USAGE_RECORD);
    }
    return MS_USAGE_HEADER + n * MS_USAGE_RECORD;
}

static void test_file(void)
{
    static unsigned char buf[MS_USAGE_HEADER + 100 * MS_USAGE_RECORD];
    struct ms_usage_sample *v;
    size_t n;
    CHECK_EQ(ms_usage_load(path, &v, &n), -ENOENT);
    size_t len = make(buf, 100);
    write_file(buf, len);
    CHECK_EQ(ms_usage_load(path, &v, &n), 0);
    CHECK_EQ(n, 100);
    for (size_t i = 0; i < n; i++) {
        CHECK_EQ(v[i].ts_ns, 1000 + i);
        CHECK_EQ(v[i].pid, 7);
        CHECK_EQ(v[i].flags, MS_USAGE_F_STATUS);
        CHECK_EQ(v[i].rss_anon, i * 4096);
        CHECK_EQ(v[i].rss_file + v[i].rss_shmem + v[i].stack + v[i].swap, 10);
        CHECK_EQ(v[i].pss * 10 + v[i].uss, 56);
        CHECK_EQ(v[i].cg_current, 7);
        CHECK(v[i].cg_max == UINT64_MAX - 1);
        CHECK_EQ(v[i].threads, i);
    }
    free(v);
    /* a record cut short: the whole ones */
    write_file(buf, len - 40);
    CHECK_EQ(ms_usage_load(path, &v, &n), 0);
    CHECK_EQ(n, 99);
    free(v);
    /* a header alone, and less than one */
    write_file(buf, MS_USAGE_HEADER);
    CHECK_EQ(ms_usage_load(path, &v, &n), 0);
    CHECK_EQ(n, 0);
    free(v);
    write_file(buf, 10);
    CHECK_EQ(ms_usage_load(path, &v, &n), MS_EFORMAT);
    CHECK(v == NULL && n == 0);
    /* a wrong magic, a wrong record size, a newer version, version 0 */
    unsigned char bad[MS_USAGE_HEADER + MS_USAGE_RECORD];
    memcpy(bad, buf, sizeof bad);
    bad[0] = 'X';
    write_file(bad, sizeof bad);
    CHECK_EQ(ms_usage_load(path, &v, &n), MS_EFORMAT);
    memcpy(bad, buf, sizeof bad);
    bad[12] = 95;
    write_file(bad, sizeof bad);
    CHECK_EQ(ms_usage_load(path, &v, &n), MS_EFORMAT);
    memcpy(bad, buf, sizeof bad);
    bad[8] = 2;
    write_file(bad, sizeof bad);
    CHECK_EQ(ms_usage_load(path, &v, &n), MS_EVERSION);
    memcpy(bad, buf, sizeof bad);
    bad[8] = 0;
    write_file(bad, sizeof bad);
    CHECK_EQ(ms_usage_load(path, &v, &n), MS_EFORMAT);
    /* a directory is no usage file */
    CHECK_EQ(ms_usage_load(dir, &v, &n), MS_EFORMAT);
}

/* Random files: a valid header followed by any bytes, or any bytes at all: either refused, or
 * exactly the whole records read. */
static void test_random(void)
{
    static unsigned char buf[MS_USAGE_HEADER + 20 * MS_USAGE_RECORD + 95];
    srand(38);
    for (int round = 0; round < 2000; round++) {
        size_t len = (size_t)rand() % sizeof buf;
        for (size_t i = 0; i < len; i++)
            buf[i] = (unsigned char)rand();
        int valid = round % 2 && len >= MS_USAGE_HEADER;
        if (valid)
            ms_usage_header(buf);
        write_file(buf, len);
        struct ms_usage_sample *v;
        size_t n;
        int rc = ms_usage_load(path, &v, &n);
        if (valid) {
            CHECK_EQ(rc, 0);
            CHECK_EQ(n, (len - MS_USAGE_HEADER) / MS_USAGE_RECORD);
            free(v);
        } else {
            CHECK(rc == MS_EFORMAT || rc == MS_EVERSION || (rc == 0 && len >= 16));
            if (rc == 0)
                free(v);
        }
    }
}

static void test_names(void)
{
    CHECK(ms_usage_is_file("usage-123.msu"));
    CHECK(ms_usage_is_file("usage-x.msu"));
    CHECK(!ms_usage_is_file("usage-.msu"));
    CHECK(!ms_usage_is_file("usage.msu"));
    CHECK(!ms_usage_is_file("123.0.mst"));
    CHECK(!ms_usage_is_file("usage-123.msu.tmp"));
}

static void test_proc(void)
{
    struct ms_usage_sample s;
    CHECK_EQ(ms_usage_read(getpid(), NULL, 1, &s), 0);
    CHECK_EQ(s.pid, getpid());
    CHECK(s.flags & MS_USAGE_F_STATUS);
    CHECK(s.rss_anon > 0 && s.rss_file > 0 && s.stack > 0);
    CHECK_EQ(s.threads, 1);
    CHECK(s.ts_ns > 0);
    if (access("/proc/self/smaps_rollup", R_OK) == 0)
        CHECK((s.flags & MS_USAGE_F_SMAPS) && s.pss > 0 && s.uss > 0 && s.uss <= s.pss + 4096);
    CHECK_EQ(ms_usage_read(getpid(), NULL, 0, &s), 0);
    CHECK(!(s.flags & MS_USAGE_F_SMAPS) && s.pss == 0 && s.uss == 0);
    /* a zombie has no memory left: gone; a reaped one too */
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0)
        _exit(0);
    siginfo_t si;
    CHECK_EQ(waitid(P_PID, (id_t)c, &si, WEXITED | WNOWAIT), 0);
    CHECK_EQ(ms_usage_read(c, NULL, 1, &s), -ESRCH);
    CHECK_EQ(waitpid(c, NULL, 0), c);
    CHECK_EQ(ms_usage_read(c, NULL, 1, &s), -ESRCH);
    CHECK_EQ(ms_usage_read(4194300, NULL, 1, &s), -ESRCH);
    /* the paced read: the first reads PSS and USS and sets when the next may */
    uint64_t next = 0;
    CHECK_EQ(ms_usage_read_paced(getpid(), NULL, &next, &s), 0);
    if (access("/proc/self/smaps_rollup", R_OK) == 0)
        CHECK((s.flags & MS_USAGE_F_SMAPS) && next > 0);
}

/* Waits (up to 20 s) until process pid's executable's name ends with suffix. */
static int wait_exe(pid_t pid, const char *suffix)
{
    char path[64], exe[4096];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    for (int i = 0; i < 2000; i++) {
        ssize_t n = readlink(path, exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            size_t k = strlen(suffix);
            if ((size_t)n >= k && !strcmp(exe + n - k, suffix))
                return 1;
        }
        usleep(10000);
    }
    return 0;
}

/* The kept reader (struct ms_usage_proc): the figures ms_usage_read gives, through descriptors
 * that stay open from one read to the next; smaps_rollup opened again after an exec (the
 * address space it was opened on is gone); a process that ended reads as ended through them;
 * the pace; a cgroup's files kept open the same way. */
static void test_proc_kept(void)
{
    const uint64_t mib8 = 8u << 20;
    int smaps = access("/proc/self/smaps_rollup", R_OK) == 0;
    int go[2];
    CHECK_EQ(pipe(go), 0);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) { /* 8 MiB written, then blocked until told to exec sleep */
        close(go[1]);
        char *m = malloc(mib8), b;
        if (!m)
            _exit(1);
        memset(m, 1, mib8);
        __asm__ volatile("" : : "r"(m) : "memory"); /* the stores are kept */
        if (read(go[0], &b, 1) != 1)
            _exit(1);
        execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(2);
    }
    close(go[0]);
    struct ms_usage_proc p;
    ms_usage_proc_init(&p, c, 1);
    struct ms_usage_sample s, r;
    for (int i = 0; i < 2000; i++) { /* until its 8 MiB are written */
        CHECK_EQ(ms_usage_proc_read(&p, 1, &s), 0);
        if (s.rss_anon >= mib8)
            break;
        p.next_smaps_ns = 0;
        usleep(10000);
    }
    CHECK(s.rss_anon >= mib8);
    p.next_smaps_ns = 0;
    uint64_t reads = p.smaps_reads, cpu = p.smaps_cpu_ns;
    CHECK_EQ(ms_usage_proc_read(&p, 1, &s), 0);
    int fd = p.status_fd;
    CHECK(fd >= 0);
    CHECK_EQ(ms_usage_read(c, NULL, 1, &r), 0); /* opened for the read: the same figures */
    CHECK_EQ(s.rss_anon, r.rss_anon);
    CHECK_EQ(s.rss_file, r.rss_file);
    CHECK_EQ(s.stack, r.stack);
    CHECK_EQ(s.threads, r.threads);
    CHECK_EQ(s.flags, r.flags);
    if (smaps) {
        CHECK(p.smaps_fd >= 0 && p.smaps_reads == reads + 1 && p.smaps_cpu_ns > 0);
        CHECK_EQ(s.pss, r.pss);
        CHECK_EQ(s.uss, r.uss);
        CHECK(s.uss >= mib8);
        /* the pace: the next read MS_USAGE_PACE times this one's CPU later */
        CHECK_EQ(p.next_smaps_ns, s.ts_ns + MS_USAGE_PACE * (p.smaps_cpu_ns - cpu));
    }
    CHECK_EQ(ms_usage_proc_read(&p, 1, &s), 0);
    CHECK_EQ(p.status_fd, fd); /* the same descriptor */
    /* an exec: a new address space, a smaller one */
    CHECK_EQ(write(go[1], "x", 1), 1);
    CHECK(wait_exe(c, "/sleep"));
    p.next_smaps_ns = 0;
    CHECK_EQ(ms_usage_proc_read(&p, 1, &s), 0);
    CHECK(s.rss_anon < mib8);
    if (smaps)
        CHECK((s.flags & MS_USAGE_F_SMAPS) && s.uss > 0 && s.uss < mib8);
    CHECK_EQ(p.status_fd, fd);
    /* ended and reaped: its descriptors say so */
    kill(c, SIGKILL);
    CHECK_EQ(waitpid(c, NULL, 0), c);
    CHECK_EQ(ms_usage_proc_read(&p, 1, &s), -ESRCH);
    ms_usage_proc_release(&p);
    CHECK(p.status_fd == -1 && p.smaps_fd == -1);
    close(go[1]);
    /* keep 0: nothing stays open */
    ms_usage_proc_init(&p, getpid(), 0);
    CHECK_EQ(ms_usage_proc_read(&p, 1, &s), 0);
    CHECK(p.status_fd == -1 && p.smaps_fd == -1);
    /* the cgroup's files kept open: the same figures as read by path */
    struct ms_usage_cgroup cg;
    if (ms_usage_cgroup_find(getpid(), &cg) == 0) {
        struct ms_usage_sample a = {0}, b = {0}, k = {0};
        ms_usage_read_cgroup(&cg, 1, &a);
        CHECK((a.flags & MS_USAGE_F_CGROUP) && cg.current_fd >= 0 && cg.max_fd >= 0);
        fd = cg.current_fd;
        ms_usage_read_cgroup(&cg, 1, &b);
        CHECK_EQ(cg.current_fd, fd);
        ms_usage_read_cgroup(&cg, 0, &k);
        CHECK_EQ(a.flags, b.flags);
        CHECK_EQ(a.flags, k.flags);
        CHECK_EQ(a.cg_max, k.cg_max);
        CHECK(a.cg_current > 0 && k.cg_current > 0);
        ms_usage_cgroup_release(&cg);
        CHECK(cg.current_fd == -1 && cg.max_fd == -1);
    }
}

int main(void)
{
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/usage.msu", dir);
    test_file();
    test_random();
    test_names();
    test_proc();
    test_proc_kept();
    unlink(path);
    rmdir(dir);
    printf("test_usage ok\n");
    return 0;
}
