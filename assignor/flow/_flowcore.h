/* The flow core's entry points defined outside _flowcore.c (one extension module, several sources). */
#ifndef RACKPLAN_FLOWCORE_H
#define RACKPLAN_FLOWCORE_H

#include <Python.h>

/* _readback.c: sticky.general_readback.read_back_py compiled (issue 29). */
PyObject *flowcore_read_back(PyObject *self, PyObject *args);

/* _nodes.c: sticky.general_nodes.members_and_hubs_py compiled (issue 29). */
PyObject *flowcore_members_and_hubs(PyObject *self, PyObject *args);

#endif
