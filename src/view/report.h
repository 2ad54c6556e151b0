/* report.h: `memscope report`: the viewer's page as one self-contained HTML file (no network
 * fetch, no server) with the answers it needs precomputed: the summary, memory over time at
 * MS_REPORT_POINTS points, and at a set of cursor times (the peak, then evenly spaced times
 * while the budget lasts) the largest blocks, the owners, the flame graph and the first pool's
 * allocator state; the flame graphs
 * of the whole run and of what was never freed; the run's largest blocks (the lifetime chart);
 * the stacks all of these name. The file stays
 * under a byte budget whatever the run's size (issue 15: 5 MB). */
#ifndef MS_VIEW_REPORT_H
#define MS_VIEW_REPORT_H

#include "api.h"

#include <stdio.h>

#define MS_REPORT_POINTS 4000
#define MS_REPORT_BUDGET (4500u * 1024u) /* bytes of answers; the page's code adds ~70 KiB */

/* Writes the report of v to out. 0, or a negative code with a reason in err. */
int ms_view_report(struct ms_view *v, FILE *out, char *err, size_t errlen);

#endif
