/* nocuda_probe.c: what a program that never touches CUDA can see of it. Prints whether the
 * process defines cuInit or cuGetProcAddress_v2 (programs probe dlsym(RTLD_DEFAULT, ...) to find
 * out whether CUDA is present) and what dlsym(RTLD_NEXT, ...) called from a library finds (the
 * definition after that library: the C library must still see the library as the caller). test_cuda.sh compares its
 * output with and without memscope. */
#include <dlfcn.h>
#include <stdio.h>

const char *probe_next(void);

int main(void)
{
    Dl_info di;
    void *m = dlsym(RTLD_NEXT, "malloc");
    printf("cuInit: %s\n", dlsym(RTLD_DEFAULT, "cuInit") ? "present" : "absent");
    printf("cuGetProcAddress_v2: %s\n",
           dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2") ? "present" : "absent");
    printf("cuMemAlloc_v2 via dlsym(RTLD_NEXT): %s\n",
           dlsym(RTLD_NEXT, "cuMemAlloc_v2") ? "present" : "absent");
    printf("libcuda.so.1: %s\n", dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) ? "loaded" : "not loaded");
    printf("next malloc found: %s\n", m && dladdr(m, &di) ? "yes" : "no");
    printf("dlsym(RTLD_NEXT) from a library: %s\n", probe_next());
    return 0;
}
