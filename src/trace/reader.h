/* reader.h: a bounded reader for memscope trace files (format.h).
 *
 * The reader treats the file as hostile: every length is checked against the bytes present,
 * chunk and record sizes are capped, and damage stops the damaged chunk only. A file whose
 * writer died is read up to the last committed record of each chunk. */
#ifndef MS_TRACE_READER_H
#define MS_TRACE_READER_H

#include "format.h"
#include "encode.h"

#include <stddef.h>
#include <stdint.h>

struct ms_trace_chunk_info {
    uint64_t offset;
    uint32_t size;
    uint32_t tid;
    uint32_t thread_serial;
    uint32_t seq;
    uint32_t used;
    uint64_t base_ns;
    int packed; /* a packed chunk (version 2): `used` is its decoded size */
};

/* The newest format version this reader reads: 1 (raw, as the agent writes it) and 2 (packed). */
#define MS_TRACE_MAX_VERSION MS_TRACE_PACKED_VERSION

/* One opened trace file. The caller owns the struct; ms_trace_release() frees its contents. */
struct ms_trace {
    const uint8_t *data;
    size_t size;
    int mapped;                         /* data came from mmap (release unmaps it) */
    struct ms_trace_file_header hdr;    /* copied and validated */
    struct ms_trace_chunk_info *chunks; /* sorted by (thread_serial, seq) */
    size_t nchunks;
    uint64_t skipped_bytes;  /* non-chunk bytes that were not zero (damage) */
    uint64_t damaged_chunks; /* chunks whose records stopped early (see ms_trace_cursor_next) */
    char warning[256];       /* the first damage message, "" when none */
};

/* Opens and indexes the trace at path. Returns 0, MS_EIO (errno in *os_errno if non-NULL),
 * MS_EFORMAT (not a trace), MS_EVERSION (newer format) or MS_ETRUNC (shorter than a header).
 * Damage after the header is not an error: it is counted and described in t->warning. */
int ms_trace_open(struct ms_trace *t, const char *path);

/* Same, over len bytes at data, which must outlive t (used by tests and the fuzz target). */
int ms_trace_open_mem(struct ms_trace *t, const uint8_t *data, size_t len);

/* Frees what ms_trace_open* allocated. Accepts a zeroed or already released struct. */
void ms_trace_release(struct ms_trace *t);

/* Says chunk k will not be read soon: its pages of a mapped file leave the process (they are
 * read again from the file if it is). Keeps a reader of a big trace from holding all of it. */
void ms_trace_drop_chunk(const struct ms_trace *t, size_t k);

/* One decoded record. Pointers point into the file or into the cursor and are valid until the
 * next call on the same cursor. */
struct ms_record {
    int type;       /* base type: MS_REC_HEAP_ALLOC, MS_REC_HEAP_FREE, ... MS_REC_EXTENSION */
    int fn;         /* MS_FN_* for the ALLOC types; the extension type byte (MS_EXT_*) for
                           EXTENSION */
    uint32_t flags; /* ACCESS: MS_ACCESS_* */
    uint64_t ns;    /* CLOCK_MONOTONIC time (events only) */
    uint64_t addr;
    uint64_t size;         /* bytes; LOST: the count */
    uint32_t stack_id;     /* ALLOC types, STACK */
    uint32_t depth;        /* STACK, PYSTACK */
    const uint64_t *pcs;   /* STACK: return addresses; PYSTACK: frame id, line, frame id, ... */
    uint64_t bias, lo, hi; /* MODULE */
    uint64_t ppid;         /* PROCESS */
    const char *str1;      /* MODULE path, PROCESS exe; EXTENSION: the label / message / op /
                              pool name of known types, the payload after dts of unknown ones */
    size_t len1;
    const char *str2; /* PROCESS cmd (NUL-separated argv) */
    size_t len2;
};

/* Reads the records of one chunk in order. A packed chunk is decoded into a buffer the cursor
 * owns: zero a cursor before its first ms_trace_cursor_init() and call ms_trace_cursor_release()
 * when done with it (ms_trace_cursor_init() releases the previous chunk's buffer itself). */
struct ms_trace_cursor {
    const uint8_t *p, *end;
    uint64_t prev_ns, prev_addr;
    uint32_t tid, thread_serial;
    int failed;
    int damaged_tail; /* the packed chunk ended in damage: report it after its records */
    uint8_t *own;     /* decoded records of a packed chunk, or NULL */
    uint64_t pcs[2 * MS_TRACE_MAX_DEPTH];
};

