/* strtab.h: interns strings (function and file names) and gives each a dense id (1, 2, ...).
 *
 * Used by the store while symbolizing: each distinct name is written once to the strings table
 * and frames refer to it by id. Capped at init in entries and total bytes. */
#ifndef MS_STORE_STRTAB_H
#define MS_STORE_STRTAB_H

#include "common/u64map.h"

#include <stddef.h>
#include <stdint.h>

struct ms_strtab {
    struct ms_u64map by_hash; /* 64-bit hash -> index of the first string with that hash */
    char **texts;             /* texts[i] is id i + 1, NUL-terminated, owned */
    uint32_t *next;           /* next index with the same hash, UINT32_MAX at the end */
    size_t count, alloc;
    size_t bytes, max_count, max_bytes;
};

void ms_strtab_init(struct ms_strtab *t, size_t max_count, size_t max_bytes);
void ms_strtab_release(struct ms_strtab *t);

/* Sets *id to the id of the len bytes at s, adding them when new (then *is_new = 1).
 * Returns 0 or MS_ENOMEM (allocation failed or a cap was reached). */
int ms_strtab_intern(struct ms_strtab *t, const char *s, size_t len, int64_t *id, int *is_new);

/* The text of id (1 <= id <= count). */
static inline const char *ms_strtab_text(const struct ms_strtab *t, int64_t id)
{
    return t->texts[id - 1];
}

#endif
