/* an_budget: a known-answer program for memscope run's budgets (tests/analyze/test_budget.sh,
 * docs/ci.md).
 *
 *   an_budget [STATUS]
 *
 * Keeps to the end 3 blocks of 1000 bytes (an_budget_keep) and 2 blocks of 512 bytes
 * (third_party_cache, the suppression's target): 4024 bytes in 5 blocks live at exit. Then
 * holds 4 blocks of 250000 bytes at once (an_budget_peak) and frees them: the heap's peak is
 * 1004024 bytes in 9 blocks. No stdio (its buffer would be live at exit too). Exits with STATUS
 * (default 0), with or without the agent. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *kept[5];

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

int main(int argc, char **argv)
{
    for (int i = 0; i < 3; i++)
        kept[i] = an_budget_keep();
    for (int i = 3; i < 5; i++)
        kept[i] = third_party_cache();
    void *big[4];
    for (int i = 0; i < 4; i++)
        big[i] = an_budget_peak();
    for (int i = 0; i < 4; i++)
        free(big[i]);
    static const char ok[] = "an_budget ok\n";
    if (write(1, ok, sizeof ok - 1) < 0)
        return 1;
    return argc > 1 ? atoi(argv[1]) : 0;
}
