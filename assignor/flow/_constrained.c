/* cooperative-sticky's equal-subscription path, sticky.constrained.assign_constrained, compiled (issue 29).
 *
 * The Python step for step, answering what settling reads from it: the holder of each partition.
 * The same profiles (over-full?, rack class, room, owned counts per mask: members sorted by that key,
 * then by number), the same graph (hub nodes per class, the extra node, one source per free mask, then
 * per profile its member node and one source per owned mask; nodes and edges in the Python's order,
 * so flowcore_phases returns the Python's flow on every edge), and the same write-back: free and
 * released partitions dealt round robin to classes by the flow, the flow's kept amounts split among a
 * profile's members by the Python's cyclic rule, each class's incoming partitions dealt to its members'
 * free slots in member order.  Only the holder matters downstream, so the per-member lists' order is
 * not kept.
 *
 * constrained(masks, owner, member_class, classes) -> list | None: None, having made nothing, for
 * anything it cannot take as the Python does (a value outside 62 bits or of another type, a racked
 * class whose bit is not one bit, a flow outside the core's domain or infeasible, a write-back the
 * Python would reject): the Python answers then, with its own result or error.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "_flowcore.h"

typedef long long i64;
typedef Py_ssize_t ix;

#define VALUE_LIMIT ((i64)1 << 62)

/* A partition of some list, sorted by (mask, number): owned per member, free, released per pool. */
typedef struct {
    i64 key;
    ix gp;
} Part;

/* A member's profile key, then its number: the Python's sort of profiles, members in number order. */
typedef struct {
    int over;
    ix cls;
    i64 room;
    const i64 *vec; /* (mask, count) pairs, flattened */
    ix len;         /* pairs */
    ix member;
} Key;

static int part_cmp(const void *a, const void *b) {
    const Part *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return x->gp < y->gp ? -1 : x->gp > y->gp;
}

/* The profile key's order (Python's tuple order), without the member. */
static int key_cmp_profile(const Key *x, const Key *y) {
    if (x->over != y->over) {
        return x->over < y->over ? -1 : 1;
    }
    if (x->cls != y->cls) {
        return x->cls < y->cls ? -1 : 1;
    }
    if (x->room != y->room) {
        return x->room < y->room ? -1 : 1;
    }
    ix n = x->len < y->len ? x->len : y->len;
    for (ix i = 0; i < 2 * n; i++) {
        if (x->vec[i] != y->vec[i]) {
            return x->vec[i] < y->vec[i] ? -1 : 1;
        }
    }
    return x->len < y->len ? -1 : x->len > y->len;
}

static int key_cmp(const void *a, const void *b) {
    const Key *x = a, *y = b;
    int c = key_cmp_profile(x, y);
    if (c) {
        return c;
    }
    return x->member < y->member ? -1 : x->member > y->member;
}

/* sticky.common.deal: parts 0 .. n-1 round robin to the slot entries (who, left) in order, one per
 * entry per round; out[pos] is the member of part pos.  0 where the Python raises (parts left over). */
static int deal(ix n, ix n_slots, ix *who, i64 *left, ix *out) {
    ix active = 0;
    for (ix s = 0; s < n_slots; s++) {
        if (left[s] > 0) {
            who[active] = who[s];
            left[active] = left[s];
            active++;
        }
    }
    ix pos = 0;
    while (pos < n && active > 0) {
        ix still = 0;
        for (ix s = 0; s < active && pos < n; s++) {
            out[pos++] = who[s];
            if (--left[s]) {
                who[still] = who[s];
                left[still] = left[s];
                still++;
            }
        }
        active = still;
    }
    return pos == n;
}

/* Everything the path allocates, freed in one place. */
typedef struct {
    void *ptr[40];
    int count;
} Arena;

static void *arena_new(Arena *arena, size_t count, size_t size) {
    if (arena->count >= (int)(sizeof arena->ptr / sizeof arena->ptr[0])) {
        return NULL; /* more arrays than a run makes: reported as out of memory, never overrun */
    }
    void *p = PyMem_Calloc(count ? count : 1, size);
    if (p) {
        arena->ptr[arena->count++] = p;
    }
    return p;
}

static void arena_free(Arena *arena) {
    for (int i = 0; i < arena->count; i++) {
        PyMem_Free(arena->ptr[i]);
    }
}

