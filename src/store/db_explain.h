/* db_explain.h: why a file is not a readable memscope database, in words, for the messages of
 * the commands that read one (analyze, plot, export, view, report). */
#ifndef MS_STORE_DB_EXPLAIN_H
#define MS_STORE_DB_EXPLAIN_H

#include <stddef.h>

/* What the file at path is, for a message about a file that is not what was asked: "a
 * directory", "an empty file", "a text file", "a pickle", "a JSON
 * file", "a memscope trace file", "an SQLite database", "binary data", or "unreadable". A static
 * string. Reads at most the file's first 512 bytes. */
const char *ms_file_kind(const char *path);

/* Why path, which did not open as a memscope database, is not one, into err (errlen bytes):
 * "'run.db' is damaged: truncated to 30000 of its 557056 bytes (a copy or write cut short)",
 * "'run.db' is damaged (SQLite: database disk image is malformed)", "'x.db' is not a
 * memscope database: it is an SQLite database without memscope's meta table", "'notes.txt' is
 * not a memscope database: it is a text file". Returns MS_EFORMAT (MS_ENOTFOUND when it cannot be opened). */
int ms_db_explain(const char *path, char *err, size_t errlen);

#endif
