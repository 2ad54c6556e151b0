/* duckdb_dl.h: DuckDB's C library, loaded with dlopen when a command needs it (the Parquet
 * output, `memscope sql`, `memscope ranks`: docs/columnar.md). memscope builds and runs without
 * it: only these commands need it, and they say how to get it.
 *
 * Where the library is looked for, in order: $MEMSCOPE_DUCKDB (a path to libduckdb.so); the
 * copy scripts/setup-debian.sh installs with npm under third_party/duckdb (its path compiled in
 * when the build found it); libduckdb.so on the loader's path (ldconfig, LD_LIBRARY_PATH).
 * The types come from duckdb.h of the same version (third_party/duckdb: the build finds it;
 * without it the loader reports that memscope was built without DuckDB's header). */
#ifndef MS_DUCKDB_DL_H
#define MS_DUCKDB_DL_H

#include <stddef.h>
#include <stdint.h>

#ifdef MEMSCOPE_HAVE_DUCKDB_H
#include <duckdb.h>

/* The functions memscope calls, resolved from the library (same names without "duckdb_"). */
struct ms_duckdb {
    void *handle;
    __typeof__(duckdb_open) *open;
    __typeof__(duckdb_close) *close;
    __typeof__(duckdb_connect) *connect;
    __typeof__(duckdb_disconnect) *disconnect;
    __typeof__(duckdb_query) *query;
    __typeof__(duckdb_result_error) *result_error;
    __typeof__(duckdb_destroy_result) *destroy_result;
    __typeof__(duckdb_column_count) *column_count;
    __typeof__(duckdb_row_count) *row_count;
    __typeof__(duckdb_column_name) *column_name;
    __typeof__(duckdb_column_type) *column_type;
    __typeof__(duckdb_value_varchar) *value_varchar;
    __typeof__(duckdb_value_is_null) *value_is_null;
    __typeof__(duckdb_free) *free;
    __typeof__(duckdb_appender_create) *appender_create;
    __typeof__(duckdb_appender_error) *appender_error;
    __typeof__(duckdb_appender_end_row) *appender_end_row;
    __typeof__(duckdb_appender_destroy) *appender_destroy;
    __typeof__(duckdb_append_int64) *append_int64;
    __typeof__(duckdb_append_double) *append_double;
    __typeof__(duckdb_append_null) *append_null;
    __typeof__(duckdb_append_varchar_length) *append_varchar_length;
    __typeof__(duckdb_library_version) *library_version;
};
#else
struct ms_duckdb {
    void *handle;
};
#endif

/* Loads the library into d (the caller's struct). Returns 0, or MS_ENOTFOUND with a message in
 * err that says where it looked and how to install it (or that this memscope was built without
 * duckdb.h). d is released by ms_duckdb_release (dlclose) either way. */
int ms_duckdb_load(struct ms_duckdb *d, char *err, size_t errlen);
void ms_duckdb_release(struct ms_duckdb *d);

#endif
