/* an_budget: a known-answer program for memscope run's budgets (tests/analyze/test_budget.sh,
 * docs/ci.md).
 *
 *   an_budget [STATUS [PEAK_BLOCKS [KEEP_BLOCKS [MMAP]]]]
 *
 * Keeps to the end 3 blocks of 1000 bytes (an_budget_keep) and 2 blocks of 512 bytes
 * (third_party_cache, the suppression's target): 4024 bytes in 5 blocks live at exit. Then
 * holds 4 blocks of 250000 bytes at once (an_budget_peak) and frees them: the heap's peak is
 * 1004024 bytes in 9 blocks. No stdio (its buffer would be live at exit too). Exits with STATUS
 * (default 0), with or without the agent. PEAK_BLOCKS (default 4, at most 16) and KEEP_BLOCKS
 * (default 3, at most 16) change the counts: `an_budget 0 6 5` is a run whose peak (1506024)
 * and leak (6024) grew, for the gates of analyze compare (test_budget_gate.sh). MMAP 1 also maps
 * 1 MiB of anonymous memory (an_budget_map) while the peak blocks are held, and unmaps it: the
 * heap still peaks at 1004024, the mmap layer at 1048576, the two together at 2052600. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *kept[32];

__attribute__((noinline)) static void *an_budget_keep(void)
{
    void *p = malloc(1000);
    memset(p, 1, 1000);
    return p;
}

__attribute__((noinline)) static void *third_party_cache(void)
{
    void *p = malloc(512);
    memset(p, 2, 512);
    return p;
}

__attribute__((noinline)) static void *an_budget_peak(void)
{
    void *p = malloc(250000);
    memset(p, 3, 250000);
    return p;
}

__attribute__((noinline)) static void *an_budget_map(void)
{
    void *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
        memset(p, 4, 1 << 20);
    return p;
}

int main(int argc, char **argv)
{
    int npeak = argc > 2 ? atoi(argv[2]) : 4, nkeep = argc > 3 ? atoi(argv[3]) : 3;
    if (npeak < 0 || npeak > 16 || nkeep < 0 || nkeep > 16)
        return 2;
    for (int i = 0; i < nkeep; i++)
        kept[i] = an_budget_keep();
    for (int i = nkeep; i < nkeep + 2; i++)
        kept[i] = third_party_cache();
    void *big[16];
    for (int i = 0; i < npeak; i++)
        big[i] = an_budget_peak();
    void *map = argc > 4 && atoi(argv[4]) ? an_budget_map() : MAP_FAILED;
    if (map != MAP_FAILED)
        munmap(map, 1 << 20);
    for (int i = 0; i < npeak; i++)
        free(big[i]);
    static const char ok[] = "an_budget ok\n";
    if (write(1, ok, sizeof ok - 1) < 0)
        return 1;
    return argc > 1 ? atoi(argv[1]) : 0;
}
