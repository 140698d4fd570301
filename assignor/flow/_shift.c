/* floor_cost and spare_units: two pieces of a count-shift graph, compiled (issue 29).
 *
 * floor_cost is sticky.general_floor.floor_cost_py: per pool, in order, its cheapest edge (back to its
 * owner while the owner may hold the topic at its count, 0 < cnt <= min_sub + 1, or grow in it; unless
 * pinned, to the cheapest hub class of its topic plus one move when owned) times its size, summed over
 * the pools with a positive cheapest edge.  It answers the same int, or None for whatever it cannot take
 * as the Python does (a value not a plain int or outside its bounds, a key or index the Python would
 * miss, a wrong type): the Python answers then, with its own result or error.
 *
 * spare_units is sticky.general_spare.spare_units_py step for step, appending to the graph's own lists
 * and filling its dicts in the Python's order: the spare node; an edge to it from each dropper's node
 * (ascending); then per member neither loser nor banned, in member order, with topics it may grow in:
 * its spare-unit node, its dict entries, the edge to the spare node and one from the hub of each such
 * topic and its class (made on first use).  It answers room, or None having made nothing (the lists cut
 * back, the keys it added removed) for whatever it cannot take as the Python does (spare_of or grows
 * not empty, a dropper without a node, a member or topic outside the lists, a value not a plain int).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_flowcore.h"

typedef long long i64;

#define SHIFT_LIMIT ((i64)1 << 30) /* big and every crossing count below it */
#define FLOOR_LIMIT ((i64)1 << 62) /* the floor and each term below it */
#define COUNT_LIMIT ((i64)1 << 60)

/* crossk[g][k] as a plain int in [0, SHIFT_LIMIT), else *ok cleared (g outside crossk, k missing too). */
static i64 crossing(PyObject *crossk, i64 g, PyObject *k, int *ok) {
    if (*ok <= 0 || g < 0 || g >= PyList_GET_SIZE(crossk) || !PyDict_CheckExact(PyList_GET_ITEM(crossk, g))) {
        *ok = *ok < 0 ? *ok : 0;
        return 0;
    }
    PyObject *v = PyDict_GetItemWithError(PyList_GET_ITEM(crossk, g), k);
    if (!v) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    return flowcore_int_in(v, 0, SHIFT_LIMIT, ok);
}

/* Whether key is in the set d[o] (d a dict, o in it with a set); -1 when the Python would not answer so. */
static int in_set_of(PyObject *d, PyObject *o, PyObject *key) {
    PyObject *s = PyDict_GetItemWithError(d, o);
    int r = s && PyAnySet_CheckExact(s) ? PySet_Contains(s, key) : -1;
    if (r < 0) {
        PyErr_Clear();
    }
    return r;
}

