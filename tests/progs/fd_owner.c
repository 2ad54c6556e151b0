/* fd_owner: programs whose descriptors the agent must leave alone (issue 24, items 1-3).
 *
 *   fd_owner fork900 DIR     closes every descriptor above 2 (close_range, the daemon idiom),
 *                            opens files in DIR until it holds descriptor 900 (where the agent
 *                            keeps its trace file), forks; the child writes to 900 and exits 0
 *                            when the write works. Prints "fork900 ok" when the child did.
 *   fd_owner std DIR         reopens 0, 1 and 2 as its own data files in DIR, writes "data",
 *                            then lowers its file-size limit so that the agent cannot record
 *                            (it stops and says so) and allocates. Exit 0 when its files hold
 *                            exactly what it wrote, 12 otherwise (nothing printed: stdout is a
 *                            data file).
 *   fd_owner first           prints the descriptor its first open() gets ("first fd N"): the
 *                            same under memscope as without (under a low RLIMIT_NOFILE too).
 * Run by tests/integration/test_fd_owner.sh; each prints or exits the same without memscope. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int fork900(const char *dir)
{
    for (int i = 0; i < 1000; i++)
        free(malloc(100));
    syscall(SYS_close_range, 3u, ~0u, 0u);
    char path[4096];
    int fd = -1;
    for (int i = 0; fd < 900; i++) {
        snprintf(path, sizeof path, "%s/f%d", dir, i);
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            return 1;
    }
    if (fd != 900)
        return 1;
    pid_t pid = fork();
    if (pid == 0)
        _exit(write(900, "child\n", 6) == 6 ? 0 : 1);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 1;
    printf("fork900 ok\n");
    return 0;
}

static int std(const char *dir)
{
    char path[4096];
    for (int fd = 0; fd < 3; fd++) {
        snprintf(path, sizeof path, "%s/std%d", dir, fd);
        int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (f < 0 || dup2(f, fd) != fd)
            return 1;
        close(f);
        if (write(fd, "data", 4) != 4)
            return 1;
    }
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1 << 16, 1 << 16};
    setrlimit(RLIMIT_FSIZE, &rl);
    for (int i = 0; i < 200000; i++)
        free(malloc(1000));
    for (int fd = 0; fd < 3; fd++) {
        char buf[64] = {0};
        if (lseek(fd, 0, SEEK_END) != 4 || pread(fd, buf, sizeof buf, 0) != 4 || strcmp(buf, "data"))
            return 12;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "fork900"))
        return fork900(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "std"))
        return std(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "first")) {
        int fd = open("/dev/null", O_RDONLY);
        printf("first fd %d\n", fd);
        return fd >= 0 ? 0 : 1;
    }
    return 2;
}