/* The inputs, read as the Python would take them; 0 (nothing set) where it cannot. */
typedef struct {
    ix n, n_parts, n_cls;
    i64 *mask, *bit;
    ix *owner, *cls;
    int *has_rack;
} Input;

static int read_input(Arena *arena, PyObject *masks, PyObject *owner, PyObject *member_class, PyObject *classes,
                      Input *in) {
    if (!PyList_CheckExact(masks) || !PyList_CheckExact(owner) || !PyList_CheckExact(member_class) ||
        !PyList_CheckExact(classes)) {
        return 0;
    }
    in->n_parts = PyList_GET_SIZE(masks);
    in->n = PyList_GET_SIZE(member_class);
    in->n_cls = PyList_GET_SIZE(classes);
    if (in->n < 1 || PyList_GET_SIZE(owner) != in->n_parts) {
        return 0;
    }
    in->mask = arena_new(arena, (size_t)in->n_parts, sizeof(i64));
    in->owner = arena_new(arena, (size_t)in->n_parts, sizeof(ix));
    in->cls = arena_new(arena, (size_t)in->n, sizeof(ix));
    in->bit = arena_new(arena, (size_t)in->n_cls, sizeof(i64));
    in->has_rack = arena_new(arena, (size_t)in->n_cls, sizeof(int));
    if (!in->mask || !in->owner || !in->cls || !in->bit || !in->has_rack) {
        return -1;
    }
    int ok = 1;
    for (ix g = 0; g < in->n_cls && ok > 0; g++) {
        PyObject *c = PyList_GET_ITEM(classes, g);
        if (!PyTuple_CheckExact(c) || PyTuple_GET_SIZE(c) != 2 || !PyBool_Check(PyTuple_GET_ITEM(c, 0))) {
            return 0;
        }
        in->has_rack[g] = PyTuple_GET_ITEM(c, 0) == Py_True;
        in->bit[g] = flowcore_int_in(PyTuple_GET_ITEM(c, 1), 0, VALUE_LIMIT, &ok);
        if (in->has_rack[g] && (in->bit[g] & (in->bit[g] - 1))) {
            return 0; /* a rack's bit is one bit: the Python's cost rows read it bit by bit */
        }
    }
    for (ix i = 0; i < in->n && ok > 0; i++) {
        in->cls[i] = (ix)flowcore_int_in(PyList_GET_ITEM(member_class, i), 0, in->n_cls, &ok);
    }
    for (ix gp = 0; gp < in->n_parts && ok > 0; gp++) {
        in->mask[gp] = flowcore_int_in(PyList_GET_ITEM(masks, gp), 0, VALUE_LIMIT, &ok);
        in->owner[gp] = (ix)flowcore_int_in(PyList_GET_ITEM(owner, gp), -1, in->n, &ok);
    }
    return ok;
}

static int cross(const Input *in, ix g, i64 k) {
    return in->has_rack[g] && k && !(k & in->bit[g]);
}

/* Kafka's rack match (Prepared.matches): no rack, or a replica in the member's rack. */
static int matches(const Input *in, ix g, i64 k) {
    return !in->has_rack[g] || (k & in->bit[g]);
}

/* One run's state, phase to phase: owned lists, profiles, graph, flow. */
typedef struct {
    const Input *in;
    Arena *arena;
    ix n, P, n_cls;
    i64 q, r, big;
    /* owned partitions per member, local (matching) and remote, each sorted by (mask, number); free ones */
    ix *lstart, *rstart, n_free;
    Part *lp, *rp, *fp;
    /* profile keys, members sorted by them; their (mask, count) pairs */
    Key *keys;
    i64 *pairs;
    /* the graph: free-mask sources, then per profile its node, extra edge, hub edge, pools */
    ix nodes, edges, n_masks, n_prof;
    i64 *supply, *edge, *flow;
    ix *mask_start, *mask_edges, *prof_first, *prof_extra, *prof_pools;
} Path;

