/* _native.c: the C extension of the memscope Python package.
 *
 * Called by the package's Python modules (memscope/__init__.py and friends) and by the torch
 * layer (memscope/torch/, memscope/watcher.py). It does three jobs:
 *  - forwards the annotation API (steps, owners, marks, ranges, accesses, pools, start/stop) to
 *    the agent libmemscope.so, found with dlsym: RTLD_DEFAULT when `memscope run` preloaded it,
 *    or the handle of our own dlopen in the in-process (attach) mode. Without the agent every
 *    call is a no-op that returns False;
 *  - keeps the agent's per-thread shadow of the Python stack up to date with a C trace or
 *    profile hook, or (CPython 3.11, lines mode 3: the pytest plugin's) PEP 523's frame
 *    evaluation hook (python.c in the agent holds the shadow; this file only reports calls,
 *    returns and lines), so an allocation never needs the GIL to know its Python stack;
 *  - small helpers for the torch layer (msMemScope's CRC-64, byte copies) and the in-process
 *    mode (dlopen + attach; the trace -> database conversion is memscope._store, a separate
 *    extension: it links SQLite and libdw, which cost a program under `memscope run` 2 MB of
 *    RSS for nothing, so this one, imported at every traced Python start, stays small).
 *
 * Workload: the hook runs on every Python call and return (and line, for the trace hook) of
 * every traced thread, so it is a few loads and stores plus one co_extra lookup per call; the
 * frame evaluation hook's line source runs in each allocation. Everything else is rare.
 * Errors: Python exceptions (this is the extension; nothing here prints or exits). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* The frame evaluation hook (lines mode 3) reads the interpreter's own frames
 * (_PyInterpreterFrame: code, caller, last instruction), whose layout is internal to each
 * minor version: 3.11 only, as Cython and greenlet include it. */
#define MS_EVAL_HOOK 1
#define Py_BUILD_CORE 1
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#endif

#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_native_monitor.h"
#include "common/agent_api.h"

/* ---- the agent's entry points ---- */

/* The agent's entry points, typed by src/common/agent_api.h (the agent defines them with the
 * same prototypes): a change on either side that the other does not follow does not compile. */
struct agent_api {
#define F(field, sym) __typeof__(sym) *field;
    MS_AGENT_ENTRY_POINTS(F)
#undef F
};

static struct agent_api ag;
static void *agent_handle; /* our dlopen of the agent (attach mode), NULL otherwise */
static int agent_ok = -1;  /* cached available(): -1 unknown, 0 no, 1 yes */

/* Looks the agent's symbols up in handle (RTLD_DEFAULT or our dlopen). Returns 1 when the
 * whole Python-facing set is there. */
static int agent_resolve(void *handle)
{
#define R(field, sym) ag.field = (__typeof__(ag.field))dlsym(handle, #sym);
    MS_AGENT_ENTRY_POINTS(R)
#undef R
    agent_ok = -1;
    return ag.step && ag.start && ag.stop && ag.py_frame && ag.py_call && ag.py_return &&
           ag.py_line && ag.py_reset && ag.py_depth && ag.py_trace && ag.mark;
}

static int agent_present(void)
{
    return ag.py_frame != NULL && ag.py_call != NULL;
}

/* ---- code object -> frame id ---- */

/* The frame id of a code object lives in the code object itself, in a co_extra slot (PEP 523's
 * per-code scratch space, _PyCode_SetExtra): memscope holds no reference to any code object, so
 * a program that compiles functions at run time (exec, dataclasses, namedtuple, torch.fx) frees
 * them as it does without memscope, and memscope keeps no table that grows with them. The slot
 * holds (describe generation << 32) | id. Ids count up from 2 (1 is the probe frame of
 * available()) and are never reused: the agent interns stacks by their ids and the store keeps
 * the first description of an id, so an id must mean one code object's (file, name, first line)
 * for the whole trace. A code object that dies takes its id with it; a new one gets a new id.
 *
 * The slot's storage (16 bytes, allocated by CPython at the first _PyCode_SetExtra on a code
 * object and freed with it) is memscope's, not the program's: it is allocated under
 * memscope__quiet, so it is not recorded. With PYTHONMALLOC=malloc its free (in CPython's
 * code_dealloc) then reaches the agent as a free of a block it never saw, which the store counts
 * in process_stats.unmatched_frees; with pymalloc (the default) it never reaches malloc.
 *
 * describe_gen changes in a forked child, whose trace file is new: a code object whose slot
 * carries an older generation is described again the first time the child meets it
 * (_after_fork_child describes the frames on the child's stack at once). Only touched with the
 * GIL held. */
#define FRAME_PROBE_ID 1u
#define FRAME_FIRST_ID 2u

_Static_assert(sizeof(void *) == 8, "the co_extra slot packs a generation and an id");

static Py_ssize_t extra_index = -1; /* our co_extra index; -1: not granted (no Python stacks) */
static uint32_t next_id = FRAME_FIRST_ID;
static uint32_t describe_gen;

/* Describes code object co as frame id to the agent (a PYFRAME record). */
static void describe_code(uint32_t id, PyCodeObject *co)
{
    const char *file = PyUnicode_Check(co->co_filename) ? PyUnicode_AsUTF8(co->co_filename) : NULL;
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *qn = co->co_qualname;
#else
    PyObject *qn = co->co_name;
#endif
    const char *func = qn && PyUnicode_Check(qn) ? PyUnicode_AsUTF8(qn) : NULL;
    if (!file || !func)
        PyErr_Clear();
    ag.py_frame(id, file ? file : "?", func ? func : "?", co->co_firstlineno);
}

