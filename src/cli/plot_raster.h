/* plot_raster.h: the drawing primitives `memscope plot` uses (struct plot_pen), and the raster
 * pen that paints them into an RGB image written as PNG (plot_raster.c), so that a PNG picture
 * needs no image library. The SVG pen is in cmd_plot.c. */
#ifndef MS_CLI_PLOT_RASTER_H
#define MS_CLI_PLOT_RASTER_H

#include <stdint.h>
#include <stdio.h>

enum { PLOT_LEFT = -1, PLOT_MIDDLE = 0, PLOT_RIGHT = 1 }; /* text anchors */

/* What the picture is drawn with; coordinates in the SVG's user units (y down). cls names the
 * SVG element's class (NULL: none); the raster pen ignores it. dash_on/dash_off 0: solid. */
struct plot_pen {
    void *ctx;
    /* opens a group with these attributes (e.g. class="steps"); NULL closes it */
    void (*group)(void *ctx, const char *attrs);
    void (*line)(void *ctx, double x0, double y0, double x1, double y1, uint32_t rgb, double width,
                 int dash_on, int dash_off, const char *cls);
    /* a polyline through n points (xy: x0 y0 x1 y1 ...) */
    void (*polyline)(void *ctx, const double *xy, int n, uint32_t rgb, double width,
                     const char *cls);
    /* the area between that polyline (x increasing) and the horizontal line y = base */
    void (*area)(void *ctx, const double *xy, int n, double base, uint32_t rgb);
    /* text whose baseline starts, centres or ends at (x, y) as anchor says */
    void (*text)(void *ctx, double x, double y, const char *s, uint32_t rgb, int size, int bold,
                 int anchor);
};

struct plot_raster {
    int w, h;     /* pixels */
    double scale; /* pixels per user unit */
    uint8_t *px;  /* w * h * 3, RGB */
};

/* An image of w x h user units at scale pixels each, filled with rgb; -1 when out of memory. */
int plot_raster_init(struct plot_raster *r, int w, int h, int scale, uint32_t rgb);
void plot_raster_release(struct plot_raster *r);
/* The pen that paints into r. */
struct plot_pen plot_raster_pen(struct plot_raster *r);
/* Writes r as a PNG file (8-bit RGB, compressed); -1 on a write error (errno set). */
int plot_raster_write_png(const struct plot_raster *r, FILE *f);

#endif
