/*
 * Race values of small candidate sets, for every guess at once (bots.solver._race).
 *
 * The adaptive ceiling (bench/adaptive_bound_round4.py) needs, at every candidate set S the
 * player can reach after three guesses, the value of *every* next guess g for every round K
 * in which the opponent might solve, not only the best one: the best guess there depends on
 * what the player knows about K, and the bound takes the maximum of sum_k q(k) V_g(k) over g
 * for many distributions q.  The exact engine (_native.c) finds one optimum per objective;
 * this module enumerates.
 *
 * Scores are doubled so that they are integers: a secret solved before the opponent counts 2,
 * in the same round 1, later 0.  With j guesses left up to and including the opponent's
 * (K = d + j at depth d), the best doubled score of a set is
 *     h_1(S) = [S nonempty]                       (the last chance can only draw)
 *     h_j(S) = max over all N guesses g of 2 [g in S] + sum over g's other parts P of h_{j-1}(P)
 * and a guess's vector is V_g = (hit, 2 hit + sum h_1(P), .., 2 hit + sum h_{J-1}(P)).
 * h depends on the set alone (not on the history or the depth), so it is memoised by set.
 * Every guess is tried (no symmetry reduction, no pruning beyond stopping at a guess that
 * reaches the capacity bound), which keeps this module small enough to check by hand; its
 * values are also checked against the engine's by the bound's own floor check.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JMAX 8
#define NRMAX 64

static int N = 0, NR = 0, SOLVED = 0;
static uint8_t *resp = NULL;        /* resp[g * N + s], compact ids 0..NR-1; SOLVED iff g == s */
static int L = 0;                   /* symbols per code; 0 when init() got no symbols */
static uint32_t *symmask = NULL;    /* symmask[g]: bit s set when code g uses symbol s */
static uint8_t *sym = NULL;         /* sym[g * L + p] */
static uint32_t all_symbols = 0;

/* Permuting the symbols that no member of S uses maps S onto itself and a guess onto one of
 * the same value (responses only see symbols), so among the guesses that differ only in
 * which absent symbols they use, one suffices: the one that uses them in increasing order
 * (its first absent symbol the smallest absent one, the next new one the next, ...). */
static int canonical(int g, uint32_t absent) {
    if (!L || !(symmask[g] & absent)) return 1;
    uint32_t rem = absent, used = 0;
    const uint8_t *c = sym + (size_t)g * L;
    for (int p = 0; p < L; p++) {
        uint32_t bit = (uint32_t)1 << c[p];
        if (!(absent & bit) || (used & bit)) continue;
        if (bit != (rem & (~rem + 1))) return 0;
        rem &= ~bit;
        used |= bit;
    }
    return 1;
}

static uint32_t absent_of(const uint16_t *S, int n) {
    uint32_t present = 0;
    if (!L) return 0;
    for (int i = 0; i < n; i++) present |= symmask[S[i]];
    return all_symbols & ~present;
}

/* Memo: (set, j) -> h_j(set), open addressing with the sets in an arena. */
typedef struct { uint64_t key; uint64_t off; int32_t value; uint16_t n; uint8_t j; } Entry;
static Entry *memo = NULL;
static size_t memo_mask = 0, memo_used = 0;
static uint16_t *arena = NULL;
static size_t arena_cap = 0, arena_used = 0;
static uint64_t st_calls = 0, st_hits = 0, st_clears = 0;