static int code_set_slot(PyCodeObject *co, uint32_t id)
{
    void *v = (void *)(((uintptr_t)describe_gen << 32) | id);
    if (ag.quiet)
        ag.quiet(1);
    int rc = _PyCode_SetExtra((PyObject *)co, extra_index, v);
    if (ag.quiet)
        ag.quiet(-1);
    if (rc < 0)
        PyErr_Clear();
    return rc;
}

/* Returns the frame id of co, describing it to the agent the first time (in this process); 0
 * when no slot could be had (the frame then shows as unknown). */
static uint32_t code_id(PyCodeObject *co)
{
    if (__builtin_expect(extra_index < 0, 0))
        return 0;
    void *v = NULL;
    if (_PyCode_GetExtra((PyObject *)co, extra_index, &v) < 0) {
        PyErr_Clear();
        return 0;
    }
    uintptr_t x = (uintptr_t)v;
    uint32_t id = (uint32_t)x;
    if (__builtin_expect(id != 0, 1)) {
        if (__builtin_expect((uint32_t)(x >> 32) != describe_gen, 0) && code_set_slot(co, id) == 0)
            describe_code(id, co); /* first met in this forked child */
        return id;
    }
    if (next_id == UINT32_MAX)
        return 0;
    id = next_id;
    if (code_set_slot(co, id) < 0)
        return 0;
    next_id++;
    describe_code(id, co);
    return id;
}

/* ---- the trace hook ---- */

/* hook_gen changes every time the hook is (re)installed; a thread whose tls_gen differs
 * rebuilds its shadow stack from its real frames at its first event. That is how threads that
 * were already running when the hook was installed get correct stacks. */
static unsigned hook_gen = 1;
static int hook_on;    /* the hook is installed (for new threads too) */
static int hook_lines; /* 1: PyEval_SetTrace (line events, exact lines); 0: PyEval_SetProfile */
/* With PyEval_SetProfile: the agent keeps each call's frame and reads the innermost frame's line
 * at each allocation (frame_line): exact lines without line events, whose tracing of every
 * line and instruction is most of the hook's cost (set_python_stacks(on, 2)). */
static int hook_frames;
static int hook_eval; /* 1: the frame evaluation hook (mode 3) instead of either */

/* The current line of a frame the hook handed to the agent (memscope__py_line_source). Called
 * inside the allocation's interposer, on the frame's own thread while it runs: CPython computes
 * it from the frame's last instruction and the code's line table, allocating nothing. */
static int frame_line(void *frame, uint32_t *callee)
{
    (void)callee; /* the profile hook sees every call */
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame);
    return line > 0 ? line : 0; /* never -1: the frame is running */
}

/* One call onto the agent's shadow stack, with its frame when the agent reads lines from it. */
static void shadow_call(uint32_t id, int caller_line, int line, PyFrameObject *frame)
{
    if (hook_frames)
        ag.py_call_frame(id, caller_line, line, frame);
    else
        ag.py_call(id, caller_line, line);
}
static _Thread_local unsigned tls_gen;

#define SEED_MAX 1024

/* Pushes the whole frame chain ending at f (innermost) onto this thread's empty shadow. */
static void seed_stack(PyFrameObject *f)
{
    PyFrameObject *chain[SEED_MAX];
    int n = 0;
    Py_XINCREF(f);
    while (f && n < SEED_MAX) {
        chain[n++] = f;
        f = PyFrame_GetBack(f); /* new reference */
    }
    Py_XDECREF(f);
    ag.py_reset();
    int caller_line = 0;
    for (int i = n - 1; i >= 0; i--) {
        PyCodeObject *co = PyFrame_GetCode(chain[i]);
        uint32_t id = code_id(co);
        Py_DECREF(co);
        int line = PyFrame_GetLineNumber(chain[i]);
        shadow_call(id, caller_line, line, chain[i]);
        caller_line = line;
    }
    for (int i = 0; i < n; i++)
        Py_DECREF(chain[i]);
}

static int hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj;
    (void)arg;
    if (__builtin_expect(tls_gen != hook_gen, 0)) {
        tls_gen = hook_gen;
        seed_stack(frame); /* includes frame: a CALL, LINE or C_CALL event is done */
        if (what == PyTrace_RETURN)
            ag.py_return();
        return 0;
    }
    switch (what) {
    case PyTrace_CALL: {
        PyCodeObject *co = PyFrame_GetCode(frame);
        uint32_t id = code_id(co);
        Py_DECREF(co);
        int caller_line = 0;
        PyFrameObject *back = PyFrame_GetBack(frame);
        if (back) {
            caller_line = PyFrame_GetLineNumber(back);
            Py_DECREF(back);
        }
        shadow_call(id, caller_line, PyFrame_GetLineNumber(frame), frame);
        break;
    }
    case PyTrace_RETURN: /* also when an exception leaves the frame */ ag.py_return(); break;
    case PyTrace_LINE:
    case PyTrace_C_CALL: ag.py_line(PyFrame_GetLineNumber(frame)); break;
    default: break;
    }
    return 0;
}

