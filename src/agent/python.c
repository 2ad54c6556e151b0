/* python.c: the agent's side of Python call stacks.
 *
 * The memscope Python extension (python/) installs a hook (trace, profile or frame evaluation)
 * that reports every Python call and return of every thread here; the agent keeps a per-thread
 * shadow stack of frame ids and current lines, and stacks_capture() copies its innermost
 * entries into each allocation's stack. So the allocation path never takes the GIL, never
 * touches a Python object (but the running frame, through the extension's line source) and
 * works the same when an allocation comes from a C extension that released the GIL.
 *
 * Frame ids are the extension's: it describes each one once with memscope__py_frame() (file,
 * function, first line), which becomes a PYFRAME record. Workload: one call per Python call and
 * return, so each function here is a few loads and stores. */
#include "agent.h"

#include <string.h>

/* The calling thread's shadow stack, mapped on first use; the thread-exit hook unmaps it
 * (agent.c), so programs that start many short-lived threads do not collect mappings. */
static struct pyshadow *shadow(void)
{
    struct tstate *t = &agent_tls;
    if (likely(t->py != NULL))
        return t->py;
    void *m = sys_mmap(NULL, sizeof(struct pyshadow), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    t->py = m;
    t->internal++; /* pthread_setspecific may allocate */
    agent_thread_register();
    t->internal--;
    return t->py;
}

/* --trace-ring: every frame's description, kept to write it again in a later epoch (a PYSTACK
 * record's frames must be described in an epoch as recent as its own). Indexed by the
 * extension's dense frame ids; both areas are reserved once and never move (readers take no
 * lock), their pages touched as they fill: the agent's memory grows with the program's
 * distinct code objects, not with time. Frames past either area are not kept (NEEDSWORK:
 * their names are lost with the epoch that described them). */
#define PYF_MAX_IDS (1u << 22) /* 4M code objects: 64 MiB of address space */
#define PYF_ARENA (256u << 20)
struct pyf {
    uint32_t epoch, len; /* len 0: not kept */
    uint32_t off, firstline;
};
static struct pyf *pyf;
static char *pyf_text;
static uint32_t pyf_used; /* bytes of pyf_text; under pyf_lock */
static int pyf_lock;

static void pyframe_keep(uint32_t id, const char *buf, size_t len, uint32_t firstline,
                         uint32_t epoch)
{
    if (id >= PYF_MAX_IDS || !len)
        return;
    spin_lock(&pyf_lock);
    if (!pyf) {
        void *a = sys_mmap(NULL, (size_t)PYF_MAX_IDS * sizeof *pyf, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *b = sys_mmap(NULL, PYF_ARENA, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a != MAP_FAILED && b != MAP_FAILED) {
            pyf_text = b;
            __atomic_store_n(&pyf, (struct pyf *)a, __ATOMIC_RELEASE);
        }
    }
    if (pyf && pyf_used + len <= PYF_ARENA && !pyf[id].len) {
        memcpy(pyf_text + pyf_used, buf, len);
        pyf[id].off = pyf_used;
        pyf[id].firstline = firstline;
        pyf[id].epoch = epoch;
        __atomic_store_n(&pyf[id].len, (uint32_t)len, __ATOMIC_RELEASE);
        pyf_used += (uint32_t)len;
    }
    spin_unlock(&pyf_lock);
}

void python_redescribe(struct tstate *t, struct stream *s, const uint32_t *py, unsigned npy)
{
    struct pyf *f = __atomic_load_n(&pyf, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; f && i < npy; i++) {
        uint32_t id = py[2 * i];
        if (id >= PYF_MAX_IDS || !__atomic_load_n(&f[id].len, __ATOMIC_ACQUIRE) ||
            !writer_stale(s, __atomic_load_n(&f[id].epoch, __ATOMIC_RELAXED)))
            continue;
        uint8_t *w = writer_reserve(t, s, MS_EXT_MAX);
        if (!w)
            return;
        uint64_t v[2] = {id, f[id].firstline};
        writer_commit(s, ms_enc_ext(w, &s->enc, MS_EXT_PYFRAME, agent_now(), v, 2,
                                    pyf_text + f[id].off, f[id].len));
        __atomic_store_n(&f[id].epoch, s->ring_epoch, __ATOMIC_RELAXED);
    }
}

AGENT_API int memscope__py_frame(uint32_t id, const char *file, const char *func, int firstline)
{
    if (!id || !file || !func || !agent.initialized || agent.broken)
        return -1;
    struct tstate *t = &agent_tls;
    if (t->guard || t->internal)
        return -1;
    if (unlikely(!agent.live->generation))
        agent_unseen_child(); /* a cloned child's first record */
    t->guard = 1;
    struct stream *s = &t->s[0];
    s->nested = 0;
    char buf[MS_TRACE_MAX_LABEL];
    size_t fl = strnlen(file, sizeof buf / 2), nl = strnlen(func, sizeof buf / 2 - 1);
    memcpy(buf, file, fl);
    buf[fl] = 0;
    memcpy(buf + fl + 1, func, nl);
    uint64_t v[2] = {id, firstline > 0 ? (uint64_t)firstline : 0};
    uint8_t *w = writer_reserve(t, s, MS_EXT_MAX);
    if (w)
        writer_commit(s,
                      ms_enc_ext(w, &s->enc, MS_EXT_PYFRAME, agent_now(), v, 2, buf, fl + 1 + nl));
    if (w && agent.ring)
        pyframe_keep(id, buf, fl + 1 + nl, (uint32_t)v[1], s->ring_epoch);
    t->guard = 0;
    return w ? 0 : -1;
}

/* Records a tracer event (PYCALL with the frame id, or PYRETURN with id 0). */
static void trace_event(uint32_t id)
{
    struct tstate *t = &agent_tls;
    if (!agent.recording || agent.paused || t->guard || t->internal)
        return;
    if (unlikely(!agent.live->generation))
        agent_unseen_child(); /* a cloned child's first record */
    t->guard = 1;
    struct stream *s = &t->s[0];
    s->nested = 0;
    uint64_t v[1] = {id};
    uint8_t *w = writer_reserve(t, s, MS_EXT_MAX);
    if (w)
        writer_commit(s, ms_enc_ext(w, &s->enc, id ? MS_EXT_PYCALL : MS_EXT_PYRETURN, agent_now(),
                                    v, id ? 1 : 0, NULL, 0));
    t->guard = 0;
}

/* Turns the Python tracer (msmemscope's tracer.start/stop) on or off for all threads. */
AGENT_API void memscope__py_trace(int on)
{
    agent.py_trace = on;
}

/* A call of frame id from the current innermost frame, which is at caller_line now. */
AGENT_API void memscope__py_call(uint32_t id, int caller_line, int line)
{
    memscope__py_call_frame(id, caller_line, line, NULL);
}

/* memscope__py_call with the callee's frame object: while py_line_of is set, an allocation's
 * innermost line is read from it (stacks.c), exact without line events. */
AGENT_API void memscope__py_call_frame(uint32_t id, int caller_line, int line, void *frame)
{
    if (agent.py_trace)
        trace_event(id);
    struct pyshadow *py = shadow();
    if (!py)
        return;
    uint32_t d = py->depth;
    if (d && d <= PY_MAX_DEPTH)
        py->frames[d - 1][1] = (uint32_t)caller_line;
    if (d < PY_MAX_DEPTH) {
        py->frames[d][0] = id;
        py->frames[d][1] = (uint32_t)line;
        py->frame[d] = frame;
        py->frames_gen = agent.py_line_gen;
    }
    __atomic_store_n(&py->depth, d + 1, __ATOMIC_RELEASE); /* a signal handler reads it */
}

AGENT_API void memscope__py_return(void)
{
    if (agent.py_trace)
        trace_event(0);
    struct pyshadow *py = agent_tls.py;
    if (py && py->depth)
        __atomic_store_n(&py->depth, py->depth - 1, __ATOMIC_RELEASE);
}

/* The innermost frame is now at line (reported before it calls into C code). */
AGENT_API void memscope__py_line(int line)
{
    struct pyshadow *py = agent_tls.py;
    if (py && py->depth && py->depth <= PY_MAX_DEPTH)
        py->frames[py->depth - 1][1] = (uint32_t)line;
}

/* The function that reads a frame's current line (the extension's; NULL: none), or answers -1
 * when the frame is not running (stacks.c, py_snapshot). It runs inside the allocation's
 * interposer: it must neither allocate nor take a lock. */
AGENT_API void memscope__py_line_source(int (*line_of)(void *frame, uint32_t *callee))
{
    /* A thread's frames are read only when written since this call: the hook was off in
     * between on every thread (the extension removes it before it calls this again), so a
     * shadow from before may hold frames that have since returned and been freed; the thread
     * writes its whole stack again at its first event under the new hook. */
    __atomic_add_fetch(&agent.py_line_gen, 1, __ATOMIC_SEQ_CST);
    agent.py_line_of = line_of;
}

/* Forgets the thread's stack (the extension stops or restarts tracing). */
AGENT_API void memscope__py_reset(void)
{
    struct pyshadow *py = agent_tls.py;
    if (py)
        py->depth = 0;
}

/* Returns the Python depth the agent was configured with (0: Python stacks off). */
AGENT_API unsigned memscope__py_depth(void)
{
    return agent.initialized ? agent.py_depth : 0;
}