/* Each member's owned partitions, local and remote, sorted by (mask, number); the unowned are free. */
static int owned_lists(Path *w) {
    const Input *in = w->in;
    ix n = w->n, P = w->P;
    w->lstart = arena_new(w->arena, (size_t)n + 1, sizeof(ix));
    w->rstart = arena_new(w->arena, (size_t)n + 1, sizeof(ix));
    w->lp = arena_new(w->arena, (size_t)P, sizeof(Part));
    w->rp = arena_new(w->arena, (size_t)P, sizeof(Part));
    w->fp = arena_new(w->arena, (size_t)P, sizeof(Part));
    ix *lfill = arena_new(w->arena, (size_t)n, sizeof(ix)), *rfill = arena_new(w->arena, (size_t)n, sizeof(ix));
    if (!w->lstart || !w->rstart || !w->lp || !w->rp || !w->fp || !lfill || !rfill) {
        return -1;
    }
    for (ix gp = 0; gp < P; gp++) {
        ix o = in->owner[gp];
        if (o < 0) {
            w->fp[w->n_free++] = (Part){in->mask[gp], gp};
        } else if (matches(in, in->cls[o], in->mask[gp])) {
            w->lstart[o + 1]++;
        } else {
            w->rstart[o + 1]++;
        }
    }
    for (ix i = 0; i < n; i++) {
        w->lstart[i + 1] += w->lstart[i];
        w->rstart[i + 1] += w->rstart[i];
    }
    for (ix gp = 0; gp < P; gp++) {
        ix o = in->owner[gp];
        if (o >= 0) {
            if (matches(in, in->cls[o], in->mask[gp])) {
                w->lp[w->lstart[o] + lfill[o]++] = (Part){in->mask[gp], gp};
            } else {
                w->rp[w->rstart[o] + rfill[o]++] = (Part){in->mask[gp], gp};
            }
        }
    }
    for (ix i = 0; i < n; i++) {
        qsort(w->lp + w->lstart[i], (size_t)(w->lstart[i + 1] - w->lstart[i]), sizeof(Part), part_cmp);
        qsort(w->rp + w->rstart[i], (size_t)(w->rstart[i + 1] - w->rstart[i]), sizeof(Part), part_cmp);
    }
    return 1;
}

/* Profiles: an over-full member's remote partitions are free and its key counts its local ones;
 * members sorted by key, then number; the free partitions sorted by (mask, number). */
static int profiles(Path *w) {
    w->pairs = arena_new(w->arena, 2 * (size_t)w->P, sizeof(i64));
    w->keys = arena_new(w->arena, (size_t)w->n, sizeof(Key));
    if (!w->pairs || !w->keys) {
        return -1;
    }
    ix n_pairs = 0;
    for (ix i = 0; i < w->n; i++) {
        ix n_local = w->lstart[i + 1] - w->lstart[i], n_remote = w->rstart[i + 1] - w->rstart[i];
        int over = n_local > w->q;
        if (over) {
            for (ix a = w->rstart[i]; a < w->rstart[i + 1]; a++) {
                w->fp[w->n_free++] = w->rp[a];
            }
        }
        const Part *seg = over ? w->lp + w->lstart[i] : w->rp + w->rstart[i];
        ix seg_len = over ? n_local : n_remote;
        Key *k = &w->keys[i];
        *k = (Key){over, w->in->cls[i], over ? 0 : w->q - n_local, w->pairs + 2 * n_pairs, 0, i};
        for (ix a = 0; a < seg_len; a++) {
            if (a == 0 || seg[a].key != seg[a - 1].key) {
                w->pairs[2 * n_pairs] = seg[a].key;
                w->pairs[2 * n_pairs + 1] = 0;
                n_pairs++;
                k->len++;
            }
            w->pairs[2 * n_pairs - 1]++;
        }
    }
    qsort(w->fp, (size_t)w->n_free, sizeof(Part), part_cmp);
    qsort(w->keys, (size_t)w->n, sizeof(Key), key_cmp);
    return 1;
}

/* The end of the profile starting at keys[a]: the first member with another key. */
static ix profile_end(const Path *w, ix a) {
    ix b = a + 1;
    while (b < w->n && !key_cmp_profile(&w->keys[a], &w->keys[b])) {
        b++;
    }
    return b;
}

static void add_edge(Path *w, ix *e, i64 tail, i64 head, i64 capacity, i64 cost) {
    i64 *at = w->edge + 4 * (*e)++;
    at[0] = tail;
    at[1] = head;
    at[2] = capacity;
    at[3] = cost;
}

/* The Python's graph, nodes and edges in its order: hubs, the extra node, one source per free mask
 * (edges to every hub), then per profile its node, its extra edge, its hub edge unless over-full, and
 * per owned mask a source with its stay edge and one edge to every hub. */
