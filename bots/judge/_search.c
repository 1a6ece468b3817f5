/*
 * Exact values of MOO positions for the judge (bots/judge/values.py), with no game tables.
 *
 * The solver's engine (bots/solver/_native.c) is built to solve whole games: it starts by
 * computing an N x N response table and capacity bounds (about a tenth of a second of CPU for
 * 4 of 10) that pay off over minutes of search. The judge needs the opposite: a fresh process that solves a few positions of a
 * few dozen secrets (those after the third guess; the earlier ones are in the shipped opening
 * table) and exits. So this engine scores guess against secret on the fly from bit masks
 * (bulls = shared (position, symbol) bits, bulls + cows = shared symbols), which needs
 * nothing but the codes, and searches only the minimum objective, whose values do not depend
 * on the depth:
 *
 *   W(S)    = min over guesses g of W(S, g),   W({s}) = 1
 *   W(S, g) = |S| + sum of W(P) over the parts P of S under g, except the part g solves
 *
 * Bounds. At most one secret is solved by the next guess, at most 1 + (R-1) within two, and
 * so on (R responses): the capacity bound LB(n), 2n - 1 for n <= R. A member of S that splits
 * S into singletons reaches 2n - 1, so it is optimal; without one, every guess costs at least
 * 2n (a member leaves a part of two or more, a non-member solves nothing), so a non-member
 * that splits S into singletons is optimal. A part's "probe" is the least one-ply bound over
 * every guess (|P| + the capacity bounds of its sub-parts); it is kept in the transposition
 * table as a lower bound.
 *
 * Search: fail-soft branch and bound with a cutoff (exact below `beta`, else a lower bound
 * >= beta). Every guess is scored against S once; guesses that split S the same way are kept
 * once and tried in bound order. Before descending into a guess's parts, every part is probed,
 * which rejects most guesses without any deeper search; then the parts are searched largest
 * first, each with the slack the others leave.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXL 6
#define MAXR ((MAXL + 1) * (MAXL + 1))
#define MAXDEPTH 32
#define INF ((int64_t)1 << 60)

static int L = 0, NSYM = 0, N = 0, SOLVED = 0, NRESP = 0;
static uint64_t *posmask = NULL;  /* bit pos * NSYM + sym for each position */
static uint32_t *symmask = NULL;  /* bit sym for each symbol of the code */
static int64_t cap[64];           /* cap[j]: at most cap[j] secrets solved within j guesses */
static uint64_t st_nodes = 0, st_probes = 0;
/* A solve() may be given a budget of probes; past it the search gives up (aborted), storing
 * nothing it has not finished, and the caller uses another engine. */
static uint64_t probe_limit = 0;
static int aborted = 0;

static inline int resp(int g, int s) {
    int bulls = __builtin_popcountll(posmask[g] & posmask[s]);
    int common = __builtin_popcount(symmask[g] & symmask[s]);
    return bulls * (L + 1) + (common - bulls);
}

static int64_t lbtab[65536];

static int64_t capacity_bound(int n) {
    int64_t total = 0, prev = 0;
    for (int j = 1; prev < n; j++) {
        int64_t upto = cap[j] < n ? cap[j] : n;
        total += (int64_t)j * (upto - prev);
        prev = upto;
    }
    return total;
}

#define LB(n) lbtab[n]

/* -- transposition table: set -> exact value or lower bound --------------------------- */
typedef struct {
    uint64_t hash;
    uint32_t off;
    uint16_t n;
    uint8_t exact;
    uint8_t used;
    uint8_t probed;     /* a lower bound from a full one-ply scan (else a cheap one) */
    int64_t value;
    int32_t guess;
} TTEntry;

#define TT_LOG2 18
static TTEntry *tt = NULL;
static uint16_t *arena = NULL;
static size_t arena_cap = 0, arena_used = 0, tt_used = 0;

static uint64_t hash_set(const uint16_t *S, int n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= S[i];
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
    }
    return h;
}

static void tt_clear(void) {
    if (tt) memset(tt, 0, sizeof(TTEntry) << TT_LOG2);
    arena_used = 0;
    tt_used = 0;
}

static TTEntry *tt_find(const uint16_t *S, int n, uint64_t h) {
    size_t mask = ((size_t)1 << TT_LOG2) - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        TTEntry *e = &tt[i];
        if (!e->used) return e;
        if (e->hash == h && e->n == n && !memcmp(arena + e->off, S, sizeof(uint16_t) * n))
            return e;
    }
}

