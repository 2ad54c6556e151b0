/* fuzz_trace_reader.c: fuzz target for the trace reader (src/trace/reader.c).
 *
 * Opens the input with ms_trace_open_mem(), then reads every thread's stream to its end and every
 * chunk with a plain cursor, touching each decoded string and pc so the sanitizers see any read
 * outside the input. Built two ways (tests/fuzz/CMakeLists.txt): with MEMSCOPE_FUZZ as a
 * libFuzzer target, otherwise as a plain program that replays the files and directories given
 * on its command line (the seed corpus in the normal test run). */
#include "common/ms_error.h"
#include "read_all.h"
#include "trace/reader.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ms_trace t;
    if (ms_trace_open_mem(&t, data, size) < 0)
        return 0;
    read_all(&t);
    ms_trace_release(&t);
    return 0;
}

#ifdef MS_FUZZ_REPLAY_MAIN
#include "replay_main.h"
#endif
