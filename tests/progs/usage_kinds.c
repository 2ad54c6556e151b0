/* usage_kinds: known answers for the usage monitor (`memscope analyze usage`, docs/usage.md).
 *
 *   usage_kinds retain | stack | shm
 *
 * retain: 204,800 blocks of 1024 bytes (200 MiB), then frees all but one in 64 (3,200 blocks,
 *         3,125 KiB live, plus the 1,600 KiB array of pointers, 4,915,200 bytes live until
 *         the exit): glibc keeps the freed
 *         chunks between the kept ones (holes of 63 chunks, under its trim threshold), so about
 *         200 MiB of anonymous memory stay resident that no live block explains.
 * stack:  a recursion of 96 frames of 64 KiB each (6 MiB of stack, every page touched).
 * shm:    a 32 MiB POSIX shared memory object, mapped and written (unlinked at once, so a
 *         killed run leaves nothing in /dev/shm), and 64 KiB of heap live meanwhile.
 *
 * Under `memscope run` (MEMSCOPE_TRACE_DIR set) it holds each state until the usage sampler
 * has appended 2 records of it with PSS and USS to <trace dir>/usage-<pid>.msu (hold()), so the
 * test's expectations never depend on timing; it gives up after 60 s (exit 3). Prints "usage_kinds ok MODE" and exits 0. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

/* The records of this process with PSS and USS (flag 2: MS_USAGE_F_SMAPS, src/common/usage.h)
 * at or after byte offset from in the usage file of the trace directory (usage-<pid>.msu, pid:
 * the program memscope run started, this one or its parent); *end gets the file's size. */
static int smaps_records(off_t from, off_t *end)
{
    const char *dir = getenv("MEMSCOPE_TRACE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/usage-%d.msu", dir ? dir : "", (int)getpid());
    if (access(path, F_OK) != 0)
        snprintf(path, sizeof path, "%s/usage-%d.msu", dir ? dir : "", (int)getppid());
    FILE *f = fopen(path, "rb");
    *end = -1;
    if (!f)
        return 0;
    unsigned char rec[96];
    int n = 0;
    off_t at = 16;
    fseek(f, 16, SEEK_SET);
    while (fread(rec, 1, sizeof rec, f) == sizeof rec) {
        unsigned pid, flags;
        memcpy(&pid, rec + 8, 4);
        memcpy(&flags, rec + 12, 4);
        if (at >= from && pid == (unsigned)getpid() && (flags & 2))
            n++;
        at += 96;
    }
    *end = at;
    fclose(f);
    return n;
}

/* Holds the state until the sampler has read it in full twice: 2 records of this process with
 * PSS and USS written after the state was complete (the first may have been read before; the
 * sampler reads PSS and USS only as often as their cost allows, docs/usage.md). With
 * USAGE_KINDS_HOLD=F (`memscope usage --pid`'s test), writes F.ready and waits until F exists
 * instead. */
static void hold(void)
{
    const char *file = getenv("USAGE_KINDS_HOLD");
    struct timespec ms = {0, 1000000};
    if (file) {
        char ready[4096];
        snprintf(ready, sizeof ready, "%s.ready", file);
        FILE *f = fopen(ready, "w");
        if (f)
            fclose(f);
        for (int i = 0; i < 60000; i++) {
            if (access(file, F_OK) == 0)
                return;
            nanosleep(&ms, NULL);
        }
        fprintf(stderr, "usage_kinds: %s not created in 60 s\n", file);
        exit(3);
    }
    if (!getenv("MEMSCOPE_TRACE_DIR"))
        return;
    off_t start;
    smaps_records(0, &start);
    for (int i = 0; i < 60000; i++) {
        off_t end;
        if (start < 0) /* the sampler has not created its file yet */
            smaps_records(0, &start);
        else if (smaps_records(start, &end) >= 2)
            return;
        nanosleep(&ms, NULL);
    }
    fprintf(stderr, "usage_kinds: no usage samples after 60 s\n");
    exit(3);
}

static void retain(void)
{
    enum { N = 200 * 1024, SIZE = 1024 };
    char **v = malloc(N * sizeof *v);
    if (!v)
        exit(1);
    for (int i = 0; i < N; i++) {
        v[i] = malloc(SIZE);
        if (!v[i])
            exit(1);
        memset(v[i], 1, SIZE);
    }
    for (int i = 0; i < N; i++)
        if (i % 64)
            free(v[i]);
    hold(); /* the kept blocks stay live to the end: freeing them would let glibc trim */
}

__attribute__((noinline)) static int recurse(int n)
{
    volatile char frame[64 * 1024];
    memset((char *)frame, n, sizeof frame);
    if (n > 1)
        return recurse(n - 1) + frame[100];
    hold();
    return frame[100];
}

static void shm(void)
{
    char name[64];
    snprintf(name, sizeof name, "/memscope_usage_kinds_%d", (int)getpid());
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        exit(1);
    shm_unlink(name);
    if (ftruncate(fd, 32 * MIB) < 0)
        exit(1);
    char *p = mmap(NULL, 32 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        exit(1);
    memset(p, 7, 32 * MIB);
    char *live = malloc(64 * 1024); /* live bytes to draw beside (the viewer's test) */
    if (!live)
        exit(1);
    memset(live, 1, 64 * 1024);
    hold();
    free(live);
    munmap(p, 32 * MIB);
}

int main(int argc, char **argv)
{
    static char out[256]; /* stdout's buffer: no allocation of its own among the live bytes */
    setvbuf(stdout, out, _IOLBF, sizeof out);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "retain"))
        retain();
    else if (!strcmp(mode, "stack"))
        recurse(96);
    else if (!strcmp(mode, "shm"))
        shm();
    else
        return 2;
    printf("usage_kinds ok %s\n", mode);
    return 0;
}
