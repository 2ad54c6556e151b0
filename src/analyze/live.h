/* live.h: what a running process holds now, read from its own trace while the agent still
 * writes it: the live heap blocks by call site and by owner, and how many call sites the leak
 * growth rule (leak_rule.h) calls leaks. The Python package's OOMDetector, MemoryLeakDetector
 * and MemoryDebugger ask it (memscope._store.live_holders) for the "why" of a warning; only the
 * process that writes the trace can name its native frames (dladdr), so it is meant to be
 * called by that process on its own trace file. */
#ifndef MS_ANALYZE_LIVE_H
#define MS_ANALYZE_LIVE_H

#include <stddef.h>
#include <stdint.h>

#define MS_LIVE_TENTHS 10 /* held[] cells: the growth rule without steps (leaks.c's tenths) */

/* One call site (or owner) and the live heap blocks it holds. */
struct ms_live_holder {
    char name[512];               /* the site's text ("function (file:line)") or owner label */
    int64_t bytes, blocks;        /* live now */
    int64_t held[MS_LIVE_TENTHS]; /* sites: bytes live now by tenth of the allocations */
    int leak;                     /* sites: the growth rule calls it a leak */
};

/* The result. The caller owns it and frees its contents with ms_live_report_release(). */
struct ms_live_report {
    int64_t live_bytes, live_blocks; /* heap blocks live now (mmap regions are not counted) */
    int64_t peak_live_bytes;         /* the most live heap bytes at any moment of the trace */
    int64_t allocations;             /* heap allocations recorded */
    struct ms_live_holder *sites;    /* by bytes, the largest first; at most max_sites */
    size_t nsites, sites_total;      /* kept, and distinct sites seen */
    struct ms_live_holder *owners;   /* by bytes; "(no owner)" for blocks outside any owner */
    size_t nowners;
    size_t leaks; /* sites the growth rule, on tenths of the allocations, calls leaks */
    int python;   /* the trace has Python stacks */
};

/* Reads the trace at path (a raw trace being written, or a finished one) and fills *out with
 * the live heap blocks at its last record, the max_sites largest sites and owners kept (the
 * leak count covers all sites). Allocations and frees of all threads are merged by time.
 * Returns 0, or a negative MS_E* code with a message in err (the trace cannot be opened, out of
 * memory). */
int ms_live_read(const char *path, size_t max_sites, struct ms_live_report *out, char *err,
                 size_t errlen);

/* Frees what ms_live_read allocated; accepts a zeroed report. */
void ms_live_report_release(struct ms_live_report *r);

#endif
