/* reserve: address space reserved without access (PROT_NONE) and committed in parts, as V8,
 * JVMs and Go do, for the mmap layer's reservations (tests/integration/test_mmap.sh).
 *
 *   reserve
 *
 * In order (MiB = 1048576 bytes, offsets within the reservation R):
 *   mmap      2 pages (8192 bytes) read/write, anonymous: an ordinary mapping, kept to the end;
 *             then mprotect'ed to read-only (no change: it is no reservation)
 *   mmap      R = 512 MiB PROT_NONE, anonymous (ms_progs_reserve_map): reserved, no memory
 *   mprotect  [0, 8 MiB) read/write (ms_progs_reserve_commit), written to: 8 MiB committed
 *   mprotect  [0, 8 MiB) read-only: still 8 MiB (access given twice counts once)
 *   mmap      [64 MiB, 65 MiB) read/write, MAP_FIXED over R: 1 MiB more (9 MiB, the peak)
 *   mprotect  [4 MiB, 8 MiB) PROT_NONE: 4 MiB less
 *   mmap      [64 MiB, 65 MiB) PROT_NONE, MAP_FIXED: 1 MiB less (4 MiB left)
 *   munmap    R: nothing left but the ordinary mapping
 *   mmap      16 MiB PROT_NONE (ms_progs_reserve_keep): reserved, never unmapped
 * So the mmap layer's peak is 9 MiB + 8192 = 9445376 bytes, R is 512 MiB of the reservations'
 * layer from its mmap to its munmap, and 16 MiB are reserved at exit, which is no memory still
 * live. Prints "reserve ok" and exits 0. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (1u << 20)
#define RESERVED (512u * MIB)

__attribute__((noinline)) char *ms_progs_reserve_map(void)
{
    return mmap(NULL, RESERVED, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

__attribute__((noinline)) void *ms_progs_reserve_keep(void)
{
    return mmap(NULL, 16 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

__attribute__((noinline)) int ms_progs_reserve_commit(char *p, size_t n)
{
    return mprotect(p, n, PROT_READ | PROT_WRITE);
}

int main(void)
{
    char *plain = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (plain == MAP_FAILED || mprotect(plain, 8192, PROT_READ) != 0)
        return 1;
    char *r = ms_progs_reserve_map();
    if (r == MAP_FAILED || ms_progs_reserve_commit(r, 8 * MIB) != 0)
        return 1;
    memset(r, 1, 8 * MIB);
    if (mprotect(r, 8 * MIB, PROT_READ) != 0)
        return 1;
    char *f = mmap(r + 64 * MIB, MIB, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (f != r + 64 * MIB)
        return 1;
    memset(f, 2, MIB);
    if (mprotect(r + 4 * MIB, 4 * MIB, PROT_NONE) != 0)
        return 1;
    if (mmap(f, MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != f)
        return 1;
    if (munmap(r, RESERVED) != 0 || ms_progs_reserve_keep() == MAP_FAILED)
        return 1;
    printf("reserve ok\n");
    return 0;
}
