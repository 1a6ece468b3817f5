/*
 * Generic exact solver over a response table (bots.solver._table).
 *
 * The MOO engine (_native.c) hard-wires MOO's scoring and the symmetries of distinct-symbol
 * codes, which is what makes it fast on 5040 codes.  This module is the other half of the
 * solver: it takes *any* game given as
 *   - N codes of L symbols (indices 0..NSYM-1), guesses = secrets = the codes,
 *   - a response table resp[g * N + s] (compact ids 0..NR-1, one of them SOLVED),
 *   - a cost per guess number (same convention as _native.c: the objective is the sum over
 *     secrets of cost[k], k the guess number that solves it, cost increasing in k),
 * and finds the optimal fixed strategy by depth-first branch and bound with a transposition
 * table, capacity lower bounds, one-ply probes and relabelling symmetry (position permutation
 * x symbol permutation, valid whenever the table is invariant under relabelling, which the
 * caller asserts by passing symmetry=True).  Mastermind (4 of 6: 1296 codes, 14 responses)
 * is the intended user; nothing here is shared with _native.c, so the MOO solve is untouched.
 *
 * value(S, d) = min over guesses g of [g in S] * cost[d+1] + sum over the other parts P of
 * value(P, d+1).  search() is fail-soft: exact when the result is < beta, otherwise a lower
 * bound >= beta.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXL 8
#define MAXD 24
#define NRMAX 64
#define INF ((int64_t)1 << 60)

static int L = 0, NSYM = 0, N = 0, NR = 0, SOLVED = 0;
static uint8_t *codes = NULL;        /* codes[i * L + p] */
static int32_t *index_of = NULL;     /* packed base-NSYM code -> index, -1 if none */
static uint8_t *resp = NULL;         /* resp[g * N + s] */
static int64_t cost[MAXD + 2];
static int64_t cap[MAXD + 2];        /* at most cap[j] secrets solved within j guesses */
static int64_t *lbtab = NULL;        /* lbtab[d * (N+1) + n] */
static uint64_t st_nodes = 0, st_probes = 0;

/* Symmetry group: all (position perm, symbol perm) pairs, as an index pp * nsp + sp. */
static int use_sym = 0;
static int npp = 0, nsp = 0;
static uint8_t *pperm = NULL;        /* pperm[k * L + i] */
static uint8_t *sperm = NULL;        /* sperm[k * NSYM + x] */
static uint32_t *stab[MAXD + 2];     /* stabiliser of the history at each depth */
static int nstab[MAXD + 2];

typedef struct { int64_t bound; int32_t guess; } Cand;
static Cand *cand_buf[MAXD + 2];
static uint16_t *part_buf[MAXD + 2];

static inline int64_t LB(int d, int n) { return lbtab[(size_t)d * (N + 1) + n]; }

static int image(uint32_t el, int x) {
    int pp = (int)(el / (uint32_t)nsp), sp = (int)(el % (uint32_t)nsp);
    const uint8_t *c = codes + (size_t)x * L, *P = pperm + (size_t)pp * L,
                  *Sg = sperm + (size_t)sp * NSYM;
    uint8_t out[MAXL];
    for (int i = 0; i < L; i++) out[P[i]] = Sg[c[i]];
    int v = 0;
    for (int i = 0; i < L; i++) v = v * NSYM + out[i];
    return index_of[v];
}

/* ---------------- transposition table ---------------- */
typedef struct {
    uint64_t key;
    uint64_t off;
    int64_t value;
    int32_t guess;
    uint16_t n;
    uint8_t depth, exact;
} TTEntry;
static TTEntry *tt = NULL;
static size_t tt_mask = 0, tt_used = 0;
static uint16_t *arena = NULL;
static size_t arena_cap = 0, arena_used = 0;

static uint64_t hash_set(const uint16_t *S, int n, int d) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)d << 32) ^ (uint64_t)n;
    for (int i = 0; i < n; i++) { h ^= S[i]; h *= 0xff51afd7ed558ccdULL; h ^= h >> 29; }
    return h ? h : 1;
}

static void tt_clear(void) {
    if (tt) memset(tt, 0, (tt_mask + 1) * sizeof(TTEntry));
    tt_used = 0;
    arena_used = 0;
}