PyObject *flowcore_floor_cost(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pools, *cnt, *min_sub, *spare_of, *grows, *crossk, *cls, *classes, *big_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOOOO", &pools, &cnt, &min_sub, &spare_of, &grows, &crossk, &cls, &classes,
                          &big_obj)) {
        return NULL;
    }
    int ok = 1;
    i64 big = flowcore_int_in(big_obj, 0, SHIFT_LIMIT, &ok);
    if (!ok || !PyList_CheckExact(pools) || !PyList_CheckExact(cnt) || !PyList_CheckExact(min_sub) ||
        !PyDict_CheckExact(spare_of) || !PyDict_CheckExact(grows) || !PyList_CheckExact(crossk) ||
        !PyList_CheckExact(cls) || !PyList_CheckExact(classes)) {
        Py_RETURN_NONE;
    }
    for (Py_ssize_t t = 0; t < PyList_GET_SIZE(classes) && ok > 0; t++) { /* the Python keys its cache by each */
        PyObject *gs = PyList_GET_ITEM(classes, t);
        if (!PyTuple_CheckExact(gs)) {
            ok = 0;
        }
        for (Py_ssize_t j = 0; ok > 0 && j < PyTuple_GET_SIZE(gs); j++) {
            (void)flowcore_int_in(PyTuple_GET_ITEM(gs, j), 0, COUNT_LIMIT, &ok);
        }
    }
    i64 floor = 0;
    for (Py_ssize_t p = 0; p < PyList_GET_SIZE(pools) && ok > 0; p++) {
        PyObject *pool = PyList_GET_ITEM(pools, p), *key, *lst;
        if (!PyTuple_CheckExact(pool) || PyTuple_GET_SIZE(pool) != 2 ||
            !PyTuple_CheckExact(key = PyTuple_GET_ITEM(pool, 0)) || PyTuple_GET_SIZE(key) != 4 ||
            !PyList_CheckExact(lst = PyTuple_GET_ITEM(pool, 1))) {
            ok = 0;
            break;
        }
        PyObject *o_obj = PyTuple_GET_ITEM(key, 0), *t_obj = PyTuple_GET_ITEM(key, 1);
        PyObject *k_obj = PyTuple_GET_ITEM(key, 2), *pinned = PyTuple_GET_ITEM(key, 3);
        i64 o = flowcore_int_in(o_obj, -COUNT_LIMIT, PyList_GET_SIZE(cnt), &ok);
        i64 t = flowcore_int_in(t_obj, 0, PyList_GET_SIZE(classes), &ok);
        if (!ok || !PyBool_Check(pinned)) {
            ok = 0;
            break;
        }
        i64 best = -1;
        if (o >= 0) {
            i64 c = flowcore_int_in(PyList_GET_ITEM(cnt, o), -COUNT_LIMIT, COUNT_LIMIT, &ok);
            i64 low = t < PyList_GET_SIZE(min_sub)
                          ? flowcore_int_in(PyList_GET_ITEM(min_sub, t), -COUNT_LIMIT, COUNT_LIMIT, &ok)
                          : (ok = 0);
            int may = ok > 0 && 0 < c && c <= low + 1;
            if (ok > 0 && !may) { /* or it may grow in the topic: the Python asks only now */
                int spare = PyDict_Contains(spare_of, o_obj);
                may = spare > 0 ? in_set_of(grows, o_obj, t_obj) : spare;
                if (may < 0) {
                    PyErr_Clear();
                    ok = 0;
                }
            }
            if (ok > 0 && may) {
                i64 g = o < PyList_GET_SIZE(cls) ? flowcore_int_in(PyList_GET_ITEM(cls, o), 0, COUNT_LIMIT, &ok)
                                                 : (ok = 0);
                best = big * crossing(crossk, g, k_obj, &ok);
            }
        }
        PyObject *gs = ok > 0 ? PyList_GET_ITEM(classes, t) : NULL;
        if (ok > 0 && !PyTuple_CheckExact(gs)) {
            ok = 0;
        }
        if (ok > 0 && pinned == Py_False && PyTuple_GET_SIZE(gs)) {
            i64 fewest = SHIFT_LIMIT;
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(gs) && ok > 0; j++) {
                i64 g = flowcore_int_in(PyTuple_GET_ITEM(gs, j), 0, COUNT_LIMIT, &ok);
                i64 x = crossing(crossk, g, k_obj, &ok);
                fewest = x < fewest ? x : fewest;
            }
            i64 c = big * fewest + (o >= 0 ? 1 : 0);
            if (best < 0 || c < best) {
                best = c;
            }
        }
        if (ok > 0 && best > 0) {
            i64 term;
            if (__builtin_mul_overflow(best, (i64)PyList_GET_SIZE(lst), &term) ||
                __builtin_add_overflow(floor, term, &floor) || floor >= FLOOR_LIMIT) {
                ok = 0;
            }
        }
    }
    if (ok < 0) {
        return NULL;
    }
    if (!ok) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong(floor);
}

/* ---- spare_units ------------------------------------------------------------------------------ */

typedef struct {
    PyObject *supply, *edges, *added; /* added: (dict, key) pairs set here, undone on failure */
    int ok;
} Spare;

/* Append an int to supply; its node number, -1 on failure. */
static Py_ssize_t spare_node(Spare *s, i64 supply) {
    Py_ssize_t v = PyList_GET_SIZE(s->supply);
    PyObject *x = PyLong_FromLongLong(supply);
    if (!x || PyList_Append(s->supply, x) < 0) {
        s->ok = -1;
        v = -1;
    }
    Py_XDECREF(x);
    return v;
}

