/* read_back: the holder of each partition from a solved count-shift flow, compiled (issue 29).
 *
 * sticky.general_readback.read_back_py step for step, so the same holder for every input it takes:
 * per pool, in pool order, the partitions its owner edges carry stay with the owner (those it
 * already holds first, then by number), a one-partition pool goes to the first hub edge carrying its
 * unit, the rest are dealt round robin over its hub edges in edge order; then, per hub in the order
 * it first received a partition, its partitions (ascending) are dealt round robin to the members its
 * edges with flow reach (ascending, a member reached twice counted once with both flows).  The
 * writes happen in the Python's order, so even a partition listed twice ends where the Python puts it.
 *
 * Whatever it cannot take as the Python does answers None and the Python reads the flow back with
 * its own result or error: a value not a plain int (or outside its range: a partition outside the
 * holder, a hub outside the graph's nodes, a flow negative or at 2**31), a pool's edges outside the
 * flow, a wrong shape, a deal left with partitions (the Python's AssertionError).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "_flowcore.h"

typedef long long i64;

#define FLOW_LIMIT ((i64)1 << 31)
#define ANY_LIMIT ((i64)1 << 62)

/* One hub edge with flow into a member: the hub's index (first-use order), the member, the flow. */
typedef struct {
    Py_ssize_t hub;
    i64 member, flow;
} Reach;

typedef struct {
    PyObject *flow, *new_holder;
    Py_ssize_t n, n_flow, num_nodes;
    Py_ssize_t *slot;     /* per node: its index among the hubs that received, -1 if none */
    Py_ssize_t n_hubs;    /* hubs that received, in first-use order */
    i64 *incoming;        /* (hub index << 32 | partition), in the order received */
    Py_ssize_t n_incoming, cap_incoming;
    i64 *keys, *counts;   /* scratch: a pool's partitions, a deal's slots */
    Py_ssize_t *dealt, *active, cap_scratch;
    int ok;               /* 1 so far, 0 refused (None), -1 a Python error (out of memory) */
} ReadBack;

static i64 flow_at(ReadBack *r, Py_ssize_t i) {
    return flowcore_int_in(PyList_GET_ITEM(r->flow, i), 0, FLOW_LIMIT, &r->ok);
}

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) {
        return 0;
    }
    Py_ssize_t cap2 = need > 2 * *cap ? need : 2 * *cap;
    void *b = PyMem_Realloc(*buf, (size_t)cap2 * item);
    if (!b) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = b;
    *cap = cap2;
    return 0;
}

/* Room for `need` partitions or slots in each scratch array (a pool's, a deal's), 0 on success. */
static int scratch(ReadBack *r, Py_ssize_t need) {
    if (need <= r->cap_scratch) {
        return 0;
    }
    Py_ssize_t cap = need > 2 * r->cap_scratch ? need : 2 * r->cap_scratch;
    i64 *keys = PyMem_Realloc(r->keys, (size_t)cap * sizeof(i64));
    r->keys = keys ? keys : r->keys;
    i64 *counts = keys ? PyMem_Realloc(r->counts, (size_t)cap * sizeof(i64)) : NULL;
    r->counts = counts ? counts : r->counts;
    Py_ssize_t *dealt = counts ? PyMem_Realloc(r->dealt, (size_t)cap * sizeof(Py_ssize_t)) : NULL;
    r->dealt = dealt ? dealt : r->dealt;
    Py_ssize_t *active = dealt ? PyMem_Realloc(r->active, (size_t)cap * sizeof(Py_ssize_t)) : NULL;
    r->active = active ? active : r->active;
    if (!active) {
        PyErr_NoMemory();
        return -1;
    }
    r->cap_scratch = cap;
    return 0;
}

/* common.deal: parts[i] to slot dealt[i], round robin over the slots with counts[j] > 0 in order
 * (counts spent), one part per slot per round; 0 if every part is placed, else -1 (the Python's
 * AssertionError).  `active` needs room for n_slots. */
