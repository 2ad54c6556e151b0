/* db_schema.h: the SQL of the memscope database (docs/database.md), beside its vocabulary
 * (db_ids.h): the tables, their indexes and msMemScope's memscope_dump. One text for every
 * writer of a database: the converter (src/store/convert_rows.c), the CSV export and the dump
 * (src/store), and the snapshot import (src/snapshot/import.c). */
#ifndef MS_DB_SCHEMA_H
#define MS_DB_SCHEMA_H

#include "common/db_ids.h" /* the format version, layer and kind ids */

/* Tables and fixed rows; run before loading. */
extern const char ms_schema_sql[];
/* Indexes. The converter runs them before loading: they are partial or on small tables, so
 * keeping them up to date costs less than reading the events table again to build them. */
extern const char ms_schema_index_sql[];

/* msMemScope's memscope_dump: its DDL, and the SELECT of its rows from the tables above, to
 * which callers append "AND <condition>" and an ORDER BY (src/store/dump.c). */
extern const char ms_dump_ddl[];
extern const char ms_dump_select[];

/* The DDL of memscope_dump and the INSERT that fills it from events, as one SQL text
 * (malloc'ed; NULL when out of memory), for a writer that runs SQL (the snapshot import). */
char *ms_dump_create_sql(void);

#endif
