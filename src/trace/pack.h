/* pack.h: packed traces (format version 2), a lossless post-run recoding of a raw trace.
 *
 * The agent writes raw traces (version 1): simple varint records, fast to write from inside the
 * traced program. After the program has ended, ms_pack_file() recodes a raw trace into a packed
 * one: same header fields, every record kept, heap events coded with a model of the allocator
 * and rANS under per-chunk frequency tables (about 40% of the bytes). The reader (reader.h)
 * opens both versions and returns the same records; ms_pack_decode() is what it calls for a
 * packed chunk.
 * docs/trace-format.md describes the layout and the model. */
#ifndef MS_TRACE_PACK_H
#define MS_TRACE_PACK_H

#include <stddef.h>
#include <stdint.h>

#define MS_TRACE_PACKED_VERSION 2u
#define MS_TRACE_V2_HEADER_SIZE 128u
#define MS_TRACE_PACK_MAGIC 0x4b50534du /* "MSPK" little-endian: a packed chunk */
#define MS_TRACE_F_PACKED 4u            /* header flag of a packed trace */
/* Decoded bytes of one packed chunk at most (the writer cuts a thread's events into chunks of
 * this many raw bytes; a reader refuses chunks that claim more). */
#define MS_PACK_MAX_RAW (1u << 20)

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

/* Decodes one packed chunk's payload (len bytes at in) whose first record's time delta is taken
 * from base_ns. Writes the records in version-1 encoding (delta state starting at base_ns and
 * address 0, as in a raw chunk) into out, which has room for `want` bytes: exactly what the
 * chunk header promises. Returns the number of bytes written; *damaged is set to 1 when the
 * payload is malformed or ends early, in which case the bytes written are the whole records
 * decoded before the damage. Input is treated as hostile: every table index and size is
 * checked, and decoding never reads outside [in, in + len) nor writes past out + want. */
size_t ms_pack_decode(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out, size_t want,
                      int *damaged);

#endif
