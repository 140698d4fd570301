/* members_and_hubs: the member nodes, hub nodes and member edges of a count-shift graph, compiled (issue 29).
 *
 * sticky.general_nodes.members_and_hubs_py step for step, appending to the graph's own (empty) lists and
 * filling its (empty) dicts: per topic in order, per subscriber in order whose count c has
 * 0 < c <= min_sub[t] + 1, the hub of (topic, the member's class) made on first use (supply 0), the
 * member's node made on first use (supply -c, plus one for a dropper), the edge (hub, member, c, 0);
 * then a node for every member with a count still without one, in member order.  The nodes are
 * numbered as the Python numbers them and each dict gets its entries in the Python's order.
 *
 * Whatever it cannot take as the Python does (a list or dict not empty, a member outside the counts,
 * a class outside [0, 2**16), a value not a plain int, a wrong type) leaves the lists and dicts empty
 * and answers None: the Python builds the nodes then, with its own result or error.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_flowcore.h"

typedef long long i64;

#define CLASS_LIMIT ((i64)1 << 16)
#define COUNT_LIMIT ((i64)1 << 60)

/* Append the edge (hub, v, c, 0), 0 on success. */
static int member_edge(PyObject *edges, Py_ssize_t hub, Py_ssize_t v, PyObject *c, PyObject *zero) {
    PyObject *e = Py_BuildValue("(nnOO)", hub, v, c, zero);
    int r = e ? PyList_Append(edges, e) : -1;
    Py_XDECREF(e);
    return r;
}

typedef struct {
    PyObject *supply, *hubs, *member_node, *cnt_list, *drops;
    Py_ssize_t *node_of;   /* per member: its node, -1 before it is made */
    PyObject **made;       /* per node: its dict key (a (topic, class) tuple or a member int), in order */
    Py_ssize_t n_made, cap_made;
    int ok;
} Nodes;

/* A new node of that supply, its key recorded (a new reference stolen), its number; -1 on failure. */
static Py_ssize_t new_node(Nodes *b, i64 supply, PyObject *key) {
    PyObject *s = key ? PyLong_FromLongLong(supply) : NULL;
    if (!s || PyList_Append(b->supply, s) < 0) {
        Py_XDECREF(s);
        Py_XDECREF(key);
        b->ok = -1;
        return -1;
    }
    Py_DECREF(s);
    if (b->n_made == b->cap_made) {
        Py_ssize_t cap = b->cap_made ? 2 * b->cap_made : 64;
        PyObject **m = PyMem_Realloc(b->made, (size_t)cap * sizeof(PyObject *));
        if (!m) {
            Py_DECREF(key);
            PyErr_NoMemory();
            b->ok = -1;
            return -1;
        }
        b->made = m;
        b->cap_made = cap;
    }
    b->made[b->n_made] = key;
    return b->n_made++;
}

/* Member i's node, made with supply -c (+1 for a dropper) if it has none yet. */
static Py_ssize_t member_of(Nodes *b, Py_ssize_t i, i64 c) {
    if (b->node_of[i] >= 0) {
        return b->node_of[i];
    }
    PyObject *i_obj = PyLong_FromSsize_t(i);
    int dropper = i_obj ? PySet_Contains(b->drops, i_obj) : -1;
    if (dropper < 0) {
        Py_XDECREF(i_obj);
        b->ok = -1;
        return -1;
    }
    return b->node_of[i] = new_node(b, -c + dropper, i_obj);
}

/* The dicts filled in node order: hubs[(t, g)] = node, member_node[i] = node, node_member[node] = i. */
static PyObject *fill(Nodes *b, PyObject *node_member) {
    for (Py_ssize_t v = 0; v < b->n_made; v++) {
        PyObject *key = b->made[v], *v_obj = PyLong_FromSsize_t(v);
        int r = !v_obj ? -1
                : PyTuple_CheckExact(key) ? PyDict_SetItem(b->hubs, key, v_obj)
                                           : (PyDict_SetItem(b->member_node, key, v_obj) < 0 ? -1
                                                                                            : PyDict_SetItem(node_member, v_obj, key));
        Py_XDECREF(v_obj);
        if (r < 0) {
            return NULL;
        }
    }
    return node_member;
}

