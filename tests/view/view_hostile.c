/* view_hostile.c: a program whose names are hostile to an HTML page: argv[1] (say
 * "<!--<script>") names its thread, an owner, a mark, a range and a pool, and is in its command
 * line. It allocates 1 MiB under that owner and range, 4 KiB from the pool, and frees them. */
#include "memscope.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "<!--<script>";
    char thread[16];
    strncpy(thread, name, sizeof thread - 1);
    thread[sizeof thread - 1] = 0;
    pthread_setname_np(pthread_self(), thread);
    memscope_step();
    memscope_owner_push(name);
    memscope_range_push(name);
    memscope_mark(name);
    void *p = malloc(1 << 20);
    memset(p, 1, 1 << 20);
    static char pool[1 << 16];
    memscope_pool_reserve(name, pool, sizeof pool);
    memscope_pool_alloc(name, pool, 4096);
    memscope_range_pop();
    memscope_owner_pop();
    memscope_step();
    memscope_pool_free(name, pool);
    free(p);
    memscope_step();
    return 0;
}
