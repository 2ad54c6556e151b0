/* _store.c: memscope._store, the in-process mode's trace -> database conversion.
 *
 * Called by memscope/__init__.py's stop() (and at exit) in the in-process mode only. It is a
 * separate extension from memscope._native because it links the store (SQLite, libdw, libelf,
 * the compressors): loading those costs about 2 MB of RSS, which every Python program started
 * by `memscope run` would pay at start-up for a converter it never calls (the CLI converts).
 * Workload: one call per stop(). Errors: Python exceptions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdio.h>

#include "_store_live.h"
#include "common/files.h"
#include "store/stack_text.h"
#include "store/store.h"

#include <string.h>

/* convert(trace_dir, db_path, argv, call_stack_c, no_dump=False, compact=False,
 * window_start=None, window_end=None, no_traces=False): ms_store_convert in this process
 * (no_dump: the full database without memscope_dump; compact: the compact database; no_traces:
 * compact, without its packed traces; window_start, window_end: the mark prefixes of the
 * windows whose memory the conversion computes; the last three for memscope.pytest_plugin).
 * Raises RuntimeError with the store's reason. Runs without the GIL. */
static PyObject *n_convert(PyObject *self, PyObject *args)
{
    (void)self;
    const char *dir, *db;
    PyObject *argv_obj = Py_None;
    unsigned c_depth = 0;
    int no_dump = 0, compact = 0, no_traces = 0;
    const char *wstart = NULL, *wend = NULL;
    if (!PyArg_ParseTuple(args, "ss|OIppzzp:convert", &dir, &db, &argv_obj, &c_depth, &no_dump,
                          &compact, &wstart, &wend, &no_traces))
        return NULL;
    Py_ssize_t n = 0;
    const char **argv = NULL;
    if (argv_obj != Py_None) {
        if (!PyList_Check(argv_obj)) {
            PyErr_SetString(PyExc_TypeError, "convert: argv must be a list of str");
            return NULL;
        }
        n = PyList_GET_SIZE(argv_obj);
        argv = PyMem_Calloc((size_t)n + 1, sizeof *argv);
        if (!argv)
            return PyErr_NoMemory();
        for (Py_ssize_t i = 0; i < n; i++) {
            argv[i] = PyUnicode_AsUTF8(PyList_GET_ITEM(argv_obj, i));
            if (!argv[i]) {
                PyMem_Free(argv);
                return NULL;
            }
        }
    }
    struct ms_store_options o = {
        .trace_dir = dir,
        .db_path = db,
        .argv = argv,
        .exit_status = -1,
        .call_stack_c = c_depth,
        .events = "alloc,free",
        .symbolize = 1,
        .no_dump = no_dump,
        .compact = compact,
        .no_traces = no_traces,
        .window_start = wstart,
        .window_end = wend,
    };
    struct ms_store_result res;
    char err[512] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = ms_store_convert(&o, &res, err, sizeof err);
    Py_END_ALLOW_THREADS PyMem_Free(argv);
    if (rc < 0) {
        PyErr_Format(PyExc_RuntimeError, "memscope: cannot write the database %s: %s", db,
                     err[0] ? err : "error");
        return NULL;
    }
    return Py_BuildValue("{s:K,s:K,s:K,s:s}", "events", (unsigned long long)res.events, "processes",
                         (unsigned long long)res.processes, "lost_events",
                         (unsigned long long)res.lost_events, "warning", res.warning);
}

/* export_csv(db_path, csv_path): msMemScope's CSV from a database. */
static PyObject *n_export_csv(PyObject *self, PyObject *args)
{
    (void)self;
    const char *db, *csv;
    if (!PyArg_ParseTuple(args, "ss:export_csv", &db, &csv))
        return NULL;
    struct ms_output mo; /* a new file renamed over csv (files.h) */
    int orc = ms_output_open(&mo, csv);
    FILE *f = orc == 0 ? fdopen(mo.fd, "w") : NULL;
    if (!f) {
        errno = orc < 0 ? -orc : errno;
        ms_output_abort(&mo);
        return PyErr_SetFromErrnoWithFilename(PyExc_OSError, csv);
    }
    char err[512] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = ms_store_export_csv(db, f, err, sizeof err);
    Py_END_ALLOW_THREADS if (fclose(f) != 0 && rc == 0) rc = -1;
    mo.fd = -1; /* fclose closed it */
    if (rc == 0)
        rc = ms_output_commit(&mo);
    else
        ms_output_abort(&mo);
    if (rc < 0) {
        PyErr_Format(PyExc_RuntimeError, "memscope: cannot write %s: %s", csv,
                     err[0] ? err : "error");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* py_texts(db_path, ids): {stack id: its Python text} ("file(line): function" a line,
 * innermost first; "" without a Python part), read from the stack tree (a compact database
 * stores no text). Raises RuntimeError when the database cannot be read. */
static PyObject *n_py_texts(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path;
    PyObject *ids;
    if (!PyArg_ParseTuple(args, "sO:py_texts", &path, &ids))
        return NULL;
    PyObject *it = PyObject_GetIter(ids), *out = PyDict_New(), *k;
    sqlite3 *db = NULL;
    struct ms_stack_text t;
    int t_ok = 0;
    if (!it || !out)
        goto fail;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        ms_stack_text_init(&t, db) < 0) {
        PyErr_Format(PyExc_RuntimeError, "memscope: cannot read the stacks of %s", path);
        goto fail;
    }
    t_ok = 1;
    while ((k = PyIter_Next(it))) {
        long long id = PyLong_AsLongLong(k);
        const char *text = id == -1 && PyErr_Occurred() ? NULL : ms_stack_text_py(&t, id);
        PyObject *v = text ? PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace") : NULL;
        if (!text && !PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "memscope: cannot read stack %lld of %s", id, path);
        if (!v || PyDict_SetItem(out, k, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(k);
            goto fail;
        }
        Py_DECREF(v);
        Py_DECREF(k);
    }
    if (PyErr_Occurred())
        goto fail;
    ms_stack_text_release(&t);
    sqlite3_close(db);
    Py_DECREF(it);
    return out;
fail:
    if (t_ok)
        ms_stack_text_release(&t);
    sqlite3_close(db);
    Py_XDECREF(it);
    Py_XDECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"convert", n_convert, METH_VARARGS,
     "convert(trace_dir, db_path, argv=None, c_depth=0, no_dump=False, compact=False, "
     "window_start=None, window_end=None, no_traces=False)"},
    {"py_texts", n_py_texts, METH_VARARGS, "py_texts(db_path, ids) -> {id: Python stack text}"},
    {"export_csv", n_export_csv, METH_VARARGS, "export_csv(db_path, csv_path)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    "memscope._store",
    "memscope's trace -> database converter",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__store(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (m && PyModule_AddFunctions(m, ms__py_live_methods) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
