/* cooperative-sticky's plan from a target, sticky.plan.withhold_py compiled (issue 29).
 *
 * The Python step for step: partitions visited in global order (topic by topic, partition by
 * partition), each kept by its holder when its valid claimer is none or the holder, else withheld
 * and listed under its claimer's revoked; a contested partition (no valid claimer, listed in
 * contested) under every claimer's.  Lists come out in global order, which is (topic, partition)
 * order; assignment has every member, revoked those that lose something, both in member order.
 *
 * withhold(holder, claim, contested, member_ids, topics, topic_offset) -> (assignment, revoked) |
 * None: None, having made nothing, for anything it cannot take as the Python does (a list of another
 * length or type, a number out of range, offsets that do not number the partitions): the Python
 * answers then, with its own result or error.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_flowcore.h"

typedef Py_ssize_t ix;

/* Numbers read from Python and the counts; freed in one place. */
typedef struct {
    ix *holder, *claim, *offset, *kept_n, *rev_n, *con_at, *con_len, *claimers, *kept_fill, *rev_fill;
} Work;

static void work_free(Work *w) {
    PyMem_Free(w->holder);
    PyMem_Free(w->claim);
    PyMem_Free(w->offset);
    PyMem_Free(w->kept_n);
    PyMem_Free(w->rev_n);
    PyMem_Free(w->con_at);
    PyMem_Free(w->con_len);
    PyMem_Free(w->claimers);
    PyMem_Free(w->kept_fill);
    PyMem_Free(w->rev_fill);
}

/* Everything read and counted: 1, or 0 (the Python answers), or -1 (out of memory). */
static int read_and_count(PyObject *holder, PyObject *claim, PyObject *contested, ix n, ix n_topics,
                          PyObject *topic_offset, Work *w) {
    ix P = PyList_GET_SIZE(holder);
    size_t cells = (size_t)(P > 0 ? P : 1);
    w->holder = PyMem_New(ix, cells);
    w->claim = PyMem_New(ix, cells);
    w->con_at = PyMem_New(ix, cells);
    w->con_len = PyMem_New(ix, cells);
    w->offset = PyMem_New(ix, (size_t)n_topics + 1);
    w->kept_n = PyMem_Calloc((size_t)n + 1, sizeof(ix));
    w->rev_n = PyMem_Calloc((size_t)n + 1, sizeof(ix));
    w->kept_fill = PyMem_Calloc((size_t)n + 1, sizeof(ix));
    w->rev_fill = PyMem_Calloc((size_t)n + 1, sizeof(ix));
    if (!w->holder || !w->claim || !w->con_at || !w->con_len || !w->offset || !w->kept_n || !w->rev_n ||
        !w->kept_fill || !w->rev_fill) {
        return -1;
    }
    int ok = 1;
    for (ix gp = 0; gp < P && ok > 0; gp++) {
        w->holder[gp] = (ix)flowcore_int_in(PyList_GET_ITEM(holder, gp), 0, n, &ok);
        w->claim[gp] = (ix)flowcore_int_in(PyList_GET_ITEM(claim, gp), -1, n, &ok);
        w->con_len[gp] = 0;
    }
    for (ix t = 0; t <= n_topics && ok > 0; t++) {
        w->offset[t] = (ix)flowcore_int_in(PyList_GET_ITEM(topic_offset, t), 0, (long long)P + 1, &ok);
        if (ok > 0 && ((t == 0 && w->offset[t] != 0) || (t > 0 && w->offset[t] < w->offset[t - 1]))) {
            ok = 0;
        }
    }
    if (ok <= 0 || w->offset[n_topics] != P) {
        return ok < 0 ? -1 : 0;
    }
    /* The contested partitions' claimers, in the order listed. */
    ix total = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(contested, &pos, &key, &value)) {
        if (!PyList_CheckExact(value)) {
            return 0;
        }
        total += PyList_GET_SIZE(value);
    }
    w->claimers = PyMem_New(ix, (size_t)(total > 0 ? total : 1));
    if (!w->claimers) {
        return -1;
    }
    ix at = 0;
    pos = 0;
    while (PyDict_Next(contested, &pos, &key, &value)) {
        ix gp = (ix)flowcore_int_in(key, 0, P, &ok);
        if (ok <= 0 || w->con_len[gp]) {
            return ok < 0 ? -1 : 0;
        }
        w->con_at[gp] = at;
        w->con_len[gp] = PyList_GET_SIZE(value);
        for (ix j = 0; j < w->con_len[gp] && ok > 0; j++) {
            w->claimers[at++] = (ix)flowcore_int_in(PyList_GET_ITEM(value, j), 0, n, &ok);
        }
        if (ok <= 0) {
            return ok < 0 ? -1 : 0;
        }
    }
    for (ix gp = 0; gp < P; gp++) {
        ix h = w->holder[gp], prev = w->claim[gp];
        if (prev == -1 || prev == h) {
            if (prev == -1 && w->con_len[gp]) {
                for (ix j = 0; j < w->con_len[gp]; j++) {
                    w->rev_n[w->claimers[w->con_at[gp] + j]]++;
                }
            } else {
                w->kept_n[h]++;
            }
        } else {
            w->rev_n[prev]++;
        }
    }
    return 1;
}

