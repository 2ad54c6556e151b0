/* api.h: the viewer's JSON queries over a model (model.h), as the HTTP server (server.c) and
 * the report writer (report.c) ask them. Each answer is aggregated on this side: the browser
 * never receives more than a few thousand points or rows, whatever the run's size. */
#ifndef MS_VIEW_API_H
#define MS_VIEW_API_H

#include "store/stack_text.h"
#include "model.h"
#include "analyze/analyze.h"
#include "common/u64map.h"

#include <stddef.h>

/* The model plus the caches the answers fill (stack texts, site names, owner labels). Used by
 * one thread at a time (the server answers requests on one thread). */
/* A stack's frames as a flame graph draws them (outermost first), each a line of the stack's
 * cached text with the hash of its name: a flame graph of thousands of deep stacks splits and
 * hashes each stack's text once, not once per request. */
struct ms_vframe {
    const char *s; /* into the stack's cached text; not NUL-terminated */
    uint32_t len;
    uint64_t hash;
};
struct ms_vframes {
    struct ms_vframe *f;
    uint32_t n;
};

struct ms_view {
    struct ms_view_model m;
    struct ms_u64map stack_idx; /* stack id -> index into texts (uint32) */
    char **texts;               /* per cached stack: C lines, a '\x1f' line, Python lines */
    size_t ntexts, captexts;
    struct ms_u64map frames_idx; /* stack id -> index into frames (uint32) */
    struct ms_vframes *frames;   /* per stack a flame graph drew */
    size_t nframes, capframes;
    /* the last flame graph's nodes and child map, emptied and refilled by the next one: a
     * graph of hundreds of thousands of nodes allocates (and faults in) its memory once */
    void *flame_nodes;
    size_t flame_cap;
    struct ms_u64map flame_kids;
    struct ms_stack_text stext;         /* the stacks' text (from the stack tree) */
    int stext_ok;                       /* stext is initialized */
    struct ms_site_reader *site_reader; /* the call sites' reader, kept */
    struct ms_u64map site_idx;          /* stack id -> index into sites (uint32) */
    char **sites;                       /* per cached stack: its call site */
    size_t nsites, capsites;
    char **owners; /* owner id -> label (index = id), loaded with the model */
    size_t nowners;
    char command[1024]; /* the traced command line, from meta */
    char *path;         /* the database's name for the analyses, which open it themselves: the file
                 * opened first, /proc/self/fd/<fd> (pin.h), where the process has /proc */
    int fd;             /* the descriptor that holds it, -1 when none */
    int64_t python_calls; /* rows of the Python call trace (python_trace) */
    char *analysis[16];   /* the text report of ms_analyses[i], once asked for */
    /* The blocks alive in [live_a, live_b) in live_track (indexes, ascending): the last window
     * asked for. A cursor move asks blocks, owners and the flame graph at one time, a zoom the
     * lifetimes and the Blocks table of one window: one pass each. */
    uint32_t *live_idx;
    size_t live_n, live_cap;
    int64_t live_a, live_b, live_track;
    int live_ok;
    struct ms_u64map *seen_stacks; /* when set (memscope report), every stack id an answer
                                      names is added to it (keys; values unused, 1 byte) */
};

/* Loads the model of the database at path and the owner labels. 0, or a negative code with
 * a reason in err; release with ms_view_release(). */
int ms_view_open(struct ms_view *v, const char *path, char *err, size_t errlen);
void ms_view_release(struct ms_view *v);

/* Looks up a query parameter by name: its value (NUL-terminated), or NULL when absent. */
typedef const char *(*ms_view_param_fn)(void *ctx, const char *name);

/* Answers the API request for path (e.g. "/api/series") with its parameters. Returns the HTTP
 * status (200, 400 with a JSON {"error": ...}, 404 for an unknown path) and sets *body (malloc'd,
 * the caller frees) and *len; *body is NULL only when out of memory (then 500). */
int ms_view_api(struct ms_view *v, const char *path, ms_view_param_fn param, void *ctx, char **body,
                size_t *len);

#endif
