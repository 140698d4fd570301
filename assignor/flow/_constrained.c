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

/* The path proper; 1 with holder filled, 0 where the Python must answer, -1 out of memory. */
static int run(Arena *arena, const Input *in, ix *holder) {
    ix n = in->n, P = in->n_parts, n_cls = in->n_cls;
    i64 q = P / n, r = P % n, big = (i64)P + 1;

    /* Owned partitions per member, local (matching) and remote, each sorted by (mask, number). */
    ix *lstart = arena_new(arena, (size_t)n + 1, sizeof(ix)), *rstart = arena_new(arena, (size_t)n + 1, sizeof(ix));
    Part *lp = arena_new(arena, (size_t)P, sizeof(Part)), *rp = arena_new(arena, (size_t)P, sizeof(Part));
    Part *fp = arena_new(arena, (size_t)P, sizeof(Part));
    if (!lstart || !rstart || !lp || !rp || !fp) {
        return -1;
    }
    ix n_free = 0;
    for (ix gp = 0; gp < P; gp++) {
        ix o = in->owner[gp];
        if (o < 0) {
            fp[n_free++] = (Part){in->mask[gp], gp};
        } else if (matches(in, in->cls[o], in->mask[gp])) {
            lstart[o + 1]++;
        } else {
            rstart[o + 1]++;
        }
    }
    for (ix i = 0; i < n; i++) {
        lstart[i + 1] += lstart[i];
        rstart[i + 1] += rstart[i];
    }
    ix *lfill = arena_new(arena, (size_t)n, sizeof(ix)), *rfill = arena_new(arena, (size_t)n, sizeof(ix));
    if (!lfill || !rfill) {
        return -1;
    }
    for (ix gp = 0; gp < P; gp++) {
        ix o = in->owner[gp];
        if (o >= 0) {
            if (matches(in, in->cls[o], in->mask[gp])) {
                lp[lstart[o] + lfill[o]++] = (Part){in->mask[gp], gp};
            } else {
                rp[rstart[o] + rfill[o]++] = (Part){in->mask[gp], gp};
            }
        }
    }

    /* Profiles: an over-full member's remote partitions are free; its key counts its local ones. */
    i64 *pairs = arena_new(arena, 2 * (size_t)P, sizeof(i64));
    Key *keys = arena_new(arena, (size_t)n, sizeof(Key));
    if (!pairs || !keys) {
        return -1;
    }
    ix n_pairs = 0;
    for (ix i = 0; i < n; i++) {
        ix n_local = lstart[i + 1] - lstart[i];
        int over = n_local > q;
        qsort(lp + lstart[i], (size_t)n_local, sizeof(Part), part_cmp);
        qsort(rp + rstart[i], (size_t)(rstart[i + 1] - rstart[i]), sizeof(Part), part_cmp);
        if (over) {
            for (ix a = rstart[i]; a < rstart[i + 1]; a++) {
                fp[n_free++] = rp[a];
            }
        }
        const Part *seg = over ? lp + lstart[i] : rp + rstart[i];
        ix seg_len = over ? n_local : rstart[i + 1] - rstart[i];
        keys[i] = (Key){over, in->cls[i], over ? 0 : q - n_local, pairs + 2 * n_pairs, 0, i};
        for (ix a = 0; a < seg_len; a++) {
            if (a == 0 || seg[a].key != seg[a - 1].key) {
                pairs[2 * n_pairs] = seg[a].key;
                pairs[2 * n_pairs + 1] = 0;
                n_pairs++;
                keys[i].len++;
            }
            pairs[2 * n_pairs - 1]++;
        }
    }
    qsort(fp, (size_t)n_free, sizeof(Part), part_cmp);
    qsort(keys, (size_t)n, sizeof(Key), key_cmp);

    /* The graph's size: free-mask sources, then per profile its node, extra edge, hub edge, pools. */
    ix n_masks = 0;
    for (ix a = 0; a < n_free; a++) {
        n_masks += a == 0 || fp[a].key != fp[a - 1].key;
    }
    ix nodes = n_cls + 1 + n_masks, edges = n_masks * n_cls;
    for (ix a = 0; a < n;) {
        ix b = a + 1;
        while (b < n && !key_cmp_profile(&keys[a], &keys[b])) {
            b++;
        }
        nodes += 1 + keys[a].len;
        edges += 1 + !keys[a].over + keys[a].len * (1 + n_cls);
        a = b;
    }
    i64 *supply = arena_new(arena, (size_t)nodes, sizeof(i64));
    i64 *edge = arena_new(arena, 4 * (size_t)edges, sizeof(i64));
    i64 *flow = arena_new(arena, (size_t)edges, sizeof(i64));
    if (!supply || !edge || !flow) {
        return -1;
    }
    ix v = 0, e = 0;
#define ADD_EDGE(tail, head, capacity, cost)                                                                   \
    do {                                                                                                       \
        edge[4 * e] = (tail);                                                                                  \
        edge[4 * e + 1] = (head);                                                                              \
        edge[4 * e + 2] = (capacity);                                                                          \
        edge[4 * e + 3] = (cost);                                                                              \
        e++;                                                                                                   \
    } while (0)
    ix hub0 = v;
    v += n_cls;
    ix extra = v++;
    supply[extra] = -r;
    ix *mask_start = arena_new(arena, (size_t)n_masks + 1, sizeof(ix));
    ix *mask_edges = arena_new(arena, (size_t)n_masks, sizeof(ix));
    if (!mask_start || !mask_edges) {
        return -1;
    }
    for (ix a = 0, m = 0; a < n_free; m++) {
        ix b = a + 1;
        while (b < n_free && fp[b].key == fp[a].key) {
            b++;
        }
        ix f = v++;
        supply[f] = b - a;
        mask_start[m] = a;
        mask_edges[m] = e;
        for (ix g = 0; g < n_cls; g++) {
            ADD_EDGE(f, hub0 + g, b - a, big * cross(in, g, fp[a].key));
        }
        a = b;
    }
    mask_start[n_masks] = n_free;
    ix *prof_first = arena_new(arena, (size_t)n + 1, sizeof(ix));
    ix *prof_extra = arena_new(arena, (size_t)n, sizeof(ix));
    ix *prof_pools = arena_new(arena, (size_t)n, sizeof(ix));
    if (!prof_first || !prof_extra || !prof_pools) {
        return -1;
    }
    ix n_prof = 0;
    for (ix a = 0; a < n;) {
        ix b = a + 1;
        while (b < n && !key_cmp_profile(&keys[a], &keys[b])) {
            b++;
        }
        const Key *k = &keys[a];
        i64 c = b - a;
        ix m_node = v++;
        supply[m_node] = -(k->over ? c * q : c * k->room);
        prof_first[n_prof] = a;
        prof_extra[n_prof] = e;
        ADD_EDGE(m_node, extra, c, 0);
        if (!k->over) {
            ADD_EDGE(hub0 + k->cls, m_node, c * (k->room + 1), 0);
        }
        prof_pools[n_prof] = e;
        for (ix p = 0; p < k->len; p++) {
            i64 mask = k->vec[2 * p], cnt = k->vec[2 * p + 1];
            ix src = v++;
            supply[src] = c * cnt;
            ADD_EDGE(src, m_node, c * cnt, k->over ? 0 : big * cross(in, k->cls, mask));
            for (ix h = 0; h < n_cls; h++) {
                ADD_EDGE(src, hub0 + h, c * cnt, big * cross(in, h, mask) + 1);
            }
        }
        n_prof++;
        a = b;
    }
    prof_first[n_prof] = n;
#undef ADD_EDGE
    i64 cost = 0, unused = 0;
    int status = flowcore_phases(nodes, edges, edge, supply, 0, 0, flow, &cost, &unused);
    if (status != 0) {
        return status < 0 ? -1 : 0;
    }

    /* Write-back.  Incoming partitions per class as (class, partition); free slots as (class, member). */
    Part *incoming = arena_new(arena, (size_t)P, sizeof(Part));
    Part *slot_of = arena_new(arena, (size_t)n, sizeof(Part));
    i64 *slot_left = arena_new(arena, (size_t)n, sizeof(i64));
    ix *who = arena_new(arena, (size_t)(n > n_cls ? n : n_cls), sizeof(ix));
    i64 *left = arena_new(arena, (size_t)(n > n_cls ? n : n_cls), sizeof(i64));
    ix *out = arena_new(arena, (size_t)P, sizeof(ix));
    Part *released = arena_new(arena, (size_t)P, sizeof(Part));
    i64 *kept = arena_new(arena, 2 * (size_t)P + 1, sizeof(i64));
    if (!incoming || !slot_of || !slot_left || !who || !left || !out || !released || !kept) {
        return -1;
    }
    ix n_in = 0, n_slots = 0;
    for (ix m = 0; m < n_masks; m++) {
        ix a = mask_start[m], len = mask_start[m + 1] - a;
        for (ix g = 0; g < n_cls; g++) {
            who[g] = g;
            left[g] = flow[mask_edges[m] + g];
        }
        if (!deal(len, n_cls, who, left, out)) {
            return 0;
        }
        for (ix j = 0; j < len; j++) {
            incoming[n_in++] = (Part){out[j], fp[a + j].gp};
        }
    }
    for (ix pr = 0; pr < n_prof; pr++) {
        const Key *k = &keys[prof_first[pr]];
        ix c = prof_first[pr + 1] - prof_first[pr], len = k->len;
        i64 n_extra = flow[prof_extra[pr]];
        ix pools = prof_pools[pr]; /* pool p: its stay edge, then one edge to each hub */
        /* The kept amounts split among the profile's members (constrained._cyclic). */
        memset(kept, 0, (size_t)(c * len) * sizeof(i64));
        i64 pos = 0;
        for (ix p = 0; p < len; p++) {
            i64 amount = flow[pools + p * (1 + n_cls)];
            if (!amount) {
                continue;
            }
            i64 base = amount / c, more = amount % c;
            for (ix step = 0; step < c; step++) {
                ix j = (ix)((pos + step) % c);
                kept[j * len + p] += base + (step < more);
            }
            pos = (pos + amount) % c;
        }
        ix n_rel = 0;
        for (ix j = 0; j < c; j++) {
            ix i = keys[prof_first[pr] + j].member;
            i64 cap = q + (j < n_extra), have = 0;
            if (!k->over) {
                for (ix a = lstart[i]; a < lstart[i + 1]; a++) {
                    holder[lp[a].gp] = i;
                    have++;
                }
            }
            const Part *seg = k->over ? lp + lstart[i] : rp + rstart[i];
            ix a = 0;
            for (ix p = 0; p < len; p++) {
                ix run_len = (ix)k->vec[2 * p + 1];
                i64 keep = kept[j * len + p];
                for (ix t = 0; t < run_len; t++, a++) {
                    if (t < keep) {
                        holder[seg[a].gp] = i;
                        have++;
                    } else {
                        released[n_rel++] = (Part){p, seg[a].gp};
                    }
                }
            }
            if (cap - have < 0) {
                return 0; /* the Python raises: the profile's split went over a member's capacity */
            }
            if (cap - have) {
                slot_of[n_slots] = (Part){k->cls, i};
                slot_left[n_slots++] = cap - have;
            }
        }
        qsort(released, (size_t)n_rel, sizeof(Part), part_cmp);
        for (ix a = 0; a < n_rel;) {
            ix b = a;
            while (b < n_rel && released[b].key == released[a].key) {
                b++;
            }
            ix p = (ix)released[a].key;
            for (ix h = 0; h < n_cls; h++) {
                who[h] = h;
                left[h] = flow[pools + p * (1 + n_cls) + 1 + h];
            }
            if (!deal(b - a, n_cls, who, left, out)) {
                return 0;
            }
            for (ix j = 0; j < b - a; j++) {
                incoming[n_in++] = (Part){out[j], released[a + j].gp};
            }
            a = b;
        }
    }
    /* Each class's incoming partitions, in order, dealt to its members' slots in member order. */
    qsort(incoming, (size_t)n_in, sizeof(Part), part_cmp);
    Part *order = arena_new(arena, (size_t)n_slots, sizeof(Part));
    if (!order) {
        return -1;
    }
    for (ix s = 0; s < n_slots; s++) {
        order[s] = (Part){slot_of[s].key * (i64)n + slot_of[s].gp, s};
    }
    qsort(order, (size_t)n_slots, sizeof(Part), part_cmp);
    ix a = 0, s = 0;
    for (ix g = 0; g < n_cls; g++) {
        ix b = a, t = s, n_who = 0;
        while (b < n_in && incoming[b].key == g) {
            b++;
        }
        while (t < n_slots && slot_of[order[t].gp].key == g) {
            who[n_who] = slot_of[order[t].gp].gp;
            left[n_who++] = slot_left[order[t].gp];
            t++;
        }
        if (!deal(b - a, n_who, who, left, out)) {
            return 0;
        }
        for (ix j = 0; j < b - a; j++) {
            holder[incoming[a + j].gp] = out[j];
        }
        a = b;
        s = t;
    }
    return 1;
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
