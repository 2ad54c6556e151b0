/* dl_lib: a plugin loaded with dlopen by dl_main, for checking that stacks through a library
 * loaded after start (and unloaded before the end) are symbolized.
 *
 * Built as a MODULE library with frame pointers. ms_progs_dl_alloc allocates 17011 bytes. */
#include <stdlib.h>

__attribute__((visibility("default"), noinline)) void *ms_progs_dl_alloc(void)
{
    return malloc(17011); /* SITE:dl_alloc */
}