static uint64_t hash_set(const uint16_t *S, int n, int j) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)j << 40) ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= S[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

static Entry *memo_find(const uint16_t *S, int n, int j, uint64_t h) {
    for (size_t i = h & memo_mask;; i = (i + 1) & memo_mask) {
        Entry *e = &memo[i];
        if (!e->key) return e;
        if (e->key == h && e->n == n && e->j == j &&
            memcmp(arena + e->off, S, (size_t)n * sizeof(uint16_t)) == 0)
            return e;
    }
}

static void memo_clear(void) {
    memset(memo, 0, (memo_mask + 1) * sizeof(Entry));
    memo_used = 0;
    arena_used = 0;
    st_clears++;
}

/* Upper bound of h_j over sets of n codes: every code solved before the last chance. */
static int cap_of(int n, int j) {
    if (n == 0) return 0;
    if (j == 1) return 1;
    /* h_2: a member and at most 13 other parts, each one draw; h_3: each of at most 14
     * parts P adds at most |P| + 1 (its h_2); h_4 likewise with at most 14 * 14 parts */
    if (j == 2) return n + 1 < 15 ? n + 1 : 15;
    if (j == 3) return n + 14 < 2 * n ? n + 14 : 2 * n;
    if (j == 4) return n + 196 < 2 * n ? n + 196 : 2 * n;
    return 2 * n;
}

static int h(const uint16_t *S, int n, int j);

/* S split by guess g's responses into buf (parts contiguous: part k at buf + start[k], count[k]
 * codes); returns whether g is in S. */
static int split(const uint16_t *S, int n, int g, uint16_t *buf, int *count, int *start) {
    const uint8_t *r = resp + (size_t)g * N;
    int fill[NRMAX], pos = 0;
    memset(count, 0, sizeof(int) * (size_t)NR);
    for (int i = 0; i < n; i++) count[r[S[i]]]++;
    for (int k = 0; k < NR; k++) { start[k] = pos; pos += count[k]; }
    memcpy(fill, start, sizeof(int) * (size_t)NR);
    for (int i = 0; i < n; i++) buf[fill[r[S[i]]]++] = S[i];
    return count[SOLVED] > 0;
}

/* 2 [g in S] + sum over g's other parts of h_{j-1}; parts are written to buf (n entries).
 * Returns -2 without solving any part when the parts' capacity bounds cannot beat `floor`. */
static int guess_value(const uint16_t *S, int n, int j, int g, uint16_t *buf, int floor) {
    const uint8_t *r = resp + (size_t)g * N;
    if (j <= 3) {
        /* Which responses occur is enough here: h_1 of a part is 1, and h_2(P) <= |P| + 1
         * bounds the h_2 case by hit + n + parts (NR <= 64: one bit per response). */
        uint64_t mask = 0;
        for (int i = 0; i < n; i++) mask |= (uint64_t)1 << r[S[i]];
        int hit = (int)(mask >> SOLVED & 1);
        int nparts = __builtin_popcountll(mask) - hit;
        if (j == 2) return 2 * hit + nparts;
        if (hit + n + nparts <= floor) return -2;
    }
    int count[NRMAX], start[NRMAX];
    int hit = split(S, n, g, buf, count, start);
    int ub = 2 * hit;
    for (int k = 0; k < NR; k++)
        if (k != SOLVED && count[k]) ub += count[k] == 1 ? (j - 1 == 1 ? 1 : 2) : cap_of(count[k], j - 1);
    if (ub <= floor) return -2;
    int v = 2 * hit;
    for (int k = 0; k < NR; k++) {
        if (k == SOLVED || !count[k]) continue;
        int x = j - 1 == 1 ? 1 : h(buf + start[k], count[k], j - 1);
        if (x < 0) return -1;
        v += x;
    }
    return v;
}

static int h(const uint16_t *S, int n, int j) {
    if (n == 0) return 0;
    if (j == 1) return 1;
    if (n == 1) return 2;
    if (n == 2) return j == 2 ? 3 : 4;
    st_calls++;
    uint64_t key = hash_set(S, n, j);
    Entry *e = memo_find(S, n, j, key);
    if (e->key) { st_hits++; return e->value; }
    int cap = cap_of(n, j), best = -1;
    uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)n);
    if (!buf) return -1;
    /* Members first: they reach the capacity bound most often, which ends the scan. */
    for (int i = 0; i < n && best < cap; i++) {
        int v = guess_value(S, n, j, S[i], buf, best);
        if (v == -1) { free(buf); return -1; }
        if (v > best) best = v;
    }
    uint32_t absent = absent_of(S, n);
    if (j == 2) cap = n < 14 ? n : 14;          /* a non-member: at most 14 parts, one draw each */
    for (int g = 0, i = 0; g < N && best < cap; g++) {
        if (i < n && S[i] == g) { i++; continue; }
        if (!canonical(g, absent)) continue;
        int v = guess_value(S, n, j, g, buf, best);
        if (v == -1) { free(buf); return -1; }
        if (v > best) best = v;
    }
    free(buf);
    if (memo_used * 10 >= (memo_mask + 1) * 7 || arena_used + (size_t)n > arena_cap) memo_clear();
    e = memo_find(S, n, j, key);
    memcpy(arena + arena_used, S, (size_t)n * sizeof(uint16_t));
    e->key = key; e->off = arena_used; e->n = (uint16_t)n; e->j = (uint8_t)j; e->value = best;
    arena_used += (size_t)n;
    memo_used++;
    return best;
}

