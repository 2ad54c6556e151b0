/* bytes.h: fixed-size integers in the byte order of the files memscope writes (the host's:
 * x86-64, little-endian), at any alignment. Header-only; shared by the file formats of
 * src/common (the usage monitor's samples and pagemap walks) and the trace follower. */
#ifndef MS_BYTES_H
#define MS_BYTES_H

#include <stdint.h>
#include <string.h>

static inline void ms_put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static inline void ms_put64(unsigned char *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static inline uint32_t ms_get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t ms_get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#endif