static TTEntry *tt_find(const uint16_t *S, int n, int d, uint64_t h) {
    for (size_t i = h & tt_mask;; i = (i + 1) & tt_mask) {
        TTEntry *e = &tt[i];
        if (!e->key) return e;
        if (e->key == h && e->n == n && e->depth == d &&
            memcmp(arena + e->off, S, (size_t)n * sizeof(uint16_t)) == 0)
            return e;
    }
}

static void tt_store(const uint16_t *S, int n, int d, int64_t value, int exact, int guess) {
    uint64_t h = hash_set(S, n, d);
    TTEntry *e = tt_find(S, n, d, h);
    if (e->key) {
        if (e->exact) return;
        if (exact || value > e->value) { e->value = value; e->exact = (uint8_t)exact; e->guess = guess; }
        return;
    }
    /* Full: start over (only costs time; every answer is recomputed on demand). */
    if (tt_used * 10 >= (tt_mask + 1) * 7 || arena_used + (size_t)n > arena_cap) {
        tt_clear();
        e = tt_find(S, n, d, h);
    }
    memcpy(arena + arena_used, S, (size_t)n * sizeof(uint16_t));
    e->key = h; e->off = arena_used; e->n = (uint16_t)n; e->depth = (uint8_t)d;
    e->value = value; e->exact = (uint8_t)exact; e->guess = guess;
    arena_used += (size_t)n;
    tt_used++;
}

/* ---------------- bounds ---------------- */
/* One-ply bound of guess g on S at depth d: the hit plus the capacity bounds of the parts.
 * Returns -1 for a guess that learns nothing (one part, not a hit). */
static int64_t guess_bound(const uint16_t *S, int n, int d, int g) {
    int cnt[NRMAX];
    memset(cnt, 0, sizeof(int) * (size_t)NR);
    const uint8_t *r = resp + (size_t)g * N;
    for (int i = 0; i < n; i++) cnt[r[S[i]]]++;
    int64_t b = 0;
    for (int k = 0; k < NR; k++) {
        if (!cnt[k]) continue;
        if (k == SOLVED) b += cost[d + 1];
        else {
            if (cnt[k] == n) return -1;
            b += LB(d + 1, cnt[k]);
        }
    }
    return b;
}

static int64_t probe_bound(const uint16_t *S, int n, int d) {
    st_probes++;
    int64_t best = INF;
    for (int g = 0; g < N; g++) {
        int64_t b = guess_bound(S, n, d, g);
        if (b >= 0 && b < best) best = b;
    }
    return best;
}

static int cmp_cand(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    if (x->bound != y->bound) return x->bound < y->bound ? -1 : 1;
    return x->guess - y->guess;
}

