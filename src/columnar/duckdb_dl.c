/* duckdb_dl.c: loads DuckDB's C library with dlopen (duckdb_dl.h says where it looks and why).
 * Called once by each command that writes or reads the Parquet tables; costs a dlopen (the
 * library is 64 MB, mapped, not read). */
#include "duckdb_dl.h"

#include "common/ms_error.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOW_TO_GET                                                                          \
    "DuckDB's C library is needed for this (docs/columnar.md): scripts/setup-debian.sh "    \
    "installs it (npm ci in third_party/duckdb), or set MEMSCOPE_DUCKDB to a libduckdb.so " \
    "(DuckDB's release archive libduckdb-linux-*.zip, conda-forge or Homebrew: version 1.4)"

void ms_duckdb_release(struct ms_duckdb *d)
{
    if (d && d->handle)
        dlclose(d->handle);
    if (d)
        memset(d, 0, sizeof *d);
}

#ifndef MEMSCOPE_HAVE_DUCKDB_H
int ms_duckdb_load(struct ms_duckdb *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    snprintf(err, errlen,
             "this memscope was built without DuckDB's header duckdb.h (run "
             "scripts/setup-debian.sh, then build again). " HOW_TO_GET);
    return MS_ENOTFOUND;
}
#else

#ifndef MEMSCOPE_DUCKDB_DEFAULT
#define MEMSCOPE_DUCKDB_DEFAULT ""
#endif

int ms_duckdb_load(struct ms_duckdb *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    const char *env = getenv("MEMSCOPE_DUCKDB");
    const char *tried[3] = {NULL, NULL, NULL};
    int n = 0;
    if (env && env[0])
        tried[n++] = env;
    else {
        if (MEMSCOPE_DUCKDB_DEFAULT[0])
            tried[n++] = MEMSCOPE_DUCKDB_DEFAULT;
        tried[n++] = "libduckdb.so";
    }
    const char *why = "";
    for (int i = 0; i < n && !d->handle; i++) {
        d->handle = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
        if (!d->handle)
            why = dlerror();
    }
    if (!d->handle) {
        snprintf(err, errlen, "cannot load %s%s%s (%s). " HOW_TO_GET, tried[0], n > 1 ? " or " : "",
                 n > 1 ? tried[n - 1] : "", why ? why : "");
        return MS_ENOTFOUND;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
#define SYM(f)                       \
    {                                \
        (void **)&d->f, "duckdb_" #f \
    }
        SYM(open),
        SYM(close),
        SYM(connect),
        SYM(disconnect),
        SYM(query),
        SYM(result_error),
        SYM(destroy_result),
        SYM(column_count),
        SYM(row_count),
        SYM(column_name),
        SYM(column_type),
        SYM(value_varchar),
        SYM(value_is_null),
        SYM(free),
        SYM(appender_create),
        SYM(appender_error),
        SYM(appender_end_row),
        SYM(appender_destroy),
        SYM(append_int64),
        SYM(append_double),
        SYM(append_null),
        SYM(append_varchar_length),
        SYM(library_version),
#undef SYM
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(d->handle, syms[i].name);
        if (!*syms[i].fn) {
            snprintf(err, errlen,
                     "%s has no %s: not DuckDB's C library of version 1.x. " HOW_TO_GET,
                     env && env[0] ? env : "libduckdb.so", syms[i].name);
            ms_duckdb_release(d);
            return MS_ENOTFOUND;
        }
    }
    return 0;
}
#endif
