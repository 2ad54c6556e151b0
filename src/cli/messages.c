/* messages.c: how the memscope command speaks on stderr (cli.h): errors ("memscope: ..."),
 * usage errors (with the hint to --help, exit status 2) and the log at --log-level. Only the
 * CLI prints; the layers below return codes and reasons. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>

int cli_log_level = 1;

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memscope: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("memscope: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see memscope --help)\n", stderr);
    va_end(ap);
    return 2;
}

void cli_log(int level, const char *fmt, ...)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    if (level < cli_log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "memscope [%s]: ", names[level < 0 ? 0 : level > 3 ? 3 : level]);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
