/* The primal-dual phases of rackplan.assignor.flow.mincost, compiled (issue 29).
 *
 * This is mincost._phases with _Residual's construction, _dijkstra and _blocking_flows, step for
 * step: the same arc numbering (input edge i is arcs 2i and 2i+1, then one arc pair per non-zero
 * supply in node order), the same adjacency order (each node's arcs in arc order), the same Dinic
 * search (levels counted to the sink, arcs tried in order, the same retreats), the same cut-off
 * tests and the same cost tally.  So it returns the very flow the Python returns on every edge: the
 * plans are read back from the flow, and another optimum among ties would change them.
 *
 * The Dijkstra is a binary heap, not the Python's bucket queue.  Its settle order within one
 * distance differs, which changes nothing: every node closer than the sink is settled at its exact
 * distance whatever the order, and every other node's potential moves by the sink's distance.
 *
 * The core works in 64-bit integers.  It answers only problems it can solve exactly within them
 * and says so otherwise (status FALLBACK): capacities and supplies below 2**60, the costs' sum
 * below 2**60 and the total supply times (that sum + 1) below 2**61, every value a plain int,
 * every node a valid index, the supplies summing to zero, nothing negative.  Anything else,
 * including every input the Python rejects, goes to the Python solver, which raises its own
 * errors with its own messages.  Potentials stay within [0, sum of costs] (the source's stays 0,
 * the sink's is the current shortest path's length), reduced distances below 2**62, and the cost
 * bound spent + (need - sent) * (pot[t] + 1) below 2**61, so nothing here overflows.
 *
 * solve(num_nodes, edges, supply, cutoff) -> (status, a, b):
 *   (0, cost, flow)   the flow on each input edge, and its cost
 *   (1, None, None)   cut off: the flow cannot cost less than cutoff
 *   (2, sent, need)   infeasible: only sent of need units can be routed
 *   (3, None, None)   outside the core's domain: solve it in Python
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_flowcore.h"

typedef long long i64;

#define LIMIT_60 ((i64)1 << 60)
#define LIMIT_61 ((i64)1 << 61)
#define LIMIT_62 ((i64)1 << 62)
#define UNREACHED INT64_MAX

enum { SOLVED = 0, CUT_OFF = 1, INFEASIBLE = 2, FALLBACK = 3 };

/* The residual graph: arcs in pairs (e, e ^ 1), each node's arcs in arc order from first[v]. */
typedef struct {
    Py_ssize_t n, s, t, arcs, n_input;
    i64 *head, *cap, *cost;
    Py_ssize_t *first, *adj; /* adj[first[v] .. first[v + 1]): the arcs leaving v */
    i64 *pot, *dist, *level;
    Py_ssize_t *it, *queue, *path;
    i64 *heap_d;
    Py_ssize_t *heap_v, heap_cap;
} Graph;

/* A plain int within (-LIMIT_62, LIMIT_62), else 0 with *ok cleared (no Python error left set). */
static i64 small_int(PyObject *obj, int *ok) {
    if (!PyLong_Check(obj)) {
        *ok = 0;
        return 0;
    }
    int overflow = 0;
    i64 value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    if (value >= LIMIT_62 || value <= -LIMIT_62) {
        *ok = 0;
        return 0;
    }
    return value;
}

/* ---- Dijkstra: reduced distances from the source, stopped once the sink is settled. ---------- */

static void heap_push(Graph *g, Py_ssize_t *size, i64 d, Py_ssize_t v) {
    Py_ssize_t i = (*size)++;
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (g->heap_d[parent] <= d) {
            break;
        }
        g->heap_d[i] = g->heap_d[parent];
        g->heap_v[i] = g->heap_v[parent];
        i = parent;
    }
    g->heap_d[i] = d;
    g->heap_v[i] = v;
}

static void heap_pop(Graph *g, Py_ssize_t *size, i64 *d, Py_ssize_t *v) {
    *d = g->heap_d[0];
    *v = g->heap_v[0];
    Py_ssize_t last = --(*size);
    i64 ld = g->heap_d[last];
    Py_ssize_t lv = g->heap_v[last];
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t child = 2 * i + 1;
        if (child >= last) {
            break;
        }
        if (child + 1 < last && g->heap_d[child + 1] < g->heap_d[child]) {
            child++;
        }
        if (g->heap_d[child] >= ld) {
            break;
        }
        g->heap_d[i] = g->heap_d[child];
        g->heap_v[i] = g->heap_v[child];
        i = child;
    }
    g->heap_d[i] = ld;
    g->heap_v[i] = lv;
}