static int build_graph(Path *w) {
    const Input *in = w->in;
    ix n_cls = w->n_cls;
    for (ix a = 0; a < w->n_free; a++) {
        w->n_masks += a == 0 || w->fp[a].key != w->fp[a - 1].key;
    }
    w->nodes = n_cls + 1 + w->n_masks;
    w->edges = w->n_masks * n_cls;
    for (ix a = 0; a < w->n; a = profile_end(w, a)) {
        w->nodes += 1 + w->keys[a].len;
        w->edges += 1 + !w->keys[a].over + w->keys[a].len * (1 + n_cls);
    }
    w->supply = arena_new(w->arena, (size_t)w->nodes, sizeof(i64));
    w->edge = arena_new(w->arena, 4 * (size_t)w->edges, sizeof(i64));
    w->flow = arena_new(w->arena, (size_t)w->edges, sizeof(i64));
    w->mask_start = arena_new(w->arena, (size_t)w->n_masks + 1, sizeof(ix));
    w->mask_edges = arena_new(w->arena, (size_t)w->n_masks, sizeof(ix));
    w->prof_first = arena_new(w->arena, (size_t)w->n + 1, sizeof(ix));
    w->prof_extra = arena_new(w->arena, (size_t)w->n, sizeof(ix));
    w->prof_pools = arena_new(w->arena, (size_t)w->n, sizeof(ix));
    if (!w->supply || !w->edge || !w->flow || !w->mask_start || !w->mask_edges || !w->prof_first ||
        !w->prof_extra || !w->prof_pools) {
        return -1;
    }
    ix hub0 = 0, extra = n_cls, v = n_cls + 1, e = 0;
    w->supply[extra] = -w->r;
    for (ix a = 0, m = 0; a < w->n_free; m++) {
        ix b = a + 1;
        while (b < w->n_free && w->fp[b].key == w->fp[a].key) {
            b++;
        }
        ix f = v++;
        w->supply[f] = b - a;
        w->mask_start[m] = a;
        w->mask_edges[m] = e;
        for (ix g = 0; g < n_cls; g++) {
            add_edge(w, &e, f, hub0 + g, b - a, w->big * cross(in, g, w->fp[a].key));
        }
        a = b;
    }
    w->mask_start[w->n_masks] = w->n_free;
    for (ix a = 0; a < w->n; a = profile_end(w, a)) {
        const Key *k = &w->keys[a];
        i64 c = profile_end(w, a) - a;
        ix m_node = v++;
        w->supply[m_node] = -(k->over ? c * w->q : c * k->room);
        w->prof_first[w->n_prof] = a;
        w->prof_extra[w->n_prof] = e;
        add_edge(w, &e, m_node, extra, c, 0);
        if (!k->over) {
            add_edge(w, &e, hub0 + k->cls, m_node, c * (k->room + 1), 0);
        }
        w->prof_pools[w->n_prof++] = e;
        for (ix p = 0; p < k->len; p++) {
            i64 mask = k->vec[2 * p], cnt = k->vec[2 * p + 1];
            ix src = v++;
            w->supply[src] = c * cnt;
            add_edge(w, &e, src, m_node, c * cnt, k->over ? 0 : w->big * cross(in, k->cls, mask));
            for (ix h = 0; h < n_cls; h++) {
                add_edge(w, &e, src, hub0 + h, c * cnt, w->big * cross(in, h, mask) + 1);
            }
        }
    }
    w->prof_first[w->n_prof] = w->n;
    return 1;
}

/* The write-back's buffers: incoming partitions per class as (class, partition), free slots as
 * (class, member) with their room, a deal's entries and answer, released partitions, kept amounts. */
typedef struct {
    Part *incoming, *slot_of, *released;
    i64 *slot_left, *left, *kept;
    ix *who, *out, n_in, n_slots;
} Deals;

/* Partitions parts[0 .. len) dealt to the classes by the flow on the edges from ``first``, one per
 * class: appended to incoming.  0 where the Python raises. */
static int deal_to_classes(const Path *w, Deals *d, const Part *parts, ix len, ix first) {
    for (ix g = 0; g < w->n_cls; g++) {
        d->who[g] = g;
        d->left[g] = w->flow[first + g];
    }
    if (!deal(len, w->n_cls, d->who, d->left, d->out)) {
        return 0;
    }
    for (ix j = 0; j < len; j++) {
        d->incoming[d->n_in++] = (Part){d->out[j], parts[j].gp};
    }
    return 1;
}

