/* rack_and_fill: the range assignor's rack pass and fill over one fresh topic, compiled (issue 29).
 *
 * consumer.range_assignor._rack_pass_py then _fill step for step, on a topic nothing is assigned in yet
 * (every count 0).  The rack pass is Kafka's assignRanges with racksMatch.  Each consumer, in order, while partitions and quota
 * are left, takes up to its quota (per, plus one while extra > 0) of the first unassigned partitions
 * its key matches: key -1 (no rack) every partition, key 0 (a rack holding no broker) none, else the
 * partitions whose replica mask has a bit in common with the key.  Each key keeps a cursor into its
 * ordered candidates, moved past what is taken, as the Python does.  The fill is Kafka's plain
 * assignRanges over what is left: each consumer, in order, up to its quota less what it took, the first
 * unassigned partitions.
 *
 * Answers (owner, counts, extra, assigned): owner per partition, counts per consumer (in the order
 * given), and the state's extra and assigned after both passes; or None for whatever it
 * cannot take as the Python does (a mask or key not a plain int in range, a consumer outside keys, a
 * consumer twice, per or extra negative): the Python answers then.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "_flowcore.h"

typedef long long i64;

#define MASK_LIMIT ((i64)1 << 62)

/* A topic's masks come as the cluster keeps them (a tuple) or as a list. */
#define SEQ_SIZE(o) (PyList_CheckExact(o) ? PyList_GET_SIZE(o) : PyTuple_GET_SIZE(o))
#define SEQ_ITEM(o, i) (PyList_CheckExact(o) ? PyList_GET_ITEM(o, i) : PyTuple_GET_ITEM(o, i))

typedef struct {
    i64 key;
    Py_ssize_t *cand; /* NULL for key -1: every partition, in order */
    Py_ssize_t len;
    Py_ssize_t cursor;
} Cursor;

/* A new list of the n values, or NULL with a Python error set. */
static PyObject *int_list(const i64 *values, Py_ssize_t n) {
    PyObject *list = PyList_New(n);
    for (Py_ssize_t i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(values[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, v);
    }
    return list;
}

PyObject *flowcore_rack_and_fill(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *masks_obj, *consumers_obj, *keys_obj;
    long long per, extra;
    if (!PyArg_ParseTuple(args, "OOOLL", &masks_obj, &consumers_obj, &keys_obj, &per, &extra)) {
        return NULL;
    }
    if (!(PyList_CheckExact(masks_obj) || PyTuple_CheckExact(masks_obj)) || !PyList_CheckExact(consumers_obj) || !PyList_CheckExact(keys_obj) ||
        per < 0 || extra < 0) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = SEQ_SIZE(masks_obj), m = PyList_GET_SIZE(consumers_obj);
    Py_ssize_t n_keys = PyList_GET_SIZE(keys_obj);
    PyObject *result = NULL;
    i64 *masks = PyMem_Malloc(sizeof(i64) * (size_t)(n ? n : 1));
    i64 *owner = PyMem_Malloc(sizeof(i64) * (size_t)(n ? n : 1));
    i64 *member = PyMem_Malloc(sizeof(i64) * (size_t)(m ? m : 1));
    i64 *counts = PyMem_Calloc((size_t)(m ? m : 1), sizeof(i64));
    unsigned char *seen = PyMem_Calloc((size_t)(n_keys ? n_keys : 1), 1);
    Cursor *cursors = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Cursor));
    Py_ssize_t n_cursors = 0;
    if (!masks || !owner || !member || !counts || !seen || !cursors) {
        PyErr_NoMemory();
        goto done;
    }
    int ok = 1;
    for (Py_ssize_t p = 0; p < n && ok; p++) {
        masks[p] = flowcore_int_in(SEQ_ITEM(masks_obj, p), 0, MASK_LIMIT, &ok);
        owner[p] = -1;
    }
    for (Py_ssize_t j = 0; j < m && ok; j++) {
        i64 c = flowcore_int_in(PyList_GET_ITEM(consumers_obj, j), 0, n_keys, &ok);
        if (ok && seen[c]) {
            ok = 0; /* a consumer twice: the Python's counts dict would merge them */
        }
        if (ok) {
            seen[c] = 1;
            member[j] = c;
        }
    }
    if (!ok) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    i64 assigned = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        if (assigned == n || (per == 0 && extra == 0)) {
            break; /* nothing left, or no quota left for anyone (quotas never grow) */
        }
        i64 limit = per + (extra > 0 ? 1 : 0); /* counts[j] is 0: each consumer comes once */
        if (limit <= 0) {
            continue;
        }
        i64 key = flowcore_int_in(PyList_GET_ITEM(keys_obj, member[j]), -1, MASK_LIMIT, &ok);
        if (!ok) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        if (key == 0) {
            continue; /* a rack holding no broker matches no partition */
        }
        Cursor *cur = NULL;
        for (Py_ssize_t i = 0; i < n_cursors; i++) {
            if (cursors[i].key == key) {
                cur = &cursors[i];
                break;
            }
        }
        if (!cur) {
            cur = &cursors[n_cursors++];
            cur->key = key;
            if (key == -1) {
                cur->len = n;
            } else {
                cur->cand = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n ? n : 1));
                if (!cur->cand) {
                    PyErr_NoMemory();
                    goto done;
                }
                for (Py_ssize_t p = 0; p < n; p++) {
                    if (masks[p] & key) {
                        cur->cand[cur->len++] = p;
                    }
                }
            }
        }
        Py_ssize_t i = cur->cursor, end = cur->len;
        i64 took = 0;
        while (i < end && took < limit) {
            Py_ssize_t p = cur->cand ? cur->cand[i] : i;
            i++;
            if (owner[p] < 0) {
                owner[p] = member[j];
                took++;
            }
        }
        while (i < end && owner[cur->cand ? cur->cand[i] : i] >= 0) {
            i++;
        }
        cur->cursor = i;
        if (took) {
            assigned += took;
            counts[j] += took;
            if (counts[j] > per) {
                extra--;
            }
        }
    }
    Py_ssize_t cursor = 0; /* the fill: what the rack pass left, in partition order */
    for (Py_ssize_t j = 0; j < m; j++) {
        if (assigned == n) {
            break;
        }
        i64 limit = per + (extra > 0 ? 1 : 0) - counts[j];
        if (limit <= 0) {
            continue;
        }
        i64 took = 0;
        while (cursor < n && took < limit) {
            if (owner[cursor] < 0) {
                owner[cursor] = member[j];
                took++;
            }
            cursor++;
        }
        while (cursor < n && owner[cursor] >= 0) {
            cursor++;
        }
        if (took) {
            assigned += took;
            counts[j] += took;
            if (counts[j] > per) {
                extra--;
            }
        }
    }
    PyObject *owner_list = int_list(owner, n), *count_list = owner_list ? int_list(counts, m) : NULL;
    if (!count_list) {
        Py_XDECREF(owner_list);
        goto done;
    }
    result = Py_BuildValue("(NNLL)", owner_list, count_list, (long long)extra, (long long)assigned);
done:
    if (cursors) {
        for (Py_ssize_t i = 0; i < n_cursors; i++) {
            PyMem_Free(cursors[i].cand);
        }
    }
    PyMem_Free(cursors);
    PyMem_Free(seen);
    PyMem_Free(counts);
    PyMem_Free(member);
    PyMem_Free(owner);
    PyMem_Free(masks);
    return result;
}