/* d[key] = value (value a new reference, stolen), recorded first for the undo. */
static void spare_set(Spare *s, PyObject *d, PyObject *key, PyObject *value) {
    PyObject *pair = value ? PyTuple_Pack(2, d, key) : NULL;
    if (!pair || PyList_Append(s->added, pair) < 0 || PyDict_SetItem(d, key, value) < 0) {
        s->ok = -1;
    }
    Py_XDECREF(pair);
    Py_XDECREF(value);
}

/* Append the edge (tail, head, cap, 0) (the tuple made directly: Py_BuildValue's format was most of its cost). */
static void spare_edge(Spare *s, Py_ssize_t tail, Py_ssize_t head, PyObject *cap) {
    PyObject *e = PyTuple_New(4), *a = PyLong_FromSsize_t(tail), *b = PyLong_FromSsize_t(head), *z = PyLong_FromLong(0);
    if (!e || !a || !b || !z) {
        Py_XDECREF(e);
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(z);
        s->ok = -1;
        return;
    }
    Py_INCREF(cap);
    PyTuple_SET_ITEM(e, 0, a);
    PyTuple_SET_ITEM(e, 1, b);
    PyTuple_SET_ITEM(e, 2, cap);
    PyTuple_SET_ITEM(e, 3, z);
    if (PyList_Append(s->edges, e) < 0) {
        s->ok = -1;
    }
    Py_DECREF(e);
}

/* The dropper numbers, ascending (a new C array of *n), NULL with *ok cleared on anything else. */
static i64 *sorted_drops(PyObject *drops, Py_ssize_t n_members, Py_ssize_t *n, int *ok) {
    *n = PySet_GET_SIZE(drops);
    i64 *out = PyMem_New(i64, *n + 1);
    PyObject *it = out ? PyObject_GetIter(drops) : NULL, *item;
    if (!it) {
        if (!out) {
            PyErr_NoMemory();
        }
        PyMem_Free(out);
        *ok = -1;
        return NULL;
    }
    Py_ssize_t j = 0;
    while (*ok > 0 && j < *n && (item = PyIter_Next(it))) {
        i64 i = flowcore_int_in(item, 0, n_members, ok), at = j++;
        Py_DECREF(item);
        while (at > 0 && out[at - 1] > i) { /* insertion: a handful of droppers */
            out[at] = out[at - 1];
            at--;
        }
        out[at] = i;
    }
    Py_DECREF(it);
    if (*ok > 0 && (PyErr_Occurred() || j != *n)) {
        *ok = PyErr_Occurred() ? -1 : 0;
    }
    if (*ok <= 0) {
        PyMem_Free(out);
        return NULL;
    }
    return out;
}

/* The hub of (t, g): hubs' own, else a new node recorded in hubs. */
static Py_ssize_t spare_hub(Spare *s, PyObject *hubs, PyObject *t_obj, PyObject *g_obj) {
    PyObject *key = PyTuple_Pack(2, t_obj, g_obj);
    PyObject *hub = key ? PyDict_GetItemWithError(hubs, key) : NULL;
    Py_ssize_t v = -1;
    if (hub) {
        v = (Py_ssize_t)flowcore_int_in(hub, 0, COUNT_LIMIT, &s->ok);
    } else if (!key || PyErr_Occurred()) {
        s->ok = -1;
    } else {
        v = spare_node(s, 0);
        if (s->ok > 0) {
            spare_set(s, hubs, key, PyLong_FromSsize_t(v));
        }
    }
    Py_XDECREF(key);
    return v;
}

