/* dl_main: dlopens a library after start, allocates through it, and unloads it.
 *
 *   dl_main LIBRARY
 *
 * Run by tests/integration/test_stacks.sh with LIBRARY = dl_lib's .so. Calls its
 * ms_progs_dl_alloc three times (3 x 17011 bytes, freed), dlcloses it, prints "dl_main ok" and
 * exits 0. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dl_main: %s\n", dlerror());
        return 1;
    }
    void *(*fn)(void) = (void *(*)(void))dlsym(h, "ms_progs_dl_alloc");
    if (!fn)
        return 1;
    void *p[3];
    for (int i = 0; i < 3; i++)
        if (!(p[i] = fn()))
            return 1;
    for (int i = 0; i < 3; i++)
        free(p[i]);
    if (dlclose(h) != 0)
        return 1;
    printf("dl_main ok\n");
    return 0;
}
