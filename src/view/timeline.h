/* timeline.h: one track's live bytes over time (the viewer's memory-over-time chart), held
 * encoded: about 3 to 5 bytes a change instead of 16.
 *
 * A track is the list of (ts, live) after each of its MALLOC/FREE events, ts never decreasing
 * (a second change at the same ns replaces the first's value). It is cut into chunks of
 * MS_VLINE_CHUNK changes; each chunk keeps, in a head, its first change, its min and max live
 * bytes and where its other changes start in one byte array, where each is two zigzag varints:
 * the ts and the live bytes minus the previous change's. Reading a chunk decodes at most
 * MS_VLINE_CHUNK changes into the caller's cursor (struct ms_vcur, on the caller's stack), so
 * any number of threads read a finished track at once, and a query over a window costs a
 * binary search over the heads plus at most two decoded chunks at its ends (whole chunks
 * inside it are answered by their heads).
 *
 * Written once (ms_vtrack_push ... ms_vtrack_finish), then only read. The track's other fields
 * (process, layer, peak) are model.h's. */
#ifndef MS_VIEW_TIMELINE_H
#define MS_VIEW_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#define MS_VLINE_CHUNK 64

struct ms_vchunk {
    int64_t ts0, live0; /* the chunk's first change */
    int64_t min, max;   /* of its changes' live bytes */
    uint64_t off;       /* its other changes in ms_vline.data from here */
};

struct ms_vline {
    struct ms_vchunk *heads;
    size_t nheads, capheads;
    uint8_t *data;
    size_t len, capdata;
    size_t n; /* changes */
    int64_t last_ts, last_live;
    int64_t (*pend)[2]; /* while written: the last chunk's changes, not yet encoded */
    size_t npend;
};

/* A reader's decoded chunks: pass one, set by ms_vcur_init, to the reading calls; it keeps
 * the last two chunks decoded (a window's two ends), so consecutive queries near each other
 * decode each once. */
struct ms_vslot {
    size_t chunk; /* SIZE_MAX: none */
    size_t n;
    int64_t ts[MS_VLINE_CHUNK], live[MS_VLINE_CHUNK];
};
struct ms_vcur {
    const struct ms_vline *line;
    struct ms_vslot slot[2];
    int last; /* the slot decoded or read last */
};

/* Appends a change of delta bytes at ts (ts not before the last change's). 0 or MS_ENOMEM. */
int ms_vline_push(struct ms_vline *l, int64_t ts, int64_t delta);

/* Encodes the last chunk and frees the writer's buffer: the line is only read after. 0 or
 * MS_ENOMEM. */
int ms_vline_finish(struct ms_vline *l);

/* Frees the line's memory; accepts a zeroed line. */
void ms_vline_release(struct ms_vline *l);

void ms_vcur_init(struct ms_vcur *c, const struct ms_vline *l);

/* Index of the last change at or before t, -1 when none. */
long ms_vline_last_at(struct ms_vcur *c, int64_t t);

/* The change at index i (< n): its ts and live bytes. */
int64_t ms_vline_ts(struct ms_vcur *c, size_t i);
int64_t ms_vline_live(struct ms_vcur *c, size_t i);

/* Live bytes at t (after every change at or before t); 0 before the first. */
int64_t ms_vline_live_at(struct ms_vcur *c, int64_t t);

/* Min and max live bytes over [a, b) (the value entering the window counts). */
void ms_vline_minmax(struct ms_vcur *c, int64_t a, int64_t b, int64_t *mn, int64_t *mx);

/* Bytes the line holds (heads and encoded changes). */
size_t ms_vline_bytes(const struct ms_vline *l);

#endif
