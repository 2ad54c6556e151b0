/* mmap_anon: anonymous mappings, a remap, and a file mapping that must not be recorded.
 *
 *   mmap_anon
 *
 * Run by tests/integration/test_mmap.sh. Page size 4096 is assumed (x86-64).
 *   mmap   5 x 7 pages (28672 bytes), anonymous private; 3 of them munmap'ed whole
 *   mmap   1 x 11 pages (45056 bytes), anonymous shared; kept
 *   mmap   1 x 5 pages (20480 bytes), then mremap'ed to 9 pages (36864 bytes, may move), kept
 *   mmap   1 x 13 pages (53248 bytes) of /proc/self/exe, file-backed: NOT an anonymous mapping,
 *          then munmap'ed
 * Through the mmap64 name too: the 11-page mapping is made with mmap64.
 * Prints "mmap_anon ok" and exits 0. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* reallocarray, pvalloc, mremap, mmap64 */
#endif
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096

__attribute__((noinline)) void *ms_progs_mmap_site(size_t len)
{
    return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

int main(void)
{
    void *m[5];

    for (int i = 0; i < 5; i++) {
        m[i] = ms_progs_mmap_site(7 * PAGE);
        if (m[i] == MAP_FAILED)
            return 1;
        memset(m[i], i, 7 * PAGE);
    }
    for (int i = 0; i < 3; i++)
        if (munmap(m[i], 7 * PAGE) != 0)
            return 1;

    void *s = mmap64(NULL, 11 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return 1;
    memset(s, 1, 11 * PAGE);

    void *r = ms_progs_mmap_site(5 * PAGE);
    if (r == MAP_FAILED)
        return 1;
    r = mremap(r, 5 * PAGE, 9 * PAGE, MREMAP_MAYMOVE);
    if (r == MAP_FAILED)
        return 1;
    memset(r, 2, 9 * PAGE);

    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0)
        return 1;
    void *f = mmap(NULL, 13 * PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f == MAP_FAILED)
        return 1;
    if (munmap(f, 13 * PAGE) != 0)
        return 1;
    printf("mmap_anon ok\n");
    return 0;
}
