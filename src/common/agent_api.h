/* agent_api.h: the contract between `memscope run` (src/cli), the agent (src/agent) and the
 * Python extension (python/memscope/_native.c), in one header so that the compiler checks each
 * side against it: the environment that configures the agent, and the agent's entry points,
 * which the extension looks up by name (dlsym) and the agent defines. Header-only: the agent
 * includes it without linking anything of src/common. */
#ifndef MS_AGENT_API_H
#define MS_AGENT_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- the environment (docs/cli.md, docs/torch.md) ----
 * Read by the agent: */
#define MS_ENV_TRACE_DIR "MEMSCOPE_TRACE_DIR"     /* where <pid>.<n>.mst go; unset: idle */
#define MS_ENV_DEPTH "MEMSCOPE_DEPTH"             /* native stack depth, 0..1000 */
#define MS_ENV_PY_DEPTH "MEMSCOPE_PY_DEPTH"       /* Python stack depth, 0..1000 */
#define MS_ENV_STACKS_AUTO "MEMSCOPE_STACKS_AUTO" /* 1: a Python image takes no native stack */
#define MS_ENV_UNWIND "MEMSCOPE_UNWIND"           /* dwarf (default) or fp */
#define MS_ENV_DEFERRED "MEMSCOPE_DEFERRED"       /* 1: record nothing until memscope__start */
#define MS_ENV_STEPS "MEMSCOPE_STEPS"             /* --steps: "1,3": record only these steps */
#define MS_MAX_STEP_FILTER 5                      /* step numbers --steps takes (msMemScope's) */
#define MS_ENV_NO_FOLLOW "MEMSCOPE_NO_FOLLOW"     /* 1: programs this image execs are not traced */
#define MS_ENV_NO_TSC "MEMSCOPE_NO_TSC"           /* 1: timestamps never from the TSC */
#define MS_ENV_STDERR "MEMSCOPE_STDERR"           /* "<dev>:<ino>" of memscope run's stderr */
#define MS_ENV_DEVICE "MEMSCOPE_DEVICE"           /* --device: cuda, cuda:N, cpu */
#define MS_ENV_EVENTS "MEMSCOPE_EVENTS"           /* --events as given (also the Python layer) */

/* Sampling mode (docs/production.md, "Sampling"): */
#define MS_ENV_SAMPLING "MEMSCOPE_SAMPLING" /* --sampling: mean bytes between samples (decimal) */
#define MS_ENV_SAMPLING_SEED "MEMSCOPE_SAMPLING_SEED"   /* tests: the sampler's fixed seed */
#define MS_ENV_MAX_TRACE_SIZE "MEMSCOPE_MAX_TRACE_SIZE" /* --max-trace-size in bytes */
#define MS_ENV_TRACE_RING "MEMSCOPE_TRACE_RING"         /* --trace-ring in bytes */
#define MS_TRACE_RING_MIN (4ull << 20) /* the smallest --trace-ring (both check it) */
/* Only in memscope attach's configuration block (src/agent/inject.c), never an environment
 * variable: Python source the agent has the interpreter run (Py_AddPendingCall) when a session
 * starts and when it stops, to install and remove the Python stack hook. */
#define MS_CFG_PY_START "MEMSCOPE_PY_ATTACH_START"
#define MS_CFG_PY_STOP "MEMSCOPE_PY_ATTACH_STOP"
/* memscope attach's own pid: should it die without stopping the session, the agent stops
 * recording by itself (src/agent/inject.c, inject_orphaned). */
#define MS_CFG_OWNER "MEMSCOPE_ATTACH_OWNER"
/* Read by the Python layer only: */
#define MS_ENV_LEVEL "MEMSCOPE_LEVEL"           /* --level */
#define MS_ENV_WATCH "MEMSCOPE_WATCH"           /* --watch */
#define MS_ENV_STEP_ON "MEMSCOPE_STEP_ON"       /* --step-on */
#define MS_ENV_ANALYSIS "MEMSCOPE_ANALYSIS"     /* --analysis (decompose: activation owners) */
#define MS_ENV_OUTPUT_DIR "MEMSCOPE_OUTPUT_DIR" /* where watch_dump/ goes */

