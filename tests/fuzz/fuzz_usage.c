/* fuzz_usage.c: libFuzzer target for the usage monitor's file reader (ms_usage_load,
 * src/common/usage.c): any bytes as a usage-<pid>.msu file. The reader refuses the file or
 * returns exactly its whole records. Built with -fsanitize=fuzzer under MEMSCOPE_FUZZ; otherwise
 * a plain program (MS_FUZZ_REPLAY_MAIN) that replays the seeds in usage_seeds/ (a valid file,
 * one cut mid-record, a wrong magic, a newer version, a header alone). */
#include "common/usage.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/ms-fuzz-usage.%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);
    struct ms_usage_sample *v;
    size_t n;
    int rc = ms_usage_load(path, &v, &n);
    unlink(path);
    if (rc == 0) {
        if (size < MS_USAGE_HEADER || n != (size - MS_USAGE_HEADER) / MS_USAGE_RECORD)
            abort();
        free(v);
    } else if (v != NULL || n != 0) {
        abort();
    }
    return 0;
}

#ifdef MS_FUZZ_REPLAY_MAIN
#include "replay_main.h"
#endif