/* One profile: what each member keeps (the flow's kept amounts split by constrained._cyclic), its free
 * slots, and its released partitions dealt to the classes.  0 where the Python raises. */
static int profile_back(const Path *w, Deals *d, ix pr, ix *holder) {
    ix first = w->prof_first[pr], c = w->prof_first[pr + 1] - first, n_cls = w->n_cls;
    const Key *k = &w->keys[first];
    ix len = k->len, pools = w->prof_pools[pr]; /* pool p: its stay edge, then one edge to each hub */
    i64 n_extra = w->flow[w->prof_extra[pr]], pos = 0;
    memset(d->kept, 0, (size_t)(c * len) * sizeof(i64));
    for (ix p = 0; p < len; p++) {
        i64 amount = w->flow[pools + p * (1 + n_cls)];
        if (!amount) {
            continue;
        }
        i64 base = amount / c, more = amount % c;
        for (ix step = 0; step < c; step++) {
            d->kept[((pos + step) % c) * len + p] += base + (step < more);
        }
        pos = (pos + amount) % c;
    }
    ix n_rel = 0;
    for (ix j = 0; j < c; j++) {
        ix i = w->keys[first + j].member;
        i64 cap = w->q + (j < n_extra), have = 0;
        if (!k->over) {
            for (ix a = w->lstart[i]; a < w->lstart[i + 1]; a++) {
                holder[w->lp[a].gp] = i;
                have++;
            }
        }
        const Part *seg = k->over ? w->lp + w->lstart[i] : w->rp + w->rstart[i];
        for (ix p = 0, a = 0; p < len; p++) {
            ix run_len = (ix)k->vec[2 * p + 1];
            i64 keep = d->kept[j * len + p];
            for (ix t = 0; t < run_len; t++, a++) {
                if (t < keep) {
                    holder[seg[a].gp] = i;
                    have++;
                } else {
                    d->released[n_rel++] = (Part){p, seg[a].gp};
                }
            }
        }
        if (cap - have < 0) {
            return 0; /* the Python raises: the profile's split went over a member's capacity */
        }
        if (cap - have) {
            d->slot_of[d->n_slots] = (Part){k->cls, i};
            d->slot_left[d->n_slots++] = cap - have;
        }
    }
    qsort(d->released, (size_t)n_rel, sizeof(Part), part_cmp);
    for (ix a = 0; a < n_rel;) {
        ix b = a;
        while (b < n_rel && d->released[b].key == d->released[a].key) {
            b++;
        }
        ix p = (ix)d->released[a].key;
        if (!deal_to_classes(w, d, d->released + a, b - a, pools + p * (1 + n_cls) + 1)) {
            return 0;
        }
        a = b;
    }
    return 1;
}

/* Each class's incoming partitions, in order, dealt to its members' free slots in member order. */
static int to_members(const Path *w, Deals *d, ix *holder) {
    ix n_in = d->n_in, n_slots = d->n_slots;
    qsort(d->incoming, (size_t)n_in, sizeof(Part), part_cmp);
    Part *order = arena_new(w->arena, (size_t)n_slots, sizeof(Part));
    if (!order) {
        return -1;
    }
    for (ix s = 0; s < n_slots; s++) {
        order[s] = (Part){d->slot_of[s].key * (i64)w->n + d->slot_of[s].gp, s};
    }
    qsort(order, (size_t)n_slots, sizeof(Part), part_cmp);
    for (ix g = 0, a = 0, s = 0; g < w->n_cls; g++) {
        ix b = a, n_who = 0;
        while (b < n_in && d->incoming[b].key == g) {
            b++;
        }
        for (; s < n_slots && d->slot_of[order[s].gp].key == g; s++) {
            d->who[n_who] = d->slot_of[order[s].gp].gp;
            d->left[n_who++] = d->slot_left[order[s].gp];
        }
        if (!deal(b - a, n_who, d->who, d->left, d->out)) {
            return 0;
        }
        for (ix j = 0; j < b - a; j++) {
            holder[d->incoming[a + j].gp] = d->out[j];
        }
        a = b;
    }
    return 1;
}

/* The flow read back into the holder: free partitions dealt to classes, each profile's members, then
 * each class's incoming partitions to its members. */