static void tt_store(const uint16_t *S, int n, uint64_t h, int64_t value, int exact, int guess,
                     int probed) {
    if (tt_used * 4 > ((size_t)3 << TT_LOG2) || arena_used + n > arena_cap) tt_clear();
    TTEntry *e = tt_find(S, n, h);
    if (e->used) {
        if (e->exact) return;
        if (!exact && value <= e->value) { e->probed = (uint8_t)(probed || e->probed); return; }
    } else {
        e->used = 1;
        e->hash = h;
        e->n = (uint16_t)n;
        e->off = (uint32_t)arena_used;
        memcpy(arena + arena_used, S, sizeof(uint16_t) * n);
        arena_used += n;
        tt_used++;
    }
    e->value = value;
    e->exact = (uint8_t)exact;
    e->guess = guess;
    e->probed = (uint8_t)(probed || e->probed);
}

/* -- scoring ------------------------------------------------------------------------- */
typedef struct { int64_t bound; int64_t spread; uint64_t sig; int32_t guess; } Cand;

static Cand *cands[MAXDEPTH];
static Cand *cands_by_bound[MAXDEPTH];   /* cands[] placed in bound order (see order_by_bound) */
static int *bound_count = NULL;          /* scratch of order_by_bound: N + 1 counters */
static uint16_t *parts_buf[MAXDEPTH];
static uint8_t *is_member = NULL;

/* Counts per response of guess g over S and a signature of the partition. */
static inline uint64_t score_guess(int g, const uint16_t *S, int n, int *cnt) {
    uint64_t sig = 0;
    memset(cnt, 0, sizeof(int) * MAXR);
    for (int i = 0; i < n; i++) {
        int r = resp(g, S[i]);
        cnt[r]++;
        sig = (sig + (uint64_t)(r + 1)) * 0x100000001B3ULL;
    }
    return sig;
}

static inline int64_t guess_bound(const int *cnt, int n) {
    int64_t b = n;
    for (int r = 0; r < MAXR; r++)
        if (r != SOLVED && cnt[r]) b += LB(cnt[r]);
    return b;
}

static inline int max_count(const int *cnt) {
    int m = 0;
    for (int r = 0; r < MAXR; r++) if (cnt[r] > m) m = cnt[r];
    return m;
}

/* Symbols that no code of S holds are interchangeable: a guess is scanned only if its
 * absent symbols, read in position order, are the smallest absent ones in increasing order. */
static uint8_t *sym_of = NULL;  /* sym_of[g * L + p] */

static inline uint32_t present_symbols(const uint16_t *S, int n) {
    uint32_t m = 0;
    for (int i = 0; i < n; i++) m |= symmask[S[i]];
    return m;
}

static inline int canonical_absent(int g, uint32_t present) {
    int next = 0;
    const uint8_t *x = sym_of + (size_t)g * L;
    for (int p = 0; p < L; p++) {
        int s = x[p];
        if (present >> s & 1) continue;
        while (present >> next & 1) next++;
        if (s != next) return 0;
        next++;
    }
    return 1;
}

/* A member splitting S into singletons (-1 if none). */
static int perfect_member(const uint16_t *S, int n) {
    int cnt[MAXR];
    for (int i = 0; i < n; i++) {
        memset(cnt, 0, sizeof cnt);
        int ok = 1;
        for (int j = 0; j < n && ok; j++)
            if (++cnt[resp(S[i], S[j])] > 1) ok = 0;
        if (ok) return S[i];
    }
    return -1;
}

/* Exact value when it is cheap to know, else a lower bound; *exact says which. Probes (a
 * one-ply bound over every guess) are kept in the transposition table. */
