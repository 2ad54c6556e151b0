/* libms_nofp_lib.so: nofp_main's library built like a distribution's (-O2, no frame pointers). */
#include <stdlib.h>

__attribute__((noinline, visibility("default"))) void *nofp_lib_alloc(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