static int write_back(const Path *w, ix *holder) {
    size_t P = (size_t)w->P, slots = (size_t)(w->n > w->n_cls ? w->n : w->n_cls);
    Deals d = {
        arena_new(w->arena, P, sizeof(Part)),      arena_new(w->arena, (size_t)w->n, sizeof(Part)),
        arena_new(w->arena, P, sizeof(Part)),      arena_new(w->arena, (size_t)w->n, sizeof(i64)),
        arena_new(w->arena, slots, sizeof(i64)),   arena_new(w->arena, 2 * P + 1, sizeof(i64)),
        arena_new(w->arena, slots, sizeof(ix)),    arena_new(w->arena, P, sizeof(ix)),
        0,                                         0,
    };
    if (!d.incoming || !d.slot_of || !d.released || !d.slot_left || !d.left || !d.kept || !d.who || !d.out) {
        return -1;
    }
    for (ix m = 0; m < w->n_masks; m++) {
        ix a = w->mask_start[m];
        if (!deal_to_classes(w, &d, w->fp + a, w->mask_start[m + 1] - a, w->mask_edges[m])) {
            return 0;
        }
    }
    for (ix pr = 0; pr < w->n_prof; pr++) {
        if (!profile_back(w, &d, pr, holder)) {
            return 0;
        }
    }
    return to_members(w, &d, holder);
}

/* The path proper; 1 with holder filled, 0 where the Python must answer, -1 out of memory. */
static int run(Arena *arena, const Input *in, ix *holder) {
    Path w;
    memset(&w, 0, sizeof w);
    w.in = in;
    w.arena = arena;
    w.n = in->n;
    w.P = in->n_parts;
    w.n_cls = in->n_cls;
    w.q = w.P / w.n;
    w.r = w.P % w.n;
    w.big = (i64)w.P + 1;
    int ok = owned_lists(&w);
    ok = ok > 0 ? profiles(&w) : ok;
    ok = ok > 0 ? build_graph(&w) : ok;
    if (ok <= 0) {
        return ok;
    }
    i64 cost = 0, unused = 0;
    int status = flowcore_phases(w.nodes, w.edges, w.edge, w.supply, 0, 0, w.flow, &cost, &unused);
    if (status != 0) {
        return status < 0 ? -1 : 0;
    }
    return write_back(&w, holder);
}

/* The holder as a Python list; NULL with the error set. */
static PyObject *holder_list(const ix *holder, ix n_parts) {
    PyObject *list = PyList_New(n_parts);
    for (ix gp = 0; list && gp < n_parts; gp++) {
        PyObject *h = PyLong_FromSsize_t(holder[gp]);
        if (!h) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, gp, h);
    }
    return list;
}

/* An entry point's answer where the path did not finish: None (0: the Python answers then), or NULL
 * with the error set (-1: out of memory). */
