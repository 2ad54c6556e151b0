/* fuzz_demangle.c: libFuzzer target for the demangler (src/store/demangle.c): any bytes, cut at
 * the first NUL, as a symbol name. The result is NULL or a string of at most
 * MS_DEMANGLE_MAX_OUT bytes. Built with -fsanitize=fuzzer under MEMSCOPE_FUZZ; otherwise a plain
 * program (MS_FUZZ_REPLAY_MAIN) that replays the seeds in demangle_seeds/ (one name per file:
 * real C++ and Rust names, and damaged ones). */
#include "store/demangle.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char name[MS_DEMANGLE_MAX_IN + 2];
    if (size > sizeof name - 1)
        size = sizeof name - 1;
    memcpy(name, data, size);
    name[size] = 0;
    char *d = ms_demangle(name);
    if (d && strlen(d) > MS_DEMANGLE_MAX_OUT)
        abort();
    free(d);
    return 0;
}

#ifdef MS_FUZZ_REPLAY_MAIN
#include "replay_main.h"
#endif