static int64_t quick(const uint16_t *S, int n, int *exact, int full) {
    *exact = 1;
    if (n == 1) return 1;
    if (n == 2) return 3;
    uint64_t h = hash_set(S, n);
    TTEntry *e = tt_find(S, n, h);
    if (e->used && (e->exact || e->probed || !full)) {
        *exact = e->exact;
        return e->value;
    }
    int64_t known = e->used ? e->value : 0;
    int g = e->used ? -1 : perfect_member(S, n);
    if (g >= 0) {
        tt_store(S, n, h, 2 * (int64_t)n - 1, 1, g, 1);
        return 2 * (int64_t)n - 1;
    }
    if (!full) {  /* no scan: without a perfect member every guess costs 2n at least */
        *exact = 0;
        int64_t b = LB(n);
        if (b < 2 * (int64_t)n) b = 2 * (int64_t)n;
        tt_store(S, n, h, b, 0, -1, 0);
        return b;
    }
    st_probes++;
    if (probe_limit && st_probes > probe_limit) {
        aborted = 1;
        *exact = 0;
        return INF;
    }
    int cnt[MAXR];
    int64_t best = INF;
    int64_t floor_ = LB(n) > 2 * (int64_t)n ? LB(n) : 2 * (int64_t)n;
    uint32_t present = present_symbols(S, n);
    for (int x = 0; x < N && best > floor_; x++) {
        if (!canonical_absent(x, present)) continue;
        score_guess(x, S, n, cnt);
        int m = max_count(cnt);
        if (m == n) continue;
        if (m == 1) {  /* a non-member into singletons: 2n, optimal without a perfect member */
            tt_store(S, n, h, 2 * (int64_t)n, 1, x, 1);
            return 2 * (int64_t)n;
        }
        int64_t b = guess_bound(cnt, n);
        if (b < best) best = b;
    }
    if (best < 2 * (int64_t)n) best = 2 * (int64_t)n;
    if (best < known) best = known;
    *exact = 0;
    tt_store(S, n, h, best, 0, -1, 1);
    return best;
}

static int cmp_cand(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    if (x->bound != y->bound) return x->bound < y->bound ? -1 : 1;
    if (x->spread != y->spread) return x->spread < y->spread ? -1 : 1;
    if (x->sig != y->sig) return x->sig < y->sig ? -1 : 1;
    return x->guess - y->guess;
}

/* The m candidates of cs placed into out by bound alone (a counting sort, when the bounds
 * span at most N values; else a full sort by cmp_cand).  Returns how many of out are already
 * in cmp_cand order: m after a full sort, else 0, and the search sorts each run of equal
 * bounds when it reaches it.  That visits the guesses in exactly cmp_cand's order (a total
 * order: the guess breaks ties), so the search finds the same values and the same guesses as
 * with one full sort, but most runs are never sorted: the search stops at the first bound
 * that cannot beat the best total, and sorting every guess of a node was a seventh of the
 * review's time. */
static int order_by_bound(const Cand *cs, int m, Cand *out) {
    if (m == 0) return 0;
    int64_t lo = cs[0].bound, hi = cs[0].bound;
    for (int c = 1; c < m; c++) {
        if (cs[c].bound < lo) lo = cs[c].bound;
        if (cs[c].bound > hi) hi = cs[c].bound;
    }
    if (hi - lo >= N) {
        memcpy(out, cs, sizeof(Cand) * (size_t)m);
        qsort(out, (size_t)m, sizeof(Cand), cmp_cand);
        return m;
    }
    int span = (int)(hi - lo) + 1;
    memset(bound_count, 0, sizeof(int) * ((size_t)span + 1));
    for (int c = 0; c < m; c++) bound_count[cs[c].bound - lo + 1]++;
    for (int k = 1; k <= span; k++) bound_count[k] += bound_count[k - 1];
    for (int c = 0; c < m; c++) out[bound_count[cs[c].bound - lo]++] = cs[c];
    return 0;
}