/* One list per member (revoked: only where it has entries, else NULL), then every partition's pair
 * placed; 0 with a Python error set on failure (out of memory). */
static int fill(PyObject *topics, ix n, ix n_topics, ix P, Work *w, PyObject **kept, PyObject **rev) {
    for (ix i = 0; i < n; i++) {
        kept[i] = PyList_New(w->kept_n[i]);
        rev[i] = w->rev_n[i] ? PyList_New(w->rev_n[i]) : NULL;
        if (!kept[i] || (w->rev_n[i] && !rev[i])) {
            return 0;
        }
    }
    ix tk = 0;
    for (ix gp = 0; gp < P; gp++) {
        while (tk < n_topics && gp >= w->offset[tk + 1]) {
            tk++;
        }
        PyObject *p = PyLong_FromSsize_t(gp - w->offset[tk]);
        if (!p) {
            return 0;
        }
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(topics, tk), p);
        Py_DECREF(p);
        if (!pair) {
            return 0;
        }
        ix h = w->holder[gp], prev = w->claim[gp];
        if (prev == -1 || prev == h) {
            if (prev == -1 && w->con_len[gp]) {
                for (ix j = 0; j < w->con_len[gp]; j++) {
                    ix c = w->claimers[w->con_at[gp] + j];
                    Py_INCREF(pair);
                    PyList_SET_ITEM(rev[c], w->rev_fill[c]++, pair);
                }
            } else {
                Py_INCREF(pair);
                PyList_SET_ITEM(kept[h], w->kept_fill[h]++, pair);
            }
        } else {
            Py_INCREF(pair);
            PyList_SET_ITEM(rev[prev], w->rev_fill[prev]++, pair);
        }
        Py_DECREF(pair);
    }
    return 1;
}

PyObject *flowcore_withhold(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *holder, *claim, *contested, *member_ids, *topics, *topic_offset;
    if (!PyArg_ParseTuple(args, "OOOOOO", &holder, &claim, &contested, &member_ids, &topics, &topic_offset)) {
        return NULL;
    }
    if (!PyList_CheckExact(holder) || !PyList_CheckExact(claim) || !PyDict_CheckExact(contested) ||
        !PyList_CheckExact(member_ids) || !PyList_CheckExact(topics) || !PyList_CheckExact(topic_offset) ||
        PyList_GET_SIZE(claim) != PyList_GET_SIZE(holder) ||
        PyList_GET_SIZE(topic_offset) != PyList_GET_SIZE(topics) + 1) {
        Py_RETURN_NONE;
    }
    ix n = PyList_GET_SIZE(member_ids), n_topics = PyList_GET_SIZE(topics), P = PyList_GET_SIZE(holder);
    Work w;
    memset(&w, 0, sizeof w);
    int ok = read_and_count(holder, claim, contested, n, n_topics, topic_offset, &w);
    if (ok <= 0) {
        work_free(&w);
        if (ok < 0) {
            return PyErr_Occurred() ? NULL : PyErr_NoMemory();
        }
        Py_RETURN_NONE;
    }
    PyObject **kept = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
    PyObject **rev = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
    PyObject *assignment = NULL, *revoked = NULL, *answer = NULL;
    if (!kept || !rev) {
        PyErr_NoMemory();
    } else if (fill(topics, n, n_topics, P, &w, kept, rev)) {
        assignment = PyDict_New();
        revoked = PyDict_New();
        int fine = assignment && revoked;
        for (ix i = 0; i < n && fine; i++) {
            PyObject *mid = PyList_GET_ITEM(member_ids, i);
            fine = PyDict_SetItem(assignment, mid, kept[i]) == 0 && (!rev[i] || PyDict_SetItem(revoked, mid, rev[i]) == 0);
        }
        if (fine) {
            answer = PyTuple_Pack(2, assignment, revoked);
        }
    }
    for (ix i = 0; kept && rev && i < n; i++) {
        Py_XDECREF(kept[i]);
        Py_XDECREF(rev[i]);
    }
    Py_XDECREF(assignment);
    Py_XDECREF(revoked);
    PyMem_Free(kept);
    PyMem_Free(rev);
    work_free(&w);
    return answer;
}
