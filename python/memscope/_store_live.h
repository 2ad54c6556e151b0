/* _store_live.h: the functions _store_live.c adds to memscope._store. */
#ifndef MS_PY_STORE_LIVE_H
#define MS_PY_STORE_LIVE_H

#include <Python.h>

extern PyMethodDef ms__py_live_methods[];

#endif