static int64_t search(const uint16_t *S, int n, int depth, int64_t beta, int *best_guess) {
    st_nodes++;
    int exact;
    int64_t q = quick(S, n, &exact, 1);
    if (aborted) return INF;
    uint64_t h = hash_set(S, n);
    if (exact || q >= beta) {
        TTEntry *e = tt_find(S, n, h);
        *best_guess = e->used ? e->guess : (n == 1 ? S[0] : (S[0] < S[1] ? S[0] : S[1]));
        if (n <= 2) *best_guess = S[0];
        return q;
    }
    if (depth >= MAXDEPTH) return INF;  /* cannot happen in a real game */
    int64_t floor_ = q;
    int cnt[MAXR];
    for (int i = 0; i < n; i++) is_member[S[i]] = 1;
    Cand *cs = cands[depth];
    int m = 0;
    uint32_t present = present_symbols(S, n);
    for (int g = 0; g < N; g++) {
        if (!canonical_absent(g, present)) continue;
        uint64_t sig = score_guess(g, S, n, cnt);
        if (max_count(cnt) == n && !is_member[g]) continue;  /* learns nothing */
        cs[m].bound = guess_bound(cnt, n);
        int64_t spread = 0;  /* sum of squared part sizes: balanced splits first */
        for (int r = 0; r < MAXR; r++) spread += (int64_t)cnt[r] * cnt[r];
        cs[m].spread = spread;
        cs[m].sig = sig ^ (is_member[g] ? 0x5555555555555555ULL : 0);
        cs[m].guess = g;
        m++;
    }
    for (int i = 0; i < n; i++) is_member[S[i]] = 0;
    int sorted_to = order_by_bound(cs, m, cands_by_bound[depth]);
    cs = cands_by_bound[depth];
    int64_t best = INF, lower = INF;
    int bestg = -1;
    uint16_t *buf = parts_buf[depth];
    for (int c = 0; c < m && !aborted; c++) {
        if (c >= sorted_to) {  /* the first guess of a run of equal bounds */
            int64_t cutoff = best < beta ? best : beta;
            if (cs[c].bound >= cutoff) {  /* what the test below would do, before sorting */
                if (cs[c].bound < lower) lower = cs[c].bound;
                break;
            }
            int e = c + 1;
            while (e < m && cs[e].bound == cs[c].bound) e++;
            qsort(cs + c, (size_t)(e - c), sizeof(Cand), cmp_cand);
            sorted_to = e;
        }
        if (c > 0 && cs[c].sig == cs[c - 1].sig && cs[c].bound == cs[c - 1].bound
            && cs[c].spread == cs[c - 1].spread) continue;
        int64_t cutoff = best < beta ? best : beta;
        if (cs[c].bound >= cutoff) {
            if (cs[c].bound < lower) lower = cs[c].bound;
            break;
        }
        int g = cs[c].guess;
        int off[MAXR + 1], fill[MAXR];
        memset(cnt, 0, sizeof cnt);
        for (int i = 0; i < n; i++) cnt[resp(g, S[i])]++;
        off[0] = 0;
        for (int r = 0; r < MAXR; r++) off[r + 1] = off[r] + cnt[r];
        memcpy(fill, off, sizeof fill);
        for (int i = 0; i < n; i++) buf[fill[resp(g, S[i])]++] = S[i];
        /* Bound every part cheaply, then probe the unsettled ones largest first: most
         * guesses are rejected before any deeper search. */
        int order[MAXR], k = 0;
        int64_t pb[MAXR];
        int px[MAXR];
        int64_t total = n;
        for (int r = 0; r < MAXR; r++) {
            if (!cnt[r] || r == SOLVED) continue;
            pb[r] = quick(buf + off[r], cnt[r], &px[r], 0);
            total += pb[r];
            if (!px[r]) order[k++] = r;
        }
        if (total >= cutoff) {
            if (total < lower) lower = total;
            continue;
        }
        for (int a = 1; a < k; a++)
            for (int b = a; b > 0 && cnt[order[b]] > cnt[order[b - 1]]; b--) {
                int t = order[b]; order[b] = order[b - 1]; order[b - 1] = t;
            }
        for (int j = 0; j < k && total < cutoff; j++) {
            int r = order[j];
            int64_t before = pb[r];
            pb[r] = quick(buf + off[r], cnt[r], &px[r], 1);
            total += pb[r] - before;
        }
        if (total >= cutoff) {
            if (total < lower) lower = total;
            continue;
        }
        {
            int kk = 0;
            for (int j = 0; j < k; j++) if (!px[order[j]]) order[kk++] = order[j];
            k = kk;
        }
        int cut = 0;
        for (int j = 0; j < k; j++) {
            int r = order[j];
            int sub;
            int64_t rest = total - pb[r];  /* everything but this part, bounds for the rest */
            int64_t v = search(buf + off[r], cnt[r], depth + 1, cutoff - rest, &sub);
            total = rest + v;
            if (total >= cutoff) {
                cut = 1;
                break;
            }
        }
        if (cut) {
            if (total < lower) lower = total;
            continue;
        }
        best = total;
        bestg = g;
        if (best <= floor_) break;
    }
    if (aborted) return INF;
    if (best < beta) {
        tt_store(S, n, h, best, 1, bestg, 1);
        *best_guess = bestg;
        return best;
    }
    int64_t bound = best < lower ? best : lower;
    if (bound < beta) bound = beta;
    tt_store(S, n, h, bound, 0, bestg, 1);
    *best_guess = bestg;
    return bound;
}