/* ---- the frame evaluation hook (3.11; lines mode 3) ----
 *
 * Under a profile or trace function, CPython 3.11 runs every instruction of every frame through
 * its tracing path, unspecialized: most of the profile hook's cost is there, not in the hook.
 * PEP 523's frame evaluation hook (_PyInterpreterState_SetEvalFrameFunc) is called instead each
 * time a Python frame starts or resumes, on every thread of the interpreter, and the frame then
 * runs specialized as without memscope (calls between Python functions, which the interpreter
 * otherwise runs in the same C loop, go through C). eval_hook pushes the frame onto the agent's
 * shadow before it runs and pops it after; the caller's line is exact (its last instruction is
 * the call), and the agent reads the innermost frame's line at each allocation (iframe_line). As
 * with the profile hook, allocations of threads that released the GIL get their stack, and the
 * allocation path touches no interpreter state but the thread's current frame.
 *
 * Not every frame passes through the hook: those running when it was installed (they return
 * without it), and those CPython 3.11.2 starts without it (BINARY_SUBSCR_GETITEM: a class's
 * __getitem__). So each thread mirrors its shadow's frames (struct eval_tls) and, when a frame
 * starts whose caller is not the shadow's innermost frame, brings the shadow in line with the
 * real chain first (eval_sync): it drops the entries of frames that have returned and pushes the
 * frames between (the caller's chain is walked until a frame of the shadow; frame and code must
 * both match, as a frame's memory is reused). A frame that eval_hook pushed pops, when it returns,
 * whatever was pushed above it too. Between a frame's unseen return and the next call the shadow
 * still ends with it; the agent then finds the running frame below it (iframe_line answers only
 * for the thread's current frame), and an unseen frame that makes no call is missing from the
 * stack (its caller shows at the line of its last call).
 *
 * A PEP 523 hook installed before memscope's is chained (prev_eval); one installed after it
 * replaces it, and the stacks then stop at the frames running then (NEEDSWORK: a debugger's or
 * torch.compile's hook and this one cannot both see every frame). */
#ifdef MS_EVAL_HOOK
#define SYNC_MAX 64    /* frames walked from a caller to find the shadow in its chain */
#define MIRROR_MAX 128 /* innermost entries mirrored (a ring): a sync looks among them */

static _PyFrameEvalFunction prev_eval; /* the hook installed before ours; NULL: the default */
static int eval_on;                    /* eval_hook is installed */

/* A thread's mirror of its shadow's innermost entries: entry i (0: the outermost) in slot
 * i % MIRROR_MAX while depth - i <= MIRROR_MAX. Small (2 KiB): the C library allocates each
 * thread's copy of this module's thread-local data from the heap, which the program's figures
 * count. */
struct eval_tls {
    unsigned gen;             /* hook_gen the shadow was built under */
    unsigned depth;           /* entries on the agent's shadow */
    unsigned hooked;          /* depth of the innermost entry eval_hook pushed; 0: none */
    unsigned epoch;           /* counts rebuilds: a frame pushed before one pops nothing */
    _PyInterpreterFrame *top; /* the innermost entry's frame, at any depth */
    _PyInterpreterFrame *frame[MIRROR_MAX];
    PyCodeObject *code[MIRROR_MAX]; /* compared only, never dereferenced */
};
static _Thread_local struct eval_tls et;

/* The current line of f, a running frame of the calling thread: the line table read at its
 * last instruction, allocating nothing. */
static int frame_line_now(_PyInterpreterFrame *f)
{
    PyCodeObject *co = f->f_code;
    int i = _PyInterpreterFrame_LASTI(f);
    int line;
    if (i < 0) /* not started */
        line = co->co_firstlineno;
    else if (__atomic_load_n(&co->_co_linearray, __ATOMIC_ACQUIRE)) /* code_line_table */
        line = _PyCode_LineNumberFromArray(co, i);
    else
        line = PyCode_Addr2Line(co, i * (int)sizeof(_Py_CODEUNIT));
    return line > 0 ? line : 0;
}

/* The agent's line source in mode 3, called in the allocation's interposer with a frame of the
 * thread's shadow: its line when it is the thread's current frame, else -1 (not running: the
 * agent looks below it). The check makes the read safe whatever the shadow holds (a frame that
 * returned unseen, its memory reused): the current frame of the calling thread is alive, GIL
 * or not, as only this thread changes its frames. */
static int iframe_line(void *p, uint32_t *callee)
{
    PyThreadState *ts = PyGILState_GetThisThreadState(); /* no lock, no allocation */
    if (!ts || !ts->cframe)
        return -1;
    _PyInterpreterFrame *cur = ts->cframe->current_frame;
    if (cur == p)
        return frame_line_now(p);
    if (!cur || cur->previous != p || _PyFrame_IsIncomplete(cur))
        return -1;
    /* cur, called from p, started without the hook (a class's __getitem__, specialized after
     * its first runs went through the hook: its code has its id). With the GIL only: then no
     * other thread changes the code's co_extra. */
    void *v = NULL;
    if (_PyThreadState_UncheckedGet() == ts && extra_index >= 0 &&
        _PyCode_GetExtra((PyObject *)cur->f_code, extra_index, &v) == 0) {
        uintptr_t x = (uintptr_t)v;
        if ((uint32_t)x != 0 && (uint32_t)(x >> 32) == describe_gen) {
            callee[0] = (uint32_t)x;
            callee[1] = (uint32_t)frame_line_now(cur);
        }
    }
    return frame_line_now(p);
}

/* Gives co CPython's own table of its lines by instruction (_co_linearray, which 3.11 builds
 * for line tracing and frees with the code object), so that a line costs one read instead of a
 * decoding of the code's location table from its start, at each call and allocation. The
 * entries are what PyCode_Addr2Line returns without the table: both come from
 * _PyCode_CheckLineNumber over the same table, walked here once from the first instruction
 * (4-byte entries: every line fits). The table is memscope's, allocated under quiet (with
 * PYTHONMALLOC=malloc its free is an unmatched free, as for the co_extra slot). */
