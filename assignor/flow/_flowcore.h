/* The flow core's entry points defined outside _flowcore.c (one extension module, several sources). */
#ifndef RACKPLAN_FLOWCORE_H
#define RACKPLAN_FLOWCORE_H

#include <Python.h>

/* obj as an exact int in [lo, hi), else 0 with *ok cleared (no Python error left set); *ok < 0 (a
 * Python error already set) stays.  Shared by the sources that refuse what they cannot take exactly. */
static inline long long flowcore_int_in(PyObject *obj, long long lo, long long hi, int *ok) {
    if (*ok <= 0 || !PyLong_CheckExact(obj)) {
        *ok = *ok < 0 ? *ok : 0;
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred()) || v < lo || v >= hi) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    return v;
}

/* _flowcore.c: the primal-dual phases on a problem given as C arrays (edge[4 * i ..]: tail, head, capacity,
 * cost of edge i): 0 solved (flow_out, *a the cost), 1 cut off, 2 infeasible (*a sent, *b need), 3 outside
 * the core's domain, as solve() answers; -1 out of memory, a Python error set. */
int flowcore_phases(Py_ssize_t num_nodes, Py_ssize_t n_edges, const long long *edge, const long long *supply,
                    int has_cutoff, long long cutoff, long long *flow_out, long long *a, long long *b);

/* _constrained.c: sticky.constrained.assign_constrained compiled, as a holder per partition (issue 29). */
PyObject *flowcore_constrained(PyObject *self, PyObject *args);
PyObject *flowcore_constrained_settle(PyObject *self, PyObject *args);

/* _withhold.c: sticky.plan.withhold_py compiled, the plan of a target (issue 29). */
PyObject *flowcore_withhold(PyObject *self, PyObject *args);

/* _readback.c: sticky.general_readback.read_back_py compiled (issue 29). */
PyObject *flowcore_read_back(PyObject *self, PyObject *args);

/* _nodes.c: sticky.general_nodes.members_and_hubs_py compiled (issue 29). */
PyObject *flowcore_members_and_hubs(PyObject *self, PyObject *args);

/* _shift.c: sticky.general_floor.floor_cost_py and sticky.general_spare.spare_units_py compiled (issue 29). */
PyObject *flowcore_floor_cost(PyObject *self, PyObject *args);
PyObject *flowcore_spare_units(PyObject *self, PyObject *args);

/* _range.c: consumer.range_assignor._rack_pass_py and _fill compiled on a fresh topic (issue 29). */
PyObject *flowcore_rack_and_fill(PyObject *self, PyObject *args);

#endif