/* -- Python interface ---------------------------------------------------------------- */
static void free_all(void) {
    free(posmask); free(symmask); free(sym_of); free(is_member); free(tt); free(arena);
    free(bound_count);
    posmask = NULL; symmask = NULL; sym_of = NULL; is_member = NULL; tt = NULL; arena = NULL;
    bound_count = NULL;
    for (int d = 0; d < MAXDEPTH; d++) {
        free(cands[d]); free(cands_by_bound[d]); free(parts_buf[d]);
        cands[d] = NULL; cands_by_bound[d] = NULL; parts_buf[d] = NULL;
    }
}

static void gen_codes(uint8_t *cur, int k, uint32_t used, int *count) {
    if (k == L) {
        uint64_t pm = 0;
        uint32_t sm = 0;
        for (int p = 0; p < L; p++) {
            pm |= (uint64_t)1 << (p * NSYM + cur[p]);
            sm |= (uint32_t)1 << cur[p];
        }
        posmask[*count] = pm;
        symmask[*count] = sm;
        memcpy(sym_of + (size_t)(*count) * L, cur, (size_t)L);
        (*count)++;
        return;
    }
    for (int s = 0; s < NSYM; s++) {
        if (used & (1u << s)) continue;
        cur[k] = (uint8_t)s;
        gen_codes(cur, k + 1, used | (1u << s), count);
    }
}

PyDoc_STRVAR(init_doc,
"init(length, nsym) -> number of codes\n\n"
"Set up the game of `length` distinct symbols out of `nsym` (codes numbered in lexicographic\n"
"order of symbol indices, as moo.rules.Rules.secrets) and empty the transposition table.");

static PyObject *py_init(PyObject *self, PyObject *args) {
    (void)self;
    int length, nsym;
    if (!PyArg_ParseTuple(args, "ii", &length, &nsym)) return NULL;
    if (length < 2 || length > MAXL || nsym < length || nsym > 16 || length * nsym > 64) {
        PyErr_SetString(PyExc_ValueError, "unsupported game size");
        return NULL;
    }
    int n = 1;
    for (int i = 0; i < length; i++) n *= nsym - i;
    if (n > 65535) { PyErr_SetString(PyExc_ValueError, "too many codes"); return NULL; }
    free_all();
    L = length; NSYM = nsym; N = n; SOLVED = L * (L + 1);
    posmask = malloc(sizeof(uint64_t) * N);
    symmask = malloc(sizeof(uint32_t) * N);
    sym_of = malloc((size_t)N * (size_t)length);
    is_member = calloc((size_t)N, 1);
    tt = calloc((size_t)1 << TT_LOG2, sizeof(TTEntry));
    arena_cap = (size_t)1 << 22;
    arena = malloc(sizeof(uint16_t) * arena_cap);
    bound_count = malloc(sizeof(int) * ((size_t)n + 1));
    int ok = posmask && symmask && sym_of && is_member && tt && arena && bound_count;
    for (int d = 0; d < MAXDEPTH && ok; d++) {
        cands[d] = malloc(sizeof(Cand) * N);
        cands_by_bound[d] = malloc(sizeof(Cand) * N);
        parts_buf[d] = malloc(sizeof(uint16_t) * N);
        ok = cands[d] && cands_by_bound[d] && parts_buf[d];
    }
    if (!ok) { free_all(); return PyErr_NoMemory(); }
    uint8_t cur[MAXL];
    int count = 0;
    gen_codes(cur, 0, 0, &count);
    /* Responses a distinct guess can get: b + c <= L, not (L-1, 1), b + c >= 2L - nsym. */
    NRESP = 0;
    for (int b = 0; b <= L; b++)
        for (int c = 0; b + c <= L; c++)
            if (!(b == L - 1 && c == 1) && b + c >= 2 * L - NSYM) NRESP++;
    cap[0] = 0;
    for (int j = 1; j < 64; j++) {
        cap[j] = 1 + (int64_t)(NRESP - 1) * cap[j - 1];
        if (cap[j] > N) cap[j] = N;
    }
    for (int k = 0; k <= N; k++) lbtab[k] = capacity_bound(k);
    /* The table is fresh from calloc, so already empty: clearing it would touch all of its
     * pages (10 MB), which a fresh `moo analyse` process mostly never uses. */
    arena_used = 0;
    tt_used = 0;
    st_nodes = st_probes = 0;
    return PyLong_FromLong(N);
}

