/* usage_pages.h: the pages a forked process holds alone (copy-on-write, docs/usage.md): the walk
 * of /proc/PID/pagemap over its private anonymous writable mappings, which finds the pages that
 * are present and mapped by this process only (pagemap's "exclusively mapped" bit, 56, and the
 * present bit, 63: no privilege needed, PFNs are not read), and the sampler's pages file
 * `usage-<pid>.msp` beside `usage-<pid>.msu` in the trace directory, which the conversion maps
 * onto the blocks the parent had live at the fork (src/store/convert_cow.c).
 *
 * After a fork every anonymous page is shared by parent and child until one of them writes it;
 * the writer gets a copy of its own. So in a child, a page present and exclusively mapped is one
 * it copied (or one it touched first: a page of a parent's block never touched before the fork,
 * or its own allocation), and the conversion keeps those inside the parent's live blocks.
 *
 * The file's byte layout (little-endian), normative:
 *
 *   header, 16 bytes:  "MSPAGES\0" (8 bytes), u32 version (1), u32 range size (16)
 *   records, appended by one writer, each one walk of one process:
 *     0  u64 ts_ns      CLOCK_MONOTONIC ns when the walk began (the agent's clock)
 *     8  u32 pid
 *    12  u32 nranges    at most MS_PAGES_MAX_RANGES
 *    16  u64 bytes      the sum of the ranges' lengths
 *    24  nranges x {u64 start, u64 length}: page-aligned address ranges of the pages present
 *        and exclusively mapped, ascending and not overlapping
 *
 * A reader treats the file as hostile: a wrong magic or range size, a newer version, ranges out
 * of order, overlapping or whose lengths do not sum to bytes end the reading (what was read
 * before is kept); a record cut short is dropped. */
#ifndef MS_USAGE_PAGES_H
#define MS_USAGE_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MS_PAGES_SUFFIX ".msp" /* usage-<pid>.msp */
#define MS_PAGES_MAGIC "MSPAGES"
#define MS_PAGES_VERSION 1u
#define MS_PAGES_HEADER 16u
#define MS_PAGES_RECORD 24u              /* a record's fixed part */
#define MS_PAGES_MAX_RANGES (4u << 20)   /* per walk: 64 MiB of ranges */
#define MS_PAGES_MAX_TOTAL (64ull << 20) /* ranges read from one file (1 GiB) */
#define MS_PAGES_MAPS_MAX (64u << 20)    /* bytes of /proc/PID/maps read */
/* A walk reads 8 bytes per page of address space, resident or not: a mapping larger than this
 * (a sanitizer's shadow memory, an arena reserved writable) is not walked, and a walk stops
 * after this much address space in all (its figures are then those of what it walked). */
#define MS_PAGES_MAX_MAPPING (64ull << 30)
#define MS_PAGES_MAX_WALK (256ull << 30)

struct ms_pages_range {
    uint64_t start, len;
};

/* One walk: the caller's struct; ms_pages_walk_release frees r. */
struct ms_pages_walk {
    uint64_t ts_ns;
    uint32_t pid;
    uint64_t bytes; /* sum of r[i].len */
    struct ms_pages_range *r;
    size_t n, cap;
};

void ms_pages_walk_release(struct ms_pages_walk *w);

/* Walks process pid's private anonymous writable mappings ([heap], anonymous mmap, named
 * anonymous mappings; not the main thread's stack, file mappings or shared memory; not a
 * mapping over MS_PAGES_MAX_MAPPING, nor beyond MS_PAGES_MAX_WALK in all) in
 * /proc/PID/pagemap into *w (its ranges replaced; ts_ns from CLOCK_MONOTONIC before the walk).
 * Returns 0; -ESRCH when the process is gone; another negative errno (-EACCES: another user's
 * process; -ENOMEM: more than MS_PAGES_MAX_RANGES ranges or no memory, w then holds the ranges
 * found so far). Reads about 8 bytes of pagemap per page of those mappings. */
int ms_pages_walk(pid_t pid, struct ms_pages_walk *w);

/* Whether a file name is a pages file's: "usage-" ... ".msp". */
int ms_pages_is_file(const char *name);

/* Writes the header (MS_PAGES_HEADER bytes) into out. */
void ms_pages_header(unsigned char *out);
/* Encodes w's fixed part (MS_PAGES_RECORD bytes) into out; its ranges follow as they are in
 * memory (two little-endian u64 each). */
void ms_pages_encode(const struct ms_pages_walk *w, unsigned char *out);

/* Reads the pages file at path: *out gets its walks (the caller frees each with
 * ms_pages_walk_release, then the array with free()), *n their count. Returns 0 (a damaged
 * record ends the reading: the walks before it are kept); -ENOENT; MS_EFORMAT for a file that
 * is not a pages file (or not a regular file); MS_EVERSION for a newer version; MS_ENOMEM. */
int ms_pages_load(const char *path, struct ms_pages_walk **out, size_t *n);

#endif
