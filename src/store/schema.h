/* schema.h: the SQL of the memscope database (docs/database.md), shared by the converter
 * (convert.c) and the CSV export (export.c). */
#ifndef MS_STORE_SCHEMA_H
#define MS_STORE_SCHEMA_H

#include "common/db_ids.h" /* the format version, layer and kind ids */

/* Tables and fixed rows; run before loading. */
extern const char ms_schema_sql[];
/* Indexes. The converter runs them before loading: they are partial or on small tables, so
 * keeping them up to date costs less than reading the events table again to build them. */
extern const char ms_schema_index_sql[];

/* msMemScope's memscope_dump: its DDL, and the SELECT of its rows from the tables above, to
 * which callers append "AND <condition>" and an ORDER BY (dump.c). */
extern const char ms_dump_ddl[];
extern const char ms_dump_select[];

#endif
