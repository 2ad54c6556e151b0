/* close_fds: a daemon-like program that closes every descriptor it did not open (the
 * agent's trace file among them) and opens a log file, which may get the same number.
 *
 *   close_fds LOGFILE
 *
 * Then it allocates enough for the agent to need new trace space. The agent must notice that
 * its descriptor is gone and stop recording, never write into the log. Prints what the log
 * holds ("log ok: hello" when untouched). Run by tests/integration/test_cannot_record.sh. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    for (int i = 0; i < 1000; i++)
        free(malloc(100));
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "hello", 5) != 5)
        return 1;
    for (int i = 0; i < 200000; i++)
        free(malloc(1000));
    char buf[64] = {0};
    off_t size = lseek(fd, 0, SEEK_END);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    printf("log %s: %s\n", size == 5 && n == 5 ? "ok" : "CHANGED", buf);
    return 0;
}
