/* fuzz_unpickle.c: libFuzzer target for the snapshot reader (unpickler, JSON reader, model,
 * summary and --state-at). Built with -fsanitize=fuzzer under MEMSCOPE_FUZZ; built without it
 * (MS_FUZZ_REPLAY) it is a plain program that replays files and directories given as
 * arguments, so the seed corpus runs in every normal build. Caps are set low so that each
 * input costs little. */
#include "snapshot/snapshot.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null;
    if (!null)
        null = fopen("/dev/null", "w");
    struct ms_unpickle_caps caps = {.max_depth = 200, .max_memory = (uint64_t)256 << 20,
                                    .max_items = 1 << 20, .max_stack = 1 << 20};
    struct ms_snapshot s;
    ms_snapshot_init(&s, &caps);
    if (ms_snapshot_load_mem(&s, data, size) == 0 && null) {
        ms_snapshot_write_summary(&s, null, 1, 5);
        for (uint64_t i = 0; i < s.ntraces; i++) {
            struct ms_snap_state st;
            int64_t n = (int64_t)s.traces[i].nevents;
            if (ms_snapshot_state_at(&s, s.traces[i].device, n ? n / 2 : -1, &st) == 0) {
                ms_snap_state_write_json(&s, &st, null);
                ms_snap_state_release(&st);
            }
        }
    }
    ms_snapshot_release(&s);
    return 0;
}

#ifdef MS_FUZZ_REPLAY
#include <dirent.h>
#include <sys/stat.h>

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    fclose(f);
    if (!buf)
        return 1;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int bad = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= replay_file(argv[i]);
            count++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            bad |= replay_file(path);
            count++;
        }
        if (d)
            closedir(d);
    }
    printf("fuzz_unpickle replay: %d inputs\n", count);
    return bad;
}
#endif
