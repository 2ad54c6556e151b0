/* arenas: heap blocks that make another allocator (jemalloc, tcmalloc, mimalloc) map arenas,
 * and one mapping of the program's own, for the heap counted once
 * (tests/integration/test_allocators.sh).
 *
 *   arenas
 *
 * Maps 4 MiB (1024 pages, anonymous, ms_progs_arenas_map), then allocates 32 blocks of 1 MiB
 * and 1000 blocks of 100 bytes (ms_progs_arenas_alloc) and holds them all, then frees them and
 * unmaps the mapping: the peak of the heap and mmap layers together is the heap's peak plus
 * 4 MiB, whatever the allocator maps to hold those blocks. Writes "arenas ok" with write(2),
 * so that stdio allocates nothing after the peak, and exits 0. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BIG 32
#define SMALL 1000
#define MAP_BYTES (4u << 20)

__attribute__((noinline)) void *ms_progs_arenas_alloc(size_t n)
{
    return malloc(n);
}

__attribute__((noinline)) void *ms_progs_arenas_map(void)
{
    return mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

int main(void)
{
    static void *big[BIG], *small[SMALL];
    void *map = ms_progs_arenas_map();
    if (map == MAP_FAILED)
        return 1;
    for (int i = 0; i < BIG; i++) {
        if (!(big[i] = ms_progs_arenas_alloc(1u << 20)))
            return 1;
        memset(big[i], i, 1u << 20); /* an allocator may map lazily: use the memory */
    }
    for (int i = 0; i < SMALL; i++)
        if (!(small[i] = ms_progs_arenas_alloc(100)))
            return 1;
    for (int i = 0; i < BIG; i++)
        free(big[i]);
    for (int i = 0; i < SMALL; i++)
        free(small[i]);
    munmap(map, MAP_BYTES);
    static const char ok[] = "arenas ok\n";
    return write(1, ok, sizeof ok - 1) == sizeof ok - 1 ? 0 : 1;
}