PyObject *flowcore_members_and_hubs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *n_topics_obj, *n_obj, *tm, *cnt, *min_sub, *drops, *cls, *supply, *edges, *hubs, *member_node;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOO", &n_topics_obj, &n_obj, &tm, &cnt, &min_sub, &drops, &cls, &supply,
                          &edges, &hubs, &member_node)) {
        return NULL;
    }
    int ok = 1;
    i64 n_topics = flowcore_int_in(n_topics_obj, 0, COUNT_LIMIT, &ok), n = flowcore_int_in(n_obj, 0, COUNT_LIMIT, &ok);
    if (!ok || !PyList_CheckExact(tm) || !PyList_CheckExact(cnt) || !PyList_CheckExact(min_sub) ||
        !PyList_CheckExact(cls) || !PyAnySet_CheckExact(drops) || !PyList_CheckExact(supply) ||
        !PyList_CheckExact(edges) || !PyDict_CheckExact(hubs) || !PyDict_CheckExact(member_node) ||
        PyList_GET_SIZE(supply) || PyList_GET_SIZE(edges) || PyDict_GET_SIZE(hubs) || PyDict_GET_SIZE(member_node) ||
        n_topics > PyList_GET_SIZE(tm) || n_topics > PyList_GET_SIZE(min_sub) || n > PyList_GET_SIZE(cnt)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n_members = PyList_GET_SIZE(cnt), n_cls = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(cls) && ok; i++) {
        i64 g = flowcore_int_in(PyList_GET_ITEM(cls, i), 0, CLASS_LIMIT, &ok);
        n_cls = g + 1 > n_cls ? (Py_ssize_t)g + 1 : n_cls;
    }
    if (!ok) {
        Py_RETURN_NONE;
    }
    Nodes b = {supply, hubs, member_node, cnt, drops, NULL, NULL, 0, 0, 1};
    Py_ssize_t *hub_of = PyMem_New(Py_ssize_t, n_cls + 1); /* this topic's hub per class, -1 if none */
    b.node_of = PyMem_New(Py_ssize_t, n_members + 1);
    PyObject *zero = PyLong_FromLong(0), *node_member = PyDict_New();
    if (!hub_of || !b.node_of || !zero || !node_member) {
        b.ok = -1;
        PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; b.ok > 0 && i < n_members; i++) {
        b.node_of[i] = -1;
    }
    for (Py_ssize_t t = 0; t < n_topics && b.ok > 0; t++) {
        PyObject *subs = PyList_GET_ITEM(tm, t);
        i64 bound = flowcore_int_in(PyList_GET_ITEM(min_sub, t), -COUNT_LIMIT, COUNT_LIMIT, &b.ok) + 1;
        if (b.ok <= 0 || !PyList_CheckExact(subs)) {
            b.ok = b.ok < 0 ? b.ok : 0;
            break;
        }
        for (Py_ssize_t g = 0; g < n_cls; g++) {
            hub_of[g] = -1;
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(subs) && b.ok > 0; j++) {
            Py_ssize_t i = (Py_ssize_t)flowcore_int_in(PyList_GET_ITEM(subs, j), 0, n_members, &b.ok);
            PyObject *c_obj = b.ok > 0 ? PyList_GET_ITEM(cnt, i) : NULL;
            i64 c = b.ok > 0 ? flowcore_int_in(c_obj, -COUNT_LIMIT, COUNT_LIMIT, &b.ok) : 0;
            if (b.ok <= 0 || !(0 < c && c <= bound)) {
                continue;
            }
            if (i >= PyList_GET_SIZE(cls)) {
                b.ok = 0;
                break;
            }
            PyObject *g_obj = PyList_GET_ITEM(cls, i);
            Py_ssize_t g = (Py_ssize_t)PyLong_AsSsize_t(g_obj);
            if (hub_of[g] < 0) {
                hub_of[g] = new_node(&b, 0, Py_BuildValue("(nO)", t, g_obj));
            }
            Py_ssize_t v = b.ok > 0 ? member_of(&b, i, c) : -1;
            if (b.ok > 0 && member_edge(edges, hub_of[g], v, c_obj, zero) < 0) {
                b.ok = -1;
            }
        }
    }
    for (Py_ssize_t i = 0; i < n && b.ok > 0; i++) { /* members whose count no hub reaches still need their node */
        i64 c = flowcore_int_in(PyList_GET_ITEM(cnt, i), -COUNT_LIMIT, COUNT_LIMIT, &b.ok);
        if (b.ok > 0 && c > 0) {
            member_of(&b, i, c);
        }
    }
    if (b.ok > 0 && !fill(&b, node_member)) {
        b.ok = -1;
    }
    for (Py_ssize_t v = 0; v < b.n_made; v++) {
        Py_DECREF(b.made[v]);
    }
    PyMem_Free(b.made);
    PyMem_Free(b.node_of);
    PyMem_Free(hub_of);
    Py_XDECREF(zero);
    if (b.ok > 0) {
        return node_member;
    }
    Py_XDECREF(node_member);
    /* Undo: the lists and dicts empty, as they came. */
    PyObject *err_type, *err_value, *err_tb;
    PyErr_Fetch(&err_type, &err_value, &err_tb);
    int undone = PyList_SetSlice(supply, 0, PyList_GET_SIZE(supply), NULL) == 0 &&
                 PyList_SetSlice(edges, 0, PyList_GET_SIZE(edges), NULL) == 0;
    PyDict_Clear(hubs);
    PyDict_Clear(member_node);
    if (b.ok < 0 || !undone) {
        if (!undone) {
            Py_XDECREF(err_type);
            Py_XDECREF(err_value);
            Py_XDECREF(err_tb);
            return NULL;
        }
        PyErr_Restore(err_type, err_value, err_tb);
        return NULL;
    }
    Py_XDECREF(err_type);
    Py_XDECREF(err_value);
    Py_XDECREF(err_tb);
    Py_RETURN_NONE;
}