/* The sink's reduced distance, -1 if unreachable; g->dist holds the others (exact below it). */
static i64 dijkstra(Graph *g) {
    i64 *dist = g->dist, *pot = g->pot, *cap = g->cap, *cost = g->cost, *head = g->head;
    Py_ssize_t *first = g->first, *adj = g->adj;
    for (Py_ssize_t v = 0; v < g->n; v++) {
        dist[v] = UNREACHED;
    }
    dist[g->s] = 0;
    Py_ssize_t size = 0;
    heap_push(g, &size, 0, g->s);
    while (size > 0) {
        i64 d;
        Py_ssize_t u;
        heap_pop(g, &size, &d, &u);
        if (dist[u] != d) {
            continue; /* reached again at a shorter distance */
        }
        if (u == g->t) {
            return d;
        }
        i64 pu = pot[u] + d;
        for (Py_ssize_t i = first[u]; i < first[u + 1]; i++) {
            Py_ssize_t e = adj[i];
            if (cap[e]) {
                Py_ssize_t v = (Py_ssize_t)head[e];
                i64 nd = pu + cost[e] - pot[v];
                if (nd < dist[v]) {
                    dist[v] = nd;
                    heap_push(g, &size, nd, v);
                }
            }
        }
    }
    return -1;
}

/* ---- Dinic on the arcs of zero reduced cost, levels counted to the sink, up to limit. -------- */

static i64 blocking_flows(Graph *g, i64 limit) {
    i64 *head = g->head, *cap = g->cap, *cost = g->cost, *pot = g->pot, *level = g->level;
    Py_ssize_t *first = g->first, *adj = g->adj, *it = g->it, *queue = g->queue, *path = g->path;
    Py_ssize_t n = g->n, s = g->s, t = g->t;
    i64 total = 0;
    while (total < limit) {
        for (Py_ssize_t v = 0; v < n; v++) {
            level[v] = -1;
        }
        level[t] = 0;
        queue[0] = t;
        Py_ssize_t q_end = 1;
        for (Py_ssize_t q = 0; q < q_end; q++) {
            if (level[s] >= 0) {
                break;
            }
            Py_ssize_t v = queue[q];
            i64 lv = level[v] + 1, pv = pot[v];
            for (Py_ssize_t i = first[v]; i < first[v + 1]; i++) {
                Py_ssize_t e = adj[i];
                if (cap[e ^ 1]) { /* the arc head[e] -> v has room */
                    Py_ssize_t u = (Py_ssize_t)head[e];
                    if (level[u] < 0 && pot[u] - cost[e] == pv) {
                        level[u] = lv;
                        queue[q_end++] = u;
                    }
                }
            }
        }
        if (level[s] < 0) {
            return total;
        }
        for (Py_ssize_t v = 0; v < n; v++) {
            it[v] = first[v];
        }
        Py_ssize_t depth = 0; /* the path's arcs: path[0 .. depth) */
        Py_ssize_t u = s;
        while (total < limit) {
            if (u == t) {
                i64 push = limit - total;
                for (Py_ssize_t i = 0; i < depth; i++) {
                    if (cap[path[i]] < push) {
                        push = cap[path[i]];
                    }
                }
                Py_ssize_t cut = -1;
                for (Py_ssize_t i = 0; i < depth; i++) {
                    Py_ssize_t e = path[i];
                    cap[e] -= push;
                    cap[e ^ 1] += push;
                    if (cut < 0 && cap[e] == 0) {
                        cut = i;
                    }
                }
                total += push;
                depth = cut < 0 ? depth - 1 : cut; /* the Python's del path[cut:], cut = -1 included */
                u = depth ? (Py_ssize_t)head[path[depth - 1]] : s;
                continue;
            }
            Py_ssize_t i = it[u], end = first[u + 1];
            i64 lu = level[u] - 1, pu = pot[u];
            while (i < end) {
                Py_ssize_t e = adj[i];
                if (cap[e]) {
                    Py_ssize_t v = (Py_ssize_t)head[e];
                    if (level[v] == lu && cost[e] + pu == pot[v]) {
                        break;
                    }
                }
                i++;
            }
            it[u] = i;
            if (i < end) {
                path[depth++] = adj[i];
                u = (Py_ssize_t)head[adj[i]];
                continue;
            }
            level[u] = -1; /* dead end: retreat */
            if (!depth) {
                break;
            }
            Py_ssize_t e = path[--depth];
            u = (Py_ssize_t)head[e ^ 1];
            it[u] += 1;
        }
    }
    return total;
}

