/* read_all.h: what the trace fuzz targets do with an opened trace: read every thread's stream
 * to its end and every chunk with a plain cursor, touching each decoded string and pc so that
 * the sanitizers see any read outside the input, and abort on a broken reader invariant. */
#ifndef MS_FUZZ_READ_ALL_H
#define MS_FUZZ_READ_ALL_H

#include "trace/reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void touch(const struct ms_record *r)
{
    uint64_t h = (uint64_t)r->type ^ r->ns ^ r->addr ^ r->size ^ r->stack_id;
    uint32_t npcs = r->type == MS_REC_STACK ? r->depth
                    : r->type == MS_REC_EXTENSION && r->fn == MS_EXT_PYSTACK ? 2 * r->depth
                                                                              : 0;
    for (uint32_t i = 0; i < npcs; i++)
        h += r->pcs[i];
    for (size_t i = 0; i < r->len1; i++)
        h += (unsigned char)r->str1[i];
    for (size_t i = 0; i < r->len2; i++)
        h += (unsigned char)r->str2[i];
    sink += h;
}

static void read_all(struct ms_trace *t)
{
    struct ms_trace_stream *s = calloc(1, sizeof *s);
    struct ms_record r;
    if (!s)
        abort();
    for (size_t first = 0; first < t->nchunks;) {
        size_t next = ms_trace_stream_init(s, t, first);
        if (next <= first)
            abort(); /* the stream must advance */
        first = next;
        while (ms_trace_stream_next(s, &r) == 1)
            touch(&r);
    }
    for (size_t k = 0; k < t->nchunks; k++) {
        if (t->chunks[k].packed && t->chunks[k].used > MS_PACK_MAX_RAW)
            abort();
        ms_trace_cursor_init(&s->cur, t, k);
        while (ms_trace_cursor_next(&s->cur, &r) == 1)
            touch(&r);
    }
    if (strlen(t->warning) >= sizeof t->warning)
        abort();
    ms_trace_cursor_release(&s->cur);
    free(s);
}

#endif
