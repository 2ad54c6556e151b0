/* writer.c: the agent's trace file: one per process image, written through per-thread chunks
 * of a file-backed shared mapping.
 *
 * Why a shared file mapping: a store into it is in the page cache at once, so everything a
 * thread has committed survives SIGKILL, abort or the OOM killer without any flush, and the
 * hot path needs no syscall. Each thread owns one chunk at a time (4 KiB at first, doubling up
 * to 64 KiB); only taking a new chunk touches shared state (an atomic add, fallocate, mmap). Space
 * is reserved with fallocate so that a full disk shows up as an error here, never as SIGBUS in
 * the host. Called from the interposers in agent.c; workload: millions of records per second. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_MIN (4u << 10) /* one page: a thread that allocates little costs little disk */
/* 64 KiB: a thread's current chunk is resident in the program whole (a shared file mapping's
 * written pages), so this bounds what the trace costs the program's RSS per thread (issue 47,
 * section 5: 1 MiB chunks were 1 MB of a small Python program's max RSS); a new chunk costs
 * an atomic add, fallocate and mmap once per 64 KiB of records. */
#define CHUNK_MAX (64u << 10)

static uint64_t real_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int agent_fd_is(int fd, uint64_t dev, uint64_t ino)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == dev &&
           (uint64_t)st.st_ino == ino;
}

static char *put_dec(char *p, unsigned long v);

void agent_say(const char *msg, const char *detail)
{
    char buf[512];
    size_t n = 0;
    const char *parts[] = {"memscope agent: ", msg, detail ? ": " : "", detail ? detail : "", "\n"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        for (const char *s = parts[i]; *s && n < sizeof buf - 1; s++)
            buf[n++] = *s;
    if (agent.sandboxed)
        return; /* no system call under the program's seccomp filter */
    if (!agent.err_known || agent_fd_is(2, agent.err_dev, agent.err_ino)) {
        ssize_t w = write(2, buf, n);
        (void)w;
        return;
    }
    /* fd 2 is the program's own file now: the message goes where memscope run finds it */
    char path[4200];
    size_t dl = strnlen(agent.dir, sizeof agent.dir);
    if (!dl || dl > 4000)
        return;
    char *p = path;
    memcpy(p, agent.dir, dl);
    p += dl;
    *p++ = '/';
    p = put_dec(p, agent.hdr ? (unsigned long)agent.hdr->pid : (unsigned long)getpid());
    memcpy(p, ".msg", 5);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        ssize_t w = write(fd, buf, n);
        (void)w;
        close(fd);
    }
}

void writer_fail(const char *what, int err)
{
    if (__atomic_exchange_n(&agent.broken, 1, __ATOMIC_ACQ_REL))
        return;
    __atomic_store_n(&agent.recording, 0, __ATOMIC_RELEASE);
    if (agent.hdr)
        __atomic_store_n(&agent.hdr->stopped_errno, (uint64_t)err, __ATOMIC_RELAXED);
    char detail[256];
    agent_tls.internal++;
    snprintf(detail, sizeof detail, "%s (%s); recording stopped, the program runs on", what,
             strerror(err));
    agent_say("cannot record", detail);
    agent_tls.internal--;
}

/* Appends decimal v to p; returns the end. */
static char *put_dec(char *p, unsigned long v)
{
    char tmp[24];
    int n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* Makes [off, off + size) of the trace file real disk space, without ever raising SIGXFSZ in
 * the host: a file-size limit (ulimit -f) is checked first and reported as EFBIG. Where the
 * file system has no fallocate, ftruncate extends the file under agent.file_lock (so that two
 * threads cannot shrink it); a nested stream only tries that lock (EWOULDBLOCK when taken).
 * Returns 0 or -1 with errno set. */
static int grow_file(int fd, uint64_t off, uint64_t size, int nested)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        off + size > rl.rlim_cur) {
        errno = EFBIG;
        return -1;
    }
    int rc = fallocate(fd, 0, (off_t)off, (off_t)size);
    if (rc == 0 || (errno != EOPNOTSUPP && errno != ENOSYS))
        return rc;
    if (nested) {
        if (!spin_trylock(&agent.file_lock)) {
            errno = EWOULDBLOCK;
            return -1;
        }
    } else {
        spin_lock(&agent.file_lock);
    }
    struct stat st;
    rc = fstat(fd, &st);
    if (rc == 0 && (uint64_t)st.st_size < off + size)
        rc = ftruncate(fd, (off_t)(off + size));
    int err = errno;
    spin_unlock(&agent.file_lock);
    errno = err;
    return rc;
}