static int deal(Py_ssize_t n_parts, i64 *counts, Py_ssize_t n_slots, Py_ssize_t *active, Py_ssize_t *dealt) {
    Py_ssize_t n_active = 0, pos = 0;
    for (Py_ssize_t j = 0; j < n_slots; j++) {
        if (counts[j] > 0) {
            active[n_active++] = j;
        }
    }
    while (pos < n_parts && n_active) {
        Py_ssize_t still = 0;
        for (Py_ssize_t a = 0; a < n_active && pos < n_parts; a++) {
            Py_ssize_t j = active[a];
            dealt[pos++] = j;
            if (--counts[j]) {
                active[still++] = j;
            }
        }
        n_active = still;
    }
    return pos == n_parts ? 0 : -1;
}

/* The partition gp received by hub node `hub` (its index made on first use). */
static void receive(ReadBack *r, Py_ssize_t hub, i64 gp) {
    if (r->slot[hub] < 0) {
        r->slot[hub] = r->n_hubs++;
    }
    if (grow((void **)&r->incoming, &r->cap_incoming, r->n_incoming + 1, sizeof(i64)) < 0) {
        r->ok = -1;
        return;
    }
    r->incoming[r->n_incoming++] = ((i64)r->slot[hub] << 32) | gp;
}

/* new_holder[gp] = obj (a new reference taken). */
static void hold(ReadBack *r, i64 gp, PyObject *obj) {
    Py_INCREF(obj);
    PyList_SetItem(r->new_holder, (Py_ssize_t)gp, obj);
}

static int cmp_i64(const void *a, const void *b) {
    i64 x = *(const i64 *)a, y = *(const i64 *)b;
    return (x > y) - (x < y);
}

static int cmp_reach(const void *a, const void *b) {
    const Reach *x = a, *y = b;
    if (x->hub != y->hub) {
        return (x->hub > y->hub) - (x->hub < y->hub);
    }
    return (x->member > y->member) - (x->member < y->member);
}

/* One pool: its owner's partitions kept, the rest received by its hubs. */
static void one_pool(ReadBack *r, PyObject *holder, PyObject *pool, PyObject *edges_of) {
    if (!PyTuple_CheckExact(pool) || PyTuple_GET_SIZE(pool) != 2 || !PyTuple_CheckExact(edges_of) ||
        PyTuple_GET_SIZE(edges_of) != 4 || !PyTuple_CheckExact(PyTuple_GET_ITEM(pool, 0)) ||
        PyTuple_GET_SIZE(PyTuple_GET_ITEM(pool, 0)) != 4) {
        r->ok = 0;
        return;
    }
    PyObject *o_obj = PyTuple_GET_ITEM(PyTuple_GET_ITEM(pool, 0), 0);
    PyObject *lst = PyTuple_GET_ITEM(edges_of, 0), *hubs = PyTuple_GET_ITEM(edges_of, 3);
    i64 o = flowcore_int_in(o_obj, -ANY_LIMIT, ANY_LIMIT, &r->ok);
    i64 first = flowcore_int_in(PyTuple_GET_ITEM(edges_of, 1), 0, r->n_flow + 1, &r->ok);
    i64 stays = flowcore_int_in(PyTuple_GET_ITEM(edges_of, 2), 0, r->n_flow + 1, &r->ok);
    if (r->ok <= 0 || !PyList_CheckExact(lst) || !PyList_CheckExact(hubs) ||
        first + stays + PyList_GET_SIZE(hubs) > r->n_flow) {
        r->ok = r->ok < 0 ? r->ok : 0;
        return;
    }
    Py_ssize_t out = (Py_ssize_t)(first + stays), n_hubs = PyList_GET_SIZE(hubs), size = PyList_GET_SIZE(lst);
    i64 pos = 0;
    for (Py_ssize_t e = (Py_ssize_t)first; e < out; e++) {
        pos += flow_at(r, e);
    }
    if (size == 1) {
        i64 gp = flowcore_int_in(PyList_GET_ITEM(lst, 0), 0, r->n, &r->ok);
        if (r->ok > 0 && pos) {
            hold(r, gp, o_obj);
            return;
        }
        Py_ssize_t j = 0;
        while (r->ok > 0 && j < n_hubs && flow_at(r, out + j) != 1) {
            j++;
        }
        if (r->ok <= 0 || j == n_hubs) { /* its unit left by no hub edge: the Python's AssertionError */
            r->ok = r->ok < 0 ? r->ok : 0;
            return;
        }
        i64 hub = flowcore_int_in(PyList_GET_ITEM(hubs, j), 0, r->num_nodes, &r->ok);
        if (r->ok > 0) {
            receive(r, (Py_ssize_t)hub, gp);
        }
        return;
    }
    if (scratch(r, size > n_hubs ? size : n_hubs) < 0) {
        r->ok = -1;
        return;
    }
    for (Py_ssize_t i = 0; i < size && r->ok > 0; i++) { /* (not the owner's now, partition) */
        i64 gp = flowcore_int_in(PyList_GET_ITEM(lst, i), 0, r->n, &r->ok);
        i64 h = r->ok > 0 ? flowcore_int_in(PyList_GET_ITEM(holder, (Py_ssize_t)gp), -ANY_LIMIT, ANY_LIMIT, &r->ok) : 0;
        r->keys[i] = ((i64)(h != o) << 32) | gp;
    }
    if (r->ok <= 0) {
        return;
    }
    if (size > 1) { /* qsort's array must not be NULL, even empty (C: undefined; UBSan says so) */
        qsort(r->keys, (size_t)size, sizeof(i64), cmp_i64);
    }
    Py_ssize_t kept = pos < size ? (Py_ssize_t)pos : size;
    for (Py_ssize_t i = 0; i < kept; i++) {
        hold(r, r->keys[i] & 0xFFFFFFFF, o_obj);
    }
    Py_ssize_t rest = size - kept;
    i64 *parts = r->keys + kept;
    for (Py_ssize_t i = 0; i < rest; i++) {
        parts[i] &= 0xFFFFFFFF;
    }
    if (rest > 1) {
        qsort(parts, (size_t)rest, sizeof(i64), cmp_i64);
    }
    for (Py_ssize_t j = 0; j < n_hubs; j++) {
        r->counts[j] = flow_at(r, out + j);
    }
    if (r->ok > 0 && deal(rest, r->counts, n_hubs, r->active, r->dealt) < 0) {
        r->ok = 0;
    }
    for (Py_ssize_t i = 0; i < rest && r->ok > 0; i++) {
        i64 hub = flowcore_int_in(PyList_GET_ITEM(hubs, r->dealt[i]), 0, r->num_nodes, &r->ok);
        if (r->ok > 0) {
            receive(r, (Py_ssize_t)hub, parts[i]);
        }
    }
}

