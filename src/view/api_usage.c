/* api_usage.c: the usage monitor's series of /api/series (api_internal.h): what the OS said of
 * each process (RSS, PSS, USS) and what NVML said each CUDA device had in use, over the same
 * buckets as the live bytes, for the memory chart (web/src/chart.js, docs/viewer.md). At most
 * MS_VIEW_MAX_USAGE processes and MS_VIEW_MAX_DEVICES devices, a few thousand buckets each. */
#include "api_internal.h"

_Static_assert(sizeof(struct ms_vusage_point) == 4 * sizeof(int64_t), "a point is 4 int64_t");
_Static_assert(sizeof(struct ms_vdevice_point) == 2 * sizeof(int64_t), "a point is 2 int64_t");

/* Writes one series as the array key over the nb buckets of [a, b), step ns each: in each, the
 * largest value read in it, else the last one read before it (a value holds until the next
 * reading: PSS and USS are read at a pace, a device at steps and exits), null before the first.
 * Sample k's time is ts[k * stride], its value v[k * stride] (-1: not read then). */
static void bucket_series(struct ms_json *j, const char *key, const int64_t *ts, const int64_t *v,
                          size_t stride, size_t n, int64_t a, int64_t b, int64_t step, size_t nb)
{
    ms_json_begin_array(j, key);
    size_t lo = 0, hi = n; /* the first sample at or after a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ts[mid * stride] < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t at = lo;
    int64_t t = a, last = -1; /* the last value read before the bucket */
    for (size_t q = at; q-- > 0 && last < 0;)
        last = v[q * stride];
    for (size_t q = 0; q < nb; q++, t += step) {
        int64_t end = t + step < b ? t + step : b, best = -1;
        for (; at < n && ts[at * stride] < end; at++) {
            int64_t x = v[at * stride];
            best = x > best ? x : best;
            last = x >= 0 ? x : last;
        }
        if (best < 0)
            best = last; /* no reading in the bucket: the value holds */
        if (best < 0)
            ms_json_null(j, NULL);
        else
            ms_json_int(j, NULL, best);
    }
    ms_json_end_array(j);
}

void ms__vapi_usage_series(const struct ms_view_model *m, int64_t a, int64_t b, int64_t step,
                           size_t nb, struct ms_json *j)
{
    ms_json_begin_array(j, "usage");
    for (size_t i = 0; i < m->nusage; i++) {
        const struct ms_vusage *u = &m->usage[i];
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "process_id", u->process_id);
        ms_json_int(j, "pid", u->pid);
        const int64_t *p = u->n ? &u->p[0].ts : NULL;
        bucket_series(j, "rss", p, p ? p + 1 : NULL, 4, u->n, a, b, step, nb);
        bucket_series(j, "pss", p, p ? p + 2 : NULL, 4, u->n, a, b, step, nb);
        bucket_series(j, "uss", p, p ? p + 3 : NULL, 4, u->n, a, b, step, nb);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
    ms_json_begin_array(j, "devices");
    for (size_t i = 0; i < m->ndevices; i++) {
        const struct ms_vdevice *d = &m->devices[i];
        ms_json_begin_object(j, NULL);
        ms_json_int(j, "device", d->device);
        const int64_t *p = d->n ? &d->p[0].ts : NULL;
        bucket_series(j, "used", p, p ? p + 1 : NULL, 2, d->n, a, b, step, nb);
        ms_json_end_object(j);
    }
    ms_json_end_array(j);
}
