/* plot_axes.c: the axes of a picture of bytes over time (plot_axes.h), for cmd_plot.c and
 * usage_plot.c: a few lines and a dozen labels through a pen. */
#include "plot_axes.h"

#include <stdio.h>

#define AXIS 0x888888u
#define GRID 0xeeeeeeu
#define LABEL 0x444444u

double plot_nice_max(double v)
{
    static const double mant[] = {1, 2, 4, 5, 8, 10, 20, 40, 50, 80, 100, 200, 400, 500, 800};
    if (v <= 0)
        return 1024;
    for (double unit = 1; unit < 1e19; unit *= 1024)
        for (size_t k = 0; k < sizeof mant / sizeof mant[0]; k++)
            if (mant[k] * unit >= v)
                return mant[k] * unit;
    return v;
}

/* The unit of the time axis for a span of span_s seconds: its name and its size in seconds, so
 * that the ticks differ in their first digits. */
static void time_unit(double span_s, const char **name, double *size)
{
    if (span_s >= 10) {
        *name = "s", *size = 1;
    } else if (span_s >= 0.01) {
        *name = "ms", *size = 1e-3;
    } else {
        *name = "us", *size = 1e-6;
    }
}

void plot_axes_draw(const struct plot_pen *p, const struct plot_frame *fr, double ymax, double x0_s,
                    double span_s, const char *xlabel)
{
    const double left = fr->left, right = fr->left + fr->width, top = fr->top;
    const double bottom = fr->top + fr->height;
    char buf[160];
    p->group(p->ctx, "class=\"axes\"");
    p->line(p->ctx, left, top, left, bottom, AXIS, 1, 0, 0, NULL);
    p->line(p->ctx, left, bottom, right, bottom, AXIS, 1, 0, 0, NULL);
    p->group(p->ctx, NULL);
    /* the y labels in the unit of the top (1 KiB = 1024 B) */
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    double usz = 1;
    while (u < 6 && ymax >= usz * 1024)
        usz *= 1024, u++;
    p->group(p->ctx, "class=\"yticks\"");
    for (int k = 0; k <= 4; k++) {
        double y = bottom - fr->height * k / 4;
        snprintf(buf, sizeof buf, "%g %s", ymax * k / 4 / usz, units[u]);
        if (k)
            p->line(p->ctx, left + 1, y, right, y, GRID, 1, 0, 0, NULL);
        p->text(p->ctx, left - 6, y + 4, buf, LABEL, 11, 0, PLOT_RIGHT);
    }
    p->group(p->ctx, NULL);
    const char *unit;
    double usize;
    time_unit(span_s, &unit, &usize);
    p->group(p->ctx, "class=\"xticks\"");
    for (int k = 0; k <= 5; k++) {
        snprintf(buf, sizeof buf, "%.1f", (x0_s + span_s * k / 5) / usize);
        p->text(p->ctx, left + fr->width * k / 5, bottom + 16, buf, LABEL, 11, 0, PLOT_MIDDLE);
    }
    snprintf(buf, sizeof buf, "%s (%s)", xlabel, unit);
    p->text(p->ctx, left + fr->width / 2, bottom + 36, buf, LABEL, 11, 0, PLOT_MIDDLE);
    p->group(p->ctx, NULL);
}