/* Whether the file name base (no directory) is a Python interpreter's: python, python3,
 * python3.11 ... memscope run's rule for a Python program's default stacks, applied by the CLI
 * to the program it starts and by the agent to each image (MS_ENV_STACKS_AUTO). */
static inline int ms_python_name(const char *base)
{
    for (const char *p = "python"; *p; p++, base++)
        if (*base != *p)
            return 0;
    for (; *base; base++)
        if ((*base < '0' || *base > '9') && *base != '.')
            return 0;
    return 1;
}

/* ---- the agent's entry points (libmemscope.so; include/memscope.h wraps the annotation ones
 * for C programs) ---- */
int memscope__step(void);
int memscope__owner_push(const char *label);
int memscope__owner_pop(void);
int memscope__mark(const char *msg);
int memscope__range_push(const char *name);
int memscope__range_pop(void);
int memscope__access(const void *p, size_t n, int flags, const char *op);
int memscope__pool_alloc(const char *pool, const void *p, size_t n);
int memscope__pool_free(const char *pool, const void *p);
int memscope__pool_reserve(const char *pool, const void *p, size_t n);
int memscope__pool_release(const char *pool, const void *p);
int memscope__start(void);
int memscope__stop(void);
int memscope__quiet(int delta);
int memscope__py_frame(uint32_t id, const char *file, const char *func, int firstline);
void memscope__py_call(uint32_t id, int caller_line, int line);
void memscope__py_return(void);
void memscope__py_line(int line);
/* A call as memscope__py_call, with the callee's frame (the extension's: a PyFrameObject* under
 * the profile hook, valid until its return; an interpreter frame under the frame evaluation
 * hook), and the function that reads a frame's current line: set (NULL: none), the agent asks
 * it for the innermost frame's line at each allocation instead of relying on line events. It
 * answers -1 for a frame that is not running (the entry's frame returned unseen): the agent then
 * asks for the entries below it; and when the running frame is a callee of frame that the
 * shadow lacks, it answers frame's line and sets callee[0] and callee[1] to the callee's frame
 * id and line (callee[0] stays 0 otherwise). */
void memscope__py_call_frame(uint32_t id, int caller_line, int line, void *frame);
void memscope__py_line_source(int (*line_of)(void *frame, uint32_t *callee));
void memscope__py_reset(void);
unsigned memscope__py_depth(void);
void memscope__py_trace(int on);
int memscope__attach(void);
int memscope__detach(void);
/* memscope attach (src/cli/inject.c calls them inside the process, src/agent/inject.c): */
int memscope__inject_start(const char *config);
int memscope__inject_stop(void);
#define MS_INJECT_START "memscope__inject_start"
#define MS_INJECT_STOP "memscope__inject_stop"

/* X(field, symbol) for each entry point the Python extension resolves. */
#define MS_AGENT_ENTRY_POINTS(X)                \
    X(step, memscope__step)                     \
    X(owner_push, memscope__owner_push)         \
    X(owner_pop, memscope__owner_pop)           \
    X(mark, memscope__mark)                     \
    X(range_push, memscope__range_push)         \
    X(range_pop, memscope__range_pop)           \
    X(access, memscope__access)                 \
    X(pool_alloc, memscope__pool_alloc)         \
    X(pool_free, memscope__pool_free)           \
    X(pool_reserve, memscope__pool_reserve)     \
    X(pool_release, memscope__pool_release)     \
    X(start, memscope__start)                   \
    X(stop, memscope__stop)                     \
    X(py_frame, memscope__py_frame)             \
    X(py_call, memscope__py_call)               \
    X(py_return, memscope__py_return)           \
    X(py_line, memscope__py_line)               \
    X(py_call_frame, memscope__py_call_frame)   \
    X(py_line_source, memscope__py_line_source) \
    X(py_reset, memscope__py_reset)             \
    X(py_depth, memscope__py_depth)             \
    X(py_trace, memscope__py_trace)             \
    X(attach, memscope__attach)                 \
    X(quiet, memscope__quiet)

#endif
