/* plot_pen.h: the drawing primitives of memscope's static pictures (struct plot_pen): `memscope
 * plot` and `memscope usage --plot` draw once through a pen, and the pen writes SVG
 * (plot_svg.c) or paints pixels for a PNG image (plot_raster.c). */
#ifndef MS_CLI_PLOT_PEN_H
#define MS_CLI_PLOT_PEN_H

#include <stdint.h>

enum { PLOT_LEFT = -1, PLOT_MIDDLE = 0, PLOT_RIGHT = 1 }; /* text anchors */

/* What a picture is drawn with; coordinates in the SVG's user units (y down). cls names the
 * SVG element's class (NULL: none); the raster pen ignores it. dash_on/dash_off 0: solid. */
struct plot_pen {
    void *ctx;
    /* opens a group with these attributes (e.g. class="steps"); NULL closes it */
    void (*group)(void *ctx, const char *attrs);
    void (*line)(void *ctx, double x0, double y0, double x1, double y1, uint32_t rgb, double width,
                 int dash_on, int dash_off, const char *cls);
    /* a polyline through n points (xy: x0 y0 x1 y1 ...) */
    void (*polyline)(void *ctx, const double *xy, int n, uint32_t rgb, double width, int dash_on,
                     int dash_off, const char *cls);
    /* the area between that polyline (x increasing) and the horizontal line y = base */
    void (*area)(void *ctx, const double *xy, int n, double base, uint32_t rgb);
    /* text whose baseline starts, centres or ends at (x, y) as anchor says */
    void (*text)(void *ctx, double x, double y, const char *s, uint32_t rgb, int size, int bold,
                 int anchor);
};

#endif
