/* summary.c: the per-device summary of a loaded snapshot (docs/snapshot.md), as text or JSON.
 * Called by `memscope snapshot FILE [--json]`. Workload: one pass over segments, blocks and
 * events, one hash map of live addresses per device; sites are aggregated per stack id, so
 * shared stacks cost one lookup each. */
#include "snapshot.h"
#include "common/term_text.h"

#include "common/u64map.h"
#include "common/grow.h"
#include "common/ms_error.h"
#include "common/utf8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ms__json_str(FILE *out, const char *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    putc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') {
            putc('\\', out);
            putc(c, out);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(out, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
        } else if (c >= 0x80) { /* JSON is UTF-8: other bytes as U+FFFD (utf8.h) */
            size_t len = ms_utf8_len((const unsigned char *)p + i, n - i);
            if (len)
                fwrite(p + i, 1, len, out), i += len - 1;
            else
                fputs("\\ufffd", out);
        } else {
            putc(c, out);
        }
    }
    putc('"', out);
}

struct site {
    uint32_t frame;
    uint64_t bytes, count;
};

struct devsum {
    int64_t device;
    uint64_t segs, blocks;
    uint64_t state_count[MS_SB_COUNT], state_bytes[MS_SB_COUNT];
    uint64_t reserved, allocated, active, requested;
    uint64_t events, action_count[MS_SA_COUNT], action_bytes[MS_SA_COUNT];
    int64_t t_first, t_last;
    uint64_t ghost_count, ghost_bytes;
    uint64_t free_bytes, largest_free;
    struct site *live, *allocs;
    uint32_t nlive, nallocs;
    size_t cap_live, cap_allocs;
    const uint64_t *segi; /* the device's segments: indexes into s->segs, ascending */
    uint64_t nsegi;
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Segment indexes by their segment's device, then by index (qsort is not stable); arg: the
 * snapshot. */
static int cmp_seg_device(const void *a, const void *b, void *arg)
{
    const struct ms_snapshot *s = arg;
    uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
    int64_t x = s->segs[i].device, y = s->segs[j].device;
    if (x != y)
        return x < y ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int cmp_site(const void *a, const void *b)
{
    const struct site *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->frame < y->frame ? -1 : x->frame > y->frame;
}

/* Aggregates bytes by site frame; per_frame is a scratch array of nframes slots. */
static int add_site(struct site **v, uint32_t *n, size_t *cap, uint32_t *slot_of, uint32_t frame,
                    uint64_t bytes)
{
    if (!slot_of[frame]) {
        if (ms_grow((void **)v, cap, *n, sizeof **v, 64, MS_GROW_MAX) < 0)
            return MS_ENOMEM;
        (*v)[*n] = (struct site){frame, 0, 0};
        slot_of[frame] = ++*n;
    }
    struct site *s = &(*v)[slot_of[frame] - 1];
    s->bytes += bytes;
    s->count++;
    return 0;
}

static int summarize(const struct ms_snapshot *s, int64_t dev, const uint64_t *segi, uint64_t nsegi,
                     struct devsum *d, uint32_t *scratch)
{
    memset(d, 0, sizeof *d);
    d->device = dev;
    d->segi = segi;
    d->nsegi = nsegi;
    d->t_first = MS_SNAP_NO_TIME;
    const struct ms_snap_trace *t = ms__snap_trace(s, dev);
    struct ms_u64map live; /* address -> its alloc event */
    ms_u64map_init(&live, sizeof(uint64_t), MS_U64MAP_MAX);
    int rc = 0;
    if (t) {
        d->events = t->nevents;
        for (uint64_t i = 0; i < t->nevents; i++) {
            const struct ms_snap_event *e = &t->events[i];
            d->action_count[e->action]++;
            d->action_bytes[e->action] += e->size;
            if (e->time_us != MS_SNAP_NO_TIME) {
                if (d->t_first == MS_SNAP_NO_TIME) {
                    d->t_first = d->t_last = e->time_us;
                } else {
                    if (e->time_us < d->t_first)
                        d->t_first = e->time_us;
                    if (e->time_us > d->t_last)
                        d->t_last = e->time_us;
                }
            }
            if (e->action == MS_SA_ALLOC) {
                if ((rc = ms_u64map_set64(&live, e->addr, i)))
                    goto out;
                uint32_t site = e->stack ? s->stacks[e->stack].site : 0;
                if ((rc =
                         add_site(&d->allocs, &d->nallocs, &d->cap_allocs, scratch, site, e->size)))
                    goto out;
            } else if (e->action == MS_SA_FREE_COMPLETED) {
                ms_u64map_del(&live, e->addr, NULL);
            }
        }
    }
    for (uint32_t i = 0; i < d->nallocs; i++)
        scratch[d->allocs[i].frame] = 0;
    for (uint64_t k = 0; k < nsegi; k++) {
        const struct ms_snap_segment *g = &s->segs[segi[k]];
        d->segs++;
        d->reserved += g->total;
        d->allocated += g->allocated;
        d->active += g->active;
        d->requested += g->requested;
        uint64_t seg_free = 0, seg_largest = 0;
        for (uint64_t j = 0; j < g->nblocks; j++) {
            const struct ms_snap_block *b = &s->blocks[g->first_block + j];
            d->blocks++;
            d->state_count[b->state]++;
            d->state_bytes[b->state] += b->size;
            if (b->state == MS_SB_INACTIVE) {
                seg_free += b->size;
                if (b->size > seg_largest)
                    seg_largest = b->size;
            }
            if (b->state == MS_SB_ACTIVE_ALLOCATED || b->state == MS_SB_ACTIVE_PENDING_FREE) {
                if (!ms_u64map_get(&live, b->addr)) {
                    d->ghost_count++;
                    d->ghost_bytes += b->size;
                }
            }
            if (b->state == MS_SB_ACTIVE_ALLOCATED) {
                uint32_t site = b->stack ? s->stacks[b->stack].site : 0;
                if ((rc = add_site(&d->live, &d->nlive, &d->cap_live, scratch, site, b->size)))
                    goto out;
            }
        }
        d->free_bytes += seg_free;
        if (seg_largest > d->largest_free)
            d->largest_free = seg_largest;
    }
    for (uint32_t i = 0; i < d->nlive; i++)
        scratch[d->live[i].frame] = 0;
    if (d->nlive)
        qsort(d->live, d->nlive, sizeof *d->live, cmp_site);
    if (d->nallocs)
        qsort(d->allocs, d->nallocs, sizeof *d->allocs, cmp_site);
out:
    ms_u64map_release(&live);
    return rc;
}

/* Writes a reader value as JSON, bounded: depth 32 and `budget` nodes (cycles and shared
 * subtrees cannot blow up the output). */
static void dump_value(const struct ms_snapshot *s, FILE *out, ms_pv v, int depth, long *budget)
{
    const struct ms_unpickle *u = &s->u;
    if (--*budget < 0 || depth > 32) {
        fputs("null", out);
        return;
    }
    int64_t i;
    double f;
    size_t n;
    const char *p;
    switch (ms_pv_type(u, v)) {
    case MS_PV_BOOL: fputs(ms_pv_bool(u, v) ? "true" : "false", out); break;
    case MS_PV_INT:
        ms_pv_int(u, v, &i);
        fprintf(out, "%lld", (long long)i);
        break;
    case MS_PV_FLOAT:
        ms_pv_float(u, v, &f);
        if (isfinite(f))
            fprintf(out, "%.17g", f);
        else
            fputs("null", out);
        break;
    case MS_PV_STR:
        p = ms_pv_str(u, v, &n);
        ms__json_str(out, p, n);
        break;
    case MS_PV_LIST:
    case MS_PV_TUPLE:
    case MS_PV_SET:
        putc('[', out);
        for (uint64_t k = 0; k < ms_pv_len(u, v) && *budget >= 0; k++) {
            if (k)
                putc(',', out);
            dump_value(s, out, ms_pv_item(u, v, k), depth + 1, budget);
        }
        putc(']', out);
        break;
    case MS_PV_DICT:
        putc('{', out);
        for (uint64_t k = 0; k < ms_pv_len(u, v) && *budget >= 0; k++) {
            if (k)
                putc(',', out);
            ms_pv key = ms_pv_dict_key(u, v, k);
            if (ms_pv_type(u, key) == MS_PV_STR) {
                p = ms_pv_str(u, key, &n);
                ms__json_str(out, p, n);
            } else if (!ms_pv_int(u, key, &i)) {
                fprintf(out, "\"%lld\"", (long long)i);
            } else {
                fputs("\"?\"", out);
            }
            putc(':', out);
            dump_value(s, out, ms_pv_dict_value(u, v, k), depth + 1, budget);
        }
        putc('}', out);
        break;
    default: fputs("null", out); break;
    }
}

static void json_site(const struct ms_snapshot *s, FILE *out, const struct site *x,
                      const char *countname)
{
    const struct ms_snap_frame *f = x->frame ? &s->frames[x->frame] : NULL;
    fputs("{\"file\":", out);
    ms__json_str(out, f ? f->file.p : "", f ? f->file.n : 0);
    fprintf(out, ",\"line\":%lld,\"function\":", f ? (long long)f->line : 0LL);
    ms__json_str(out, f ? f->func.p : "", f ? f->func.n : 0);
    fprintf(out, ",\"bytes\":%llu,\"%s\":%llu}", (unsigned long long)x->bytes, countname,
            (unsigned long long)x->count);
}

static void write_device_json(const struct ms_snapshot *s, FILE *out, const struct devsum *d,
                              int top)
{
    fprintf(out, "{\"device\":%lld,\"segments\":%llu,\"blocks\":%llu,\"blocks_by_state\":{",
            (long long)d->device, (unsigned long long)d->segs, (unsigned long long)d->blocks);
    for (int i = 0; i < MS_SB_COUNT; i++)
        fprintf(out, "%s\"%s\":{\"count\":%llu,\"bytes\":%llu}", i ? "," : "",
                ms_snap_state_names[i], (unsigned long long)d->state_count[i],
                (unsigned long long)d->state_bytes[i]);
    fprintf(out,
            "},\"reserved_bytes\":%llu,\"allocated_bytes\":%llu,\"active_bytes\":%llu,"
            "\"requested_bytes\":%llu,\"trace_entries\":%llu,\"actions\":{",
            (unsigned long long)d->reserved, (unsigned long long)d->allocated,
            (unsigned long long)d->active, (unsigned long long)d->requested,
            (unsigned long long)d->events);
    for (int i = 0; i < MS_SA_COUNT; i++)
        fprintf(out, "%s\"%s\":%llu", i ? "," : "", ms_snap_action_names[i],
                (unsigned long long)d->action_count[i]);
    fputs("},\"action_bytes\":{", out);
    for (int i = 0; i < MS_SA_COUNT; i++)
        fprintf(out, "%s\"%s\":%llu", i ? "," : "", ms_snap_action_names[i],
                (unsigned long long)d->action_bytes[i]);
    fputs("},\"time_us\":", out);
    if (d->t_first == MS_SNAP_NO_TIME)
        fputs("null", out);
    else
        fprintf(out, "{\"first\":%lld,\"last\":%lld,\"span\":%lld}", (long long)d->t_first,
                (long long)d->t_last, (long long)(d->t_last - d->t_first));
    fprintf(out, ",\"blocks_without_alloc_event\":{\"count\":%llu,\"bytes\":%llu}",
            (unsigned long long)d->ghost_count, (unsigned long long)d->ghost_bytes);
    double ratio =
        d->free_bytes ? (double)(d->free_bytes - d->largest_free) / (double)d->free_bytes : 0.0;
    fprintf(out,
            ",\"fragmentation\":{\"inactive_bytes\":%llu,\"largest_free_block\":%llu,"
            "\"ratio\":%.6f,\"segments\":[",
            (unsigned long long)d->free_bytes, (unsigned long long)d->largest_free, ratio);
    int first = 1;
    for (uint64_t k = 0; k < d->nsegi; k++) {
        const struct ms_snap_segment *g = &s->segs[d->segi[k]];
        uint64_t fb = 0, lf = 0;
        for (uint64_t j = 0; j < g->nblocks; j++) {
            const struct ms_snap_block *b = &s->blocks[g->first_block + j];
            if (b->state == MS_SB_INACTIVE) {
                fb += b->size;
                if (b->size > lf)
                    lf = b->size;
            }
        }
        fprintf(out,
                "%s{\"address\":%llu,\"total_size\":%llu,\"inactive_bytes\":%llu,"
                "\"largest_free_block\":%llu}",
                first ? "" : ",", (unsigned long long)g->addr, (unsigned long long)g->total,
                (unsigned long long)fb, (unsigned long long)lf);
        first = 0;
    }
    fputs("]},\"top_sites_live\":[", out);
    for (uint32_t i = 0; i < d->nlive && (int)i < top; i++) {
        if (i)
            putc(',', out);
        json_site(s, out, &d->live[i], "blocks");
    }
    fputs("],\"top_sites_allocated\":[", out);
    for (uint32_t i = 0; i < d->nallocs && (int)i < top; i++) {
        if (i)
            putc(',', out);
        json_site(s, out, &d->allocs[i], "allocs");
    }
    fputs("]}", out);
}

static void human(char *buf, size_t n, uint64_t b)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int k = 0;
    while (v >= 1024 && k < 4) {
        v /= 1024;
        k++;
    }
    snprintf(buf, n, k ? "%.1f %s" : "%.0f %s", v, unit[k]);
}

static void text_site(const struct ms_snapshot *s, FILE *out, const struct site *x)
{
    char b[32];
    human(b, sizeof b, x->bytes);
    const struct ms_snap_frame *f = x->frame ? &s->frames[x->frame] : NULL;
    if (f) { /* names from the pickle: escaped for a terminal (common/term_text.h) */
        char file[1024], func[1024];
        snprintf(file, sizeof file, "%.*s", (int)f->file.n, f->file.p);
        snprintf(func, sizeof func, "%.*s", (int)f->func.n, f->func.p);
        fprintf(out, "    %10s %7llu  %s:%lld %s\n", b, (unsigned long long)x->count,
                ms_term_text(file), (long long)f->line, ms_term_text(func));
    } else
        fprintf(out, "    %10s %7llu  (no frames)\n", b, (unsigned long long)x->count);
}

static void write_device_text(const struct ms_snapshot *s, FILE *out, const struct devsum *d,
                              int top)
{
    char a[32], b[32], c[32], e[32];
    fprintf(out, "device %lld: %llu segments, %llu blocks\n", (long long)d->device,
            (unsigned long long)d->segs, (unsigned long long)d->blocks);
    human(a, sizeof a, d->reserved);
    human(b, sizeof b, d->allocated);
    human(c, sizeof c, d->active);
    human(e, sizeof e, d->requested);
    fprintf(out, "  reserved %s, allocated %s, active %s, requested %s\n", a, b, c, e);
    for (int i = 0; i < MS_SB_COUNT; i++) {
        if (!d->state_count[i])
            continue;
        human(a, sizeof a, d->state_bytes[i]);
        fprintf(out, "  blocks %-20s %8llu  %s\n", ms_snap_state_names[i],
                (unsigned long long)d->state_count[i], a);
    }
    fprintf(out, "  trace entries: %llu\n", (unsigned long long)d->events);
    for (int i = 0; i < MS_SA_COUNT; i++)
        if (d->action_count[i])
            fprintf(out, "    %-16s %llu\n", ms_snap_action_names[i],
                    (unsigned long long)d->action_count[i]);
    if (d->t_first != MS_SNAP_NO_TIME)
        fprintf(out, "  time span: %.6f s\n", (double)(d->t_last - d->t_first) / 1e6);
    human(a, sizeof a, d->ghost_bytes);
    fprintf(out, "  live blocks allocated before the trace started: %llu (%s)\n",
            (unsigned long long)d->ghost_count, a);
    human(a, sizeof a, d->free_bytes);
    human(b, sizeof b, d->largest_free);
    double ratio =
        d->free_bytes ? (double)(d->free_bytes - d->largest_free) / (double)d->free_bytes : 0.0;
    fprintf(out,
            "  fragmentation: %s inactive in segments, largest free block %s, "
            "(free - largest) / free = %.3f\n",
            a, b, ratio);
    if (d->nlive) {
        fputs("  largest live allocation sites (bytes, blocks, innermost Python frame):\n", out);
        for (uint32_t i = 0; i < d->nlive && (int)i < top; i++)
            text_site(s, out, &d->live[i]);
    }
    if (d->nallocs) {
        fputs("  largest allocation sites over the trace (bytes, allocs):\n", out);
        for (uint32_t i = 0; i < d->nallocs && (int)i < top; i++)
            text_site(s, out, &d->allocs[i]);
    }
}

int ms_snapshot_write_summary(const struct ms_snapshot *s, FILE *out, int json, int top)
{
    /* The devices: those of segments and those with a trace slot; the segments grouped by
     * device (stable), so that each device's summary reads its own: work linear in devices. */
    uint64_t nd = 0;
    int64_t *devs = malloc((size_t)(s->nsegs + s->ntraces + 1) * sizeof *devs);
    uint64_t *segi = malloc((size_t)(s->nsegs + 1) * sizeof *segi);
    uint32_t *scratch = calloc(s->nframes + 1, sizeof *scratch);
    if (!devs || !segi || !scratch) {
        free(devs);
        free(segi);
        free(scratch);
        return MS_ENOMEM;
    }
    for (uint64_t i = 0; i < s->nsegs; i++) {
        devs[nd++] = s->segs[i].device;
        segi[i] = i;
    }
    for (uint64_t i = 0; i < s->ntraces; i++)
        devs[nd++] = s->traces[i].device;
    qsort(devs, (size_t)nd, sizeof *devs, cmp_i64);
    uint64_t k = 0;
    for (uint64_t i = 0; i < nd; i++)
        if (!k || devs[k - 1] != devs[i])
            devs[k++] = devs[i];
    nd = k;
    qsort_r(segi, (size_t)s->nsegs, sizeof *segi, cmp_seg_device, (void *)s);

    uint64_t nev = 0;
    for (uint64_t i = 0; i < s->ntraces; i++)
        nev += s->traces[i].nevents;
    int rc = 0;
    if (json) {
        fprintf(out,
                "{\"format\":\"%s\",\"protocol\":%d,\"top_level\":\"%s\",\"file_size\":%llu,"
                "\"segments\":%llu,\"blocks\":%llu,\"trace_entries\":%llu,\"frames\":%u,"
                "\"stacks\":%u,\"external_annotations\":%llu,\"devices\":[",
                s->format == MS_SNAP_JSON ? "json" : "pickle", s->protocol,
                s->bare_list ? "list" : "dict", (unsigned long long)s->file_size,
                (unsigned long long)s->nsegs, (unsigned long long)s->nblocks,
                (unsigned long long)nev, s->nframes - 1, s->nstacks - 1,
                (unsigned long long)s->nannotations);
    } else {
        fprintf(out,
                "%s snapshot (%s%d), %llu bytes: %llu segments, %llu blocks, %llu trace "
                "entries, %u distinct frames, %u distinct stacks, %llu annotations\n",
                s->bare_list ? "bare-list" : "dict",
                s->format == MS_SNAP_JSON ? "JSON" : "pickle protocol ",
                s->format == MS_SNAP_JSON ? 0 : s->protocol, (unsigned long long)s->file_size,
                (unsigned long long)s->nsegs, (unsigned long long)s->nblocks,
                (unsigned long long)nev, s->nframes - 1, s->nstacks - 1,
                (unsigned long long)s->nannotations);
    }
    uint64_t at = 0; /* the first of devs[i]'s segments in segi */
    for (uint64_t i = 0; i < nd; i++) {
        uint64_t n = 0;
        while (at + n < s->nsegs && s->segs[segi[at + n]].device == devs[i])
            n++;
        struct devsum d;
        rc = summarize(s, devs[i], segi + at, n, &d, scratch);
        at += n;
        if (!rc) {
            if (json) {
                if (i)
                    putc(',', out);
                write_device_json(s, out, &d, top);
            } else {
                write_device_text(s, out, &d, top);
            }
        }
        free(d.live);
        free(d.allocs);
        if (rc)
            break;
    }
    long budget = 100000;
    if (json) {
        fputs("],\"allocator_settings\":", out);
        dump_value(s, out, s->allocator_settings, 0, &budget);
        fputs("}\n", out);
    } else if (ms_pv_type(&s->u, s->allocator_settings) != MS_PV_ABSENT) {
        fputs("allocator settings: ", out);
        dump_value(s, out, s->allocator_settings, 0, &budget);
        putc('\n', out);
    }
    free(devs);
    free(segi);
    free(scratch);
    if (!rc && ferror(out))
        rc = MS_EIO;
    return rc;
}