PyDoc_STRVAR(init_doc,
"init(table, n, solved, nresp, memo_log2=22, symbols=None, length=0)\n\n"
"Load the response table (bytes, table[g * n + s] a compact response id below nresp,\n"
"`solved` the id of the solved response) and size the memo (2**memo_log2 sets).  With the\n"
"codes' symbols (bytes, symbols[g * length + p]), guesses that differ only in symbols absent\n"
"from a set are tried once there (valid when responses only see symbols, as in MOO).");

static PyObject *py_init(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view, symview = {0};
    int n, solved, nresp, memo_log2 = 22, length = 0;
    if (!PyArg_ParseTuple(args, "y*iii|iy*i", &view, &n, &solved, &nresp, &memo_log2, &symview,
                          &length))
        return NULL;
    free(sym); free(symmask);
    sym = NULL; symmask = NULL; L = 0; all_symbols = 0;
    if (symview.buf) {
        const uint8_t *b = symview.buf;
        int ok = length > 0 && symview.len == (Py_ssize_t)n * length;
        for (Py_ssize_t i = 0; ok && i < symview.len; i++) ok = b[i] < 32;
        if (ok) {
            sym = malloc((size_t)n * length);
            symmask = malloc(sizeof(uint32_t) * (size_t)n);
        }
        if (!ok || !sym || !symmask) {
            PyBuffer_Release(&symview); PyBuffer_Release(&view);
            free(sym); free(symmask); sym = NULL; symmask = NULL;
            if (ok) return PyErr_NoMemory();
            PyErr_SetString(PyExc_ValueError, "symbols: n * length ids below 32 expected");
            return NULL;
        }
        memcpy(sym, b, (size_t)n * length);
        for (int g = 0; g < n; g++) {
            symmask[g] = 0;
            for (int p = 0; p < length; p++) symmask[g] |= (uint32_t)1 << b[(size_t)g * length + p];
            all_symbols |= symmask[g];
        }
        L = length;
        PyBuffer_Release(&symview);
    }
    if (n <= 0 || n > 65535 || view.len != (Py_ssize_t)n * n || nresp <= 0 || nresp > NRMAX ||
        solved < 0 || solved >= nresp || memo_log2 < 10 || memo_log2 > 30) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "bad table or sizes");
        return NULL;
    }
    free(resp); free(memo); free(arena);
    resp = malloc((size_t)n * n);
    memo_mask = ((size_t)1 << memo_log2) - 1;
    memo = calloc(memo_mask + 1, sizeof(Entry));
    arena_cap = (memo_mask + 1) * 8;
    arena = malloc(arena_cap * sizeof(uint16_t));
    if (!resp || !memo || !arena) {
        PyBuffer_Release(&view);
        free(resp); free(memo); free(arena);
        resp = NULL; memo = NULL; arena = NULL;
        return PyErr_NoMemory();
    }
    memcpy(resp, view.buf, (size_t)n * n);
    PyBuffer_Release(&view);
    for (size_t i = 0; i < (size_t)n * n; i++)
        if (resp[i] >= nresp) { free(resp); resp = NULL; PyErr_SetString(PyExc_ValueError, "response id out of range"); return NULL; }
    N = n; NR = nresp; SOLVED = solved;
    memo_used = arena_used = 0;
    st_calls = st_hits = st_clears = 0;
    Py_RETURN_NONE;
}

static int get_set(PyObject *obj, Py_buffer *view, const uint16_t **S, int *n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) return -1;
    if (view->len % 2) { PyBuffer_Release(view); PyErr_SetString(PyExc_ValueError, "uint16 array expected"); return -1; }
    *S = view->buf;
    *n = (int)(view->len / 2);
    for (int i = 0; i < *n; i++)
        if ((*S)[i] >= N || (i && (*S)[i] <= (*S)[i - 1])) {
            PyBuffer_Release(view);
            PyErr_SetString(PyExc_ValueError, "set must be sorted distinct code indices");
            return -1;
        }
    return 0;
}

