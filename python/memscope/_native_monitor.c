/* _native_monitor.c: the C helpers of the monitoring classes (memscope/monitor.py), added to
 * memscope._native: the one size parser (src/common/size.h), the one forecaster
 * (src/common/forecast.h, the fit `memscope analyze trend` uses) and the usage monitor's reader
 * of /proc (src/common/usage.h). Kept out of _native.c, whose job is the agent's hooks.
 * Workload: a few calls per sample (0.1 s). Errors: Python exceptions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_native_monitor.h"
#include "common/forecast.h"
#include "common/size.h"
#include "common/usage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* size_parse(text) -> int: "300 MiB", "1.5GiB", "4096" (powers of 1024). ValueError else. */
static PyObject *n_size_parse(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!s) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "size_parse() takes a str");
        return NULL;
    }
    uint64_t v;
    if (ms_size_parse(s, &v) < 0) {
        PyErr_Format(PyExc_ValueError,
                     "not a size: %R (a number of bytes, optionally with a unit: B, KiB, MiB, "
                     "GiB, TiB; KB, MB... are powers of 1024 too)",
                     arg);
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(v);
}

/* Reads a sequence of numbers into a new array of doubles (the caller frees it). */
static double *doubles(PyObject *seq, Py_ssize_t *n)
{
    PyObject *f = PySequence_Fast(seq, "forecast() takes sequences of numbers");
    if (!f)
        return NULL;
    *n = PySequence_Fast_GET_SIZE(f);
    double *v = malloc(((size_t)*n + 1) * sizeof *v);
    if (!v) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        v[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(f, i));
        if (v[i] == -1.0 && PyErr_Occurred()) {
            free(v);
            Py_DECREF(f);
            return NULL;
        }
    }
    Py_DECREF(f);
    return v;
}

/* forecast(x, y, limit) -> dict: the fit of the recent half of the series (slope, intercept,
 * r2, slope_stderr, points), status ("reached", "predicted", "not_growing", "too_short") and at
 * (the x at which the fit reaches limit, or None): ms_forecast_series. */
static PyObject *n_forecast(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *yo;
    double limit;
    if (!PyArg_ParseTuple(args, "OOd:forecast", &xo, &yo, &limit))
        return NULL;
    Py_ssize_t nx, ny;
    double *x = doubles(xo, &nx);
    if (!x)
        return NULL;
    double *y = doubles(yo, &ny);
    if (!y) {
        free(x);
        return NULL;
    }
    if (nx != ny || nx > INT32_MAX) {
        free(x);
        free(y);
        PyErr_SetString(PyExc_ValueError, "forecast(): x and y differ in length");
        return NULL;
    }
    struct ms_series_forecast fc;
    ms_forecast_series(x, y, (int)nx, limit, &fc);
    free(x);
    free(y);
    PyObject *at = fc.at >= 0 ? PyFloat_FromDouble(fc.at) : Py_NewRef(Py_None);
    if (!at)
        return NULL;
    PyObject *d = Py_BuildValue("{s:d,s:d,s:d,s:d,s:i,s:s,s:O}", "slope", fc.fit.slope, "intercept",
                                fc.fit.intercept, "r2", fc.fit.r2, "slope_stderr", fc.fit.se,
                                "points", fc.fit.n, "status", ms_limit_words[fc.status], "at", at);
    Py_DECREF(at);
    return d;
}

/* usage_read(pid, smaps=True, next_smaps_ns=None) -> dict or None: ms_usage_read's figures of
 * process pid (bytes; cg_max None when the cgroup sets no limit, the cgroup figures None when
 * unreadable, pss/uss None when smaps_rollup was not read); None when the process is gone.
 * OSError otherwise. With next_smaps_ns (an int, 0 at first), PSS and USS are read at the
 * sampler's pace (ms_usage_read_paced: at most 0.25% of a core) and the dict's "next_smaps_ns"
 * is the value to pass next time. */
static PyObject *n_usage_read(PyObject *self, PyObject *args)
{
    (void)self;
    int pid, smaps = 1;
    PyObject *next_obj = Py_None;
    if (!PyArg_ParseTuple(args, "i|pO:usage_read", &pid, &smaps, &next_obj))
        return NULL;
    unsigned long long next = 0;
    if (next_obj != Py_None) {
        next = PyLong_AsUnsignedLongLong(next_obj);
        if (PyErr_Occurred())
            return NULL;
    }
    struct ms_usage_cgroup cg;
    int have_cg = ms_usage_cgroup_find(pid, &cg) == 0;
    struct ms_usage_sample s;
    uint64_t next64 = next;
    int rc = next_obj != Py_None ? ms_usage_read_paced(pid, have_cg ? &cg : NULL, &next64, &s)
                                 : ms_usage_read(pid, have_cg ? &cg : NULL, smaps, &s);
    if (rc == -ESRCH)
        Py_RETURN_NONE;
    if (rc < 0) {
        errno = -rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
#define OPT(flag, v) ((s.flags & (flag)) ? PyLong_FromUnsignedLongLong(v) : Py_NewRef(Py_None))
    PyObject *pss = OPT(MS_USAGE_F_SMAPS, s.pss), *uss = OPT(MS_USAGE_F_SMAPS, s.uss);
    PyObject *cur = OPT(MS_USAGE_F_CGROUP, s.cg_current), *max = OPT(MS_USAGE_F_CG_MAX, s.cg_max);
#undef OPT
    PyObject *d = NULL;
    if (pss && uss && cur && max)
        d = Py_BuildValue("{s:K,s:I,s:K,s:K,s:K,s:K,s:K,s:O,s:O,s:O,s:O,s:I}", "ts_ns",
                          (unsigned long long)s.ts_ns, "pid", s.pid, "rss_anon",
                          (unsigned long long)s.rss_anon, "rss_file",
                          (unsigned long long)s.rss_file, "rss_shmem",
                          (unsigned long long)s.rss_shmem, "stack", (unsigned long long)s.stack,
                          "swap", (unsigned long long)s.swap, "pss", pss, "uss", uss, "cg_current",
                          cur, "cg_max", max, "threads", s.threads);
    Py_XDECREF(pss);
    Py_XDECREF(uss);
    Py_XDECREF(cur);
    Py_XDECREF(max);
    if (d && next_obj != Py_None) {
        PyObject *n = PyLong_FromUnsignedLongLong(next64);
        if (!n || PyDict_SetItemString(d, "next_smaps_ns", n) < 0)
            Py_CLEAR(d);
        Py_XDECREF(n);
    }
    return d;
}

PyMethodDef ms__py_monitor_methods[] = {
    {"size_parse", n_size_parse, METH_O, "size_parse(text) -> int: memscope's size rule"},
    {"forecast", n_forecast, METH_VARARGS,
     "forecast(x, y, limit) -> dict: memscope's forecaster (analyze trend's)"},
    {"usage_read", n_usage_read, METH_VARARGS,
     "usage_read(pid, smaps=True, next_smaps_ns=None) -> dict or None: /proc figures"},
    {NULL, NULL, 0, NULL},
};
