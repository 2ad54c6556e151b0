/* grow.c: see grow.h. */
#include "grow.h"

#include "ms_error.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int ms_grow(void **a, size_t *cap, size_t n, size_t elem, size_t first, size_t max)
{
    if (n < *cap)
        return 0;
    if (n >= max || elem == 0)
        return MS_ENOMEM;
    size_t nc = *cap ? *cap : (first ? first : 1);
    while (nc <= n)
        nc = nc > max / 2 ? max : nc * 2;
    if (nc > max)
        nc = max;
    if (nc > PTRDIFF_MAX / elem) /* no object is larger */
        return MS_ENOMEM;
    void *b = realloc(*a, nc * elem);
    if (!b)
        return MS_ENOMEM;
    *a = b;
    *cap = nc;
    return 0;
}
