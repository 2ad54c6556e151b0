/* inject.h: calling functions inside another running process with ptrace (x86-64 Linux), for
 * `memscope attach` (cmd_attach.c): the checks that refuse a process before it is touched,
 * the lookup of a library's dynamic symbol in it, and the call itself, made by one of its
 * threads at a moment when that thread holds no lock of the C library. No gdb, no signal sent:
 * PTRACE_SEIZE and PTRACE_INTERRUPT only. */
#ifndef MS_CLI_INJECT_H
#define MS_CLI_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#define INJECT_MAX_RANGES 64

/* A process being injected into. Caller's struct: inject_open() fills it, inject_close()
 * releases it (a seized thread is let go first). */
struct inject {
    pid_t pid;
    int mem_fd; /* /proc/PID/mem, -1 when closed */
    /* executable ranges of the C library, the dynamic loader and memscope's agent: a thread
     * whose instruction pointer is in one of them may hold their locks */
    uintptr_t unsafe[INJECT_MAX_RANGES][2];
    int nunsafe;
    /* the seized thread (tid 0: none), its registers and signal mask as found */
    pid_t tid;
    struct user_regs_struct saved;
    uint64_t saved_mask;
    uintptr_t scratch; /* next free byte below the thread's stack (grows down) */
    /* how the last inject_seize went: threads tried, looks at them, and the moment taken */
    int tries, looks, in_syscall;
};

/* Refuses what must not be touched, before anything is: a process that does not exist, has
 * exited, is stopped (state T), is traced already, runs under a seccomp filter, lives in another PID namespace, belongs to
 * another user without CAP_SYS_PTRACE, or that the Yama ptrace scope keeps from memscope.
 * Returns 0, or -1 with the reason (a sentence naming the pid) in why. */
int inject_check(pid_t pid, char *why, size_t len);

/* Whether pid has ended (gone, or a zombie its parent has not reaped yet). */
int inject_process_gone(pid_t pid);

/* Opens pid for injection (its memory, the ranges above). 0, or -1 with why. */
int inject_open(struct inject *in, pid_t pid, char *why, size_t len);
void inject_close(struct inject *in);

/* The address in the process of the dynamic symbol name (a function) of the loaded object
 * whose file name starts with prefix (e.g. "libc.so."); or of the object whose path is
 * exactly path when prefix is NULL. Read from the object's file (checked to be the mapped one:
 * same device and inode). 0 and *addr, -ENOENT when the object is not loaded, -ESRCH when it
 * does not define name, or another negative code, with why. */
int inject_symbol(struct inject *in, const char *prefix, const char *path, const char *name,
                  uintptr_t *addr, char *why, size_t len);

/* Whether an object whose file name starts with prefix is loaded that is not the file path
 * (another device or inode); its path goes to found. */
int inject_other_object(struct inject *in, const char *prefix, const char *path, char *found,
                        size_t len);

/* Whether the object whose path is path (the same file: device and inode) is loaded. */
int inject_has_object(struct inject *in, const char *path);

/* Seizes a thread of the process at a moment it is safe to call into the C library from:
 * blocked in a system call that waits (sleep, poll, a condition variable, a read from a pipe
 * or socket ...) or running code outside the C library, the dynamic loader and the agent. The
 * other threads run on. Tries each thread for at most timeout_s seconds in all. 0, or -1 with
 * why (the process ended, could not be traced, or had no safe moment). */
int inject_seize(struct inject *in, double timeout_s, char *why, size_t len);

/* Copies n bytes into the seized thread's stack, below what it uses; *addr gets their address
 * (16-byte aligned). 0 or -1 with why. Valid until inject_release(). */
int inject_write(struct inject *in, const void *data, size_t n, uintptr_t *addr, char *why,
                 size_t len);

/* Reads up to n - 1 bytes of the string at addr of the process into buf (NUL-terminated). */
void inject_read_string(struct inject *in, uintptr_t addr, char *buf, size_t n);

/* Makes the seized thread call fn(args[0], ..., args[nargs - 1]) (nargs <= 6) with every
 * signal blocked but the ones a fault raises, and waits up to timeout_s seconds for it to
 * return (*ret: its rax). 0, or -1 with why (the process ended, the call faulted or did not
 * return in time: the thread's registers are then put back as they were anyway). */
int inject_call(struct inject *in, uintptr_t fn, const uint64_t *args, int nargs, uint64_t *ret,
                double timeout_s, char *why, size_t len);

/* Puts the seized thread's registers and signal mask back as they were found and lets it go
 * (it goes on exactly where it was: a system call it was waiting in is restarted). */
void inject_release(struct inject *in);

#endif
