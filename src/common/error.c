/* error.c: the project's error reasons (ms_errf) and the messages of its error codes (ms_strerror,
 * called by the CLI only); see ms_error.h. */
#include "ms_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ms_errf(char *err, size_t len, int rc, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *ms_strerror(int code)
{
    switch (code) {
    case MS_OK: return "success";
    case MS_ENOMEM: return "out of memory or over a size cap";
    case MS_EFORMAT: return "malformed input";
    case MS_ETRUNC: return "input is truncated";
    case MS_EVERSION: return "written by a newer format version";
    case MS_ELIMIT: return "input exceeds a hard limit";
    case MS_EINVAL: return "invalid argument";
    case MS_EIO: return "input/output error";
    case MS_EDB: return "database error";
    case MS_ENOTFOUND: return "not found";
    case MS_EREFUSED: return "refused: input asks for code execution";
    default: break;
    }
    if (code < 0 && code > MS_EBASE)
        return strerror(-code);
    return "unknown error";
}

static volatile int oom_seen;

void ms_oom_note(void)
{
    oom_seen = 1;
}

int ms_oom_seen(void)
{
    return oom_seen;
}
