/* files.h: how memscope creates and replaces files (docs/cli.md, "Files"). Every file memscope
 * creates is new (O_EXCL) and never reached through a symbolic link (O_NOFOLLOW), so a link
 * planted in a shared directory cannot make memscope write someone else's file; files are
 * readable by their owner only (0600, directories 0700): traces and databases hold argv, the
 * working directory and stacks. Every file memscope removes is one it created in this process. */
#ifndef MS_FILES_H
#define MS_FILES_H

#include <limits.h>
#include <stddef.h>

/* Creates path, which must not exist, for writing (0600): a descriptor, or -errno. */
int ms_file_create(const char *path);

/* Writing an output file without ever destroying what was there: into a new temporary file
 * beside it, renamed over it when complete. A target that exists and is not a regular file
 * (a device such as /dev/full or /dev/stdout, a FIFO) is written in place instead, never
 * replaced nor removed. */
struct ms_output {
    char tmp[PATH_MAX + 64]; /* the temporary file, "" when writing in place */
    const char *path;
    int fd;
};

/* Opens the output; 0 (o->fd to write to) or -errno. */
int ms_output_open(struct ms_output *o, const char *path);
/* Closes o->fd (if still open) and renames the temporary file over the target; 0 or -errno
 * (the temporary file is then removed, the target left as it was). */
int ms_output_commit(struct ms_output *o);
/* Closes o->fd and removes the temporary file: the target is left as it was. */
void ms_output_abort(struct ms_output *o);

/* A temporary name beside path for this process: "<path><tag><pid>.<n>" in buf (len bytes)
 * that does not exist yet; 0 or -ENAMETOOLONG. The caller creates it with ms_file_create. */
int ms_temp_name(char *buf, size_t len, const char *path, const char *tag);

#endif
