/* _store_live.c: memscope._store.live_holders, the live heap of this process by call site and
 * owner read from its own trace (src/analyze/live.h), for the monitoring classes of
 * memscope/monitor.py (the "why" of an OOM warning, the leak count). Part of memscope._store (it
 * reads traces with the store's reader; memscope._native stays small). Workload: one call per
 * warning or leak check. Errors: Python exceptions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_store_live.h"
#include "analyze/live.h"

static PyObject *holders_list(const struct ms_live_holder *h, size_t n, int sites)
{
    PyObject *l = PyList_New(0);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *d = sites
                          ? Py_BuildValue("{s:s,s:L,s:L,s:O}", "site", h[i].name, "bytes",
                                          (long long)h[i].bytes, "blocks", (long long)h[i].blocks,
                                          "leak", h[i].leak ? Py_True : Py_False)
                          : Py_BuildValue("{s:s,s:L,s:L}", "owner", h[i].name, "bytes",
                                          (long long)h[i].bytes, "blocks", (long long)h[i].blocks);
        if (!d || PyList_Append(l, d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(d);
    }
    return l;
}

/* live_holders(trace_path, top=5) -> dict: live_bytes, live_blocks, peak_live_bytes,
 * allocations, python (bool), sites [{site, bytes, blocks, leak}], sites_total, owners [{owner,
 * bytes, blocks}], leaks. Raises OSError with the reader's reason. Runs without the GIL. */
static PyObject *n_live_holders(PyObject *self, PyObject *args)
{
    (void)self;
    const char *path;
    Py_ssize_t top = 5;
    if (!PyArg_ParseTuple(args, "s|n:live_holders", &path, &top))
        return NULL;
    if (top < 0)
        top = 0;
    struct ms_live_report r;
    char err[512] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = ms_live_read(path, (size_t)top, &r, err, sizeof err);
    Py_END_ALLOW_THREADS if (rc < 0)
    {
        PyErr_Format(PyExc_OSError, "memscope: %s", err);
        return NULL;
    }
    PyObject *sites = holders_list(r.sites, r.nsites, 1);
    PyObject *owners = sites ? holders_list(r.owners, r.nowners, 0) : NULL;
    PyObject *d =
        owners ? Py_BuildValue("{s:L,s:L,s:L,s:L,s:O,s:O,s:n,s:O,s:n}", "live_bytes",
                               (long long)r.live_bytes, "live_blocks", (long long)r.live_blocks,
                               "peak_live_bytes", (long long)r.peak_live_bytes, "allocations",
                               (long long)r.allocations, "python", r.python ? Py_True : Py_False,
                               "sites", sites, "sites_total", (Py_ssize_t)r.sites_total, "owners",
                               owners, "leaks", (Py_ssize_t)r.leaks)
               : NULL;
    Py_XDECREF(sites);
    Py_XDECREF(owners);
    ms_live_report_release(&r);
    return d;
}

PyMethodDef ms__py_live_methods[] = {
    {"live_holders", n_live_holders, METH_VARARGS,
     "live_holders(trace_path, top=5) -> dict: this process's live heap by site and owner"},
    {NULL, NULL, 0, NULL},
};