/* Member d's spare-unit node, entries and edges, if it may grow in some topic. */
static void spare_member(Spare *s, PyObject *const *lists, Py_ssize_t d, Py_ssize_t spare, i64 reach,
                         PyObject *room_obj, PyObject *dicts[4]) {
    PyObject *cnt = lists[0], *min_sub = lists[1], *mt = lists[2], *cls = lists[3];
    PyObject *topics = PyList_GET_ITEM(mt, d);
    if (!PyList_CheckExact(topics) || d >= PyList_GET_SIZE(cnt)) {
        s->ok = 0;
        return;
    }
    i64 top = flowcore_int_in(PyList_GET_ITEM(cnt, d), -COUNT_LIMIT, COUNT_LIMIT, &s->ok) - reach;
    PyObject *grow = PyList_New(0);
    if (!grow) {
        s->ok = -1;
        return;
    }
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(topics) && s->ok > 0; j++) {
        PyObject *t_obj = PyList_GET_ITEM(topics, j);
        i64 t = flowcore_int_in(t_obj, 0, PyList_GET_SIZE(min_sub), &s->ok);
        i64 low = s->ok > 0 ? flowcore_int_in(PyList_GET_ITEM(min_sub, t), -COUNT_LIMIT, COUNT_LIMIT, &s->ok) : 0;
        if (s->ok > 0 && top <= low && PyList_Append(grow, t_obj) < 0) {
            s->ok = -1;
        }
    }
    if (s->ok > 0 && PyList_GET_SIZE(grow)) {
        PyObject *g_obj = d < PyList_GET_SIZE(cls) ? PyList_GET_ITEM(cls, d) : NULL;
        (void)flowcore_int_in(g_obj ? g_obj : Py_None, -COUNT_LIMIT, COUNT_LIMIT, &s->ok);
        PyObject *d_obj = s->ok > 0 ? PyLong_FromSsize_t(d) : NULL;
        Py_ssize_t y = d_obj ? spare_node(s, 0) : -1;
        if (s->ok > 0 && !d_obj) {
            s->ok = -1;
        }
        if (s->ok > 0) {
            spare_set(s, dicts[0], d_obj, PyLong_FromSsize_t(y)); /* spare_of[d] = y */
        }
        if (s->ok > 0) {
            spare_set(s, dicts[1], d_obj, PySet_New(grow)); /* grows[d] = set(grow) */
        }
        PyObject *y_obj = s->ok > 0 ? PyLong_FromSsize_t(y) : NULL;
        if (s->ok > 0 && !y_obj) {
            s->ok = -1;
        }
        if (s->ok > 0) { /* node_member[y] = d: a new node, so no key of the Python's is overwritten */
            int had = PyDict_Contains(dicts[2], y_obj);
            s->ok = had < 0 ? -1 : had ? 0 : s->ok;
        }
        if (s->ok > 0) {
            Py_INCREF(d_obj);
            spare_set(s, dicts[2], y_obj, d_obj);
        }
        Py_XDECREF(y_obj);
        Py_XDECREF(d_obj);
        if (s->ok > 0) {
            spare_edge(s, y, spare, room_obj);
        }
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(grow) && s->ok > 0; j++) {
            Py_ssize_t hub = spare_hub(s, dicts[3], PyList_GET_ITEM(grow, j), g_obj);
            if (s->ok > 0) {
                spare_edge(s, hub, y, room_obj);
            }
        }
    }
    Py_DECREF(grow);
}

/* Undo: the lists cut back to their lengths and the keys set here removed, latest first. */
static int spare_undo(Spare *s, Py_ssize_t n_supply0, Py_ssize_t n_edges0) {
    int r = PyList_SetSlice(s->supply, n_supply0, PyList_GET_SIZE(s->supply), NULL) |
            PyList_SetSlice(s->edges, n_edges0, PyList_GET_SIZE(s->edges), NULL);
    for (Py_ssize_t j = PyList_GET_SIZE(s->added) - 1; j >= 0; j--) {
        PyObject *pair = PyList_GET_ITEM(s->added, j), *d = PyTuple_GET_ITEM(pair, 0), *key = PyTuple_GET_ITEM(pair, 1);
        int in = PyDict_Contains(d, key); /* not in: its setting failed */
        r |= in < 0 || (in && PyDict_DelItem(d, key) < 0);
    }
    return r;
}

