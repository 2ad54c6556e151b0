/* alloc_loop: N pairs of malloc(SIZE) and free in one thread, nothing else: the instructions an
 * interposer adds per allocation are the difference of two runs with different N
 * (tests/integration/test_sampling_cost.sh). With KEEP, one block of KEEP bytes is allocated
 * first and kept to the end (in sampling mode, a sampled block: the set of sampled addresses is
 * not empty while the loop frees).
 *
 *   alloc_loop [N=1000] [SIZE=64] [KEEP=0]
 *
 * Prints "alloc_loop ok N". */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
    size_t keep = argc > 3 ? (size_t)atol(argv[3]) : 0;
    char *kept = keep ? malloc(keep) : NULL;
    if (keep && !kept)
        return 1;
    for (long i = 0; i < n; i++) {
        char *p = malloc(size);
        if (!p)
            return 1;
        *(volatile char *)p = 1;
        free(p);
    }
    free(kept);
    printf("alloc_loop ok %ld\n", n);
    return 0;
}
