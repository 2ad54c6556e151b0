/* plot_svg.h: the SVG pen: the drawing primitives of plot_pen.h written as the elements of one
 * standalone SVG document (plot_svg.c), for `memscope plot` and `memscope usage --plot`. */
#ifndef MS_CLI_PLOT_SVG_H
#define MS_CLI_PLOT_SVG_H

#include "plot_pen.h"

#include <stdio.h>

/* Writes the document's start to f: the XML declaration, the <svg> element of w x h user units
 * (sans-serif, 11 units), its <title> (title escaped) and a white background. */
void plot_svg_begin(FILE *f, int w, int h, const char *title);
/* The pen that writes the elements into f, between plot_svg_begin and plot_svg_end. */
struct plot_pen plot_svg_pen(FILE *f);
/* Writes the document's end. */
void plot_svg_end(FILE *f);
/* Writes s with the five XML special characters escaped (and control characters, which XML
 * 1.0 does not allow, left out), for text and attribute values. */
void plot_svg_text(FILE *f, const char *s);

#endif
