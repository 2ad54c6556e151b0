/* an_pools: many pools for the analyses' layer filter (issue 37 item 11: about 55 pools made
 * `analyze leaks|peak|temporary` fail, the filter's SQL cut at 256 bytes), and a pool name that
 * is not UTF-8 for their JSON (item 15).
 *
 * an_pools N [BADNAME]: pools "pool00" .. "pool<N-1>" (N <= 200) each reserve a 4096-byte static
 * region and hand out one 1000-byte block from it, never freed; with BADNAME, the last pool's
 * name is "bad\xff\xfe<ctrl-A>name" instead (bytes that are not UTF-8, and a control
 * character), and its block is idle for 6 APIs between two accesses (temporary_idleness with
 * --idle-threshold 5: three 16-byte temporaries between them). The heap: one 777-byte block
 * never freed and one 333-byte temporary. */
#include "memscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Alignas(64) char arena[200][4096];

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 80;
    if (n < 1 || n > 200)
        return 2;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "pool%02d", i);
        if (argc > 2 && i == n - 1)
            strcpy(name, "bad\xff\xfe\x01name");
        memscope_pool_reserve(name, arena[i], sizeof arena[i]);
        memscope_pool_alloc(name, arena[i], 1000);
    }
    if (argc > 2) {
        memscope_access(arena[n - 1], 1000, MEMSCOPE_READ, "use");
        for (int k = 0; k < 3; k++)
            free(malloc(16));
        memscope_access(arena[n - 1], 1000, MEMSCOPE_READ, "use");
    }
    volatile char *leak = malloc(777);
    char *tmp = malloc(333);
    leak[0] = 1;
    memset(tmp, 0, 333);
    free(tmp);
    return 0;
}
