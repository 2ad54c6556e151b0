/* cow_workers.c: bench/usage.sh's forked workload (-w fork): a parent holding many small blocks
 * and workers that read them the way Python's do (writing a counter in each, as a reference
 * count), so every page of the parent's heap becomes each worker's copy: the usage monitor
 * walks the workers' pagemaps (docs/usage.md, copy-on-write).
 *
 *   cow_workers MIB WORKERS PASSES
 *
 * The parent allocates MIB MiB in 256-byte blocks, forks WORKERS workers; each makes PASSES
 * passes over every block (incrementing its first word), then exits; the parent waits. Prints
 * the sum of the counters it saw ("cow_workers ok N"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    int workers = argc > 2 ? atoi(argv[2]) : 2, passes = argc > 3 ? atoi(argv[3]) : 20;
    size_t n = mib * 4096; /* 256-byte blocks */
    uint64_t **v = malloc(n * sizeof *v);
    if (!v)
        return 1;
    for (size_t i = 0; i < n; i++) {
        v[i] = malloc(256);
        if (!v[i])
            return 1;
        v[i][0] = i;
    }
    for (int w = 0; w < workers; w++) {
        pid_t p = fork();
        if (p < 0)
            return 1;
        if (p == 0) {
            uint64_t sum = 0;
            for (int k = 0; k < passes; k++)
                for (size_t i = 0; i < n; i++)
                    sum += ++v[i][0];
            _exit(sum == 0);
        }
    }
    int ok = 1, st;
    for (int w = 0; w < workers; w++)
        ok &= wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("cow_workers ok %zu\n", n);
    return !ok;
}
