/* agent.h: internals shared by the files of libmemscope.so, the LD_PRELOAD agent.
 *
 * The agent records every heap and anonymous-mmap event of the process it is loaded into,
 * straight into a file-backed shared mapping (writer.c), so that what it recorded survives
 * the death of the process. It must never crash, deadlock or change the behaviour of its host:
 * no stdio, no libc malloc and no lock on the recording path; on any write failure it stops
 * recording and says so once on stderr. */
#ifndef MS_AGENT_H
#define MS_AGENT_H

#include "encode.h"
#include "format.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define AGENT_API __attribute__((visibility("default")))

/* Per-thread state. Lives in static TLS (initial-exec), so reading it never allocates. */
struct tstate {
    int guard;              /* nonzero while the agent itself runs on this thread */
    uint32_t generation;    /* agent generation (bumped in a forked child) this state is for */
    uint32_t tid;
    uint32_t serial;        /* process-unique thread number, never reused */
    uint32_t seq;           /* next chunk sequence number */
    uint32_t chunk_size;    /* size of the current chunk */
    uint8_t *chunk;         /* current chunk mapping, NULL when none */
    uint8_t *pos, *end;     /* free space of the current chunk */
    uint64_t last_ns;       /* last timestamp encoded by this thread */
    struct ms_enc_state enc;
    uintptr_t stack_lo, stack_hi; /* this thread's stack, for safe frame-pointer walks */
};

extern __thread struct tstate agent_tls __attribute__((tls_model("initial-exec")));

/* Global configuration and state, set up by agent_init(). */
struct agent_global {
    volatile int recording;   /* events are recorded (atomic reads) */
    int initialized;
    int broken;               /* recording stopped for good after an error */
    int fd;                   /* trace file */
    struct ms_trace_file_header *hdr; /* shared mapping of the file header */
    uint32_t generation;
    unsigned depth;           /* native stack depth, 0 = no stacks */
    int unwind_dwarf;         /* 1: unwind with .eh_frame (backtrace()), 0: frame pointers */
    unsigned flags;           /* MS_TRACE_F_* */
    uint32_t next_serial;     /* atomic */
    int file_lock;            /* spinlock for chunk reservation (rare) */
    char dir[4096];
};

extern struct agent_global agent;

/* agent.c: makes the thread-exit hook run for the calling thread (once it has a chunk). */
void agent_thread_register(void);

/* writer.c */
int writer_open(void);               /* opens this image's trace file; 0 or -errno */
void writer_after_fork_child(void);  /* drops the parent's file and mappings, opens a new one */
void writer_thread_exit(struct tstate *t);
/* Returns room for n bytes in the thread's chunk, or NULL (recording is then stopped). */
uint8_t *writer_reserve(struct tstate *t, size_t n);
/* Publishes the bytes written up to end. */
void writer_commit(struct tstate *t, uint8_t *end);
void writer_fail(const char *what, int err);
void writer_process_record(void);

/* stacks.c */
int stacks_init(void);             /* 0 or -errno */
void stacks_reset_after_fork(void);
/* Captures the caller's stack starting at frame pointer fp and returns its id (0: none),
 * writing STACK and MODULE records for what is new. */
uint32_t stacks_capture(struct tstate *t, void *fp);
void modules_scan(struct tstate *t);
void stacks_warm_up(void);

/* Raw syscalls: the agent's own mappings must not show up as traced mmap events (the
 * agent's mmap symbol is its own interposer). They set errno like libc does. */
static inline void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    return r == -1 ? MAP_FAILED : (void *)r;
}

static inline void sys_munmap(void *addr, size_t len)
{
    syscall(SYS_munmap, addr, len);
}

/* Returns CLOCK_MONOTONIC in ns (vDSO; no syscall). */
uint64_t agent_now(void);

/* Writes a message to stderr with write(2): "memscope agent: <msg>\n". */
void agent_say(const char *msg, const char *detail);

#endif
