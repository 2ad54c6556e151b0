/* usage_plot.c: the series of `memscope usage --plot` and their SVG picture (usage_plot.h).
 *
 * Called by cmd_usage.c once a sample for each series (ten a second), then once to draw: at most
 * USAGE_PLOT_MAX_POINTS points per series whatever the length of the sampling, one polyline each,
 * a legend of at most MAX_LEGEND lines. */
#include "usage_plot.h"

#include "plot_axes.h"
#include "plot_svg.h"

#include "analyze/analyze.h" /* ms_human_bytes */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define W 1000
#define H 400
#define LEFT 80
#define TOP 36
#define PLOT_W 620
#define PLOT_H 300
#define LEGEND_X (LEFT + PLOT_W + 24)
#define MAX_LEGEND 20 /* legend lines; the others are counted in one more */

void usage_plot_series_init(struct usage_plot_series *s, enum usage_plot_kind kind, unsigned id,
                            unsigned colour)
{
    static const char *const what[] = {"RSS", "PSS", "USS", "used"};
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->id = id;
    s->colour = colour;
    s->stride = 1;
    snprintf(s->name, sizeof s->name, "%s %u %s", kind == USAGE_PLOT_DEVICE ? "device" : "pid", id,
             what[kind]);
}

void usage_plot_series_release(struct usage_plot_series *s)
{
    free(s->t);
    free(s->v);
    s->t = NULL;
    s->v = NULL;
    s->n = 0;
}

void usage_plot_add(struct usage_plot_series *s, double t, uint64_t v)
{
    s->samples++;
    if (v > s->max)
        s->max = v;
    if (s->failed)
        return;
    if (s->n && s->fill < s->stride) { /* the last point stands for more samples yet */
        if (v > s->v[s->n - 1])
            s->v[s->n - 1] = v;
        s->fill++;
        return;
    }
    if (!s->t) {
        s->t = malloc(USAGE_PLOT_MAX_POINTS * sizeof *s->t);
        s->v = malloc(USAGE_PLOT_MAX_POINTS * sizeof *s->v);
        if (!s->t || !s->v) {
            usage_plot_series_release(s);
            s->failed = 1;
            return;
        }
    }
    if (s->n == USAGE_PLOT_MAX_POINTS) { /* full: neighbours merge, points stand for twice more */
        for (size_t i = 0; i < s->n / 2; i++) {
            s->t[i] = s->t[2 * i];
            s->v[i] = s->v[2 * i] > s->v[2 * i + 1] ? s->v[2 * i] : s->v[2 * i + 1];
        }
        s->n /= 2;
        s->stride *= 2;
    }
    s->t[s->n] = t;
    s->v[s->n] = v;
    s->n++;
    s->fill = 1;
}

/* The colour of process or device index k. */
static uint32_t colour(unsigned k)
{
    static const uint32_t palette[] = {0x1f6fbfu, 0xc0392bu, 0x2e8b57u, 0xb9770eu,
                                       0x7d3c98u, 0x17a2b8u, 0x566573u, 0xd35400u};
    return palette[k % (sizeof palette / sizeof palette[0])];
}

/* The stroke of a kind: width and dashes (RSS solid, PSS dashed, USS dotted, a device thick). */
static void stroke(enum usage_plot_kind k, double *width, int *on, int *off)
{
    *width = k == USAGE_PLOT_DEVICE ? 2.5 : 1.5;
    *on = k == USAGE_PLOT_PSS ? 6 : k == USAGE_PLOT_USS ? 2 : 0;
    *off = k == USAGE_PLOT_PSS ? 3 : k == USAGE_PLOT_USS ? 3 : 0;
}

int usage_plot_write(FILE *f, const struct usage_plot_series *s, size_t n, double span_s,
                     const char *title)
{
    static const char *const kinds[] = {"rss", "pss", "uss", "device_used"};
    uint64_t top = 0;
    size_t drawn = 0, npts = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s[i].n)
            continue;
        drawn++;
        npts = s[i].n > npts ? s[i].n : npts;
        top = s[i].max > top ? s[i].max : top;
    }
    if (!(span_s > 0))
        span_s = 1e-3;
    double *xy = malloc((npts ? npts : 1) * 2 * sizeof *xy);
    if (!xy)
        return errno = ENOMEM, -1;
    const double ymax = plot_nice_max((double)top);
    const struct plot_frame fr = {LEFT, TOP, PLOT_W, PLOT_H};
    plot_svg_begin(f, W, H, title);
    struct plot_pen p = plot_svg_pen(f);
    p.text(p.ctx, LEFT, 20, title, 0x000000u, 13, 1, PLOT_LEFT);
    plot_axes_draw(&p, &fr, ymax, 0, span_s, "time since the sampling began");
    char buf[256], hb[32];
    size_t legend = 0;
    for (size_t i = 0; i < n; i++) {
        const struct usage_plot_series *q = &s[i];
        if (!q->n)
            continue;
        for (size_t k = 0; k < q->n; k++) {
            double x = q->t[k] / span_s;
            xy[2 * k] = LEFT + PLOT_W * (x > 1 ? 1 : x < 0 ? 0 : x);
            xy[2 * k + 1] = TOP + PLOT_H - PLOT_H * (double)q->v[k] / ymax;
        }
        snprintf(buf, sizeof buf,
                 "class=\"series\" data-name=\"%s\" data-kind=\"%s\" data-id=\"%u\" "
                 "data-max-bytes=\"%llu\" data-samples=\"%llu\" data-points=\"%zu\"",
                 q->name, kinds[q->kind], q->id, (unsigned long long)q->max,
                 (unsigned long long)q->samples, q->n);
        double width;
        int on, off;
        stroke(q->kind, &width, &on, &off);
        p.group(p.ctx, buf);
        p.polyline(p.ctx, xy, (int)q->n, colour(q->colour), width, on, off, "usage");
        p.group(p.ctx, NULL);
        /* its legend line: a sample of the stroke, the name and the peak */
        if (legend < MAX_LEGEND) {
            double y = TOP + 6 + 16.0 * (double)legend;
            p.group(p.ctx, "class=\"legend\"");
            p.line(p.ctx, LEGEND_X, y, LEGEND_X + 28, y, colour(q->colour), width, on, off, NULL);
            ms_human_bytes(hb, sizeof hb, (long long)q->max);
            snprintf(buf, sizeof buf, "%s, peak %s", q->name, hb);
            p.text(p.ctx, LEGEND_X + 34, y + 4, buf, 0x222222u, 11, 0, PLOT_LEFT);
            p.group(p.ctx, NULL);
        }
        legend++;
    }
    if (legend > MAX_LEGEND) {
        snprintf(buf, sizeof buf, "and %zu more series", legend - MAX_LEGEND);
        p.text(p.ctx, LEGEND_X, TOP + 6 + 16.0 * MAX_LEGEND + 4, buf, 0x444444u, 11, 0, PLOT_LEFT);
    }
    if (!drawn)
        p.text(p.ctx, LEFT + PLOT_W / 2.0, TOP + PLOT_H / 2.0, "no samples", 0x444444u, 13, 0,
               PLOT_MIDDLE);
    plot_svg_end(f);
    free(xy);
    return ferror(f) ? (errno = errno ? errno : EIO, -1) : 0;
}