static size_t read_small(const char *path, char *buf, size_t cap);
static void process_record(struct stream *s);

/* Parses the decimal number at s (0 when there is none). */
static unsigned long get_dec(const char *s)
{
    unsigned long v = 0;
    while (*s == ' ' || *s == '\t')
        s++;
    for (; *s >= '0' && *s <= '9' && v < (1ul << 40); s++)
        v = v * 10 + (unsigned long)(*s - '0');
    return v;
}

/* This process's pid and its parent's as memscope run sees them. In a new pid namespace
 * getpid() is the namespace's own number (1 for its first process, its parent 0), which
 * collides with other processes of the run; /proc/self and the PPid of /proc/self/status count
 * in the namespace of the /proc mount, memscope run's unless the program mounted its own. */
static void own_pids(uint64_t *pid, uint64_t *ppid)
{
    *pid = (uint64_t)getpid();
    *ppid = (uint64_t)getppid();
    char buf[2048];
    ssize_t n = readlink("/proc/self", buf, 31);
    if (n <= 0)
        return;
    buf[n] = 0;
    unsigned long outer = get_dec(buf);
    if (!outer || outer == *pid)
        return; /* the common case: one syscall */
    *pid = outer;
    size_t len = read_small("/proc/self/status", buf, sizeof buf - 1);
    buf[len] = 0;
    const char *pp = strstr(buf, "\nPPid:");
    if (pp)
        *ppid = get_dec(pp + 6);
}

/* --trace-ring (MEMSCOPE_TRACE_RING, bytes): the file is a ring of epochs, each a range of
 * agent.ring_epoch_len bytes of the file (a chunk belongs to the epoch its offset falls in).
 * When the first chunk of epoch E is taken, everything before epoch E-1 is dropped: its disk
 * space freed (a hole punched: the file's apparent size grows, its disk usage does not), the
 * header's ring_start moved to the start of E-1, and every thread moved to a new chunk at its
 * next event (a new generation). Descriptions (stacks, modules, the PROCESS record) carry the
 * epoch they were written in; one older than the chunk a thread writes to is written again
 * there (writer_stale()), so every kept chunk's references are in kept chunks. Two epochs are
 * 3/4 of the cap: the last quarter is room for the chunks in flight when an epoch begins. */
static void ring_setup(void)
{
    const char *v = getenv(MS_ENV_TRACE_RING);
    uint64_t n = 0;
    for (; v && *v >= '0' && *v <= '9' && n < (1ull << 60); v++)
        n = n * 10 + (uint64_t)(*v - '0');
    agent.ring = 0;
    agent.ring_epoch = agent.ring_proc_epoch = 0;
    if (!v || *v || n < MS_TRACE_RING_MIN)
        return; /* memscope run checked it: anything else is not its */
    agent.ring = n;
    agent.ring_epoch_len = (n * 3 / 8) & ~(uint64_t)(MS_TRACE_CHUNK_ALIGN - 1);
}

static uint32_t ring_epoch_of(uint64_t off)
{
    return (uint32_t)((off - MS_TRACE_HEADER_SIZE) / agent.ring_epoch_len);
}

/* The first chunk of epoch e was taken: drops what precedes epoch e - 1. */
static void ring_begin(uint32_t e)
{
    agent.generation++; /* every thread takes a new chunk (in epoch e) at its next event */
    __atomic_store_n(&agent.live->generation, agent.generation, __ATOMIC_RELEASE);
    if (e < 2)
        return;
    uint64_t from = __atomic_load_n(&agent.hdr->ring_start, __ATOMIC_RELAXED);
    uint64_t to = MS_TRACE_HEADER_SIZE + (uint64_t)(e - 1) * agent.ring_epoch_len;
    if (from < MS_TRACE_HEADER_SIZE)
        from = MS_TRACE_HEADER_SIZE;
    __atomic_store_n(&agent.hdr->ring_start, to, __ATOMIC_RELEASE); /* readers start there */
    if (to > from && fallocate(agent.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from,
                               (off_t)(to - from)) < 0)
        writer_fail("cannot drop the trace's oldest events (--trace-ring needs a file system that "
                    "frees a file's range: ext4, xfs, btrfs, tmpfs)",
                    errno);
}

