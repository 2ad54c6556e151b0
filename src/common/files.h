/* files.h: how memscope creates and replaces files (docs/cli.md, "Files"). Every file memscope
 * creates is new (O_EXCL) and never reached through a symbolic link (O_NOFOLLOW), so a link
 * planted in a shared directory cannot make memscope write someone else's file; files are
 * readable by their owner only (0600, directories 0700): traces and databases hold argv, the
 * working directory and stacks. Every file memscope removes is one it created in this process. */
#ifndef MS_FILES_H
#define MS_FILES_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

/* Creates path, which must not exist, for writing (0600): a descriptor, or -errno. */
int ms_file_create(const char *path);

/* Writing an output file without ever destroying what was there, nor anything reached through
 * a link: into a new temporary file beside it (ms_temp_create), renamed over it when complete.
 * A symbolic link at path is replaced, never followed. Only a target the user named directly
 * is written in place: /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N (the open
 * descriptor, duplicated), or an existing device or FIFO that is itself at path (not a link
 * to one): never replaced nor removed. */
struct ms_output {
    char tmp[PATH_MAX + 64]; /* the temporary file, "" when writing in place */
    const char *path;
    int fd;
};

/* Opens the output; 0 (o->fd to write to) or -errno (-EISDIR for a directory). */
int ms_output_open(struct ms_output *o, const char *path);
/* Closes o->fd (if still open) and renames the temporary file over the target; 0 or -errno
 * (the temporary file is then removed, the target left as it was). */
int ms_output_commit(struct ms_output *o);
/* Closes o->fd and removes the temporary file: the target is left as it was. */
void ms_output_abort(struct ms_output *o);

/* Creates a new temporary file beside path, "<path><tag><pid>.<16 random hex digits>" (named in
 * buf, len bytes), for writing, 0600, O_EXCL and O_NOFOLLOW: no other process can guess the
 * name ahead, and a link planted at it is never followed (the pid lets a parent find what a
 * crashed child left). The descriptor, or -errno (-ENAMETOOLONG when the name does not fit in
 * buf). The file is on the cleanup list (below) until the caller renames or removes it and
 * calls ms_cleanup_forget(buf). */
int ms_temp_create(char *buf, size_t len, const char *path, const char *tag);

/* mkdtemp(tmpl) (0700, random), the directory then on the cleanup list until the caller
 * removes it and calls ms_cleanup_forget(tmpl); tmpl, or NULL with errno set. */
char *ms_temp_dir_create(char *tmpl);

/* The cleanup list: the temporary files and directories this process made and has not yet
 * renamed or removed, and the children working for it, so that a signal that ends memscope
 * (SIGINT, SIGTERM, SIGHUP: the CLI's handler calls ms_cleanup_run) leaves nothing behind.
 * At most MS_CLEANUP_MAX paths and children at once (past that, not removed on a signal). */
#define MS_CLEANUP_MAX 32
void ms_cleanup_add(const char *path, int is_dir);
void ms_cleanup_forget(const char *path);
void ms_cleanup_add_child(pid_t pid);
void ms_cleanup_forget_child(pid_t pid);
/* Empties the list (a forked child: its parent's entries are not its own). */
void ms_cleanup_reset(void);
/* Async-signal-safe: sends SIGTERM to each child on the list and waits for it (it removes its
 * own), then removes each path (a directory with what is in it, two levels deep). */
void ms_cleanup_run(void);

/* A name as ms_temp_create's that does not exist yet, for a caller that creates the file
 * itself with O_EXCL|O_NOFOLLOW; 0, -ENAMETOOLONG or -EEXIST. */
int ms_temp_name(char *buf, size_t len, const char *path, const char *tag);

/* Where memscope makes its private temporary directories (the viewer's conversion, a compact
 * database's expansion and replay): $TMPDIR when it names a directory this process can write
 * and search, else /tmp (the CLI says so when it starts). Never NULL. */
const char *ms_tmp_dir(void);

/* SQLite's unix VFS opens a database whose absolute path and "-journal" fit in its
 * MAX_PATHNAME, 512 bytes (measured: a 504-byte path opens, 505 bytes does not). */
#define MS_SQLITE_PATH_MAX 512
/* 0 when a database can be written at path (its temporary name, made absolute, fits SQLite's
 * limit), else -ENAMETOOLONG: checked before a run starts its program. */
int ms_db_path_check(const char *path);

#endif