PyObject *flowcore_spare_units(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *drops, *losers, *banned, *gainer_obj, *cnt, *min_sub, *mt, *cls, *supply, *edges, *hubs, *member_node,
        *spare_of, *grows, *node_member;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOO", &drops, &losers, &banned, &gainer_obj, &cnt, &min_sub, &mt, &cls,
                          &supply, &edges, &hubs, &member_node, &spare_of, &grows, &node_member)) {
        return NULL;
    }
    int ok = 1;
    i64 gainer = flowcore_int_in(gainer_obj, -COUNT_LIMIT, COUNT_LIMIT, &ok);
    if (!ok || !PyAnySet_CheckExact(drops) || !PyAnySet_CheckExact(losers) || !PyAnySet_CheckExact(banned) ||
        !PyList_CheckExact(cnt) || !PyList_CheckExact(min_sub) || !PyList_CheckExact(mt) || !PyList_CheckExact(cls) ||
        !PyList_CheckExact(supply) || !PyList_CheckExact(edges) || !PyDict_CheckExact(hubs) ||
        !PyDict_CheckExact(member_node) || !PyDict_CheckExact(spare_of) || !PyDict_CheckExact(grows) ||
        !PyDict_CheckExact(node_member) || PyDict_GET_SIZE(spare_of) || PyDict_GET_SIZE(grows)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n_drops = 0, n_losers = PySet_GET_SIZE(losers);
    i64 *order = sorted_drops(drops, PyList_GET_SIZE(cnt), &n_drops, &ok);
    if (!order) {
        if (ok < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Spare s = {supply, edges, PyList_New(0), 1};
    Py_ssize_t n_supply0 = PyList_GET_SIZE(supply), n_edges0 = PyList_GET_SIZE(edges);
    PyObject *one = PyLong_FromLong(1), *room_obj = PyLong_FromSsize_t(n_losers > 1 ? n_losers : 1);
    if (!s.added || !one || !room_obj) {
        s.ok = -1;
    }
    Py_ssize_t spare = s.ok > 0 ? spare_node(&s, -(gainer < 0 ? (i64)n_losers : 0) - (i64)n_drops) : -1;
    for (Py_ssize_t j = 0; j < n_drops && s.ok > 0; j++) {
        PyObject *i_obj = PyLong_FromLongLong(order[j]);
        PyObject *v = i_obj ? PyDict_GetItemWithError(member_node, i_obj) : NULL;
        if (!v) { /* no node: the Python makes one (or errs); it decides */
            s.ok = !i_obj || PyErr_Occurred() ? -1 : 0;
        } else {
            Py_ssize_t node = (Py_ssize_t)flowcore_int_in(v, 0, COUNT_LIMIT, &s.ok);
            if (s.ok > 0) {
                spare_edge(&s, node, spare, one);
            }
        }
        Py_XDECREF(i_obj);
    }
    PyObject *lists[4] = {cnt, min_sub, mt, cls}, *dicts[4] = {spare_of, grows, node_member, hubs};
    i64 reach = n_drops ? 1 : 0;
    for (Py_ssize_t d = 0; d < PyList_GET_SIZE(mt) && s.ok > 0; d++) {
        PyObject *d_obj = PyLong_FromSsize_t(d);
        int out = !d_obj ? -1 : PySet_Contains(losers, d_obj);
        out = out == 0 ? PySet_Contains(banned, d_obj) : out;
        Py_XDECREF(d_obj);
        if (out < 0) {
            s.ok = -1;
        } else if (!out) {
            spare_member(&s, lists, d, spare, reach, room_obj, dicts);
        }
    }
    PyMem_Free(order);
    Py_XDECREF(one);
    if (s.ok > 0) {
        Py_DECREF(s.added);
        return room_obj;
    }
    Py_XDECREF(room_obj);
    PyObject *err_type, *err_value, *err_tb;
    PyErr_Fetch(&err_type, &err_value, &err_tb);
    int undone = !s.added || spare_undo(&s, n_supply0, n_edges0) == 0;
    Py_XDECREF(s.added);
    if (s.ok < 0 && undone) {
        PyErr_Restore(err_type, err_value, err_tb);
        return NULL;
    }
    Py_XDECREF(err_type);
    Py_XDECREF(err_value);
    Py_XDECREF(err_tb);
    if (!undone) {
        return NULL;
    }
    Py_RETURN_NONE;
}