/* ---------------- search ---------------- */
static int64_t search(const uint16_t *S, int n, int d, int64_t beta, int *best_guess, int probe) {
    *best_guess = -1;
    if (n == 0) return 0;
    if (n == 1) { *best_guess = S[0]; return cost[d + 1]; }
    if (d + 3 > MAXD) return INF;
    if (n == 2) { *best_guess = S[0]; return cost[d + 1] + cost[d + 2]; }
    int64_t lb = LB(d, n);
    if (lb >= beta) return lb;
    st_nodes++;

    uint64_t h = hash_set(S, n, d);
    TTEntry *e = tt_find(S, n, d, h);
    if (e->key) {
        if (e->exact) { *best_guess = e->guess; return e->value; }
        if (e->value >= beta) return e->value;
        if (e->value > lb) lb = e->value;
        if (probe) return lb;
    }

    /* A member splitting the rest into singletons reaches the bound: optimal. */
    if (n <= NR) {
        for (int i = 0; i < n; i++) {
            const uint8_t *r = resp + (size_t)S[i] * N;
            uint64_t seen = 0;
            int ok = 1;
            for (int j = 0; j < n && ok; j++) {
                uint64_t bit = (uint64_t)1 << r[S[j]];
                if (seen & bit) ok = 0;
                seen |= bit;
            }
            if (ok) {
                int64_t v = cost[d + 1] + (int64_t)(n - 1) * cost[d + 2];
                *best_guess = S[i];
                tt_store(S, n, d, v, 1, S[i]);
                return v;
            }
        }
    }

    if (probe) {
        int64_t v = probe_bound(S, n, d);
        if (v < lb) v = lb;
        tt_store(S, n, d, v, 0, -1);
        return v;
    }

    /* Candidate guesses: canonical under the history's stabiliser, bounded, sorted. */
    Cand *cands = cand_buf[d];
    int nc = 0;
    int64_t min_skipped = INF;
    for (int g = 0; g < N; g++) {
        if (use_sym) {
            int keep = 1;
            for (int k = 0; k < nstab[d] && keep; k++)
                if (image(stab[d][k], g) < g) keep = 0;
            if (!keep) continue;
        }
        int64_t b = guess_bound(S, n, d, g);
        if (b < 0) continue;
        if (b >= beta) { if (b < min_skipped) min_skipped = b; continue; }
        cands[nc].bound = b;
        cands[nc].guess = g;
        nc++;
    }
    qsort(cands, (size_t)nc, sizeof(Cand), cmp_cand);

    int64_t best = beta, fail_lb = min_skipped;
    int bestg = -1;
    uint16_t *buf = part_buf[d];
    for (int c = 0; c < nc; c++) {
        int64_t total = cands[c].bound;
        if (total >= best) { if (total < fail_lb) fail_lb = total; break; }
        int g = cands[c].guess;
        const uint8_t *r = resp + (size_t)g * N;
        int cnt[NRMAX], start[NRMAX + 1], pos[NRMAX];
        memset(cnt, 0, sizeof(int) * (size_t)NR);
        for (int i = 0; i < n; i++) cnt[r[S[i]]]++;
        start[0] = 0;
        for (int k = 0; k < NR; k++) start[k + 1] = start[k] + cnt[k];
        memcpy(pos, start, sizeof(int) * (size_t)NR);
        for (int i = 0; i < n; i++) buf[pos[r[S[i]]]++] = S[i];
        int order[NRMAX], no = 0;
        for (int k = 0; k < NR; k++)
            if (cnt[k] && k != SOLVED) order[no++] = k;
        for (int a = 1; a < no; a++) {
            int x = order[a], b2 = a;
            while (b2 > 0 && cnt[order[b2 - 1]] < cnt[x]) { order[b2] = order[b2 - 1]; b2--; }
            order[b2] = x;
        }
        /* The children's stabiliser: the elements of ours that also fix g. */
        if (use_sym) {
            int m = 0;
            for (int k = 0; k < nstab[d]; k++)
                if (image(stab[d][k], g) == g) stab[d + 1][m++] = stab[d][k];
            nstab[d + 1] = m;
        }
        int ok = 1, child;
        int64_t plb[NRMAX];
        for (int a = 0; a < no && ok; a++) {
            int k = order[a];
            int64_t base = LB(d + 1, cnt[k]);
            plb[k] = base;
            if (cnt[k] <= 2) continue;
            int64_t v = search(buf + start[k], cnt[k], d + 1, best - (total - base), &child, 1);
            plb[k] = v;
            total += v - base;
            if (total >= best) ok = 0;
        }
        for (int a = 0; a < no && ok; a++) {
            int k = order[a];
            if (cnt[k] <= 2) continue;
            int64_t v = search(buf + start[k], cnt[k], d + 1, best - (total - plb[k]), &child, 0);
            total += v - plb[k];
            if (total >= best) ok = 0;
        }
        if (ok) {
            best = total;
            bestg = g;
            if (best <= lb) break;
        } else if (total < fail_lb) {
            fail_lb = total;
        }
    }
    if (bestg >= 0) {
        *best_guess = bestg;
        tt_store(S, n, d, best, 1, bestg);
        return best;
    }
    if (fail_lb < beta || fail_lb > INF / 2) fail_lb = beta;
    if (fail_lb < lb) fail_lb = lb;
    tt_store(S, n, d, fail_lb, 0, -1);
    return fail_lb;
}

/* ---------------- set-up ---------------- */
static void free_all(void) {
    free(codes); codes = NULL;
    free(index_of); index_of = NULL;
    free(resp); resp = NULL;
    free(lbtab); lbtab = NULL;
    free(pperm); pperm = NULL;
    free(sperm); sperm = NULL;
    for (int d = 0; d < MAXD + 2; d++) {
        free(cand_buf[d]); cand_buf[d] = NULL;
        free(part_buf[d]); part_buf[d] = NULL;
        free(stab[d]); stab[d] = NULL;
    }
    free(tt); tt = NULL;
    free(arena); arena = NULL;
}

