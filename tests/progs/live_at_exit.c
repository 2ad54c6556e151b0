/* live_at_exit: leaves a known set of blocks live when it exits.
 *
 * Run by tests/integration/test_live_at_exit.sh. Allocates 7 x 20011 and 3 x 20021 bytes, frees
 * two of the 20011-byte blocks, and returns: 8 blocks, 5 * 20011 + 3 * 20021 = 160118 bytes
 * still live at exit. Exit status 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *keep[16];

__attribute__((noinline)) void *ms_progs_leak_site(size_t n)
{
    void *p = malloc(n);
    if (p)
        memset(p, 0x5a, n);
    return p;
}

int main(void)
{
    int k = 0;
    for (int i = 0; i < 7; i++)
        keep[k++] = ms_progs_leak_site(20011);
    for (int i = 0; i < 3; i++)
        keep[k++] = ms_progs_leak_site(20021);
    for (int i = 0; i < k; i++)
        if (!keep[i])
            return 1;
    free(keep[1]);
    free(keep[4]);
    keep[1] = keep[4] = NULL;
    printf("live_at_exit ok\n");
    return 0;
}
