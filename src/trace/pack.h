/* pack.h: packed traces (format version 2), a lossless post-run recoding of a raw trace.
 *
 * The agent writes raw traces (version 1): simple varint records, fast to write from inside the
 * traced program. After the program has ended, ms_pack_file() recodes a raw trace into a packed
 * one: same header fields, every record kept, heap events coded with a model of the allocator
 * and rANS under per-chunk frequency tables (about 40% of the bytes). The reader (reader.h)
 * opens both versions and returns the same records, decoding packed chunks with unpack.h.
 * Layers, each using only those before it: format.h (constants) <- pack_model.h (the model) <-
 * unpack.c (the decoder) <- reader.c <- pack.c (the packer reads raw traces with the reader).
 * docs/trace-format.md describes the layout and the model. */
#ifndef MS_TRACE_PACK_H
#define MS_TRACE_PACK_H

#include "format.h"

#include <stddef.h>
#include <stdint.h>

struct ms_pack_stats {
    uint64_t events;    /* event records packed (heap, mmap, lost, annotations) */
    uint64_t records;   /* all records, descriptions (stacks, modules, ...) included */
    uint64_t in_bytes;  /* size of the raw trace */
    uint64_t out_bytes; /* size of the packed trace */
    uint64_t damaged;   /* raw chunks that ended early (their records up to the damage are kept) */
};

/* Packs the raw trace at in_path into a new file at out_path (created or truncated), using up to
 * `workers` threads (one thread's records per job). Returns 0 and fills *st (may be NULL), or a
 * negative MS_E* / -errno code; on failure out_path may hold a partial file the caller removes.
 * A trace that is already packed is refused with MS_EINVAL. */
int ms_pack_file(const char *in_path, const char *out_path, int workers, struct ms_pack_stats *st);

/* STACK records keep their id and lose their return addresses (depth 0): for the traces a
 * compact database embeds, whose stacks are in its tables already (docs/database.md). */
#define MS_PACK_STACK_IDS 1u

/* ms_pack_file with flags (MS_PACK_*); ms_pack_file is flags 0, every record kept. */
int ms_pack_file_flags(const char *in_path, const char *out_path, int workers, unsigned flags,
                       struct ms_pack_stats *st);

#endif
