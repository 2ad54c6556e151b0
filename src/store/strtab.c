/* strtab.c: string interning for the store (see strtab.h). Workload: tens of thousands of
 * function and file names per run, looked up once per distinct symbolized pc. */
#include "strtab.h"

#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

void ms_strtab_init(struct ms_strtab *t, size_t max_count, size_t max_bytes)
{
    memset(t, 0, sizeof *t);
    ms_u64map_init(&t->by_hash, sizeof(uint32_t), max_count);
    t->max_count = max_count;
    t->max_bytes = max_bytes;
}

void ms_strtab_release(struct ms_strtab *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->count; i++)
        free(t->texts[i]);
    free(t->texts);
    free(t->next);
    ms_u64map_release(&t->by_hash);
    memset(t, 0, sizeof *t);
}

int ms_strtab_intern(struct ms_strtab *t, const char *s, size_t len, int64_t *id, int *is_new)
{
    uint64_t h = hash_bytes(s, len);
    uint32_t i, first = UINT32_MAX;
    *is_new = 0;
    if (ms_u64map_get32(&t->by_hash, h, &first)) {
        for (i = first; i != UINT32_MAX; i = t->next[i]) {
            if (strlen(t->texts[i]) == len && !memcmp(t->texts[i], s, len)) {
                *id = (int64_t)i + 1;
                return 0;
            }
        }
    }
    if (t->count >= t->max_count || len > t->max_bytes - t->bytes)
        return MS_ENOMEM;
    if (t->count == t->alloc) {
        size_t n = t->alloc ? t->alloc * 2 : 256;
        char **texts = realloc(t->texts, n * sizeof *texts);
        if (!texts)
            return MS_ENOMEM;
        t->texts = texts;
        uint32_t *next = realloc(t->next, n * sizeof *next);
        if (!next)
            return MS_ENOMEM;
        t->next = next;
        t->alloc = n;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return MS_ENOMEM;
    memcpy(copy, s, len);
    copy[len] = 0;
    i = (uint32_t)t->count;
    int rc = ms_u64map_set32(&t->by_hash, h, i);
    if (rc < 0) {
        free(copy);
        return rc;
    }
    t->texts[i] = copy;
    t->next[i] = first; /* new string heads its hash chain */
    t->count++;
    t->bytes += len;
    *id = (int64_t)i + 1;
    *is_new = 1;
    return 0;
}
