/* libms_fp_lib.so: nofp_main's library built with frame pointers, calling back into the program
 * (built without): a walk that crosses both kinds of code. */
#include <stddef.h>

__attribute__((noinline, visibility("default"))) void *nofp_fp_lib_alloc(void *(*cb)(size_t),
                                                                          size_t n)
{
    void *p = cb(n);
    __asm__ volatile("" ::: "memory");
    return p;
}
