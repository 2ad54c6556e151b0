/* import.c: writes a loaded snapshot as a memscope database (docs/database.md). */
#include "snapshot.h"

#include "error.h"

#include <stdio.h>

int ms_snapshot_write_db(const struct ms_snapshot *s, const char *source_path,
                         const char *db_path, char *err, size_t errlen)
{
    (void)s;
    (void)source_path;
    (void)db_path;
    snprintf(err, errlen, "not implemented yet");
    return MS_EINVAL;
}