static int gen_perms(int k, uint8_t **out) {
    int count = 1;
    for (int i = 2; i <= k; i++) count *= i;
    *out = malloc((size_t)count * (size_t)(k ? k : 1));
    if (!*out) return -1;
    uint8_t cur[16];
    for (int i = 0; i < k; i++) cur[i] = (uint8_t)i;
    for (int c = 0; c < count; c++) {
        memcpy(*out + (size_t)c * k, cur, (size_t)k);
        /* next permutation */
        int i = k - 2;
        while (i >= 0 && cur[i] > cur[i + 1]) i--;
        if (i < 0) break;
        int j = k - 1;
        while (cur[j] < cur[i]) j--;
        uint8_t t = cur[i]; cur[i] = cur[j]; cur[j] = t;
        for (int a = i + 1, b = k - 1; a < b; a++, b--) { t = cur[a]; cur[a] = cur[b]; cur[b] = t; }
    }
    return count;
}

static PyObject *py_init(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"codes", "length", "nsym", "table", "nresp", "solved", "costs",
                             "symmetry", "tt_log2", NULL};
    Py_buffer cb, tb;
    int length, nsym, nresp, solved, symmetry = 0, tt_log2 = 22;
    PyObject *costs_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*iiy*iiO|pi", kwlist, &cb, &length, &nsym, &tb,
                                     &nresp, &solved, &costs_obj, &symmetry, &tt_log2))
        return NULL;
    PyObject *result = NULL;
    free_all();
    if (length < 1 || length > MAXL || nsym < 1 || nsym > 16 || nresp < 1 || nresp > NRMAX ||
        solved < 0 || solved >= nresp || cb.len % length) {
        PyErr_SetString(PyExc_ValueError, "bad game size");
        goto done;
    }
    L = length; NSYM = nsym; N = (int)(cb.len / length); NR = nresp; SOLVED = solved;
    if (N < 1 || N > 65535 || tb.len != (Py_ssize_t)N * N) {
        PyErr_SetString(PyExc_ValueError, "table must be N*N bytes for N codes (N <= 65535)");
        goto done;
    }
    double packed_max = 1;
    for (int i = 0; i < L; i++) packed_max *= NSYM;
    if (packed_max > 1e8) { PyErr_SetString(PyExc_ValueError, "code space too large"); goto done; }
    Py_ssize_t ncost = PySequence_Length(costs_obj);
    if (ncost < 0) goto done;
    for (int k = 0; k < MAXD + 2; k++) {
        if (k < ncost) {
            PyObject *it = PySequence_GetItem(costs_obj, k);
            if (!it) goto done;
            cost[k] = PyLong_AsLongLong(it);
            Py_DECREF(it);
            if (PyErr_Occurred()) goto done;
        } else {
            cost[k] = cost[k - 1] + (k > 1 ? cost[k - 1] - cost[k - 2] : 1) + 1;
        }
    }
    codes = malloc((size_t)cb.len);
    resp = malloc((size_t)tb.len);
    index_of = malloc(sizeof(int32_t) * (size_t)packed_max);
    lbtab = malloc(sizeof(int64_t) * (size_t)(MAXD + 2) * (size_t)(N + 1));
    if (!codes || !resp || !index_of || !lbtab) { PyErr_NoMemory(); goto done; }
    memcpy(codes, cb.buf, (size_t)cb.len);
    memcpy(resp, tb.buf, (size_t)tb.len);
    for (size_t i = 0; i < (size_t)packed_max; i++) index_of[i] = -1;
    for (int i = 0; i < N; i++) {
        int v = 0;
        for (int p = 0; p < L; p++) {
            if (codes[(size_t)i * L + p] >= NSYM) { PyErr_SetString(PyExc_ValueError, "symbol out of range"); goto done; }
            v = v * NSYM + codes[(size_t)i * L + p];
        }
        index_of[v] = i;
    }
    for (size_t i = 0; i < (size_t)tb.len; i++)
        if (resp[i] >= NR) { PyErr_SetString(PyExc_ValueError, "response id out of range"); goto done; }
    /* Capacities: cap[1] = 1, cap[j] <= 1 + (R - 1) cap[j-1], R = most distinct responses any
     * guess can get (a non-member has at most R - 1 parts, none solved). */
    int R = 0;
    for (int g = 0; g < N; g++) {
        uint64_t seen = 0;
        for (int s = 0; s < N; s++) seen |= (uint64_t)1 << resp[(size_t)g * N + s];
        int c = __builtin_popcountll(seen);
        if (c > R) R = c;
    }
    cap[0] = 0;
    for (int j = 1; j < MAXD + 2; j++) {
        int64_t c = 1 + (int64_t)(R - 1) * cap[j - 1];
        cap[j] = c > N ? N : c;
    }
    for (int d = 0; d < MAXD + 2; d++) {
        for (int n = 0; n <= N; n++) {
            int64_t v = 0, placed = 0;
            for (int j = 1; placed < n; j++) {
                int64_t room = (j < MAXD + 2 ? cap[j] : n) - placed;
                int64_t take = n - placed < room ? n - placed : room;
                int k = d + j < MAXD + 1 ? d + j : MAXD + 1;
                v += take * cost[k];
                placed += take;
            }
            lbtab[(size_t)d * (N + 1) + n] = v;
        }
    }
    use_sym = symmetry;
    if (use_sym) {
        npp = gen_perms(L, &pperm);
        nsp = gen_perms(NSYM, &sperm);
        if (npp < 0 || nsp < 0 || (int64_t)npp * nsp > 2000000) {
            PyErr_SetString(PyExc_ValueError, "symmetry group too large for this game");
            goto done;
        }
    }
    size_t gsize = use_sym ? (size_t)npp * (size_t)nsp : 1;
    for (int d = 0; d < MAXD + 2; d++) {
        cand_buf[d] = malloc(sizeof(Cand) * (size_t)N);
        part_buf[d] = malloc(sizeof(uint16_t) * (size_t)N);
        stab[d] = malloc(sizeof(uint32_t) * gsize);
        if (!cand_buf[d] || !part_buf[d] || !stab[d]) { PyErr_NoMemory(); goto done; }
    }
    tt_mask = ((size_t)1 << tt_log2) - 1;
    tt = calloc(tt_mask + 1, sizeof(TTEntry));
    arena_cap = (tt_mask + 1) * 16;
    arena = malloc(sizeof(uint16_t) * arena_cap);
    if (!tt || !arena) { PyErr_NoMemory(); goto done; }
    tt_used = arena_used = 0;
    st_nodes = st_probes = 0;
    result = PyList_New(0);
    for (int j = 0; j < MAXD + 2 && result; j++) {
        PyObject *v = PyLong_FromLongLong(cap[j]);
        if (!v || PyList_Append(result, v) < 0) { Py_XDECREF(v); Py_CLEAR(result); break; }
        Py_DECREF(v);
    }