/* ---- The problem read from Python, the phases, the answer. ------------------------------------ */

static void graph_free(Graph *g) {
    PyMem_Free(g->head);
    PyMem_Free(g->cap);
    PyMem_Free(g->cost);
    PyMem_Free(g->first);
    PyMem_Free(g->adj);
    PyMem_Free(g->pot);
    PyMem_Free(g->dist);
    PyMem_Free(g->level);
    PyMem_Free(g->it);
    PyMem_Free(g->queue);
    PyMem_Free(g->path);
    PyMem_Free(g->heap_d);
    PyMem_Free(g->heap_v);
}

static PyObject *status_only(int status) {
    return Py_BuildValue("(iOO)", status, Py_None, Py_None);
}

/* The phases on a problem given as C arrays: edge[4 * i ..] is (tail, head, capacity, cost) of edge i.
 * The checks of the module comment first (FALLBACK outside the core's domain); then SOLVED with the
 * flow on each edge in flow_out and the cost in *a, CUT_OFF, or INFEASIBLE with (*a, *b) = (sent,
 * need).  -1: out of memory (a Python error set).  solve() reads Python's lists into this; the
 * compiled assignor paths (_constrained.c) build their graphs here directly. */
int flowcore_phases(Py_ssize_t num_nodes, Py_ssize_t n_edges, const i64 *edge, const i64 *supply, int has_cutoff,
                    i64 cutoff, i64 *flow_out, i64 *a, i64 *b) {
    /* Checked first, as the Python does before it builds anything: supplies, then edges. */
    i64 need = 0, balance = 0, sum_cost = 0;
    Py_ssize_t n_supplied = 0;
    for (Py_ssize_t v = 0; v < num_nodes; v++) {
        i64 s = supply[v];
        if (s >= LIMIT_60 || s <= -LIMIT_60) {
            return FALLBACK;
        }
        balance += s; /* at most 2**60 * 2**31 entries' worth: no overflow before the check below */
        if (s > 0) {
            need += s;
            if (need >= LIMIT_60) {
                return FALLBACK;
            }
        }
        if (balance >= LIMIT_61 || balance <= -LIMIT_61) {
            return FALLBACK;
        }
        n_supplied += s != 0;
    }
    if (balance != 0) {
        return FALLBACK;
    }
    for (Py_ssize_t i = 0; i < n_edges; i++) {
        i64 u = edge[4 * i], v = edge[4 * i + 1], c = edge[4 * i + 2], w = edge[4 * i + 3];
        if (u < 0 || u >= num_nodes || v < 0 || v >= num_nodes || c < 0 || c >= LIMIT_60 || w < 0 ||
            w >= LIMIT_60) {
            return FALLBACK;
        }
        sum_cost += w;
        if (sum_cost >= LIMIT_60) {
            return FALLBACK;
        }
    }
    /* need * (sum_cost + 1) < 2**61, so every cost bound the phases compute fits. */
    if (need > 0 && sum_cost + 1 > LIMIT_61 / need) {
        return FALLBACK;
    }

    Graph g;
    memset(&g, 0, sizeof g);
    g.n = num_nodes + 2;
    g.s = num_nodes;
    g.t = g.s + 1;
    g.n_input = 2 * n_edges;
    g.arcs = g.n_input + 2 * n_supplied;
    Py_ssize_t arcs = g.arcs > 0 ? g.arcs : 1, n = g.n;
    g.head = PyMem_New(i64, arcs);
    g.cap = PyMem_New(i64, arcs);
    g.cost = PyMem_New(i64, arcs);
    g.adj = PyMem_New(Py_ssize_t, arcs);
    g.first = PyMem_New(Py_ssize_t, n + 1);
    g.pot = PyMem_New(i64, n);
    g.dist = PyMem_New(i64, n);
    g.level = PyMem_New(i64, n);
    g.it = PyMem_New(Py_ssize_t, n);
    g.queue = PyMem_New(Py_ssize_t, n);
    g.path = PyMem_New(Py_ssize_t, n);
    g.heap_cap = arcs + 1; /* one entry per improvement: at most one per arc, and the source */
    g.heap_d = PyMem_New(i64, g.heap_cap);
    g.heap_v = PyMem_New(Py_ssize_t, g.heap_cap);
    if (!g.head || !g.cap || !g.cost || !g.adj || !g.first || !g.pot || !g.dist || !g.level || !g.it ||
        !g.queue || !g.path || !g.heap_d || !g.heap_v) {
        graph_free(&g);
        PyErr_NoMemory();
        return -1;
    }

    /* The arcs, numbered as _Residual numbers them. */
    for (Py_ssize_t i = 0; i < n_edges; i++) {
        g.head[2 * i] = edge[4 * i + 1];
        g.head[2 * i + 1] = edge[4 * i];
        g.cap[2 * i] = edge[4 * i + 2];
        g.cap[2 * i + 1] = 0;
        g.cost[2 * i] = edge[4 * i + 3];
        g.cost[2 * i + 1] = -edge[4 * i + 3];
    }
    Py_ssize_t e = g.n_input;
    for (Py_ssize_t v = 0; v < num_nodes; v++) {
        i64 s = supply[v];
        if (s > 0) {
            g.head[e] = v;
            g.head[e + 1] = g.s;
        } else if (s < 0) {
            g.head[e] = g.t;
            g.head[e + 1] = v;
        } else {
            continue;
        }
        g.cap[e] = s > 0 ? s : -s;
        g.cap[e + 1] = 0;
        g.cost[e] = g.cost[e + 1] = 0;
        e += 2;
    }
    /* Each node's arcs in arc order: an arc leaves the head of its partner. */
    memset(g.first, 0, (size_t)(n + 1) * sizeof(Py_ssize_t));
    for (Py_ssize_t arc = 0; arc < g.arcs; arc++) {
        g.first[g.head[arc ^ 1] + 1]++;
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        g.first[v + 1] += g.first[v];
    }
    for (Py_ssize_t v = 0; v < n; v++) {
        g.it[v] = g.first[v];
    }
    for (Py_ssize_t arc = 0; arc < g.arcs; arc++) {
        g.adj[g.it[g.head[arc ^ 1]]++] = arc;
    }

    /* The phases, as mincost._phases runs them. */
    for (Py_ssize_t v = 0; v < n; v++) {
        g.pot[v] = 0;
    }
    i64 sent = 0, spent = 0;
    int status = SOLVED;
    while (sent < need) {
        i64 dt = dijkstra(&g);
        if (dt < 0) {
            status = INFEASIBLE;
            break;
        }
        for (Py_ssize_t v = 0; v < n; v++) {
            g.pot[v] += g.dist[v] < dt ? g.dist[v] : dt;
        }
        i64 pt = g.pot[g.t];
        if (has_cutoff && spent + (need - sent) * pt >= cutoff) {
            status = CUT_OFF;
            break;
        }
        i64 pushed = blocking_flows(&g, need - sent);
        sent += pushed;
        spent += pushed * pt;
        if (has_cutoff && sent < need && spent + (need - sent) * (pt + 1) >= cutoff) {
            status = CUT_OFF;
            break;
        }
    }
    if (status == SOLVED && has_cutoff && spent >= cutoff) {
        status = CUT_OFF;
    }
    if (status == SOLVED) {
        for (Py_ssize_t i = 0; i < n_edges; i++) {
            flow_out[i] = g.cap[2 * i + 1];
        }
        *a = spent;
    } else if (status == INFEASIBLE) {
        *a = sent;
        *b = need;
    }
    graph_free(&g);
    return status;
}

