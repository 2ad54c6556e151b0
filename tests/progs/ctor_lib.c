/* ctor_lib.c: libms_ctor.so for ctor_main: its constructor allocates three blocks of 12345
 * bytes before memscope's agent has run its own constructor (this library is initialized
 * first), as libselinux's and libstdc++'s constructors do. */
#include <stdlib.h>

__attribute__((visibility("default"))) void *ms_ctor_blocks[3];

__attribute__((noinline)) static void *ms_ctor_alloc(size_t n)
{
    return malloc(n);
}

__attribute__((constructor)) static void ms_ctor_allocate(void)
{
    for (int i = 0; i < 3; i++)
        ms_ctor_blocks[i] = ms_ctor_alloc(12345);
}
