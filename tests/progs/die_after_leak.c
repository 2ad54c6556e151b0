/* die_after_leak: leaks, then dies abruptly, for checking that no recorded event is lost.
 *
 *   die_after_leak segv|abort|exit
 *
 * Run by tests/integration/test_crash.sh. Allocates 9 x 60001 bytes and 4 x 60007 bytes, frees
 * the 60007-byte blocks, prints "leaked" (flushed), then: segv dereferences NULL (status 139
 * under memscope, 128 + SIGSEGV), abort calls abort() (134), exit calls _exit(3) (3), skipping
 * atexit handlers and stdio flushing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) void *ms_progs_crash_alloc(size_t n)
{
    void *p = malloc(n);
    if (p)
        memset(p, 0x33, n);
    return p;
}

int main(int argc, char **argv)
{
    void *tmp[4];
    if (argc != 2)
        return 2;
    for (int i = 0; i < 9; i++)
        if (!ms_progs_crash_alloc(60001))
            return 1;
    for (int i = 0; i < 4; i++)
        if (!(tmp[i] = ms_progs_crash_alloc(60007)))
            return 1;
    for (int i = 0; i < 4; i++)
        free(tmp[i]);
    printf("leaked\n");
    fflush(stdout);
    if (!strcmp(argv[1], "segv")) {
        /* Restore the default action in case the runtime installed one. */
        signal(SIGSEGV, SIG_DFL);
        volatile int *volatile null = NULL;
        *null = 1;
    } else if (!strcmp(argv[1], "abort")) {
        abort();
    } else if (!strcmp(argv[1], "exit")) {
        _exit(3);
    }
    return 2;
}