static void code_line_table(PyCodeObject *co)
{
    Py_ssize_t n = Py_SIZE(co);
    if (ag.quiet)
        ag.quiet(1);
    int32_t *t = PyMem_Malloc((size_t)n * sizeof *t);
    if (ag.quiet)
        ag.quiet(-1);
    if (!t)
        return;           /* lines are then read from the location table */
    PyCodeAddressRange b; /* as _PyCode_InitAddressRange sets it */
    b.opaque.lo_next = (const uint8_t *)PyBytes_AS_STRING(co->co_linetable);
    b.opaque.limit = b.opaque.lo_next + PyBytes_GET_SIZE(co->co_linetable);
    b.ar_start = -1;
    b.ar_end = 0;
    b.opaque.computed_line = co->co_firstlineno;
    b.ar_line = -1;
    for (Py_ssize_t i = 0; i < n; i++)
        t[i] = _PyCode_CheckLineNumber((int)(i * (Py_ssize_t)sizeof(_Py_CODEUNIT)), &b);
    co->_co_linearray_entry_size = sizeof *t;
    /* last, whole: a thread that released the GIL may read it (frame_line_now) */
    __atomic_store_n(&co->_co_linearray, (char *)t, __ATOMIC_RELEASE);
}

/* Pushes f, called from the shadow's innermost frame at caller_line, onto both shadows. */
static void eval_push(_PyInterpreterFrame *f, int caller_line)
{
    PyCodeObject *co = f->f_code;
    if (__builtin_expect(co->_co_linearray == NULL, 0))
        code_line_table(co);
    ag.py_call_frame(code_id(co), caller_line, frame_line_now(f), f);
    et.frame[et.depth % MIRROR_MAX] = f;
    et.code[et.depth % MIRROR_MAX] = co;
    et.depth++;
    et.top = f;
}

static void eval_pop(void)
{
    ag.py_return();
    et.depth--;
}

/* Rebuilds this thread's shadow from the chain ending at f (its current frame, or NULL). */
static void eval_reseed(_PyInterpreterFrame *f)
{
    _PyInterpreterFrame *chain[SEED_MAX];
    int n = 0;
    for (; f && n < SEED_MAX; f = f->previous)
        if (!_PyFrame_IsIncomplete(f)) /* not started yet: PyFrame_GetBack skips them too */
            chain[n++] = f;
    ag.py_reset();
    et.depth = 0;
    et.hooked = 0;
    et.epoch++;
    et.top = NULL;
    int caller_line = 0;
    for (int i = n - 1; i >= 0; i--) {
        eval_push(chain[i], caller_line);
        caller_line = frame_line_now(chain[i]);
    }
}

/* Brings the shadow in line with the chain ending at caller, whose innermost frame differs. */
static void eval_sync(_PyInterpreterFrame *caller)
{
    _PyInterpreterFrame *unseen[SYNC_MAX];
    int k = 0;
    unsigned lo = et.depth > MIRROR_MAX ? et.depth - MIRROR_MAX : 0;
    for (_PyInterpreterFrame *f = caller; f && k < SYNC_MAX; f = f->previous) {
        if (_PyFrame_IsIncomplete(f))
            continue;
        for (unsigned j = et.depth; j-- > lo;) {
            if (et.frame[j % MIRROR_MAX] != f || et.code[j % MIRROR_MAX] != f->f_code)
                continue;
            /* entries above j returned unseen; those of frames eval_hook will pop must not */
            if (et.hooked > j + 1)
                goto rebuild;
            while (et.depth > j + 1)
                eval_pop();
            et.top = f;
            int caller_line = frame_line_now(f);
            while (k-- > 0) {
                eval_push(unseen[k], caller_line);
                caller_line = frame_line_now(unseen[k]);
            }
            return;
        }
        unseen[k++] = f;
    }
rebuild:
    eval_reseed(caller);
}

static PyObject *eval_hook(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag)
{
    if (__builtin_expect(!eval_on, 0))
        return prev_eval ? prev_eval(ts, frame, throwflag)
                         : _PyEval_EvalFrameDefault(ts, frame, throwflag);
    PyObject *et_ = NULL, *ev = NULL, *tb = NULL;
    int err = PyErr_Occurred() != NULL; /* throwflag: the exception to throw in */
    if (__builtin_expect(err, 0))
        PyErr_Fetch(&et_, &ev, &tb);
    _PyInterpreterFrame *caller = ts->cframe->current_frame;
    if (__builtin_expect(et.gen != hook_gen, 0)) {
        et.gen = hook_gen;
        eval_reseed(caller);
    } else if (__builtin_expect(caller != et.top, 0)) {
        eval_sync(caller);
    }
    eval_push(frame, caller ? frame_line_now(caller) : 0);
    if (__builtin_expect(err, 0))
        PyErr_Restore(et_, ev, tb);
    unsigned gen = hook_gen, epoch = et.epoch, mine = et.depth, hooked = et.hooked;
    et.hooked = mine;
    PyObject *r = prev_eval ? prev_eval(ts, frame, throwflag)
                            : _PyEval_EvalFrameDefault(ts, frame, throwflag);
    if (__builtin_expect(eval_on && hook_gen == gen && et.gen == gen && et.epoch == epoch, 1)) {
        while (et.depth >= mine) /* what was pushed above it, unseen frames that returned */
            eval_pop();
        et.hooked = hooked;
        et.top = caller; /* the entry below it: the shadow ended with caller when it came */
    }
    return r;
}

