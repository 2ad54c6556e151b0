/* error.h: the project's one error convention.
 *
 * Every library function returns 0 on success or a negative MS_E* code (or a negative errno
 * value, which ms_strerror() also explains). Only the CLI prints and exits. */
#ifndef MS_ERROR_H
#define MS_ERROR_H

#include <stddef.h>

enum {
    MS_OK = 0,
    MS_EBASE = -1000,
    MS_ENOMEM = -1001,    /* an allocation failed or a cap was reached */
    MS_EFORMAT = -1002,   /* input bytes are not what the format says */
    MS_ETRUNC = -1003,    /* input ends before the structure does */
    MS_EVERSION = -1004,  /* input was written by a newer, unknown format version */
    MS_ELIMIT = -1005,    /* input exceeds a hard cap (depth, size, count) */
    MS_EINVAL = -1006,    /* bad argument or option value */
    MS_EIO = -1007,       /* read, write or open failed (see errno-based codes too) */
    MS_EDB = -1008,       /* SQLite reported an error */
    MS_ENOTFOUND = -1009, /* a named thing does not exist */
    MS_EREFUSED = -1010,  /* input asks for something we never do (e.g. a pickle that imports) */
};

/* Writes the reason of a failure, formatted as printf does, into err (len bytes; nothing when
 * err is NULL or len 0) and returns rc: `return ms_errf(err, errlen, MS_EIO, "cannot read %s",
 * path);` is the one way a function that takes an error buffer fails. */
int ms_errf(char *err, size_t len, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Returns a static English message for code (an MS_E* value or a negative errno). */
const char *ms_strerror(int code);

/* An allocation failed where a caller may have taken the failure for "not there": SQLite reports
 * each failed allocation through its log (the CLI's callback calls ms_oom_note), after which a
 * query can look empty. A command that saw one never commits an output (ms_output_commit, the
 * conversion's and the snapshot import's renames) and fails with MS_ENOMEM. */
void ms_oom_note(void);
int ms_oom_seen(void);

#endif