/* Positions c at the first record of chunk. Decoding a packed chunk may fail for damage (its
 * records up to the damage are returned, then MS_EFORMAT) or for lack of memory (no records,
 * then MS_ENOMEM: the chunk is not damaged, and a reader must fail rather than skip it). */
void ms_trace_cursor_init(struct ms_trace_cursor *c, const struct ms_trace *t, size_t chunk);

/* Frees the cursor's decoded buffer, if any. Accepts a zeroed cursor. */
void ms_trace_cursor_release(struct ms_trace_cursor *c);

/* Returns 1 with *r filled, 0 at the end of the chunk, MS_EFORMAT when the next record is
 * malformed (the cursor then stays at its end; the rest of the chunk is lost), or MS_ENOMEM
 * when a packed chunk could not be decoded for lack of memory. */
int ms_trace_cursor_next(struct ms_trace_cursor *c, struct ms_record *r);

/* A fast path for readers of many heap events: when the next record is a heap event in the
 * form the agent writes it (minimal varints; the ALIGNED bit set exactly when the address and
 * the one before it are both 16-byte aligned), reads it into *h and returns 1; otherwise returns
 * 0 and leaves the cursor as it was, for ms_trace_cursor_next() to read the record (or report
 * the damage). Such a record is exactly what ms_enc_alloc() / ms_enc_free() write for it from
 * the same delta state, byte for byte: the packer takes its length as it is. Inline: readers
 * call it once per event. */
static inline int ms_trace_cursor_next_heap(struct ms_trace_cursor *c, struct ms_heap_record *h)
{
    if (c->failed || c->p >= c->end)
        return 0;
    const uint8_t *p = c->p, *end = c->end;
    int type = *p++, base = type & ~MS_REC_F_ALIGNED16 & 0xf0;
    if ((base != MS_REC_HEAP_ALLOC || (type & 0x0f) >= MS_FN_HEAP_COUNT) &&
        (type & ~MS_REC_F_ALIGNED16) != MS_REC_HEAP_FREE)
        return 0; /* not a heap event: ms_trace_cursor_next() reads it */
    _Static_assert(MS_REC_F_ALIGNED16 == 0x40, "the shift below");
    uint64_t dt, z, size = 0, stack = 0;
    /* on a local pointer, so that it stays in a register; the cursor moves only on success */
    if (ms_get_varint_x(&p, end, &dt, 1) || ms_get_varint_x(&p, end, &z, 1) ||
        (base == MS_REC_HEAP_ALLOC && (ms_get_varint_x(&p, end, &size, 1) ||
                                       ms_get_varint_x(&p, end, &stack, 1) || stack > UINT32_MAX)))
        return 0; /* malformed or not minimal: ms_trace_cursor_next() reads it */
    unsigned aligned = (unsigned)(type & MS_REC_F_ALIGNED16) >> 6; /* 1: in units of 16 */
    uint64_t addr = c->prev_addr + ((uint64_t)ms_unzigzag(z) << (aligned * 4));
    if (aligned != (((addr | c->prev_addr) & 15) == 0))
        return 0; /* a form the agent does not write: ms_trace_cursor_next() reads it */
    c->p = p;
    c->prev_ns += dt;
    c->prev_addr = addr;
    h->type = type & ~MS_REC_F_ALIGNED16;
    h->ns = c->prev_ns;
    h->addr = addr;
    h->size = size;
    h->stack_id = (uint32_t)stack;
    return 1;
}

/* Reads one thread's records across its chunks, in order. */
struct ms_trace_stream {
    const struct ms_trace *t;
    size_t chunk; /* current chunk index */
    size_t end;   /* one past this thread's last chunk */
    struct ms_trace_cursor cur;
};

/* Starts a stream at chunk index first; returns the index one past the thread's last chunk,
 * where the next thread's stream starts. A stream frees its buffers when it reaches its end;
 * one abandoned before that is freed with ms_trace_cursor_release(&s->cur). */
size_t ms_trace_stream_init(struct ms_trace_stream *s, struct ms_trace *t, size_t first);

/* Returns 1 with *r filled, 0 at the end of the thread, or MS_ENOMEM when a packed chunk could
 * not be decoded for lack of memory (the stream ends there: the reader must fail). A damaged
 * chunk is counted in t->damaged_chunks and skipped; the stream goes on with the next chunk. */
int ms_trace_stream_next(struct ms_trace_stream *s, struct ms_record *r);

#endif