/* Installs or removes eval_hook in the current interpreter. */
static void eval_install(int on)
{
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction cur = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (on) {
        if (cur != eval_hook)
            prev_eval = cur == _PyEval_EvalFrameDefault ? NULL : cur;
        _PyInterpreterState_SetEvalFrameFunc(interp, eval_hook);
        eval_on = 1;
    } else {
        eval_on = 0;
        if (cur == eval_hook)
            _PyInterpreterState_SetEvalFrameFunc(interp,
                                                 prev_eval ? prev_eval : _PyEval_EvalFrameDefault);
    }
}
#endif

static void set_hook_this_thread(int on)
{
    if (hook_lines)
        PyEval_SetTrace(on ? hook : NULL, NULL);
    else
        PyEval_SetProfile(on ? hook : NULL, NULL);
}

/* Installs or removes the hook on every thread of the interpreter but the current one. */
static void set_hook_other_threads(int on)
{
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    PyThreadState *me = PyThreadState_Get();
    PyInterpreterState *interp = PyThreadState_GetInterpreter(me);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts;
         ts = PyThreadState_Next(ts)) {
        if (ts == me)
            continue;
        if (hook_lines)
            _PyEval_SetTrace(ts, on ? hook : NULL, NULL);
        else
            _PyEval_SetProfile(ts, on ? hook : NULL, NULL);
    }
#else
    (void)
        on; /* NEEDSWORK: 3.12+ has PyEval_SetProfileAllThreads; other versions: new threads only */
#endif
}

/* threading's per-thread hook: threading.settrace/setprofile(thread_bootstrap) makes every new
 * thread call sys.settrace(thread_bootstrap) first, so thread_bootstrap runs at that thread's
 * first Python call; it replaces itself with the C hook and seeds the thread's shadow stack. */
static PyObject *thread_bootstrap(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *frame, *event, *arg;
    if (!PyArg_ParseTuple(args, "OOO", &frame, &event, &arg))
        return NULL;
    if (hook_on && agent_present() && PyFrame_Check(frame)) {
        set_hook_this_thread(1);
        tls_gen = hook_gen;
        seed_stack((PyFrameObject *)frame);
    } else {
        set_hook_this_thread(0);
    }
    Py_RETURN_NONE;
}

static PyMethodDef bootstrap_def = {"_thread_bootstrap", thread_bootstrap, METH_VARARGS,
                                    "memscope: installs the C hook on a new thread"};
static PyObject *bootstrap_fn;

/* Calls threading.settrace/setprofile(fn) (fn may be Py_None) when the program has imported
 * threading; when it has not, memscope's import hook (__init__.py, _watch_threading) calls
 * threading_loaded() once it does: importing threading here would cost every traced program
 * the module and its imports, about 0.5 MB of RSS (issue 47, section 5). */