static int get_set(PyObject *obj, Py_buffer *view, const uint16_t **S, int *n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) return -1;
    if (view->len % 2) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "uint16 array expected");
        return -1;
    }
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

PyDoc_STRVAR(solve_doc,
"solve(set, budget=0) -> (value, guess) or None\n\n"
"W of the non-empty candidate `set` (bytes of sorted uint16 code indices): the least total\n"
"number of guesses, the next one included, summed over its secrets; and an optimal guess.\n"
"With a `budget`, None once the search has probed that many positions (it gives up).");

static PyObject *py_solve(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj;
    unsigned long long budget = 0;
    if (!PyArg_ParseTuple(args, "O|K", &set_obj, &budget)) return NULL;
    if (!posmask) { PyErr_SetString(PyExc_RuntimeError, "call init() first"); return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    if (n == 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "empty set");
        return NULL;
    }
    int guess = -1;
    int64_t v;
    aborted = 0;
    probe_limit = budget ? st_probes + budget : 0;
    Py_BEGIN_ALLOW_THREADS
    v = search(S, n, 0, INF, &guess);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    probe_limit = 0;
    if (aborted) {
        aborted = 0;
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(Li)", (long long)v, guess);
}

PyDoc_STRVAR(partition_doc,
"partition(set, guess) -> {response_id: bytes}\n\n"
"Split the candidate `set` (bytes of sorted uint16 code indices) by the response to code\n"
"`guess`; response_id = bulls * (length + 1) + cows; each part sorted, as bytes.");

static PyObject *py_partition(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj;
    int g;
    if (!PyArg_ParseTuple(args, "Oi", &set_obj, &g)) return NULL;
    if (!posmask || g < 0 || g >= N) {
        PyErr_SetString(PyExc_ValueError, "bad guess or not initialised");
        return NULL;
    }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    int cnt[MAXR] = {0}, off[MAXR + 1], fill[MAXR];
    for (int i = 0; i < n; i++) cnt[resp(g, S[i])]++;
    off[0] = 0;
    for (int r = 0; r < MAXR; r++) off[r + 1] = off[r] + cnt[r];
    memcpy(fill, off, sizeof fill);
    uint16_t *tmp = malloc(sizeof(uint16_t) * (n ? n : 1));
    PyObject *out = tmp ? PyDict_New() : NULL;
    if (out) {
        for (int i = 0; i < n; i++) tmp[fill[resp(g, S[i])]++] = S[i];
        for (int r = 0; r < MAXR && out; r++) {
            if (!cnt[r]) continue;
            PyObject *key = PyLong_FromLong(r);
            PyObject *val = PyBytes_FromStringAndSize((const char *)(tmp + off[r]),
                                                      (Py_ssize_t)cnt[r] * 2);
            if (!key || !val || PyDict_SetItem(out, key, val) < 0) Py_CLEAR(out);
            Py_XDECREF(key);
            Py_XDECREF(val);
        }
    }
    free(tmp);
    PyBuffer_Release(&view);
    if (!out && !PyErr_Occurred()) PyErr_NoMemory();
    return out;
}

static PyObject *py_stats(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return Py_BuildValue("{sKsKsn}", "nodes", (unsigned long long)st_nodes,
                         "probes", (unsigned long long)st_probes, "tt_used", (Py_ssize_t)tt_used);
}

static PyObject *py_clear(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    tt_clear();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", py_init, METH_VARARGS, init_doc},
    {"solve", py_solve, METH_VARARGS, solve_doc},
    {"partition", py_partition, METH_VARARGS, partition_doc},
    {"stats", py_stats, METH_NOARGS, "nodes and probes searched since init()"},
    {"clear", py_clear, METH_NOARGS, "empty the transposition table"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_search",
    "Exact values of MOO positions without game tables (see bots/judge/_search.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__search(void) { return PyModule_Create(&moduledef); }
