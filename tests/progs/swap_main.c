/* swap_main: a library loaded by a relative path, closed, and another loaded in its place.
 *
 *   swap_main DIR      (DIR holds libms_swap_a.so and libms_swap_b.so)
 *
 * Changes into DIR and loads "./libms_swap_a.so" (a relative path), whose function allocates
 * 60001 bytes twice; closes it; loads "./libms_swap_b.so" (usually mapped at the same address)
 * whose function allocates 60002 bytes twice; closes it. Prints "swap ok SAME" where SAME is 1
 * when the second library was mapped at the first one's address. Run by
 * tests/integration/test_modules.sh. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef void *(*alloc_fn)(size_t);

static void *call(const char *lib, const char *sym, size_t n, void **base)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return NULL;
    alloc_fn f = (alloc_fn)(uintptr_t)dlsym(h, sym);
    Dl_info info;
    if (!f || !dladdr((void *)(uintptr_t)f, &info))
        return NULL;
    *base = info.dli_fbase;
    void *p = f(n);
    void *q = f(n);
    free(q);
    dlclose(h);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2 || chdir(argv[1]) != 0)
        return 2;
    void *a_base = NULL, *b_base = NULL;
    void *a = call("./libms_swap_a.so", "ms_swap_a_alloc", 60000, &a_base);
    void *b = call("./libms_swap_b.so", "ms_swap_b_alloc", 60000, &b_base);
    if (!a || !b)
        return 1;
    printf("swap ok %d\n", a_base == b_base);
    free(a);
    free(b);
    return 0;
}