static int threading_hook(PyObject *fn)
{
    PyObject *name = PyUnicode_FromString("threading");
    if (!name)
        return -1;
    PyObject *threading = PyImport_GetModule(name);
    Py_DECREF(name);
    if (!threading)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *r = PyObject_CallMethod(threading, hook_lines ? "settrace" : "setprofile", "O", fn);
    Py_DECREF(threading);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int hook_install(int on, int lines)
{
    int eval = 0;
#ifdef MS_EVAL_HOOK
    eval = lines == 3 && ag.py_call_frame && ag.py_line_source;
#endif
    if (lines == 3 && !eval)
        lines = 2; /* another Python, or an older agent: the profile hook */
    int frames = lines == 2 && ag.py_call_frame && ag.py_line_source;
    if (lines == 2)
        lines = !frames; /* an agent without them: line events */
    if (eval)
        lines = 0;
    if (on == hook_on &&
        (!on || (lines == hook_lines && frames == hook_frames && eval == hook_eval)))
        return 0;
    if (hook_on && hook_eval) {
#ifdef MS_EVAL_HOOK
        eval_install(0);
#endif
        ag.py_line_source(NULL);
        hook_eval = 0;
        hook_on = 0;
        hook_gen++; /* the frames running now pop nothing when they return */
        ag.py_reset();
    } else if (hook_on) { /* remove the old one (of the old kind) first */
        if (hook_frames)
            ag.py_line_source(NULL);
        hook_frames = 0;
        set_hook_this_thread(0);
        set_hook_other_threads(0);
        if (threading_hook(Py_None) < 0)
            return -1;
        hook_on = 0;
        ag.py_reset();
    }
    if (!on)
        return 0;
    if (extra_index < 0 && (extra_index = _PyEval_RequestCodeExtraIndex(NULL)) < 0) {
        PyErr_SetString(PyExc_RuntimeError,
                        "memscope: no co_extra index left for the Python stack hook");
        return -1;
    }
    hook_lines = lines;
    hook_frames = frames;
#ifdef MS_EVAL_HOOK
    if (eval) {
        hook_eval = 1;
        ag.py_line_source(iframe_line);
        hook_gen++;
        hook_on = 1;
        eval_install(1);
        et.gen = hook_gen; /* this thread's shadow: every frame on its stack now */
        eval_reseed(PyThreadState_Get()->cframe->current_frame);
        return 0;
    }
#endif
    if (frames)
        ag.py_line_source(frame_line);
    if (!bootstrap_fn && !(bootstrap_fn = PyCFunction_New(&bootstrap_def, NULL)))
        return -1;
    hook_gen++;
    hook_on = 1;
    if (threading_hook(bootstrap_fn) < 0) {
        hook_on = 0;
        return -1;
    }
    set_hook_other_threads(1);
    set_hook_this_thread(1);
    /* The current thread's shadow: every frame on the stack now (our caller included). */
    tls_gen = hook_gen;
    seed_stack(PyEval_GetFrame());
    return 0;
}

/* ---- Python functions ---- */

static PyObject *bool_rc(int rc)
{
    return PyBool_FromLong(rc == 0);
}

static PyObject *n_threading_loaded(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    if (hook_on && !hook_eval && bootstrap_fn && threading_hook(bootstrap_fn) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *n_available(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    if (agent_ok < 0) {
        /* memscope__py_frame answers 0 only when the agent is initialized and not broken; the
         * probe frame it records is never referenced by a stack. */
        agent_ok = agent_present() && ag.py_frame(FRAME_PROBE_ID, "<memscope>", "<probe>", 0) == 0;
    }
    return PyBool_FromLong(agent_ok);
}

static PyObject *n_preloaded(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyBool_FromLong(agent_present() && agent_handle == NULL);
}

#define VOID_CALL(name, field)                                  \
    static PyObject *n_##name(PyObject *self, PyObject *noargs) \
    {                                                           \
        (void)self;                                             \
        (void)noargs;                                           \
        return bool_rc(ag.field ? ag.field() : -1);             \
    }
VOID_CALL(start, start)
VOID_CALL(stop, stop)
VOID_CALL(step, step)
VOID_CALL(owner_pop, owner_pop)
VOID_CALL(range_pop, range_pop)

#define STR_CALL(name, field)                                \
    static PyObject *n_##name(PyObject *self, PyObject *arg) \
    {                                                        \
        (void)self;                                          \
        const char *s = PyUnicode_AsUTF8(arg);               \
        if (!s)                                              \
            return NULL;                                     \
        return bool_rc(ag.field ? ag.field(s) : -1);         \
    }
STR_CALL(owner_push, owner_push)
STR_CALL(mark, mark)
STR_CALL(range_push, range_push)

/* quiet(delta): +1 before memscope's own Python bookkeeping, -1 after; the heap allocations
 * of this thread in between are not recorded (memscope__quiet). */
static PyObject *n_quiet(PyObject *self, PyObject *arg)
{
    (void)self;
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    return bool_rc(ag.quiet ? ag.quiet((int)d) : -1);
}

static PyObject *n_access(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long p, n;
    int flags;
    const char *op;
    if (!PyArg_ParseTuple(args, "KKis:access", &p, &n, &flags, &op))
        return NULL;
    if (flags < 1 || flags > 3) {
        PyErr_SetString(PyExc_ValueError, "access: flags must be 1 (read), 2 (write) or 3");
        return NULL;
    }
    return bool_rc(ag.access ? ag.access((const void *)(uintptr_t)p, (size_t)n, flags, op) : -1);
}

static PyObject *n_pool_alloc(PyObject *self, PyObject *args)
{
    (void)self;
    const char *pool;
    unsigned long long p, n;
    if (!PyArg_ParseTuple(args, "sKK:pool_alloc", &pool, &p, &n))
        return NULL;
    return bool_rc(ag.pool_alloc ? ag.pool_alloc(pool, (const void *)(uintptr_t)p, (size_t)n) : -1);
}

static PyObject *n_pool_free(PyObject *self, PyObject *args)
{
    (void)self;
    const char *pool;
    unsigned long long p;
    if (!PyArg_ParseTuple(args, "sK:pool_free", &pool, &p))
        return NULL;
    return bool_rc(ag.pool_free ? ag.pool_free(pool, (const void *)(uintptr_t)p) : -1);
}

static PyObject *n_pool_reserve(PyObject *self, PyObject *args)
{
    (void)self;
    const char *pool;
    unsigned long long p, n;
    if (!PyArg_ParseTuple(args, "sKK:pool_reserve", &pool, &p, &n))
        return NULL;
    return bool_rc(ag.pool_reserve ? ag.pool_reserve(pool, (const void *)(uintptr_t)p, (size_t)n)
                                   : -1);
}

static PyObject *n_pool_release(PyObject *self, PyObject *args)
{
    (void)self;
    const char *pool;
    unsigned long long p;
    if (!PyArg_ParseTuple(args, "sK:pool_release", &pool, &p))
        return NULL;
    return bool_rc(ag.pool_release ? ag.pool_release(pool, (const void *)(uintptr_t)p) : -1);
}

/* msMemScope's CRC-64 (reference §4.4): poly 0x42F0E1EBA9EA3693, init and xorout all ones,
 * and a right-shifting (reflected-style) table built from the NON-reflected polynomial, so it
 * is not CRC-64/XZ. Bit-exact with their calculate_data_check_sum. */
static uint64_t crc_table[256];

static void crc_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x42F0E1EBA9EA3693ull : c >> 1;
        crc_table[i] = c;
    }
}

static uint64_t crc64(const unsigned char *p, size_t n)
{
    uint64_t c = ~0ull;
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return ~c;
}

/* crc64(ptr, size) of raw memory, or crc64(bytes-like) */
static PyObject *n_crc64(PyObject *self, PyObject *args)
{
    (void)self;
    if (PyTuple_GET_SIZE(args) == 1) {
        Py_buffer b;
        if (!PyArg_ParseTuple(args, "y*:crc64", &b))
            return NULL;
        uint64_t c;
        Py_BEGIN_ALLOW_THREADS c = crc64(b.buf, (size_t)b.len);
        Py_END_ALLOW_THREADS PyBuffer_Release(&b);
        return PyLong_FromUnsignedLongLong(c);
    }
    unsigned long long p, n;
    if (!PyArg_ParseTuple(args, "KK:crc64", &p, &n))
        return NULL;
    if (!p && n) {
        PyErr_SetString(PyExc_ValueError, "crc64: null pointer");
        return NULL;
    }
    uint64_t c;
    Py_BEGIN_ALLOW_THREADS c = crc64((const unsigned char *)(uintptr_t)p, (size_t)n);
    Py_END_ALLOW_THREADS return PyLong_FromUnsignedLongLong(c);
}

/* read_bytes(ptr, size): a bytes copy of raw memory (the caller vouches for the range). */
static PyObject *n_read_bytes(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long p, n;
    if (!PyArg_ParseTuple(args, "KK:read_bytes", &p, &n))
        return NULL;
    if ((!p && n) || n > (unsigned long long)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_ValueError, "read_bytes: bad pointer or size");
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)(uintptr_t)p, (Py_ssize_t)n);
}