/* The vector of one guess (row of vectors()); buf holds n codes, out J values. */
static int guess_vector(const uint16_t *S, int n, int J, int g, uint16_t *buf, int32_t *out) {
    int count[NRMAX], start[NRMAX];
    int hit = split(S, n, g, buf, count, start);
    out[0] = hit;
    for (int j = 2; j <= J; j++) {
        int total = 2 * hit;
        for (int k = 0; k < NR; k++) {
            if (k == SOLVED || !count[k]) continue;
            int x = h(buf + start[k], count[k], j - 1);
            if (x < 0) return -1;
            total += x;
        }
        out[j - 1] = total;
    }
    return 0;
}

PyDoc_STRVAR(vectors_doc,
"vectors(set, horizons) -> bytes\n\n"
"For every guess g (0..n-1, in order) the int32 vector V_g(1..horizons): the doubled race\n"
"score of `set` when g is asked next and the opponent solves with the j-th guess from now,\n"
"the guesses after g being the best for that j.  Row-major, n * horizons int32.");

static PyObject *py_vectors(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj;
    int J;
    if (!PyArg_ParseTuple(args, "Oi", &set_obj, &J)) return NULL;
    if (!resp) { PyErr_SetString(PyExc_RuntimeError, "init() first"); return NULL; }
    if (J < 1 || J > JMAX) { PyErr_SetString(PyExc_ValueError, "horizons out of range"); return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)N * J * 4);
    uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    if (!out || !buf) { free(buf); Py_XDECREF(out); PyBuffer_Release(&view); return PyErr_NoMemory(); }
    int32_t *v = (int32_t *)PyBytes_AS_STRING(out);
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int g = 0; g < N && !failed; g++)
        failed = guess_vector(S, n, J, g, buf, v + (size_t)g * J) < 0;
    Py_END_ALLOW_THREADS
    free(buf);
    PyBuffer_Release(&view);
    if (failed) { Py_DECREF(out); return PyErr_NoMemory(); }
    return out;
}

PyDoc_STRVAR(pareto_doc,
"pareto(set, horizons) -> bytes\n\n"
"The distinct vectors of vectors(set, horizons) that no other one beats in every horizon\n"
"(int32, row-major, horizons per row, in the order first met).  Guesses that split `set`\n"
"into the same parts (the same members, the same one solved) have the same vector and are\n"
"evaluated once.");