static PyObject *not_answered(int ok) {
    if (ok < 0) {
        if (!PyErr_Occurred()) {
            PyErr_NoMemory();
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *flowcore_constrained(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *masks, *owner, *member_class, *classes;
    if (!PyArg_ParseTuple(args, "OOOO", &masks, &owner, &member_class, &classes)) {
        return NULL;
    }
    Arena arena = {{NULL}, 0};
    Input in;
    memset(&in, 0, sizeof in);
    int ok = read_input(&arena, masks, owner, member_class, classes, &in);
    ix *holder = NULL;
    if (ok > 0) {
        holder = arena_new(&arena, (size_t)in.n_parts, sizeof(ix));
        if (!holder) {
            ok = -1;
        } else {
            for (ix gp = 0; gp < in.n_parts; gp++) {
                holder[gp] = -1;
            }
            ok = run(&arena, &in, holder);
        }
    }
    PyObject *answer = ok > 0 ? holder_list(holder, in.n_parts) : not_answered(ok);
    arena_free(&arena);
    return answer;
}

/* ---- constrained_settle: settling.settle's search with this path, compiled (issue 29). ----------
 *
 * settling._settle_search step for step, with the path above as its algorithm: the first run on the
 * owners; then each round the follow-up round's input (the target, a partition withheld where its
 * claim is another member's or contested), its answer (the last one remembered), and when the target
 * stays, the round with everything owned.  The Python spares that last run where keeps_itself proves
 * its answer is the target; here the run itself is cheaper than the proof, and returns the same.
 *
 * constrained_settle(masks, owner, claim, member_class, classes, max_rounds) -> (holder, fixed_point,
 * rounds) | None: claim as settling builds it (-1 none, -2 contested, else the claimer); None, having
 * made nothing, where any run hands its input back (the Python settles then).
 */

/* One run of the path on owners ``owner``: 1 with ``out`` filled, 0 or -1 as run(). */
static int run_on(Input *in, ix *owner, ix *out) {
    Arena arena = {{NULL}, 0};
    in->owner = owner;
    for (ix gp = 0; gp < in->n_parts; gp++) {
        out[gp] = -1;
    }
    int ok = run(&arena, in, out);
    arena_free(&arena);
    return ok;
}

static int same(const ix *a, const ix *b, ix n) {
    return memcmp(a, b, (size_t)n * sizeof(ix)) == 0;
}

/* The search: 1 with (holder, *fixed, *rounds), or 0 / -1 as run(). */
static int settle_search(Arena *arena, Input *in, const ix *claim, i64 max_rounds, ix *holder, int *fixed,
                         i64 *rounds) {
    ix P = in->n_parts;
    ix *first = in->owner, *follow = arena_new(arena, (size_t)P, sizeof(ix));
    ix *nxt = arena_new(arena, (size_t)P, sizeof(ix)), *seen_in = arena_new(arena, (size_t)P, sizeof(ix));
    ix *seen_out = arena_new(arena, (size_t)P, sizeof(ix));
    if (!follow || !nxt || !seen_in || !seen_out) {
        return -1;
    }
    int ok = run_on(in, first, holder), seen = 0;
    for (i64 r = 0; ok > 0 && r < max_rounds; r++) {
        int moved = 0;
        for (ix gp = 0; gp < P; gp++) {
            follow[gp] = claim[gp] == -1 || claim[gp] == holder[gp] ? holder[gp] : -1;
            moved |= follow[gp] != holder[gp];
        }
        memcpy(nxt, holder, (size_t)P * sizeof(ix));
        if (moved) {
            if (seen && same(seen_in, follow, P)) {
                memcpy(nxt, seen_out, (size_t)P * sizeof(ix));
            } else {
                ok = run_on(in, follow, nxt);
                memcpy(seen_in, follow, (size_t)P * sizeof(ix));
                memcpy(seen_out, nxt, (size_t)P * sizeof(ix));
                seen = 1;
            }
        }
        if (ok > 0 && same(nxt, holder, P)) {
            memcpy(follow, holder, (size_t)P * sizeof(ix)); /* everything owned */
            ok = run_on(in, follow, nxt);
        }
        if (ok > 0 && same(nxt, holder, P)) {
            *fixed = 1;
            *rounds = r;
            return 1;
        }
        memcpy(holder, nxt, (size_t)P * sizeof(ix));
    }
    *fixed = 0;
    *rounds = max_rounds;
    return ok;
}

PyObject *flowcore_constrained_settle(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *masks, *owner, *claim, *member_class, *classes, *max_obj;
    if (!PyArg_ParseTuple(args, "OOOOOO", &masks, &owner, &claim, &member_class, &classes, &max_obj)) {
        return NULL;
    }
    Arena arena = {{NULL}, 0};
    Input in;
    memset(&in, 0, sizeof in);
    int ok = read_input(&arena, masks, owner, member_class, classes, &in);
    ix *holder = NULL, *claims = NULL;
    int fixed = 0;
    i64 rounds = 0, max_rounds = flowcore_int_in(max_obj, 0, 1 << 20, &ok);
    if (ok > 0 && (!PyList_CheckExact(claim) || PyList_GET_SIZE(claim) != in.n_parts)) {
        ok = 0;
    }
    if (ok > 0) {
        holder = arena_new(&arena, (size_t)in.n_parts, sizeof(ix));
        claims = arena_new(&arena, (size_t)in.n_parts, sizeof(ix));
        ok = holder && claims ? 1 : -1;
        for (ix gp = 0; ok > 0 && gp < in.n_parts; gp++) {
            claims[gp] = (ix)flowcore_int_in(PyList_GET_ITEM(claim, gp), -2, in.n, &ok);
        }
    }
    if (ok > 0) {
        ok = settle_search(&arena, &in, claims, max_rounds, holder, &fixed, &rounds);
    }
    PyObject *answer = NULL;
    if (ok > 0) {
        PyObject *list = holder_list(holder, in.n_parts);
        answer = list ? Py_BuildValue("(NOL)", list, fixed ? Py_True : Py_False, rounds) : NULL;
    } else {
        answer = not_answered(ok);
    }
    arena_free(&arena);
    return answer;
}
