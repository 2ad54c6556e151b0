/* embed.h: the traces of a run inside its compact database (table trace_files,
 * docs/database.md), and back out.
 *
 * The compact database keeps the event-level detail as the packed traces themselves (about
 * 2.7 bytes per event): the conversion packs each raw trace on other threads while it reads the
 * same files (ms_embed_start), then stores the packed files in trace_files (ms_embed_finish).
 * ms_embed_extract writes them back to a directory, from which the usual conversion makes the
 * full database (`memscope export --format=db`, analyses that need every event). */
#ifndef MS_STORE_EMBED_H
#define MS_STORE_EMBED_H

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>

/* Bytes per trace_files row: a file is cut into parts so that no row needs a huge buffer. */
#define MS_EMBED_PART (4u << 20)

struct ms_embed {
    char **paths;  /* the raw traces (and PyTorch allocator pickles), absolute */
    char **packed; /* what to store for each: the packed copy, or paths[i] itself */
    size_t n;
    char *work_dir; /* the directory of the packed copies (ours: removed at the end) */
    pthread_t thread;
    int started;
    int rc; /* the packing thread's result */
    char err[256];
};

/* Starts packing the n files at paths (copied) into a new private directory beside db_path on
 * another thread; files that are not raw traces (already packed, pickles) are stored as they
 * are. Returns 0 or a negative code with a reason in err. */
int ms_embed_start(struct ms_embed *e, const char *const *paths, size_t n, const char *db_path,
                   char *err, size_t errlen);

/* Waits for the packing and writes every file into trace_files of db (inside the caller's
 * transaction): name = the file name, part = 0, 1, ... Returns 0 or a negative code with err. */
int ms_embed_finish(struct ms_embed *e, sqlite3 *db, char *err, size_t errlen);

/* Waits for the packing thread if it runs and removes what it created; safe to call twice. */
void ms_embed_release(struct ms_embed *e);

/* Writes the trace_files of db into the existing empty directory dir. Returns the number of
 * files written, 0 when db has no trace_files (a full database), or a negative code with err.
 * File names are checked (no '/', not "." or ".."): a hostile database writes nothing else. */
int ms_embed_extract(sqlite3 *db, const char *dir, char *err, size_t errlen);

#endif