static PyObject *py_pareto(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj;
    int J;
    if (!PyArg_ParseTuple(args, "Oi", &set_obj, &J)) return NULL;
    if (!resp) { PyErr_SetString(PyExc_RuntimeError, "init() first"); return NULL; }
    if (J < 1 || J > JMAX) { PyErr_SetString(PyExc_ValueError, "horizons out of range"); return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    size_t nn = (size_t)(n ? n : 1);
    /* Seen partitions: each as its response ids relabelled by first occurrence (the solved
     * id kept as itself), stored whole, so equal keys mean equal partitions exactly. */
    size_t smask = 16383;
    uint32_t *slot = calloc(smask + 1, sizeof(uint32_t));       /* 1 + index of the key, 0 empty */
    uint8_t *keys = malloc(nn * (size_t)N);
    uint16_t *buf = malloc(sizeof(uint16_t) * nn);
    int32_t *front = malloc(sizeof(int32_t) * (size_t)J * (size_t)N);
    if (!slot || !keys || !buf || !front) {
        free(slot); free(keys); free(buf); free(front);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    int nkeys = 0, nfront = 0, failed = 0;
    uint32_t absent = absent_of(S, n);
    Py_BEGIN_ALLOW_THREADS
    for (int g = 0; g < N && !failed; g++) {
        if (!canonical(g, absent)) continue;
        const uint8_t *r = resp + (size_t)g * N;
        uint8_t label[NRMAX], *key = keys + (size_t)nkeys * nn;
        memset(label, 0xff, sizeof(label));
        uint8_t next = 0;
        uint64_t hsh = 1469598103934665603ULL;
        for (int i = 0; i < n; i++) {
            int x = r[S[i]];
            if (x == SOLVED) key[i] = 0xfe;
            else {
                if (label[x] == 0xff) label[x] = next++;
                key[i] = label[x];
            }
            hsh = (hsh ^ key[i]) * 1099511628211ULL;
        }
        size_t at = (size_t)hsh & smask;
        int seen = 0;
        while (slot[at]) {
            if (memcmp(keys + (size_t)(slot[at] - 1) * nn, key, (size_t)n) == 0) { seen = 1; break; }
            at = (at + 1) & smask;
        }
        if (seen) continue;
        slot[at] = (uint32_t)++nkeys;
        int32_t vec[JMAX];
        if (guess_vector(S, n, J, g, buf, vec) < 0) { failed = 1; break; }
        int dominated = 0;
        for (int a = 0; a < nfront && !dominated; a++) {
            const int32_t *f = front + (size_t)a * J;
            int ge = 1;
            for (int j = 0; j < J; j++) if (f[j] < vec[j]) { ge = 0; break; }
            dominated = ge;
        }
        if (dominated) continue;
        int kept = 0;
        for (int a = 0; a < nfront; a++) {
            const int32_t *f = front + (size_t)a * J;
            int le = 1;
            for (int j = 0; j < J; j++) if (f[j] > vec[j]) { le = 0; break; }
            if (!le) {
                if (kept != a) memmove(front + (size_t)kept * J, f, sizeof(int32_t) * (size_t)J);
                kept++;
            }
        }
        nfront = kept;
        memcpy(front + (size_t)nfront * J, vec, sizeof(int32_t) * (size_t)J);
        nfront++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    PyObject *out = failed ? PyErr_NoMemory()
                           : PyBytes_FromStringAndSize((const char *)front,
                                                       (Py_ssize_t)nfront * J * 4);
    free(slot); free(keys); free(buf); free(front);
    return out;
}

PyDoc_STRVAR(vector_doc, "vector(set, guess, horizons) -> bytes: the one row of vectors().");

static PyObject *py_vector(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj;
    int g, J;
    if (!PyArg_ParseTuple(args, "Oii", &set_obj, &g, &J)) return NULL;
    if (!resp) { PyErr_SetString(PyExc_RuntimeError, "init() first"); return NULL; }
    if (J < 1 || J > JMAX || g < 0 || g >= N) { PyErr_SetString(PyExc_ValueError, "out of range"); return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    int32_t vec[JMAX];
    int rc = buf ? guess_vector(S, n, J, g, buf, vec) : -1;
    free(buf);
    PyBuffer_Release(&view);
    if (rc < 0) return PyErr_NoMemory();
    return PyBytes_FromStringAndSize((const char *)vec, (Py_ssize_t)J * 4);
}

PyDoc_STRVAR(value_doc, "value(set, j) -> h_j(set), the doubled race score with j guesses left.");

static PyObject *py_value(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj;
    int j;
    if (!PyArg_ParseTuple(args, "Oi", &set_obj, &j)) return NULL;
    if (!resp) { PyErr_SetString(PyExc_RuntimeError, "init() first"); return NULL; }
    if (j < 1 || j > JMAX) { PyErr_SetString(PyExc_ValueError, "j out of range"); return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    int x;
    Py_BEGIN_ALLOW_THREADS
    x = h(S, n, j);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (x < 0) return PyErr_NoMemory();
    return PyLong_FromLong(x);
}

static PyObject *py_stats(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return Py_BuildValue("{sKsKsKsn}", "calls", (unsigned long long)st_calls,
                         "hits", (unsigned long long)st_hits,
                         "clears", (unsigned long long)st_clears, "sets", (Py_ssize_t)memo_used);
}

static PyMethodDef methods[] = {
    {"init", py_init, METH_VARARGS, init_doc},
    {"vectors", py_vectors, METH_VARARGS, vectors_doc},
    {"value", py_value, METH_VARARGS, value_doc},
    {"pareto", py_pareto, METH_VARARGS, pareto_doc},
    {"vector", py_vector, METH_VARARGS, vector_doc},
    {"stats", py_stats, METH_NOARGS, "memo counters since init()"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_race", "Race values of every guess at small candidate sets.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__race(void) { return PyModule_Create(&module); }