int writer_open(void)
{
    char path[4200];
    size_t dl = strlen(agent.dir);
    if (dl == 0 || dl > 4000)
        return -ENAMETOOLONG;
    uint64_t pid, ppid;
    own_pids(&pid, &ppid);
    int fd = -1;
    unsigned seq;
    for (seq = 0; seq < 10000; seq++) {
        char *p = path;
        memcpy(p, agent.dir, dl);
        p += dl;
        *p++ = '/';
        p = put_dec(p, (unsigned long)pid);
        *p++ = '.';
        p = put_dec(p, seq);
        memcpy(p, ".mst", 5);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            break;
    }
    if (fd < 0)
        return -errno;
    /* Out of the way of programs that use low descriptor numbers on purpose (shells'
     * `exec 3>file`, daemons that expect 3 to be their first file): at 900, or as high as the
     * descriptor limit allows (its last number), never where the program's next open lands. */
    struct rlimit rl;
    int want = 900;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= 900)
        want = rl.rlim_cur > 4 ? (int)rl.rlim_cur - 1 : 3;
    int high = -1;
    for (int f = want; f >= 3 && high < 0 && f > fd; f--) {
        if (fcntl(f, F_GETFD) < 0 && errno == EBADF) /* free: dup exactly there */
            high = fcntl(fd, F_DUPFD_CLOEXEC, f);
        if (high >= 0 && high != f) {
            close(high);
            high = -1;
        }
    }
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    int rc = grow_file(fd, 0, MS_TRACE_HEADER_SIZE, 0);
    if (rc < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    void *h = sys_mmap(NULL, MS_TRACE_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct ms_trace_file_header *hdr = h;
    hdr->version = MS_TRACE_VERSION;
    hdr->header_size = MS_TRACE_HEADER_SIZE;
    hdr->chunk_align = MS_TRACE_CHUNK_ALIGN;
    hdr->flags = agent.flags;
    hdr->pid = pid;
    hdr->ppid = ppid;
    hdr->start_mono_ns = agent_now();
    hdr->start_real_ns = real_now();
    hdr->max_depth = agent.depth;
    hdr->image_seq = seq;
    hdr->sample_bytes = agent.sample_bytes;
    hdr->file_end = MS_TRACE_HEADER_SIZE;
    ring_setup();
    memcpy(hdr->magic, MS_TRACE_MAGIC, 8); /* last: a reader never sees a half header as valid */
    struct stat st;
    if (fstat(fd, &st) == 0) {
        agent.fd_dev = st.st_dev;
        agent.fd_ino = st.st_ino;
    }
    agent.fd = fd;
    agent.hdr = hdr;
    return 0;
}

void writer_lost(void)
{
    if (agent.hdr)
        __atomic_add_fetch(&agent.hdr->lost_events, 1, __ATOMIC_RELAXED);
}

static void stream_drop(struct stream *s)
{
    if (s->chunk)
        sys_munmap(s->chunk, s->chunk_size);
    s->chunk = s->pos = s->end = NULL;
    s->chunk_size = 0;
    s->serial = 0;
    s->seq = 0;
}

void writer_after_fork_child(void)
{
    /* The parent's mappings are shared with the parent: drop them without writing. */
    struct tstate *t = &agent_tls;
    stream_drop(&t->s[0]);
    stream_drop(&t->s[1]);
    t->tid = 0;
    if (agent.hdr)
        sys_munmap(agent.hdr, MS_TRACE_HEADER_SIZE);
    agent.hdr = NULL;
    /* Only the parent's trace file: a program that closed every descriptor may have opened its
     * own file under that number since (the writer stopped then, writer_reserve_slow). */
    if (agent.fd >= 0 && agent_fd_is(agent.fd, agent.fd_dev, agent.fd_ino))
        close(agent.fd);
    agent.fd = -1;
    agent.file_lock = 0;
    agent.next_serial = 0;
    agent.generation++;
    __atomic_store_n(&agent.live->generation, agent.generation, __ATOMIC_RELEASE);
    if (agent.broken)
        return;
    agent.flags |= MS_TRACE_F_FORKED; /* this image's header says so (an exec starts anew) */
    int rc = writer_open();
    if (rc < 0) {
        writer_fail("cannot create the trace file of a forked child", -rc);
        return;
    }
    writer_process_record();
}

void writer_thread_exit(struct tstate *t)
{
    for (int i = 0; i < 2; i++) {
        struct stream *s = &t->s[i];
        /* an earlier generation's chunk is a memscope attach session's, made anonymous */
        /* (or, with --trace-ring, one of this file's earlier epochs) */
        if (s->chunk && (t->generation == agent.live->generation ||
                         ((agent.injected || agent.ring) && agent.live->generation)))
            sys_munmap(s->chunk, s->chunk_size);
        s->chunk = s->pos = s->end = NULL;
    }
}

/* Maps a new chunk of at least need bytes of records for stream s of thread t. */
static int new_chunk(struct tstate *t, struct stream *s, size_t need)
{
    if (unlikely(agent.injected) && inject_orphaned())
        return -1; /* memscope attach died: nobody will read this trace (inject.c) */
    if (t->generation != agent.generation) {
        /* A chunk still here is an earlier memscope attach session's, which inject_release()
         * made anonymous memory (a forked child's were dropped by writer_after_fork_child):
         * unmapped, unless this is a signal handler's stream, whose thread may be writing. */
        uint8_t *old[2] = {t->s[0].chunk, t->s[1].chunk};
        uint32_t old_size[2] = {t->s[0].chunk_size, t->s[1].chunk_size};
        t->generation = agent.generation;
        t->tid = 0;
        for (int i = 0; i < 2; i++)
            t->s[i].serial = 0, t->s[i].chunk = NULL, t->s[i].chunk_size = 0;
        for (int i = 0; i < 2 && !s->nested; i++)
            if (old[i])
                sys_munmap(old[i], old_size[i]);
    }
    if (!t->tid) {
        t->tid = (uint32_t)syscall(SYS_gettid);
        if (!s->nested)
            agent_thread_register();
    }
    if (!s->serial) {
        s->serial = __atomic_add_fetch(&agent.next_serial, 1, __ATOMIC_RELAXED);
        s->seq = 0;
        s->chunk = NULL;
        s->chunk_size = 0;
    }
    uint32_t size = s->chunk_size ? s->chunk_size * 2 : CHUNK_MIN;
    if (size > CHUNK_MAX)
        size = CHUNK_MAX;
    size_t want = (need + MS_TRACE_CHUNK_HEADER_SIZE + MS_TRACE_CHUNK_ALIGN - 1) &
                  ~(size_t)(MS_TRACE_CHUNK_ALIGN - 1);
    if (want > size)
        size = (uint32_t)want;

    /* --max-trace-size: the file stays under its cap; recording stops there (the sampling
     * mode's exact counts go on, in the header). */
    if (agent.max_trace &&
        __atomic_load_n(&agent.hdr->file_end, __ATOMIC_RELAXED) + size > agent.max_trace) {
        writer_fail("the trace reached its size cap (--max-trace-size)", EFBIG);
        return -1;
    }
    /* Space is claimed with one atomic add: no lock, so a signal handler's nested stream can
     * take a chunk even while its thread is in here. fallocate of disjoint ranges needs none
     * either; a failed one leaves zero pages, which readers skip. */
    uint64_t off = __atomic_fetch_add(&agent.hdr->file_end, size, __ATOMIC_RELAXED);
    struct stat st;
    int rc, err;
    if (fstat(agent.fd, &st) != 0 || st.st_dev != agent.fd_dev || st.st_ino != agent.fd_ino) {
        rc = -1; /* the program closed our descriptor (and may have reused its number) */
        err = EBADF;
    } else {
        rc = grow_file(agent.fd, off, size, s->nested);
        err = errno;
    }
    if (rc < 0) {
        if (err == EWOULDBLOCK) /* nested, and the fallback lock was taken: this event only */
            return -1;
        writer_fail("cannot extend the trace file", err);
        return -1;
    }
    void *m = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, agent.fd, (off_t)off);
    if (m == MAP_FAILED) {
        writer_fail("cannot map the trace file", errno);
        return -1;
    }
    if (agent.ring) {
        uint32_t e = ring_epoch_of(off), cur = __atomic_load_n(&agent.ring_epoch, __ATOMIC_ACQUIRE);
        while (e > cur && !__atomic_compare_exchange_n(&agent.ring_epoch, &cur, e, 0,
                                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ;
        if (e > cur) /* this thread moved the ring on */
            ring_begin(e);
        s->ring_epoch = e;
    }
    if (s->chunk)
        sys_munmap(s->chunk, s->chunk_size);
    struct ms_trace_chunk_header *ch = m;
    ch->size = size;
    ch->tid = t->tid;
    ch->thread_serial = s->serial;
    ch->seq = s->seq++;
    ch->used = 0;
    ch->base_ns = s->last_ns;
    __atomic_store_n(&ch->magic, MS_TRACE_CHUNK_MAGIC, __ATOMIC_RELEASE);
    s->chunk = m;
    s->chunk_size = size;
    s->pos = (uint8_t *)m + MS_TRACE_CHUNK_HEADER_SIZE;
    s->end = (uint8_t *)m + size;
    s->enc.prev_ns = s->last_ns;
    s->enc.prev_addr = 0;
    return 0;
}

uint8_t *writer_reserve_slow(struct tstate *t, struct stream *s, size_t n)
{
    if (agent.broken || !agent.hdr)
        return NULL;
    if (unlikely(!agent.live->generation)) {
        /* a cloned child: the chunks are its parent's. Set up here only where no record is
         * half made (agent_enter() does it for events; a stack or module record is the first
         * part of an event, which already went through it). */
        if (t->guard)
            return NULL;
        agent_unseen_child();
        if (agent.broken || !agent.hdr)
            return NULL;
    }
    if (new_chunk(t, s, n) < 0) {
        writer_lost();
        return NULL;
    }
    uint32_t pe = __atomic_load_n(&agent.ring_proc_epoch, __ATOMIC_RELAXED);
    if (writer_stale(s, pe) && !s->nested &&
        __atomic_compare_exchange_n(&agent.ring_proc_epoch, &pe, s->ring_epoch, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        /* the first chunk of an epoch's: the PROCESS record again, then room for n bytes */
        process_record(s);
        if ((size_t)(s->end - s->pos) < n && new_chunk(t, s, n) < 0) {
            writer_lost();
            return NULL;
        }
    }
    return s->pos;
}

/* Reads a small /proc file into buf without stdio or malloc; returns the byte count. */
static size_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t n = 0;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    return n;
}

/* The executable's path as the program was started (into exe, len bytes; its length, or -1):
 * the name given to execve (AT_EXECFN), made absolute, when it is the file /proc/self/exe
 * names. A program started through a symbolic link (redis-server, a link to redis-check-rdb;
 * python3 to python3.11) is then named by the link, as the user knows it, and the path still
 * opens the same file for symbolization. Not when the name is another file (a script: exe is
 * its interpreter), is gone, or was relative to a directory the process has since left. */
static ssize_t started_path(char *exe, size_t len)
{
    const char *fn = (const char *)getauxval(AT_EXECFN);
    struct stat a, b;
    if (!fn || !fn[0] || stat("/proc/self/exe", &a) < 0)
        return -1;
    size_t n = 0;
    if (fn[0] != '/') {
        if (!getcwd(exe, len))
            return -1;
        n = strlen(exe);
        while (fn[0] == '.' && fn[1] == '/') /* "./prog": no "/./" in the name */
            for (fn += 2; *fn == '/';)
                fn++;
        if (n > 1 && n < len)
            exe[n++] = '/';
    }
    size_t fl = strlen(fn);
    if (n + fl >= len)
        return -1;
    memcpy(exe + n, fn, fl + 1);
    if (stat(exe, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return -1;
    return (ssize_t)(n + fl);
}

/* The PROCESS record: exe path and argv, written once per image (and per forked child), and
 * with --trace-ring once per epoch, into stream s of the calling thread. */
static void process_record(struct stream *s)
{
    static char exe[MS_TRACE_MAX_PATH];    /* NEEDSWORK: two threads writing it at once (an */
    static char cmd[MS_TRACE_MAX_CMDLINE]; /* epoch begun during a fork's) share these */
    struct tstate *t = &agent_tls;
    ssize_t el = started_path(exe, sizeof exe);
    if (el < 0)
        el = readlink("/proc/self/exe", exe, sizeof exe);
    if (el < 0)
        el = 0;
    size_t cl = read_small("/proc/self/cmdline", cmd, sizeof cmd);
    uint8_t *w = writer_reserve(t, s, 1 + 3 * MS_VARINT_MAX + (size_t)el + cl);
    if (!w)
        return;
    writer_commit(s, ms_enc_process(w, agent.hdr ? agent.hdr->ppid : (uint64_t)getppid(), exe,
                                    (size_t)el, cmd, cl));
}

void writer_process_record(void)
{
    process_record(&agent_tls.s[0]);
}