static PyObject *solve(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *num_obj, *edges_obj, *supply_obj, *cutoff_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &num_obj, &edges_obj, &supply_obj, &cutoff_obj)) {
        return NULL;
    }
    int ok = 1;
    i64 num_nodes = small_int(num_obj, &ok);
    int has_cutoff = cutoff_obj != Py_None;
    i64 cutoff = 0;
    if (has_cutoff) {
        if (!PyLong_Check(cutoff_obj)) {
            return status_only(FALLBACK);
        }
        int overflow = 0;
        cutoff = PyLong_AsLongLongAndOverflow(cutoff_obj, &overflow);
        if (cutoff == -1 && PyErr_Occurred()) {
            return NULL;
        }
        /* Every bound the phases compare is in [0, 2**61): a cut-off beyond +-2**62 acts as that. */
        if (overflow > 0 || cutoff > LIMIT_62) {
            cutoff = LIMIT_62;
        } else if (overflow < 0 || cutoff < -LIMIT_62) {
            cutoff = -LIMIT_62;
        }
    }
    if (!ok || num_nodes < 0 || (!PyList_CheckExact(supply_obj) && !PyTuple_CheckExact(supply_obj))) {
        return status_only(FALLBACK);
    }
    if (!PyList_CheckExact(edges_obj) && !PyTuple_CheckExact(edges_obj)) {
        return status_only(FALLBACK);
    }
    PyObject **supply_items = PySequence_Fast_ITEMS(supply_obj);
    PyObject **edge_items = PySequence_Fast_ITEMS(edges_obj);
    Py_ssize_t n_supply = PySequence_Fast_GET_SIZE(supply_obj);
    Py_ssize_t n_edges = PySequence_Fast_GET_SIZE(edges_obj);
    if (n_supply != num_nodes) {
        return status_only(FALLBACK);
    }
    /* Python's values as plain ints within 2**62 (the phases check the tighter bounds). */
    i64 *supply = PyMem_New(i64, n_supply > 0 ? n_supply : 1);
    i64 *edge = PyMem_New(i64, n_edges > 0 ? 4 * n_edges : 1);
    i64 *flow = PyMem_New(i64, n_edges > 0 ? n_edges : 1);
    if (!supply || !edge || !flow) {
        PyMem_Free(supply);
        PyMem_Free(edge);
        PyMem_Free(flow);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t v = 0; v < n_supply && ok; v++) {
        supply[v] = small_int(supply_items[v], &ok);
    }
    for (Py_ssize_t i = 0; i < n_edges && ok; i++) {
        PyObject *item = edge_items[i];
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 4) {
            ok = 0;
            break;
        }
        for (int j = 0; j < 4; j++) {
            edge[4 * i + j] = small_int(PyTuple_GET_ITEM(item, j), &ok);
        }
    }
    i64 a = 0, b = 0;
    int status = ok ? flowcore_phases(num_nodes, n_edges, edge, supply, has_cutoff, cutoff, flow, &a, &b) : FALLBACK;
    PyObject *answer = NULL;
    if (status == SOLVED) {
        PyObject *flow_list = PyList_New(n_edges);
        if (flow_list) {
            for (Py_ssize_t i = 0; i < n_edges; i++) {
                PyObject *f = PyLong_FromLongLong(flow[i]);
                if (!f) {
                    Py_CLEAR(flow_list);
                    break;
                }
                PyList_SET_ITEM(flow_list, i, f);
            }
        }
        if (flow_list) {
            answer = Py_BuildValue("(iLN)", SOLVED, a, flow_list);
        }
    } else if (status == INFEASIBLE) {
        answer = Py_BuildValue("(iLL)", INFEASIBLE, a, b);
    } else if (status >= 0) {
        answer = status_only(status);
    }
    PyMem_Free(supply);
    PyMem_Free(edge);
    PyMem_Free(flow);
    return answer;
}

