/* ctor_main: frees the blocks libms_ctor.so's constructor allocated before main (three of
 * 12345 bytes, 10,000 of 777, one of 4321 from a frame with a fake frame-pointer chain, one
 * reallocated from 1111 to 300,000 bytes), then
 * allocates and frees one of 54321 bytes and one of 4322 from the same fake chain. memscope must
 * see every allocation (recording starts at the first allocation of the process, whatever runs
 * first), match their frees, and keep no fake frame. Run by tests/integration/test_early.sh.
 * Prints "ctor ok". */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

extern void *ms_ctor_blocks[3];
extern void *ms_ctor_many[10000];
extern void *ms_ctor_fake;
extern void *ms_ctor_grown;
void *ms_ctor_fake_frame(size_t n);

int main(void)
{
    for (int i = 0; i < 3; i++)
        free(ms_ctor_blocks[i]);
    for (int i = 0; i < 10000; i++)
        free(ms_ctor_many[i]);
    free(ms_ctor_fake);
    free(ms_ctor_grown);
    free(malloc(54321));
    free(ms_ctor_fake_frame(4322));
    printf("ctor ok\n");
    return 0;
}
