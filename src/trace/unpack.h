/* unpack.h: the decoder of one packed chunk (format version 2, see pack.h), used by the reader
 * (reader.c) and by the fuzz target of the decoder. */
#ifndef MS_TRACE_UNPACK_H
#define MS_TRACE_UNPACK_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one packed chunk's payload (len bytes at in) whose first record's time delta is taken
 * from base_ns. Writes the records in version-1 encoding (delta state starting at base_ns and
 * address 0, as in a raw chunk) into out, which has room for `want` bytes: exactly what the
 * chunk header promises. Returns the number of bytes written; *damaged is set to 1 when the
 * payload is malformed or ends early, in which case the bytes written are the whole records
 * decoded before the damage. Input is treated as hostile: every table index and size is
 * checked, and decoding never reads outside [in, in + len) nor writes past out + want. */
/* *damaged: 0, 1 (damage: the records before it were returned), or MS_PACK_OOM (no memory to
 * decode with: nothing returned, and nothing is wrong with the chunk). */
#define MS_PACK_OOM 2
size_t ms_pack_decode(const uint8_t *in, size_t len, uint64_t base_ns, uint8_t *out, size_t want,
                      int *damaged);

#endif
