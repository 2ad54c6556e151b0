/* peaks: a peak reached again and again, for the blocks live at a peak that the compact
 * database keeps (tests/integration/test_compact.sh).
 *
 *   peaks
 *
 * 40 rounds; round r (1-based) allocates 300 blocks of 1000 + r bytes, holds them all, then
 * frees them: each round's heap peak is a little higher than the last, so the heap's peak is
 * round 40's. Round 10 also holds an anonymous mapping of 4 MiB (256 pages) from before its
 * first block until after its last free: the peak of the heap and mmap layers together is
 * round 10's. So the blocks closed after a peak they were live at number 300 a round, 12,000 in
 * all (the converter keeps them until a newer peak leaves them behind), and the database keeps
 * round 10's and round 40's 300 blocks each, besides the mapping.
 * Prints "peaks ok" and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define ROUNDS 40
#define BLOCKS 300
#define MAP_BYTES (4u << 20)

__attribute__((noinline)) void *ms_progs_peaks_alloc(size_t n)
{
    return malloc(n);
}

__attribute__((noinline)) void *ms_progs_peaks_map(void)
{
    return mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

int main(void)
{
    static void *held[BLOCKS];
    for (int r = 1; r <= ROUNDS; r++) {
        void *map = r == 10 ? ms_progs_peaks_map() : NULL;
        if (map == MAP_FAILED)
            return 1;
        for (int i = 0; i < BLOCKS; i++)
            if (!(held[i] = ms_progs_peaks_alloc(1000 + (size_t)r)))
                return 1;
        for (int i = 0; i < BLOCKS; i++)
            free(held[i]);
        if (map)
            munmap(map, MAP_BYTES);
    }
    printf("peaks ok\n");
    return 0;
}
