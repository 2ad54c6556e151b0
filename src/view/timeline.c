/* timeline.c: a track's live bytes over time, encoded in chunks of zigzag varints
 * (timeline.h). Written by the model's loader (model.c) once per MALLOC/FREE, read by the
 * queries (api.c, api_pool.c, report.c) under any number of threads. */
#include "timeline.h"

#include "vcode.h"

#include "common/grow.h"
#include "common/ms_error.h"

#include <stdlib.h>
#include <string.h>

#define DATA_MAX ((size_t)1 << 38) /* bytes: far above any run's (about 5 a change) */

/* Encodes the pending changes as one chunk. */
static int flush(struct ms_vline *l)
{
    if (!l->npend)
        return 0;
    if (ms_grow((void **)&l->heads, &l->capheads, l->nheads, sizeof *l->heads, 64, MS_GROW_MAX) < 0)
        return MS_ENOMEM;
    /* at most 20 bytes a change: grow once for the whole chunk */
    if (ms_grow((void **)&l->data, &l->capdata, l->len + l->npend * 20 - 1, 1, 4096, DATA_MAX) < 0)
        return MS_ENOMEM;
    struct ms_vchunk *h = &l->heads[l->nheads++];
    h->ts0 = l->pend[0][0];
    h->live0 = h->min = h->max = l->pend[0][1];
    h->off = l->len;
    for (size_t i = 1; i < l->npend; i++) {
        int64_t v = l->pend[i][1];
        h->min = v < h->min ? v : h->min;
        h->max = v > h->max ? v : h->max;
        l->len += ms_vput(l->data + l->len, ms_zigzag(l->pend[i][0] - l->pend[i - 1][0]));
        l->len += ms_vput(l->data + l->len, ms_zigzag(v - l->pend[i - 1][1]));
    }
    l->npend = 0;
    return 0;
}

int ms_vline_push(struct ms_vline *l, int64_t ts, int64_t delta)
{
    int64_t live = l->last_live + delta;
    if (l->n && l->last_ts == ts) { /* same ns: the later value stands */
        l->pend[l->npend - 1][1] = live;
        l->last_live = live;
        return 0;
    }
    if (!l->pend && !(l->pend = malloc(MS_VLINE_CHUNK * sizeof *l->pend)))
        return MS_ENOMEM;
    if (l->npend == MS_VLINE_CHUNK && flush(l) < 0)
        return MS_ENOMEM;
    l->pend[l->npend][0] = ts;
    l->pend[l->npend++][1] = live;
    l->n++;
    l->last_ts = ts;
    l->last_live = live;
    return 0;
}

int ms_vline_finish(struct ms_vline *l)
{
    int rc = flush(l);
    free(l->pend);
    l->pend = NULL;
    if (rc == 0 && l->len && l->len < l->capdata) { /* give back the doubling's slack */
        uint8_t *p = realloc(l->data, l->len);
        if (p) {
            l->data = p;
            l->capdata = l->len;
        }
    }
    return rc;
}

void ms_vline_release(struct ms_vline *l)
{
    if (!l)
        return;
    free(l->heads);
    free(l->data);
    free(l->pend);
    memset(l, 0, sizeof *l);
}

size_t ms_vline_bytes(const struct ms_vline *l)
{
    return l->capheads * sizeof *l->heads + l->capdata;
}

void ms_vcur_init(struct ms_vcur *c, const struct ms_vline *l)
{
    c->line = l;
    c->slot[0].chunk = c->slot[1].chunk = SIZE_MAX;
    c->slot[0].n = c->slot[1].n = 0;
    c->last = 0;
}

/* Chunk k decoded: a slot of the cursor that holds it, else the slot not read last, decoded. */
static const struct ms_vslot *load(struct ms_vcur *c, size_t k)
{
    if (c->slot[c->last].chunk == k)
        return &c->slot[c->last];
    c->last ^= 1;
    struct ms_vslot *d = &c->slot[c->last];
    if (d->chunk == k)
        return d;
    const struct ms_vline *l = c->line;
    const struct ms_vchunk *h = &l->heads[k];
    size_t n = k + 1 < l->nheads ? MS_VLINE_CHUNK : l->n - k * MS_VLINE_CHUNK;
    const uint8_t *p = l->data + h->off;
    int64_t ts = h->ts0, live = h->live0;
    d->ts[0] = ts;
    d->live[0] = live;
    for (size_t i = 1; i < n; i++) {
        for (int f = 0; f < 2; f++) {
            uint64_t v = ms_vget(&p);
            if (f)
                live += ms_unzigzag(v);
            else
                ts += ms_unzigzag(v);
        }
        d->ts[i] = ts;
        d->live[i] = live;
    }
    d->chunk = k;
    d->n = n;
    return d;
}

long ms_vline_last_at(struct ms_vcur *c, int64_t t)
{
    const struct ms_vline *l = c->line;
    size_t lo = 0, hi = l->nheads; /* the first chunk starting after t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->heads[mid].ts0 <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    size_t k = lo - 1;
    const struct ms_vslot *d = load(c, k);
    size_t a = 0, b = d->n; /* the first change of the chunk after t */
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (d->ts[mid] <= t)
            a = mid + 1;
        else
            b = mid;
    }
    return (long)(k * MS_VLINE_CHUNK + a) - 1;
}

int64_t ms_vline_ts(struct ms_vcur *c, size_t i)
{
    return load(c, i / MS_VLINE_CHUNK)->ts[i % MS_VLINE_CHUNK];
}

int64_t ms_vline_live(struct ms_vcur *c, size_t i)
{
    return load(c, i / MS_VLINE_CHUNK)->live[i % MS_VLINE_CHUNK];
}

int64_t ms_vline_live_at(struct ms_vcur *c, int64_t t)
{
    long i = ms_vline_last_at(c, t);
    return i < 0 ? 0 : ms_vline_live(c, (size_t)i);
}

void ms_vline_minmax(struct ms_vcur *c, int64_t a, int64_t b, int64_t *mn, int64_t *mx)
{
    const struct ms_vline *l = c->line;
    long first = ms_vline_last_at(c, a);
    int64_t v = first < 0 ? 0 : ms_vline_live(c, (size_t)first);
    *mn = *mx = v;
    size_t i = (size_t)(first + 1), end = (size_t)(ms_vline_last_at(c, b - 1) + 1);
    while (i < end) {
        if (i % MS_VLINE_CHUNK == 0 && i + MS_VLINE_CHUNK <= end) {
            const struct ms_vchunk *h = &l->heads[i / MS_VLINE_CHUNK];
            *mn = h->min < *mn ? h->min : *mn;
            *mx = h->max > *mx ? h->max : *mx;
            i += MS_VLINE_CHUNK;
        } else {
            int64_t x = ms_vline_live(c, i);
            *mn = x < *mn ? x : *mn;
            *mx = x > *mx ? x : *mx;
            i++;
        }
    }
}
