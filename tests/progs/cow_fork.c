/* cow_fork: known answers for copy-on-write traced to the objects (`memscope analyze usage`,
 * docs/usage.md).
 *
 * The parent allocates two blocks of 32 MiB at two call sites (alloc_a, alloc_b), writes them
 * whole (their pages present, then shared with every child), and forks two workers: worker 1
 * writes every byte of block A, worker 2 every byte of block B, allocating nothing. Each worker
 * then holds 32 MiB of pages copied from its parent's block: cow_private_bytes 33,554,432 each,
 * all of it in the blocks of alloc_a (worker 1) and alloc_b (worker 2). The parent writes
 * neither block after the fork (a page the parent writes becomes the parent's copy, and the
 * child's the only mapping of the old one: it would count as the child's), and waits for both.
 *
 * Under `memscope run` (MEMSCOPE_TRACE_DIR set) each worker holds its state until the sampler
 * has walked its pagemap after its write (a record of it with MS_USAGE_F_PAGES, 32, in
 * <trace dir>/usage-<parent pid>.msu, taken after the write), so no expectation depends on
 * timing; it
 * gives up after 60 s (exit 3). It reads the file with open and read: no allocation. Prints
 * "cow_fork ok" and exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (32u << 20)

__attribute__((noinline)) static char *alloc_a(void)
{
    return malloc(BLOCK);
}

__attribute__((noinline)) static char *alloc_b(void)
{
    return malloc(BLOCK);
}

/* Whether the usage file holds a record of this process with the pages flag taken at or after
 * CLOCK_MONOTONIC ns since (a sample's time is taken before its walk begins). */
static int walked_since(const char *path, unsigned long long since)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unsigned char rec[96];
    off_t at = 16;
    int found = 0;
    while (pread(fd, rec, sizeof rec, at) == (ssize_t)sizeof rec) {
        unsigned long long ts;
        unsigned pid, flags;
        memcpy(&ts, rec, 8);
        memcpy(&pid, rec + 8, 4);
        memcpy(&flags, rec + 12, 4);
        if (ts >= since && pid == (unsigned)getpid() && (flags & 32))
            found = 1;
        at += 96;
    }
    close(fd);
    return found;
}

static void hold(void)
{
    const char *dir = getenv("MEMSCOPE_TRACE_DIR");
    if (!dir)
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/usage-%d.msu", dir, (int)getppid());
    struct timespec now, ms = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &now);
    unsigned long long since = (unsigned long long)now.tv_sec * 1000000000ull + now.tv_nsec;
    for (int i = 0; i < 60000; i++) {
        if (walked_since(path, since))
            return;
        nanosleep(&ms, NULL);
    }
    _exit(3);
}

static pid_t worker(char *block)
{
    pid_t pid = fork();
    if (pid == 0) {
        memset(block, 0x5a, BLOCK); /* every page of its block becomes its own copy */
        hold();
        _exit(0);
    }
    return pid;
}

int main(void)
{
    static char out[256]; /* stdout's buffer: no allocation of its own among the parent's */
    setvbuf(stdout, out, _IOLBF, sizeof out);
    char *a = alloc_a(), *b = alloc_b();
    if (!a || !b)
        return 1;
    memset(a, 1, BLOCK);
    memset(b, 2, BLOCK);
    pid_t w1 = worker(a);
    pid_t w2 = w1 > 0 ? worker(b) : -1;
    int ok = w1 > 0 && w2 > 0, st;
    if (w1 > 0)
        ok &= waitpid(w1, &st, 0) == w1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (w2 > 0)
        ok &= waitpid(w2, &st, 0) == w2 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok)
        return 3;
    printf("cow_fork ok\n");
    free(a);
    free(b);
    return 0;
}
