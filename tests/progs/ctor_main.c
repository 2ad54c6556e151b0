/* ctor_main: frees the three 12345-byte blocks libms_ctor.so's constructor allocated before
 * main, then allocates and frees one of 54321 bytes. memscope must see the three allocations
 * (recording starts at the first allocation of the process, whatever runs first) and match
 * their frees. Run by tests/integration/test_early.sh. Prints "ctor ok". */
#include <stdio.h>
#include <stdlib.h>

extern void *ms_ctor_blocks[3];

int main(void)
{
    for (int i = 0; i < 3; i++)
        free(ms_ctor_blocks[i]);
    free(malloc(54321));
    printf("ctor ok\n");
    return 0;
}
