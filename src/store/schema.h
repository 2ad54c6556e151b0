/* schema.h: the SQL of the memscope database (docs/database.md), shared by the converter
 * (convert.c) and the CSV export (export.c). */
#ifndef MS_STORE_SCHEMA_H
#define MS_STORE_SCHEMA_H

#include "db_ids.h" /* the format version, layer and kind ids */

/* Tables, fixed rows and the memscope_dump view; run before loading. */
extern const char ms_schema_sql[];
/* Indexes. The converter runs them before loading: they are partial or on small tables, so
 * keeping them up to date costs less than reading the events table again to build them. */
extern const char ms_schema_index_sql[];

#endif
