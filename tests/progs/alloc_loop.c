/* alloc_loop: N pairs of malloc(SIZE) and free in one thread, nothing else: the instructions an
 * interposer adds per allocation are the difference of two runs with different N
 * (tests/integration/test_sampling_cost.sh). With KEEP, one block of KEEP bytes is allocated
 * first and kept to the end (in sampling mode, a sampled block: the set of sampled addresses is
 * not empty while the loop frees).
 *
 * With `rss`, the process's resident memory is read after a fifth of the loop and at its end
 * (tests/integration/test_sampling.sh: the agent's memory stays constant over a long run).
 *
 *   alloc_loop [N=1000] [SIZE=64] [KEEP=0] [rss]
 *
 * Prints "alloc_loop ok N", and with `rss` a second line "rss KIB_AT_A_FIFTH KIB_AT_THE_END". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VmRSS of /proc/self/status in KiB, or -1. */
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

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
    size_t keep = argc > 3 ? (size_t)atol(argv[3]) : 0;
    int rss = argc > 4 && !strcmp(argv[4], "rss");
    long rss_early = 0;
    char *kept = keep ? malloc(keep) : NULL;
    if (keep && !kept)
        return 1;
    for (long i = 0; i < n; i++) {
        if (rss && i == n / 5)
            rss_early = rss_kib();
        char *p = malloc(size);
        if (!p)
            return 1;
        *(volatile char *)p = 1;
        free(p);
    }
    free(kept);
    printf("alloc_loop ok %ld\n", n);
    if (rss)
        printf("rss %ld %ld\n", rss_early, rss_kib());
    return 0;
}
