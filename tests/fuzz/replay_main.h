/* replay_main.h: a main() for a fuzz target built without libFuzzer (MS_FUZZ_REPLAY_MAIN):
 * runs LLVMFuzzerTestOneInput() once per file named on the command line, or per file of a named
 * directory, so the seed corpora are replayed by ctest in every build. Included last by each
 * target under #ifdef MS_FUZZ_REPLAY_MAIN. */
#ifndef MS_FUZZ_REPLAY_MAIN_H
#define MS_FUZZ_REPLAY_MAIN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <sys/stat.h>

/* Replays one file; returns 0 or -1 when it cannot be read. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, len = 0, n;
    uint8_t *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *b = cap < (256u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: too big or out of memory\n", path);
        return -1;
    }
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d && (e = readdir(d))) {
                char path[4096];
                if (e->d_name[0] == '.')
                    continue;
                snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
                bad |= replay_file(path);
                files++;
            }
            if (d)
                closedir(d);
        } else {
            bad |= replay_file(argv[i]);
            files++;
        }
    }
    printf("replayed %d inputs\n", files);
    return bad || files == 0;
}

#endif
