/* next_probe1.c: libms_next_probe1.so for nocuda_probe: probe_next() asks for the next
 * definition of probe_name after this library (libms_next_probe2.so's), which it gets only if
 * the C library sees this library as dlsym's caller. */
#include <dlfcn.h>

__attribute__((visibility("default"))) const char *probe_name(void) { return "one"; }

__attribute__((visibility("default"))) const char *probe_next(void)
{
    const char *(*f)(void) = (const char *(*)(void))dlsym(RTLD_NEXT, "probe_name");
    return f ? f() : "none";
}
