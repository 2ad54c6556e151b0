/* pin.h: a database file held by its descriptor (pin.c), so that replacing the file at its path
 * while `memscope view` runs changes nothing the viewer reads. */
#ifndef MS_VIEW_PIN_H
#define MS_VIEW_PIN_H

#include <stddef.h>

/* Opens the regular file at path and sets out (outlen bytes) to a name of that open file,
 * "/proc/self/fd/N", which every later sqlite3_open of this process reads as the file opened
 * here, whatever happens at path. Returns the descriptor (the caller closes it after the last
 * database connection to out), or a negative code: path is no regular file, cannot be opened,
 * or the process has no /proc (the caller then reads path itself, as before). */
int ms_view_pin(const char *path, char *out, size_t outlen);

#endif
