/* plot_raster.h: the raster pen, which paints the drawing primitives of plot_pen.h into an RGB
 * image written as PNG (plot_raster.c), so that a PNG picture needs no image library. The SVG
 * pen is plot_svg.h. */
#ifndef MS_CLI_PLOT_RASTER_H
#define MS_CLI_PLOT_RASTER_H

#include "plot_pen.h"

#include <stdint.h>
#include <stdio.h>

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