/* The hub edges with flow into members, sorted by (hub index, member); *n_reach of them. */
static Reach *reaches(ReadBack *r, PyObject *edges, Py_ssize_t limit, PyObject *node_member, Py_ssize_t *n_reach) {
    Reach *out = NULL;
    Py_ssize_t cap = 0, n = 0;
    for (Py_ssize_t e = 0; e < limit && r->ok > 0; e++) {
        i64 f = flow_at(r, e);
        if (!f || r->ok <= 0) {
            continue;
        }
        PyObject *edge = e < PyList_GET_SIZE(edges) ? PyList_GET_ITEM(edges, e) : NULL;
        if (!edge || !PyTuple_CheckExact(edge) || PyTuple_GET_SIZE(edge) != 4) {
            r->ok = 0;
            break;
        }
        i64 u = flowcore_int_in(PyTuple_GET_ITEM(edge, 0), -ANY_LIMIT, ANY_LIMIT, &r->ok);
        if (r->ok <= 0 || u < 0 || u >= r->num_nodes || r->slot[u] < 0) {
            continue; /* not a hub that received */
        }
        PyObject *m_obj = PyDict_GetItemWithError(node_member, PyTuple_GET_ITEM(edge, 1));
        if (!m_obj) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                r->ok = 0;
            }
            continue;
        }
        i64 m = flowcore_int_in(m_obj, -ANY_LIMIT, ANY_LIMIT, &r->ok);
        if (r->ok > 0 && grow((void **)&out, &cap, n + 1, sizeof(Reach)) < 0) {
            r->ok = -1;
        }
        if (r->ok > 0) {
            out[n++] = (Reach){r->slot[u], m, f};
        }
    }
    if (n) {
        qsort(out, (size_t)n, sizeof(Reach), cmp_reach);
    }
    *n_reach = n;
    return out;
}