/* ---- pool_edges: the pool sources of a cooperative-sticky count-shift graph (issue 29). -------
 *
 * sticky.general_edges.pool_edges_py step for step, appending to the graph's own lists: per pool, in
 * the order given, one source node (supply: its size), an edge back to its owner's node while the
 * owner may hold the topic at its count, one to the owner's spare-unit node while it may grow in the
 * topic, then one to each hub of the topic, in class order.  Any value it cannot take as the Python
 * does (a missing node, a value outside 64 bits, a wrong type) undoes its appends and returns None:
 * the Python builds the graph then, with its own errors.
 */

/* seq[i] (a list) as a plain int within 64-bit reach, else *ok cleared. */
static i64 item_int(PyObject *seq, Py_ssize_t i, int *ok) {
    if (!PyList_Check(seq) || i < 0 || i >= PyList_GET_SIZE(seq)) {
        *ok = 0;
        return 0;
    }
    return small_int(PyList_GET_ITEM(seq, i), ok);
}

/* d[key] as a plain int (key a Python object), else *ok cleared (a missing key too). */
static i64 dict_int(PyObject *d, PyObject *key, int *ok) {
    PyObject *v = PyDict_Check(d) ? PyDict_GetItemWithError(d, key) : NULL;
    if (!v) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    return small_int(v, ok);
}

