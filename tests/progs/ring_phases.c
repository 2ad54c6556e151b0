/* ring_phases: a service's life in phases, for --trace-ring (tests/integration/test_ring.sh).
 *
 *   ring_phases [CHURN_PHASES=8] [PAIRS=200000]
 *
 * Phase 1 makes 1000 blocks of 555 bytes (kept); then CHURN_PHASES phases of PAIRS pairs of
 * malloc(24) and free each; the last phase makes 5000 blocks of 777 bytes (kept to the end:
 * 3,885,000 bytes) and frees the 1000 blocks of phase 1. The blocks of the first and of the
 * last phase come from one call site, so their stack is the same: described when phase 1 ran
 * (an epoch the ring drops) and needed again at the end; both run in a Python function too
 * (reported as the memscope Python extension does, described once in phase 1). After every phase the disk usage of
 * the trace directory (MEMSCOPE_TRACE_DIR: the blocks its files hold, not their apparent
 * sizes) is measured, and the largest is printed; the resident memory is read after the first
 * churn phase and after the last.
 *
 * Prints "ring_phases done", "churn ADDR" (the address the churn's blocks got, the same each
 * time: the allocator's cache), "disk MAX_BYTES", "rss KIB_AFTER_FIRST_CHURN KIB_AFTER_LAST". */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The memscope Python extension's calls (as tests/progs/pystack_sim.c makes them): the first
 * and the last phase run in Python function "handle" of "service.py", described once. */
int memscope__py_frame(uint32_t id, const char *file, const char *func, int firstline)
    __attribute__((weak));
void memscope__py_call(uint32_t id, int caller_line, int line) __attribute__((weak));
void memscope__py_return(void) __attribute__((weak));

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = atol(line + 6);
    if (f)
        fclose(f);
    return kib;
}

/* Bytes the files of the trace directory hold on disk (st_blocks), 0 when it is not known. */
static long long disk_bytes(void)
{
    const char *dir = getenv("MEMSCOPE_TRACE_DIR");
    DIR *d = dir ? opendir(dir) : NULL;
    long long sum = 0;
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d))) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            sum += (long long)st.st_blocks * 512;
    }
    if (d)
        closedir(d);
    return sum;
}

static __attribute__((noinline)) void *make(size_t size)
{
    void *p = malloc(size);
    if (p)
        memset(p, 1, size);
    return p;
}

/* The one call site of the first and the last phase's blocks. */
static __attribute__((noinline)) void blocks(void **v, int n, size_t size)
{
    for (int i = 0; i < n; i++)
        v[i] = make(size);
}

static __attribute__((noinline)) void *churn(long pairs)
{
    void *addr = NULL;
    for (long i = 0; i < pairs; i++) {
        void *p = malloc(24);
        addr = p;
        *(volatile char *)p = 1;
        free(p);
    }
    return addr;
}

int main(int argc, char **argv)
{
    int phases = argc > 1 ? atoi(argv[1]) : 8;
    long pairs = argc > 2 ? atol(argv[2]) : 200000;
    static void *first[1000], *last[5000];
    long long disk = 0, now;
    long rss_early = 0, rss_late = 0;
    void *addr = NULL;
    for (int ph = 0; ph < phases + 2; ph++) {
        if (ph == 0 && memscope__py_frame)
            memscope__py_frame(3, "service.py", "handle", 20);
        if ((ph == 0 || ph == phases + 1) && memscope__py_call)
            memscope__py_call(3, 0, 21);
        if (ph == 0 || ph == phases + 1) /* one call site for both */
            blocks(ph ? last : first, ph ? 5000 : 1000, ph ? 777 : 555);
        else
            addr = churn(pairs);
        if ((ph == 0 || ph == phases + 1) && memscope__py_return)
            memscope__py_return();
        if (ph == phases + 1)
            for (int i = 0; i < 1000; i++)
                free(first[i]);
        if (ph == 1)
            rss_early = rss_kib();
        if (ph == phases)
            rss_late = rss_kib();
        if ((now = disk_bytes()) > disk)
            disk = now;
    }
    printf("ring_phases done\nchurn %p\ndisk %lld\nrss %ld %ld\n", addr, disk, rss_early, rss_late);
    return 0;
}
