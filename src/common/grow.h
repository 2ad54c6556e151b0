/* grow.h: the one way memscope's readers grow an array: capacity doubled from a first size, up
 * to a cap on the element count, the byte count at most PTRDIFF_MAX (no overflow). Hostile
 * input (a trace, a database, a pickle) then meets a clear MS_ENOMEM instead of an unbounded
 * realloc. */
#ifndef MS_GROW_H
#define MS_GROW_H

#include <stddef.h>

/* Elements an array may hold when its owner sets no tighter cap. */
#define MS_GROW_MAX ((size_t)1 << 28)

/* Makes room for element n (0-based) in the array *a of capacity *cap elements of elem bytes:
 * nothing when n < *cap, else the capacity doubles (first elements at first) up to max. Returns
 * 0, or MS_ENOMEM when n >= max or the allocation fails (*a and *cap then unchanged). */
int ms_grow(void **a, size_t *cap, size_t n, size_t elem, size_t first, size_t max);

#endif