/* Append the edge (a, b, c, d) to the list, 0 on success (new references to the four ints are taken). */
static int append_edge(PyObject *edges, PyObject *a, PyObject *b, PyObject *c, PyObject *d) {
    PyObject *e = PyTuple_New(4);
    if (!e) {
        return -1;
    }
    Py_INCREF(a);
    Py_INCREF(b);
    Py_INCREF(c);
    Py_INCREF(d);
    PyTuple_SET_ITEM(e, 0, a);
    PyTuple_SET_ITEM(e, 1, b);
    PyTuple_SET_ITEM(e, 2, c);
    PyTuple_SET_ITEM(e, 3, d);
    int r = PyList_Append(edges, e);
    Py_DECREF(e);
    return r;
}

/* Append the edge (tail, head, cap, cost), the cost made from its value, 0 on success. */
static int append_cost_edge(PyObject *edges, PyObject *tail, PyObject *head, PyObject *cap, i64 cost) {
    PyObject *cost_obj = PyLong_FromLongLong(cost);
    int r = cost_obj ? append_edge(edges, tail, head, cap, cost_obj) : -1;
    Py_XDECREF(cost_obj);
    return r;
}

#define COST_LIMIT ((i64)1 << 30) /* big and every crossing count below it: big * cross + 1 fits */

