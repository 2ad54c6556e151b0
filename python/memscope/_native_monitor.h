/* _native_monitor.h: the functions _native_monitor.c adds to memscope._native. */
#ifndef MS_PY_NATIVE_MONITOR_H
#define MS_PY_NATIVE_MONITOR_H

#include <Python.h>

extern PyMethodDef ms__py_monitor_methods[];

#endif