done:
    PyBuffer_Release(&cb);
    PyBuffer_Release(&tb);
    if (!result) { free_all(); N = 0; }
    return result;
}

/* Stabiliser of a history (list of guess indices): every group element fixing all of them. */
static int set_history(PyObject *hist, int *d_out) {
    Py_ssize_t nh = PySequence_Length(hist);
    if (nh < 0) return -1;
    if (nh > MAXD - 3) { PyErr_SetString(PyExc_ValueError, "history too long"); return -1; }
    int h[MAXD];
    for (Py_ssize_t i = 0; i < nh; i++) {
        PyObject *it = PySequence_GetItem(hist, i);
        if (!it) return -1;
        long v = PyLong_AsLong(it);
        Py_DECREF(it);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v < 0 || v >= N) { PyErr_SetString(PyExc_ValueError, "guess out of range"); return -1; }
        h[i] = (int)v;
    }
    int d = (int)nh;
    if (use_sym) {
        int m = 0;
        for (uint32_t el = 0; el < (uint32_t)(npp * nsp); el++) {
            int keep = 1;
            for (int i = 0; i < d && keep; i++)
                if (image(el, h[i]) != h[i]) keep = 0;
            if (keep) stab[d][m++] = el;
        }
        nstab[d] = m;
    }
    *d_out = d;
    return 0;
}

