/* plot_axes.h: the frame of a picture of bytes over time (plot_axes.c): the y axis's top (a
 * round number of B, KiB, MiB, ...), the two axes, their ticks and labels (bytes; seconds,
 * milliseconds or microseconds as the span asks) and the grid, drawn through a pen
 * (plot_pen.h). `memscope plot` and `memscope usage --plot` draw their series inside it. */
#ifndef MS_CLI_PLOT_AXES_H
#define MS_CLI_PLOT_AXES_H

#include "plot_pen.h"

/* The plotting area, in user units (y down): the series are drawn inside it. */
struct plot_frame {
    double left, top, width, height;
};

/* The y axis's top for a largest value v (bytes): the smallest 1, 2, 4, 5 or 8 times a power of
 * ten (below 1024) times a power of 1024 at or above v, so that its quarters read well in B,
 * KiB, MiB or GiB; 1024 for v <= 0. */
double plot_nice_max(double v);

/* Draws fr's axes through p: y from 0 (the bottom) to ymax bytes (the top) in 4 divisions with
 * grid lines and labels in the unit of the top (1 KiB = 1024 B); x from x0_s (the left) to
 * x0_s + span_s seconds in 5 divisions, labelled in the unit the span asks for, with
 * "xlabel (unit)" under them. Groups of class "axes", "yticks" and "xticks". */
void plot_axes_draw(const struct plot_pen *p, const struct plot_frame *fr, double ymax, double x0_s,
                    double span_s, const char *xlabel);

#endif