static PyObject *pool_edges(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *pools, *edges, *supply, *cnt, *min_sub, *member_node, *spare_of, *grows, *room_obj, *hub_nodes,
        *crossk, *cls, *classes, *big_obj;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOO", &pools, &edges, &supply, &cnt, &min_sub, &member_node, &spare_of,
                          &grows, &room_obj, &hub_nodes, &crossk, &cls, &classes, &big_obj)) {
        return NULL;
    }
    if (!PyList_Check(pools) || !PyList_Check(edges) || !PyList_Check(supply) || !PyList_Check(hub_nodes) ||
        !PyList_Check(classes) || !PyList_Check(crossk)) {
        Py_RETURN_NONE;
    }
    int ok = 1;
    i64 room = small_int(room_obj, &ok), big = small_int(big_obj, &ok);
    if (!ok || big < 0 || big >= COST_LIMIT || room < 0 || room >= LIMIT_60) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n_edges0 = PyList_GET_SIZE(edges), n_supply0 = PyList_GET_SIZE(supply);
    Py_ssize_t n_pools = PyList_GET_SIZE(pools);
    PyObject *out = PyList_New(n_pools);
    if (!out) {
        return NULL;
    }
    PyObject *src_obj = NULL, *size_obj = NULL; /* the pool's source node and size, shared by its edges */
    for (Py_ssize_t p = 0; p < n_pools && ok; p++) {
        Py_CLEAR(src_obj);
        Py_CLEAR(size_obj);
        PyObject *pool = PyList_GET_ITEM(pools, p), *key, *lst;
        if (!PyTuple_Check(pool) || PyTuple_GET_SIZE(pool) != 2) {
            ok = 0;
            break;
        }
        key = PyTuple_GET_ITEM(pool, 0);
        lst = PyTuple_GET_ITEM(pool, 1);
        if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 4 || !PyList_Check(lst)) {
            ok = 0;
            break;
        }
        PyObject *o_obj = PyTuple_GET_ITEM(key, 0), *t_obj = PyTuple_GET_ITEM(key, 1);
        PyObject *k_obj = PyTuple_GET_ITEM(key, 2), *pinned_obj = PyTuple_GET_ITEM(key, 3);
        i64 o = small_int(o_obj, &ok), t = small_int(t_obj, &ok);
        int pinned = PyObject_IsTrue(pinned_obj);
        if (!ok || pinned < 0 || t < 0 || t >= PyList_GET_SIZE(hub_nodes) || t >= PyList_GET_SIZE(classes)) {
            PyErr_Clear();
            ok = 0;
            break;
        }
        src_obj = PyLong_FromSsize_t(PyList_GET_SIZE(supply));
        size_obj = PyLong_FromSsize_t(PyList_GET_SIZE(lst));
        if (!src_obj || !size_obj || PyList_Append(supply, size_obj) < 0) {
            ok = -1;
            break;
        }
        Py_ssize_t first = PyList_GET_SIZE(edges);
        if (o >= 0) {
            i64 g = item_int(cls, (Py_ssize_t)o, &ok);
            PyObject *row = ok && g >= 0 && g < PyList_GET_SIZE(crossk) ? PyList_GET_ITEM(crossk, g) : NULL;
            i64 cross = row ? dict_int(row, k_obj, &ok) : (ok = 0);
            if (!ok || cross < 0 || cross >= COST_LIMIT) {
                ok = 0;
                break;
            }
            i64 own = big * cross;
            i64 c = item_int(cnt, (Py_ssize_t)o, &ok), low = item_int(min_sub, (Py_ssize_t)t, &ok);
            if (!ok) {
                break;
            }
            if (0 < c && c <= low + 1) {
                PyObject *node = PyDict_Check(member_node) ? PyDict_GetItemWithError(member_node, o_obj) : NULL;
                if (!node) { /* no node: the Python's KeyError, or a type it handles otherwise */
                    PyErr_Clear();
                    ok = 0;
                    break;
                }
                if (append_cost_edge(edges, src_obj, node, size_obj, own) < 0) {
                    ok = -1;
                    break;
                }
            }
            PyObject *spare = PyDict_Check(spare_of) ? PyDict_GetItemWithError(spare_of, o_obj) : NULL;
            if (!spare && (PyErr_Occurred() || !PyDict_Check(spare_of))) {
                PyErr_Clear();
                ok = 0;
                break;
            }
            if (spare) {
                PyObject *topics = PyDict_Check(grows) ? PyDict_GetItemWithError(grows, o_obj) : NULL;
                int in = topics && PyAnySet_Check(topics) ? PySet_Contains(topics, t_obj) : -1;
                if (in < 0) {
                    PyErr_Clear();
                    ok = 0;
                    break;
                }
                if (in && append_cost_edge(edges, src_obj, spare, room_obj, own) < 0) {
                    ok = -1;
                    break;
                }
            }
        }
        Py_ssize_t stays = PyList_GET_SIZE(edges) - first;
        PyObject *hubs;
        if (pinned) {
            hubs = PyList_New(0);
            if (!hubs) {
                ok = -1;
                break;
            }
        } else {
            hubs = PyList_GET_ITEM(hub_nodes, t);
            PyObject *gs = PyList_GET_ITEM(classes, t);
            if (!PyList_Check(hubs) || !PyTuple_Check(gs) || PyTuple_GET_SIZE(gs) != PyList_GET_SIZE(hubs)) {
                ok = 0;
                break;
            }
            i64 moved = o >= 0 ? 1 : 0;
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(gs) && ok > 0; j++) {
                i64 g = small_int(PyTuple_GET_ITEM(gs, j), &ok);
                PyObject *row = ok && g >= 0 && g < PyList_GET_SIZE(crossk) ? PyList_GET_ITEM(crossk, g) : NULL;
                i64 cross = row ? dict_int(row, k_obj, &ok) : (ok = 0);
                if (!ok || cross < 0 || cross >= COST_LIMIT) {
                    ok = 0;
                    break;
                }
                if (append_cost_edge(edges, src_obj, PyList_GET_ITEM(hubs, j), size_obj, big * cross + moved) < 0) {
                    ok = -1;
                }
            }
            if (ok <= 0) {
                break;
            }
            Py_INCREF(hubs);
        }
        PyObject *entry = Py_BuildValue("(OnnN)", lst, first, stays, hubs);
        if (!entry) {
            ok = -1;
            break;
        }
        PyList_SET_ITEM(out, p, entry);
    }
    Py_CLEAR(src_obj);
    Py_CLEAR(size_obj);
    if (ok > 0) {
        return out;
    }
    Py_DECREF(out);
    /* Undo the appends: the caller's lists are as they were. */
    PyObject *err_type, *err_value, *err_tb;
    PyErr_Fetch(&err_type, &err_value, &err_tb);
    if (PyList_SetSlice(edges, n_edges0, PyList_GET_SIZE(edges), NULL) < 0 ||
        PyList_SetSlice(supply, n_supply0, PyList_GET_SIZE(supply), NULL) < 0) {
        Py_XDECREF(err_type);
        Py_XDECREF(err_value);
        Py_XDECREF(err_tb);
        return NULL;
    }
    if (ok < 0) { /* out of memory: raise it */
        PyErr_Restore(err_type, err_value, err_tb);
        return NULL;
    }
    Py_XDECREF(err_type);
    Py_XDECREF(err_value);
    Py_XDECREF(err_tb);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"solve", solve, METH_VARARGS,
     "solve(num_nodes, edges, supply, cutoff) -> (status, a, b): mincost._phases compiled (see the source)."},
    {"pool_edges", pool_edges, METH_VARARGS,
     "pool_edges(pools, edges, supply, cnt, min_sub, member_node, spare_of, grows, room, hub_nodes, crossk, cls, "
     "classes, big) -> list | None: sticky.general_edges.pool_edges_py compiled (see the source)."},
    {"read_back", flowcore_read_back, METH_VARARGS,
     "read_back(holder, pools, pool_edges, flow, edges, hub_edges, node_member, num_nodes) -> list | None: "
     "sticky.general_readback.read_back_py compiled (see _readback.c)."},
    {"members_and_hubs", flowcore_members_and_hubs, METH_VARARGS,
     "members_and_hubs(n_topics, n, tm, cnt, min_sub, drops, cls, supply, edges, hubs, member_node) -> dict | None: "
     "sticky.general_nodes.members_and_hubs_py compiled (see _nodes.c)."},
    {"floor_cost", flowcore_floor_cost, METH_VARARGS,
     "floor_cost(pools, cnt, min_sub, spare_of, grows, crossk, cls, classes, big) -> int | None: "
     "sticky.general_floor.floor_cost_py compiled (see _shift.c)."},
    {"spare_units", flowcore_spare_units, METH_VARARGS,
     "spare_units(drops, losers, banned, gainer, cnt, min_sub, mt, cls, supply, edges, hubs, member_node, spare_of, "
     "grows, node_member) -> int | None: sticky.general_spare.spare_units_py compiled (see _shift.c)."},
    {"rack_and_fill", flowcore_rack_and_fill, METH_VARARGS,
     "rack_and_fill(masks, consumers, keys, per, extra) -> (owner, counts, extra, assigned) | None: "
     "range_assignor._rack_pass_py then _fill on a fresh topic, compiled (see _range.c)."},
    {"constrained", flowcore_constrained, METH_VARARGS,
     "constrained(masks, owner, member_class, classes) -> list | None: sticky.constrained.assign_constrained's "
     "holder per partition, compiled (see _constrained.c)."},
    {"constrained_settle", flowcore_constrained_settle, METH_VARARGS,
     "constrained_settle(masks, owner, claim, member_class, classes, max_rounds) -> (holder, fixed_point, rounds) "
     "| None: settling._settle_search with the equal path, compiled (see _constrained.c)."},
    {"withhold", flowcore_withhold, METH_VARARGS,
     "withhold(holder, claim, contested, member_ids, topics, topic_offset) -> (assignment, revoked) | None: "
     "sticky.plan.withhold_py compiled (see _withhold.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_flowcore", "The min-cost flow solver's primal-dual phases, compiled (issue 29).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__flowcore(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "SOLVED", SOLVED) || PyModule_AddIntConstant(m, "CUT_OFF", CUT_OFF) ||
              PyModule_AddIntConstant(m, "INFEASIBLE", INFEASIBLE) ||
              PyModule_AddIntConstant(m, "FALLBACK", FALLBACK))) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