static int read_set(Py_buffer *b, const uint16_t **S, int *n) {
    if (b->len % 2) { PyErr_SetString(PyExc_ValueError, "set must be uint16 indices"); return -1; }
    *S = b->buf;
    *n = (int)(b->len / 2);
    for (int i = 0; i < *n; i++)
        if ((*S)[i] >= N || (i && (*S)[i] <= (*S)[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "set must be sorted distinct code indices");
            return -1;
        }
    return 0;
}

static PyObject *py_solve(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer sb;
    PyObject *hist, *beta_obj = Py_None;
    if (!N) { PyErr_SetString(PyExc_RuntimeError, "init() first"); return NULL; }
    if (!PyArg_ParseTuple(args, "y*O|O", &sb, &hist, &beta_obj)) return NULL;
    const uint16_t *S;
    int n, d;
    int64_t beta = INF;
    if (read_set(&sb, &S, &n) < 0 || set_history(hist, &d) < 0) { PyBuffer_Release(&sb); return NULL; }
    if (beta_obj != Py_None) {
        beta = PyLong_AsLongLong(beta_obj);
        if (PyErr_Occurred()) { PyBuffer_Release(&sb); return NULL; }
    }
    uint16_t *copy = malloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    if (!copy) { PyBuffer_Release(&sb); return PyErr_NoMemory(); }
    memcpy(copy, S, sizeof(uint16_t) * (size_t)n);
    PyBuffer_Release(&sb);
    int g;
    int64_t v;
    Py_BEGIN_ALLOW_THREADS
    v = search(copy, n, d, beta, &g, 0);
    Py_END_ALLOW_THREADS
    free(copy);
    return Py_BuildValue("(LiO)", (long long)v, g, (v < beta && g >= 0) || n == 0 ? Py_True : Py_False);
}

static PyObject *py_stats(PyObject *self, PyObject *noargs) {
    (void)self; (void)noargs;
    return Py_BuildValue("{s:K,s:K,s:n}", "nodes", (unsigned long long)st_nodes, "probes",
                         (unsigned long long)st_probes, "tt_used", (Py_ssize_t)tt_used);
}

static PyObject *py_lower_bound(PyObject *self, PyObject *args) {
    (void)self;
    int n, d;
    if (!N) { PyErr_SetString(PyExc_RuntimeError, "init() first"); return NULL; }
    if (!PyArg_ParseTuple(args, "ii", &n, &d)) return NULL;
    if (n < 0 || n > N || d < 0 || d > MAXD) { PyErr_SetString(PyExc_ValueError, "out of range"); return NULL; }
    return PyLong_FromLongLong(LB(d, n));
}

/* Mastermind response table for the given codes: id = black * (L+1) + white. */
static PyObject *py_mastermind_table(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer cb;
    int length, nsym;
    if (!PyArg_ParseTuple(args, "y*ii", &cb, &length, &nsym)) return NULL;
    if (length < 1 || length > MAXL || nsym < 1 || nsym > 16 || cb.len % length) {
        PyBuffer_Release(&cb);
        PyErr_SetString(PyExc_ValueError, "bad game size");
        return NULL;
    }
    Py_ssize_t n = cb.len / length;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * n);
    if (!out) { PyBuffer_Release(&cb); return NULL; }
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    const uint8_t *c = cb.buf;
    for (Py_ssize_t g = 0; g < n; g++) {
        const uint8_t *a = c + g * length;
        for (Py_ssize_t s = 0; s < n; s++) {
            const uint8_t *b = c + s * length;
            int black = 0, ca[16] = {0}, cbn[16] = {0}, common = 0;
            for (int i = 0; i < length; i++) {
                if (a[i] == b[i]) black++;
                ca[a[i] & 15]++;
                cbn[b[i] & 15]++;
            }
            for (int x = 0; x < 16; x++) common += ca[x] < cbn[x] ? ca[x] : cbn[x];
            o[g * n + s] = (uint8_t)(black * (length + 1) + (common - black));
        }
    }
    PyBuffer_Release(&cb);
    return out;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)(void (*)(void))py_init, METH_VARARGS | METH_KEYWORDS,
     "init(codes, length, nsym, table, nresp, solved, costs, symmetry=False, tt_log2=22) -> caps"},
    {"solve", py_solve, METH_VARARGS,
     "solve(cands, history, beta=None) -> (value, best_guess, exact)"},
    {"lower_bound", py_lower_bound, METH_VARARGS, "lower_bound(n, depth) -> capacity bound"},
    {"stats", py_stats, METH_NOARGS, "search counters"},
    {"mastermind_table", py_mastermind_table, METH_VARARGS,
     "mastermind_table(codes, length, nsym) -> N*N bytes of black*(length+1)+white"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_table",
                                    "Exact solver over a generic response table.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__table(void) { return PyModule_Create(&module); }