/* set_python_stacks(on, lines=1): installs or removes the hook (see hook_install); lines 1:
 * line events, 0: calls only (a frame's line is that of its last call), 2: calls only, each
 * allocation's line read from its frame (hook_frames; 1 with an agent that cannot), 3: the
 * frame evaluation hook, lines as in 2 (hook_eval; 2 on a Python other than 3.11). */
static PyObject *n_set_python_stacks(PyObject *self, PyObject *args)
{
    (void)self;
    int on, lines = 1;
    if (!PyArg_ParseTuple(args, "p|i:set_python_stacks", &on, &lines))
        return NULL;
    if (lines < 0 || lines > 3) {
        PyErr_SetString(PyExc_ValueError, "set_python_stacks: lines must be 0, 1, 2 or 3");
        return NULL;
    }
    if (on && !agent_present())
        Py_RETURN_FALSE;
    if (hook_install(on, lines) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *n_python_stacks(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyBool_FromLong(hook_on);
}

static PyObject *n_py_depth(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyLong_FromUnsignedLong(ag.py_depth ? ag.py_depth() : 0);
}

/* tracer(on): msMemScope's Python tracer (python_trace table). Needs the hook: installs it. */
static PyObject *n_tracer(PyObject *self, PyObject *args)
{
    (void)self;
    int on;
    if (!PyArg_ParseTuple(args, "p:tracer", &on))
        return NULL;
    if (!agent_present())
        Py_RETURN_FALSE;
    if (on && !hook_on && hook_install(1, 0) < 0)
        return NULL;
    ag.py_trace(on);
    Py_RETURN_TRUE;
}

/* _after_fork_child(): the child writes a new trace file; describe every frame again. */
static PyObject *n_after_fork_child(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    if (!agent_present())
        Py_RETURN_NONE;
    if (agent_ok == 1)
        ag.py_frame(FRAME_PROBE_ID, "<memscope>", "<probe>", 0);
    /* Every code object is described again when the child first meets it; those on this
     * thread's stack now (the shadow stack holds their ids) at once. */
    describe_gen++;
    PyFrameObject *f = PyEval_GetFrame(); /* borrowed */
    Py_XINCREF(f);
    while (f) {
        PyCodeObject *co = PyFrame_GetCode(f);
        code_id(co);
        Py_DECREF(co);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_RETURN_NONE;
}

/* attach(trace_dir, c_depth, py_depth, agent_path): the in-process mode. Sets the agent's
 * environment, dlopens it (its constructor opens the trace file, deferred: nothing recorded
 * yet) and calls memscope__attach, which patches the loaded objects so that their allocations
 * reach the agent. Returns True, or False when the agent is already loaded by someone else.
 * Raises OSError when the agent cannot be loaded or attached. */
static PyObject *n_attach(PyObject *self, PyObject *args)
{
    (void)self;
    const char *dir, *path;
    unsigned c_depth, py_depth;
    if (!PyArg_ParseTuple(args, "sIIs:attach", &dir, &c_depth, &py_depth, &path))
        return NULL;
    if (agent_handle)
        Py_RETURN_TRUE;
    if (agent_present())
        Py_RETURN_FALSE; /* preloaded: nothing to attach */
    char buf[32];
    setenv(MS_ENV_TRACE_DIR, dir, 1);
    snprintf(buf, sizeof buf, "%u", c_depth);
    setenv(MS_ENV_DEPTH, buf, 1);
    snprintf(buf, sizeof buf, "%u", py_depth);
    setenv(MS_ENV_PY_DEPTH, buf, 1);
    setenv(MS_ENV_DEFERRED, "1", 1);
    setenv(MS_ENV_NO_FOLLOW, "1", 1);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    /* Children of this process are not traced (no LD_PRELOAD); drop the agent's settings so
     * that a `memscope run` started from here is not confused by them. */
    unsetenv(MS_ENV_TRACE_DIR);
    unsetenv(MS_ENV_DEPTH);
    unsetenv(MS_ENV_PY_DEPTH);
    unsetenv(MS_ENV_DEFERRED);
    unsetenv(MS_ENV_NO_FOLLOW);
    if (!h) {
        const char *e = dlerror();
        PyErr_Format(PyExc_OSError, "memscope: cannot load the agent %s: %s", path,
                     e ? e : "unknown error");
        return NULL;
    }
    struct agent_api saved = ag;
    if (!agent_resolve(h) || !ag.attach) {
        ag = saved;
        dlclose(h);
        PyErr_Format(PyExc_OSError, "memscope: %s has no memscope__attach (agent too old)", path);
        return NULL;
    }
    int rc = ag.attach();
    if (rc != 0) {
        /* The agent stays loaded (it is -z nodelete) but records nothing. */
        ag = saved;
        agent_ok = -1;
        PyErr_Format(PyExc_OSError, "memscope: attaching the agent failed (%d: %s)", rc,
                     rc < 0 ? strerror(-rc) : "error");
        return NULL;
    }
    agent_handle = h;
    Py_RETURN_TRUE;
}

/* bind_agent(agent_path): `memscope attach` loaded the agent into this running process (not
 * into the global scope, so RTLD_DEFAULT cannot see it): its entry points are taken from the
 * loaded object itself (dlopen with RTLD_NOLOAD loads nothing). Returns True when bound, False
 * when the agent is not loaded. */
static PyObject *n_bind_agent(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path;
    if (!PyArg_ParseTuple(args, "s:bind_agent", &path))
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) {
        dlerror();
        Py_RETURN_FALSE;
    }
    struct agent_api saved = ag;
    if (!agent_resolve(h)) {
        ag = saved;
        dlclose(h);
        Py_RETURN_FALSE;
    }
    dlclose(h); /* the agent is -z nodelete: its functions stay */
    Py_RETURN_TRUE;
}

/* heap_stats(): {"allocated", "reserved"} from glibc's mallinfo2 (bytes in use by the heap,
 * mmap'ed chunks included; and bytes the heap holds from the system) and "rss" from
 * /proc/self/statm. The CPU stand-in for an allocator's allocated/reserved counters. */
static PyObject *n_heap_stats(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    struct mallinfo2 mi = mallinfo2();
    unsigned long long rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        unsigned long long size, res;
        if (fscanf(f, "%llu %llu", &size, &res) == 2)
            rss = res * (unsigned long long)sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    return Py_BuildValue("{s:K,s:K,s:K}", "allocated",
                         (unsigned long long)(mi.uordblks + mi.hblkhd), "reserved",
                         (unsigned long long)(mi.arena + mi.hblkhd), "rss", rss);
}

static PyMethodDef methods[] = {
    {"available", n_available, METH_NOARGS, "available() -> bool: the agent is loaded and records"},
    {"preloaded", n_preloaded, METH_NOARGS, "preloaded() -> bool: the agent came with LD_PRELOAD"},
    {"start", n_start, METH_NOARGS, "start(): record (memscope__start)"},
    {"stop", n_stop, METH_NOARGS, "stop(): stop recording (memscope__stop)"},
    {"step", n_step, METH_NOARGS, "step(): end the current step"},
    {"quiet", n_quiet, METH_O,
     "quiet(delta): memscope's own allocations on this thread (+1 "
     "on, -1 off) are not recorded"},
    {"owner_push", n_owner_push, METH_O, "owner_push(label)"},
    {"owner_pop", n_owner_pop, METH_NOARGS, "owner_pop()"},
    {"mark", n_mark, METH_O, "mark(msg)"},
    {"range_push", n_range_push, METH_O, "range_push(name)"},
    {"range_pop", n_range_pop, METH_NOARGS, "range_pop()"},
    {"access", n_access, METH_VARARGS, "access(ptr, size, flags, op): 1 read, 2 write, 3 both"},
    {"pool_alloc", n_pool_alloc, METH_VARARGS, "pool_alloc(pool, ptr, size)"},
    {"pool_free", n_pool_free, METH_VARARGS, "pool_free(pool, ptr)"},
    {"pool_reserve", n_pool_reserve, METH_VARARGS, "pool_reserve(pool, ptr, size)"},
    {"pool_release", n_pool_release, METH_VARARGS, "pool_release(pool, ptr)"},
    {"crc64", n_crc64, METH_VARARGS, "crc64(ptr, size) or crc64(bytes) -> int (msMemScope CRC-64)"},
    {"read_bytes", n_read_bytes, METH_VARARGS, "read_bytes(ptr, size) -> bytes"},
    {"bind_agent", n_bind_agent, METH_VARARGS,
     "bind_agent(path) -> bool: use the agent memscope attach loaded into this process"},
    {"set_python_stacks", n_set_python_stacks, METH_VARARGS,
     "set_python_stacks(on, lines=True) -> bool: install/remove the Python stack hook"},
    {"python_stacks", n_python_stacks, METH_NOARGS, "python_stacks() -> bool: hook installed"},
    {"py_depth", n_py_depth, METH_NOARGS, "py_depth() -> int: the agent's Python depth"},
    {"tracer", n_tracer, METH_VARARGS, "tracer(on): Python call tracer (python_trace table)"},
    {"_after_fork_child", n_after_fork_child, METH_NOARGS, "re-describe frames after fork"},
    {"threading_loaded", n_threading_loaded, METH_NOARGS,
     "threading_loaded(): the program imported threading: hook the threads it starts"},
    {"attach", n_attach, METH_VARARGS, "attach(trace_dir, c_depth, py_depth, agent_path)"},
    {"heap_stats", n_heap_stats, METH_NOARGS, "heap_stats() -> dict"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    "memscope._native",
    "memscope's C extension",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__native(void)
{
    crc_init();
    agent_resolve(RTLD_DEFAULT);
    PyObject *m = PyModule_Create(&moduledef);
    if (m && PyModule_AddFunctions(m, ms__py_monitor_methods) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
