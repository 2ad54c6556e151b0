/* error.c: messages for the project's error codes (see error.h). Called by the CLI only. */
#include "ms_error.h"

#include <string.h>

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