/* Per hub that received, its partitions dealt to the members it reaches. */
static void to_members(ReadBack *r, Reach *reach, Py_ssize_t n_reach) {
    if (r->n_incoming > 1) {
        qsort(r->incoming, (size_t)r->n_incoming, sizeof(i64), cmp_i64);
    }
    Py_ssize_t a = 0, b = 0;
    for (Py_ssize_t k = 0; k < r->n_hubs && r->ok > 0; k++) {
        Py_ssize_t a0 = a, b0 = b, n_members = 0;
        while (a < r->n_incoming && (r->incoming[a] >> 32) == k) {
            a++;
        }
        while (b < n_reach && reach[b].hub == k) {
            b++;
        }
        if (scratch(r, (a - a0) > (b - b0) ? (a - a0) : (b - b0)) < 0) {
            r->ok = -1;
            return;
        }
        i64 *members = r->keys; /* the distinct members, their summed flows in counts */
        for (Py_ssize_t i = b0; i < b; i++) {
            if (n_members && members[n_members - 1] == reach[i].member) {
                r->counts[n_members - 1] += reach[i].flow;
            } else {
                members[n_members] = reach[i].member;
                r->counts[n_members++] = reach[i].flow;
            }
        }
        if (deal(a - a0, r->counts, n_members, r->active, r->dealt) < 0) {
            r->ok = 0;
        }
        for (Py_ssize_t i = 0; i < a - a0 && r->ok > 0; i++) {
            PyObject *m = PyLong_FromLongLong(members[r->dealt[i]]);
            if (!m) {
                r->ok = -1;
                break;
            }
            PyList_SetItem(r->new_holder, (Py_ssize_t)(r->incoming[a0 + i] & 0xFFFFFFFF), m);
        }
    }
}

PyObject *flowcore_read_back(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *holder, *pools, *pool_edges, *flow, *edges, *hub_edges_obj, *node_member, *num_nodes_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOOO", &holder, &pools, &pool_edges, &flow, &edges, &hub_edges_obj,
                          &node_member, &num_nodes_obj)) {
        return NULL;
    }
    ReadBack r = {0};
    r.ok = 1;
    if (!PyList_CheckExact(holder) || !PyList_CheckExact(pools) || !PyList_CheckExact(pool_edges) ||
        !PyList_CheckExact(flow) || !PyList_CheckExact(edges) || !PyDict_CheckExact(node_member) ||
        PyList_GET_SIZE(pools) != PyList_GET_SIZE(pool_edges) || PyList_GET_SIZE(holder) >= FLOW_LIMIT) {
        Py_RETURN_NONE;
    }
    i64 hub_edges = flowcore_int_in(hub_edges_obj, -ANY_LIMIT, ANY_LIMIT, &r.ok);
    r.num_nodes = (Py_ssize_t)flowcore_int_in(num_nodes_obj, 0, FLOW_LIMIT, &r.ok);
    if (r.ok <= 0) {
        Py_RETURN_NONE;
    }
    r.flow = flow;
    r.n = PyList_GET_SIZE(holder);
    r.n_flow = PyList_GET_SIZE(flow);
    r.new_holder = PyList_GetSlice(holder, 0, r.n);
    r.slot = PyMem_New(Py_ssize_t, r.num_nodes + 1);
    if (!r.new_holder || !r.slot) {
        Py_XDECREF(r.new_holder);
        PyMem_Free(r.slot);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t v = 0; v < r.num_nodes; v++) {
        r.slot[v] = -1;
    }
    for (Py_ssize_t p = 0; p < PyList_GET_SIZE(pools) && r.ok > 0; p++) {
        one_pool(&r, holder, PyList_GET_ITEM(pools, p), PyList_GET_ITEM(pool_edges, p));
    }
    Py_ssize_t limit = hub_edges < r.n_flow ? (Py_ssize_t)(hub_edges > 0 ? hub_edges : 0) : r.n_flow;
    Py_ssize_t n_reach = 0;
    Reach *reach = r.ok > 0 ? reaches(&r, edges, limit, node_member, &n_reach) : NULL;
    if (r.ok > 0) {
        to_members(&r, reach, n_reach);
    }
    PyMem_Free(reach);
    PyMem_Free(r.slot);
    PyMem_Free(r.incoming);
    PyMem_Free(r.keys);
    PyMem_Free(r.counts);
    PyMem_Free(r.dealt);
    PyMem_Free(r.active);
    if (r.ok > 0) {
        return r.new_holder;
    }
    Py_DECREF(r.new_holder);
    if (r.ok < 0) {
        return NULL;
    }
    PyErr_Clear();
    Py_RETURN_NONE;
}
