/*
 * Native core of the exact MOO solver: response table, partition counting and the whole
 * depth-first branch and bound.  Python (bots/solver/core.py) drives it one node at a time
 * for tree extraction and one first-response cell at a time for the search itself.
 *
 * Vocabulary
 *   code      an index 0..N-1 into the codes of `length` distinct symbols out of `nsym`,
 *             in lexicographic order of symbol indices (= moo.rules.Rules.secrets order).
 *   set S     the candidates still consistent with the history, a sorted uint16 array.
 *   depth d   number of guesses already asked; the next guess is guess number d+1.
 *   cost[k]   what one secret costs when it is solved by guess number k (absolute).  The
 *             objective is to minimise the sum over secrets.  cost must increase with k;
 *             that is what makes the capacity lower bound below admissible.
 *               minimum:   cost[k] = k (optionally plus a small tie-break term)
 *               strongest: cost[k] = (N - Gamma(k)) * 2^20 + k
 *
 * Search (search()): value(S, d) = min over guesses g of
 *        [g in S] * cost[d+1] + sum over the other response classes P of value(P, d+1).
 * It is a fail-soft branch and bound with a cutoff `beta`: the result is exact when it is
 * < beta, otherwise it is only a lower bound that is >= beta (and is remembered as such).
 * Guesses are generated once per node, reduced by symmetry and by "same partition"
 * deduplication, bounded from below by the capacity bound of their parts, sorted by that
 * bound, and tried in order until the bound of the next one cannot beat the best total found
 * so far.  Before descending into the parts of a guess, every part is "probed" (its one-ply
 * bound), which rejects most hopeless guesses without any deep search.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "_native.h"
#define NRMAX ((MAXL + 1) * (MAXL + 1))
#define INF ((int64_t)1 << 60)

/* ------------------------------------------------------------------------------------ */
/* Game tables                                                                           */
/* ------------------------------------------------------------------------------------ */
static int L = 0, NSYM = 0, N = 0, NR = 0, SOLVED = 0, NRESP = 0;
static int REPEATS = 0;               /* 0: MOO (distinct symbols), 1: Mastermind (any code) */
static uint8_t (*codes)[MAXL];        /* codes[i][pos] = symbol index */
static int32_t *index_of;             /* packed base-NSYM code -> index, -1 if not a code */
static uint8_t *resp;                 /* resp[g * N + s]: compact id of (bulls, cows); symmetric */
static int rid_code[NRMAX];           /* compact id -> bulls * (L+1) + cows */
static int64_t cost[MAXD + 2];
static int64_t cap[MAXD + 2];         /* cap[j]: at most cap[j] secrets solved within j guesses */
static int64_t *lbtab;                /* lbtab[d * (N+1) + n]: capacity lower bound */
static int perms[720][MAXL];          /* all position permutations */
static int nperms = 0;

/* Statistics, reset by stats(). */
static uint64_t st_nodes, st_tt_hits, st_tt_stores, st_guesses, st_tt_compactions;

/* Per-depth scratch, so the recursion never allocates. */
typedef struct { int64_t bound; int32_t guess; } Cand;
static Cand *cand_buf[MAXD + 2];
static uint16_t *part_buf[MAXD + 2];
static int hist[MAXD + 2];

static inline int64_t LB(int d, int n) { return lbtab[(size_t)d * (N + 1) + n]; }

static int packed(const uint8_t *c) {
    int p = 0;
    for (int i = 0; i < L; i++) p = p * NSYM + c[i];
    return p;
}

/* Scores are symmetric (bulls and common symbols both are, with or without repeats), so row s
 * of the table also lists the responses of every guess against secret s.  With repeated
 * symbols the common count is Mastermind's: sum over symbols of the smaller of the counts. */
static int score_codes(const uint8_t *a, const uint8_t *b) {
    int bulls = 0, common = 0;
    if (REPEATS) {
        int ca[MAXSYM] = {0}, cb[MAXSYM] = {0};
        for (int i = 0; i < L; i++) {
            bulls += a[i] == b[i];
            ca[a[i]]++;
            cb[b[i]]++;
        }
        for (int s = 0; s < NSYM; s++) common += ca[s] < cb[s] ? ca[s] : cb[s];
    } else {
        for (int i = 0; i < L; i++) {
            if (a[i] == b[i]) bulls++;
            for (int j = 0; j < L; j++) common += a[i] == b[j];
        }
    }
    return bulls * (L + 1) + (common - bulls);
}

/* ------------------------------------------------------------------------------------ */
/* Transposition table: sets (with their depth) -> exact value or lower bound              */
/* ------------------------------------------------------------------------------------ */
typedef struct {
    uint64_t key;      /* 0 = empty */
    uint64_t off;      /* set stored at arena[off .. off+n) */
    int64_t value;
    int32_t guess;     /* best guess when exact */
    uint16_t n;
    uint8_t depth;
    uint8_t exact;
} TTEntry;

/* The big tables (response table, transposition table and its arena) are read at random:
 * they live in their own zeroed mappings, asking for huge pages where the kernel has them,
 * which saves most TLB misses (pages never touched cost nothing either way). */
#define TT_BYTES ((tt_mask + 1) * sizeof(TTEntry))
#define ARENA_BYTES (arena_cap * sizeof(uint16_t))
#define RESP_BYTES ((size_t)N * N + BLK)
static void *big_alloc(size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);
#endif
    return p;
}

static void big_free(void *p, size_t size) {
    if (p) munmap(p, size);
}

static TTEntry *tt = NULL;
static size_t tt_mask = 0, tt_used = 0;
static uint16_t *arena = NULL;
static size_t arena_cap = 0, arena_used = 0;

static uint64_t hash_set(const uint16_t *S, int n, int d) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)d << 32) ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= S[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
    }
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
        if (!e->key) return e;                     /* empty slot: not present */
        if (e->key == h && e->n == n && e->depth == d &&
            memcmp(arena + e->off, S, (size_t)n * sizeof(uint16_t)) == 0)
            return e;
    }
}

static void tt_compact(void) {
    TTEntry *old = tt;
    uint16_t *old_arena = arena;
    TTEntry *fresh = big_alloc(TT_BYTES);
    uint16_t *fresh_arena = big_alloc(ARENA_BYTES);
    st_tt_compactions++;
    if (!fresh || !fresh_arena) {
        big_free(fresh, TT_BYTES);
        big_free(fresh_arena, ARENA_BYTES);
        tt_clear();
        return;
    }
    tt = fresh;
    arena = fresh_arena;
    tt_used = 0;
    arena_used = 0;
    for (size_t i = 0; i <= tt_mask; i++) {
        TTEntry *o = &old[i];
        if (!o->key || !o->exact) continue;
        if (tt_used * 2 >= tt_mask + 1 || arena_used + o->n > arena_cap / 2) break;
        const uint16_t *S = old_arena + o->off;
        TTEntry *e = tt_find(S, o->n, o->depth, o->key);
        *e = *o;
        e->off = arena_used;
        memcpy(arena + arena_used, S, (size_t)o->n * sizeof(uint16_t));
        arena_used += o->n;
        tt_used++;
    }
    big_free(old, TT_BYTES);
    big_free(old_arena, ARENA_BYTES);
}

static void tt_store(const uint16_t *S, int n, int d, int64_t value, int exact, int guess) {
    uint64_t h = hash_set(S, n, d);
    TTEntry *e = tt_find(S, n, d, h);
    if (e->key) {                                  /* update: keep the most useful fact */
        if (e->exact) return;
        if (exact || value > e->value) { e->value = value; e->exact = (uint8_t)exact; e->guess = guess; }
        return;
    }
    /* Full?  Keep the exact values (the optimal tree is read back from them), drop the
     * lower bounds; start over only if the exact ones alone fill half the table. */
    if (tt_used * 10 >= (tt_mask + 1) * 7 || arena_used + (size_t)n > arena_cap) {
        tt_compact();
        e = tt_find(S, n, d, h);
    }
    memcpy(arena + arena_used, S, (size_t)n * sizeof(uint16_t));
    e->key = h; e->off = arena_used; e->n = (uint16_t)n; e->depth = (uint8_t)d;
    e->value = value; e->exact = (uint8_t)exact; e->guess = guess;
    arena_used += (size_t)n;
    tt_used++;
    st_tt_stores++;
}

/* ------------------------------------------------------------------------------------ */
/* Symmetry                                                                               */
/* ------------------------------------------------------------------------------------ */
/*
 * A relabelling T (position permutation sigma, symbol permutation pi), T(x)[i] = pi(x[sigma(i)]),
 * maps S onto itself if it fixes every guess of the history (scores are invariant under
 * relabelling, so the responses stay the same).  Two more families fix S:
 *   - any permutation of the symbols absent from S (class A);
 *   - any permutation of symbols never guessed (present in S, class F): S cannot tell them apart.
 * Guesses in one orbit have equal values, so only the smallest code of each orbit needs a
 * search.  We keep g iff no checked group element maps it to something smaller; the orbit's
 * minimum always survives, whichever subset of the group is checked, so this is safe.
 */
typedef struct {
    int ng;                         /* non-identity history-fixing relabellings */
    int sigma[720][MAXL];
    int pi[720][MAXSYM];            /* -1: symbol never guessed, left in place */
    int cls[MAXSYM];                /* 0: fixed, 1: class A, 2: class F */
} Sym;
static Sym sym_buf[MAXD + 2];

/* Only the symbol classes (A: absent from S, F: present but never guessed). */
static void sym_classes(Sym *sy, const uint16_t *S, int n, const int *h, int nh) {
    int present = 0, used = 0;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < L; p++) present |= 1 << codes[S[i]][p];
    for (int k = 0; k < nh; k++)
        for (int p = 0; p < L; p++) used |= 1 << codes[h[k]][p];
    for (int s = 0; s < NSYM; s++)
        sy->cls[s] = !(present >> s & 1) ? 1 : !(used >> s & 1) ? 2 : 0;
    sy->ng = 0;
}

static void sym_setup(Sym *sy, const uint16_t *S, int n, const int *h, int nh) {
    sym_classes(sy, S, n, h, nh);
    for (int q = 1; q < nperms; q++) {             /* perms[0] is the identity */
        int pi[MAXSYM], inv[MAXSYM], ok = 1;
        for (int s = 0; s < NSYM; s++) pi[s] = inv[s] = -1;
        for (int k = 0; k < nh && ok; k++) {
            const uint8_t *c = codes[h[k]];
            for (int i = 0; i < L && ok; i++) {
                int a = c[perms[q][i]], b = c[i];   /* need pi(a) = b */
                if ((pi[a] >= 0 && pi[a] != b) || (inv[b] >= 0 && inv[b] != a)) ok = 0;
                pi[a] = b; inv[b] = a;
            }
        }
        if (!ok) continue;
        memcpy(sy->sigma[sy->ng], perms[q], sizeof(perms[q]));
        memcpy(sy->pi[sy->ng], pi, sizeof(pi));
        sy->ng++;
    }
}

/* Smallest code obtainable from x by permuting class-A and class-F symbols among themselves:
 * each symbol of a class becomes, at its first occurrence, the next unused one of its class
 * (a repeated symbol keeps the name it got). */
static int canon(const Sym *sy, const uint8_t *x) {
    uint8_t out[MAXL];
    int8_t map[MAXSYM];
    memset(map, -1, sizeof(map));
    int nextA = 0, nextF = 0;
    for (int i = 0; i < L; i++) {
        int s = x[i], c = sy->cls[s];
        if (c) {
            if (map[s] < 0) {
                int *nx = c == 1 ? &nextA : &nextF;
                while (sy->cls[*nx] != c) (*nx)++; /* next unused symbol of the class */
                map[s] = (int8_t)(*nx)++;
            }
            s = map[s];
        }
        out[i] = (uint8_t)s;
    }
    return index_of[packed(out)];
}

static int is_canonical(const Sym *sy, int g) {
    const uint8_t *x = codes[g];
    if (canon(sy, x) != g) return 0;
    for (int k = 0; k < sy->ng; k++) {
        uint8_t y[MAXL];
        for (int i = 0; i < L; i++) {
            int s = x[sy->sigma[k][i]];
            y[i] = (uint8_t)(sy->pi[k][s] >= 0 ? sy->pi[k][s] : s);
        }
        if (canon(sy, y) < g) return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------ */
/* The search                                                                             */
/* ------------------------------------------------------------------------------------ */
static inline int cand_less(const Cand *x, const Cand *y) {
    return x->bound < y->bound || (x->bound == y->bound && x->guess < y->guess);
}

/* A binary min-heap of candidates by (bound, guess). */
static void heap_down(Cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < n && cand_less(&h[l], &h[m])) m = l;
        if (l + 1 < n && cand_less(&h[l + 1], &h[m])) m = l + 1;
        if (m == i) return;
        Cand t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

static void heapify_cands(Cand *h, int n) {
    for (int i = n / 2 - 1; i >= 0; i--) heap_down(h, n, i);
}

/* Sort by (bound, guess): a quicksort with the comparison inlined (qsort's callback was a
 * visible share of the search), insertion sort for short runs. */
static void sort_cands(Cand *a, int n) {
    while (n > 16) {
        Cand *m = a + n / 2, *z = a + n - 1, t;
        if (cand_less(m, a)) { t = *m; *m = *a; *a = t; }
        if (cand_less(z, m)) { t = *z; *z = *m; *m = t; }
        if (cand_less(m, a)) { t = *m; *m = *a; *a = t; }
        Cand pivot = *m;
        int i = 0, j = n - 1;
        for (;;) {
            while (cand_less(&a[i], &pivot)) i++;
            while (cand_less(&pivot, &a[j])) j--;
            if (i >= j) break;
            t = a[i]; a[i] = a[j]; a[j] = t;
            i++; j--;
        }
        /* [0, j] <= pivot <= [j+1, n): recurse into the smaller side, loop on the other. */
        if (j + 1 < n - j - 1) { sort_cands(a, j + 1); a += j + 1; n -= j + 1; }
        else { sort_cands(a + j + 1, n - j - 1); n = j + 1; }
    }
    for (int i = 1; i < n; i++) {
        Cand x = a[i];
        int j = i;
        while (j > 0 && cand_less(&x, &a[j - 1])) { a[j] = a[j - 1]; j--; }
        a[j] = x;
    }
}

/* Sets of three: a member that separates the other two is optimal (it reaches the bound);
 * otherwise compare a member (1 + 2 + 3 guesses) with a non-member that splits all three. */
static int64_t solve3(const uint16_t *S, int d, int *best_guess) {
    int64_t c1 = cost[d + 1], c2 = cost[d + 2], c3 = cost[d + 3];
    for (int i = 0; i < 3; i++) {
        int g = S[i], a = S[(i + 1) % 3], b = S[(i + 2) % 3];
        if (resp[(size_t)g * N + a] != resp[(size_t)g * N + b]) { *best_guess = g; return c1 + 2 * c2; }
    }
    *best_guess = S[0];
    int64_t best = c1 + c2 + c3;
    if (3 * c2 < best) {
        for (int g = 0; g < N; g++) {
            const uint8_t *r = resp + (size_t)g * N;
            if (r[S[0]] != r[S[1]] && r[S[0]] != r[S[2]] && r[S[1]] != r[S[2]]) {
                *best_guess = g;
                return 3 * c2;
            }
        }
    }
    return best;
}

/*
 * One-ply bounds of every guess, the solver's hot loop (every probe and every search runs it
 * over all N guesses).
 *
 * bound(g) = [g in S] cost[d+1] + sum over the other parts P of g's partition of S of the
 * capacity bound LB(d+1, |P|).  That capacity bound is convex and piecewise linear in |P|:
 *     LB(d+1, m) = m cost[d+2] + sum_j slope_j max(0, m - cap[j]),
 *     slope_j = cost[d+2+j] - cost[d+1+j],  cap[1] = 1,
 * so for the j = 1 term the sum over parts only needs the number of parts:
 * sum_P max(0, |P| - 1) = (n - hit) - parts.  That gives
 *     bound'(g) = hit cost[d+1] + (n - hit) cost[d+2] + slope_1 ((n - hit) - parts),
 * a lower bound of bound(g) which is exact unless some part can be larger than cap[2]
 * (impossible when (n - hit) - parts + 1 <= cap[2]).
 *
 * bound' needs only which responses occur, not how often: a bit mask per guess, OR-ed over
 * the members of S.  With SSSE3 that is two byte shuffles and two ORs per 16 guesses and
 * member (the response id picks its bit from a 16-entry table), against one scattered
 * read-modify-write increment per guess and member for counting.  The few guesses whose
 * bound' is not exact and still matters are finished one by one (exact_bound()).
 *
 * gbound[g] receives bound'(g), or USELESS when g puts all of S in one unsolved part;
 * gexact[g] says whether it is already exact.  Sets larger than MASK_MAX are counted.
 */
#if defined(__SSSE3__)
#include <tmmintrin.h>
#endif
#define USELESS INT64_MAX
#define BLK 64
static int64_t *bound_buf[MAXD + 2];
static uint8_t *mask_lo, *mask_hi;
static uint8_t *key_buf;
static uint8_t *inexact_buf;
static uint64_t member_key[64];     /* random keys for partition signatures */                /* per guess, padded to a multiple of BLK */

typedef struct { int64_t c1, c2, slope[8]; int thr[8]; int nt; } BoundCoef;

static void bound_coef(BoundCoef *bc, int d, int n) {
    bc->c1 = cost[d + 1];
    bc->c2 = cost[d + 2];
    bc->nt = 0;
    for (int j = 1; j < 8 && cap[j] < n; j++) {
        bc->thr[bc->nt] = (int)cap[j];
        bc->slope[bc->nt] = cost[d + 2 + j] - cost[d + 1 + j];
        bc->nt++;
    }
}

/* The exact bound(g), by counting g's parts. */
static int64_t exact_bound(const uint16_t *S, int n, const BoundCoef *bc, int g) {
    int c[NRMAX];
    memset(c, 0, sizeof(int) * NR);
    const uint8_t *r = resp + (size_t)g * N;
    for (int i = 0; i < n; i++) c[r[S[i]]]++;
    int hit = c[SOLVED], rest = n - hit, parts = 0;
    c[SOLVED] = 0;
    for (int k = 0; k < NR; k++) parts += c[k] != 0;
    if (!hit && parts == 1) return USELESS;
    int64_t b = (hit ? bc->c1 : 0) + (int64_t)rest * bc->c2;
    if (bc->nt > 0) b += bc->slope[0] * (rest - parts);
    for (int t = 1; t < bc->nt; t++) {
        int th = bc->thr[t], sum = 0;
        for (int k = 0; k < NR; k++) sum += c[k] > th ? c[k] - th : 0;
        b += bc->slope[t] * sum;
    }
    return b;
}

/* AVX-512BW kernels (chosen at run time, see init()): 64 guesses per instruction.  The
 * counting one keeps one byte counter per response and guess in registers (a compare to a
 * mask and a masked add per response and member) instead of one scattered increment per
 * guess and member, which pays for counting every guess rather than one per family of
 * interchangeable symbols. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512 1
static int use_avx512 = 0;

__attribute__((target("avx512f,avx512bw")))
static void guess_bounds_512(const uint16_t *S, int n, const BoundCoef *bc, int64_t *gbound) {
    const __m512i ONE = _mm512_set1_epi8(1);
    uint8_t hitb[BLK], partsb[BLK], excb[8][BLK];
    for (int g0 = 0; g0 < N; g0 += BLK) {
        __m512i c[16];
        for (int k = 0; k < 16; k++) c[k] = _mm512_setzero_si512();
        for (int i = 0; i < n; i++) {
            const uint8_t *row = resp + (size_t)S[i] * N + g0;
            _mm_prefetch((const char *)(row + BLK), _MM_HINT_T0);   /* the next block's line */
            __m512i v = _mm512_loadu_si512((const void *)row);
            for (int k = 0; k < 16; k++) {
                __mmask64 m = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8((char)k));
                c[k] = _mm512_mask_add_epi8(c[k], m, c[k], ONE);
            }
        }
        __m512i parts = _mm512_setzero_si512();
        __m512i exc[8];
        for (int t = 0; t < 8; t++) exc[t] = _mm512_setzero_si512();
        for (int k = 0; k < 16; k++) {
            if (k == SOLVED) continue;
            parts = _mm512_mask_add_epi8(parts, _mm512_test_epi8_mask(c[k], c[k]), parts, ONE);
            for (int t = 1; t < bc->nt; t++)
                exc[t] = _mm512_add_epi8(exc[t], _mm512_subs_epu8(c[k],
                                         _mm512_set1_epi8((char)bc->thr[t])));
        }
        _mm512_storeu_si512((void *)hitb, c[SOLVED]);
        _mm512_storeu_si512((void *)partsb, parts);
        for (int t = 1; t < bc->nt; t++) _mm512_storeu_si512((void *)excb[t], exc[t]);
        int gb = N - g0 < BLK ? N - g0 : BLK;
        for (int j = 0; j < gb; j++) {
            int hit = hitb[j] != 0, np = partsb[j], rest = n - hit;
            if (!hit && np == 1) { gbound[g0 + j] = USELESS; continue; }
            int64_t b = (hit ? bc->c1 : 0) + (int64_t)rest * bc->c2;
            if (bc->nt > 0) b += bc->slope[0] * (rest - np);
            for (int t = 1; t < bc->nt; t++) b += bc->slope[t] * excb[t][j];
            gbound[g0 + j] = b;
        }
    }
}

__attribute__((target("avx512f,avx512bw")))
static void mask_scan_512(const uint16_t *S, int n) {
    uint8_t lot[16], hit8[16];
    for (int k = 0; k < 16; k++) {
        lot[k] = k < 8 ? (uint8_t)(1 << k) : 0;
        hit8[k] = k >= 8 ? (uint8_t)(1 << (k - 8)) : 0;
    }
    const __m512i LO = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)lot));
    const __m512i HI = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)hit8));
    for (int g0 = 0; g0 < N; g0 += BLK) {
        __m512i l = _mm512_setzero_si512(), h = l;
        for (int i = 0; i < n; i++) {
            const uint8_t *row = resp + (size_t)S[i] * N + g0;
            _mm_prefetch((const char *)(row + BLK), _MM_HINT_T0);
            __m512i v = _mm512_loadu_si512((const void *)row);
            l = _mm512_or_si512(l, _mm512_shuffle_epi8(LO, v));
            h = _mm512_or_si512(h, _mm512_shuffle_epi8(HI, v));
        }
        _mm512_storeu_si512((void *)(mask_lo + g0), l);
        _mm512_storeu_si512((void *)(mask_hi + g0), h);
    }
}
#endif

/* Whether counting every guess beats counting one per family of interchangeable symbols. */
static inline int fast_counting(void) {
#ifdef HAVE_AVX512
    return use_avx512;
#else
    return 0;
#endif
}

/* Exact bound of every guess by counting: the counts of a block of BLK guesses stay in L1
 * while the members' rows are read slice by slice (bytes when n < 256). */
static void guess_bounds(const uint16_t *S, int n, int d, int64_t *gbound) {
    BoundCoef bc;
    bound_coef(&bc, d, n);
#ifdef HAVE_AVX512
    if (use_avx512 && n <= 255 && NR <= 16 && d + 10 <= MAXD) {
        guess_bounds_512(S, n, &bc, gbound);
        return;
    }
#endif
    if (n > 255 || NR > 16 || d + 10 > MAXD) {
        for (int g = 0; g < N; g++) gbound[g] = exact_bound(S, n, &bc, g);
        return;
    }
    uint8_t cnt[BLK * 16] __attribute__((aligned(64)));
    for (int g0 = 0; g0 < N; g0 += BLK) {
        int gb = N - g0 < BLK ? N - g0 : BLK;
        memset(cnt, 0, (size_t)gb * 16);
        for (int i = 0; i < n; i++) {
            const uint8_t *row = resp + (size_t)S[i] * N + g0;
            for (int j = 0; j < gb; j++) cnt[j * 16 + row[j]]++;
        }
        for (int j = 0; j < gb; j++) {
            uint8_t *c = cnt + j * 16;
            int hit = c[SOLVED];
            c[SOLVED] = 0;
            int rest = n - hit, parts = 0;
            for (int k = 0; k < 16; k++) parts += c[k] != 0;
            if (!hit && parts == 1) { gbound[g0 + j] = USELESS; continue; }
            int64_t b = (hit ? bc.c1 : 0) + (int64_t)rest * bc.c2;
            if (bc.nt > 0) b += bc.slope[0] * (rest - parts);
            for (int t = 1; t < bc.nt; t++) {
                int th = bc.thr[t], sum = 0;
                for (int k = 0; k < 16; k++) sum += c[k] > th ? c[k] - th : 0;
                b += bc.slope[t] * sum;
            }
            gbound[g0 + j] = b;
        }
    }
}

/* The guesses that are smallest among those obtained by permuting class-A symbols among
 * themselves and class-F symbols among themselves (canon(g) == g), for the class pattern of
 * sy; cached by pattern, since a search meets few distinct patterns. */
typedef struct { uint32_t key; int count; uint16_t *list; uint8_t *in; uint16_t *cidx; } AfList;
#ifndef AF_BITS
#define AF_BITS 12
#endif
enum { AF_SLOTS = 1 << AF_BITS };
static uint64_t st_af_misses;
static AfList af_cache[AF_SLOTS];

static AfList *af_entry(const Sym *sy) {
    uint32_t key = 1;
    for (int s = 0; s < NSYM; s++) key = key * 3 + (uint32_t)sy->cls[s];
    AfList *e = &af_cache[(key * 2654435761u) >> (32 - AF_BITS)];
    if (e->list && e->key == key) return e;
    st_af_misses++;
    if (!e->list) {
        e->list = malloc(sizeof(uint16_t) * (size_t)N);
        e->in = malloc((size_t)N);
        e->cidx = malloc(sizeof(uint16_t) * (size_t)N);
    }
    int m = 0;
    for (int g = 0; g < N; g++) {
        e->cidx[g] = (uint16_t)canon(sy, codes[g]);
        e->in[g] = e->cidx[g] == g;
        if (e->in[g]) e->list[m++] = (uint16_t)g;
    }
    e->key = key;
    e->count = m;
    return e;
}

static const uint16_t *af_canonical(const Sym *sy, int *count) {
    AfList *e = af_entry(sy);
    *count = e->count;
    return e->list;
}

static void af_cache_clear(void) {
    for (int i = 0; i < AF_SLOTS; i++) {
        free(af_cache[i].list);
        free(af_cache[i].in);
        free(af_cache[i].cidx);
        af_cache[i].list = NULL;
        af_cache[i].in = NULL;
        af_cache[i].cidx = NULL;
    }
}

/* is_canonical() with the class canonicalisation read from the pattern's cached table. */
static int is_canonical_af(const Sym *sy, const AfList *af, int g) {
    if (af->cidx[g] != g) return 0;
    const uint8_t *x = codes[g];
    for (int k = 0; k < sy->ng; k++) {
        uint8_t y[MAXL];
        for (int i = 0; i < L; i++) {
            int s = x[sy->sigma[k][i]];
            y[i] = (uint8_t)(sy->pi[k][s] >= 0 ? sy->pi[k][s] : s);
        }
        if (af->cidx[index_of[packed(y)]] < g) return 0;
    }
    return 1;
}

/* guess_bounds() for the listed guesses only (gbound indexed by guess); n <= 255. */
static void guess_bounds_list(const uint16_t *S, int n, int d, const uint16_t *list, int m,
                              int64_t *gbound) {
    BoundCoef bc;
    bound_coef(&bc, d, n);
    uint8_t cnt[BLK * 16] __attribute__((aligned(64)));
    for (int j0 = 0; j0 < m; j0 += BLK) {
        int jb = m - j0 < BLK ? m - j0 : BLK;
        const uint16_t *lj = list + j0;
        memset(cnt, 0, (size_t)jb * 16);
        for (int i = 0; i < n; i++) {
            const uint8_t *row = resp + (size_t)S[i] * N;
            for (int j = 0; j < jb; j++) cnt[j * 16 + row[lj[j]]]++;
        }
        for (int j = 0; j < jb; j++) {
            uint8_t *c = cnt + j * 16;
            int hit = c[SOLVED];
            c[SOLVED] = 0;
            int rest = n - hit, parts = 0;
            for (int k = 0; k < 16; k++) parts += c[k] != 0;
            if (!hit && parts == 1) { gbound[lj[j]] = USELESS; continue; }
            int64_t b = (hit ? bc.c1 : 0) + (int64_t)rest * bc.c2;
            if (bc.nt > 0) b += bc.slope[0] * (rest - parts);
            for (int t = 1; t < bc.nt; t++) {
                int th = bc.thr[t], sum = 0;
                for (int k = 0; k < 16; k++) sum += c[k] > th ? c[k] - th : 0;
                b += bc.slope[t] * sum;
            }
            gbound[lj[j]] = b;
        }
    }
}

/* mask_lo/mask_hi[g]: which responses guess g gets from the members of S (bit = response id). */
static void mask_scan(const uint16_t *S, int n) {
#ifdef HAVE_AVX512
    if (use_avx512) { mask_scan_512(S, n); return; }
#endif
    int nblk = (N + BLK - 1) / BLK;
#if defined(__SSSE3__)
    uint8_t lot[16], hit8[16];
    for (int k = 0; k < 16; k++) {
        lot[k] = k < 8 ? (uint8_t)(1 << k) : 0;
        hit8[k] = k >= 8 ? (uint8_t)(1 << (k - 8)) : 0;
    }
    const __m128i LO = _mm_loadu_si128((const __m128i *)lot);
    const __m128i HI = _mm_loadu_si128((const __m128i *)hit8);
    for (int b = 0; b < nblk; b++) {
        int g0 = b * BLK;
        __m128i l0 = _mm_setzero_si128(), l1 = l0, l2 = l0, l3 = l0;
        __m128i h0 = l0, h1 = l0, h2 = l0, h3 = l0;
        for (int i = 0; i < n; i++) {
            const uint8_t *row = resp + (size_t)S[i] * N + g0;
            __m128i v0 = _mm_loadu_si128((const __m128i *)row);
            __m128i v1 = _mm_loadu_si128((const __m128i *)(row + 16));
            __m128i v2 = _mm_loadu_si128((const __m128i *)(row + 32));
            __m128i v3 = _mm_loadu_si128((const __m128i *)(row + 48));
            l0 = _mm_or_si128(l0, _mm_shuffle_epi8(LO, v0));
            h0 = _mm_or_si128(h0, _mm_shuffle_epi8(HI, v0));
            l1 = _mm_or_si128(l1, _mm_shuffle_epi8(LO, v1));
            h1 = _mm_or_si128(h1, _mm_shuffle_epi8(HI, v1));
            l2 = _mm_or_si128(l2, _mm_shuffle_epi8(LO, v2));
            h2 = _mm_or_si128(h2, _mm_shuffle_epi8(HI, v2));
            l3 = _mm_or_si128(l3, _mm_shuffle_epi8(LO, v3));
            h3 = _mm_or_si128(h3, _mm_shuffle_epi8(HI, v3));
        }
        _mm_storeu_si128((__m128i *)(mask_lo + g0), l0);
        _mm_storeu_si128((__m128i *)(mask_lo + g0 + 16), l1);
        _mm_storeu_si128((__m128i *)(mask_lo + g0 + 32), l2);
        _mm_storeu_si128((__m128i *)(mask_lo + g0 + 48), l3);
        _mm_storeu_si128((__m128i *)(mask_hi + g0), h0);
        _mm_storeu_si128((__m128i *)(mask_hi + g0 + 16), h1);
        _mm_storeu_si128((__m128i *)(mask_hi + g0 + 32), h2);
        _mm_storeu_si128((__m128i *)(mask_hi + g0 + 48), h3);
    }
#else
    memset(mask_lo, 0, (size_t)nblk * BLK);
    memset(mask_hi, 0, (size_t)nblk * BLK);
    for (int i = 0; i < n; i++) {
        const uint8_t *row = resp + (size_t)S[i] * N;
        for (int g = 0; g < N; g++) {
            int k = row[g];
            if (k < 8) mask_lo[g] |= (uint8_t)(1 << k); else mask_hi[g] |= (uint8_t)(1 << (k - 8));
        }
    }
#endif
}

/* key[g] = [g gets "solved"] * 16 + number of other responses g gets, from the masks;
 * returns the set of keys that occur (bit k for key k). */
static uint32_t probe_keys(uint8_t *key) {
    const unsigned sbit = 1u << SOLVED;
    const uint8_t slo = (uint8_t)(sbit & 0xFF), shi = (uint8_t)(sbit >> 8);
    uint32_t present = 0;
    int g = 0;
#if defined(__SSSE3__)
    /* Which keys occur: key k sets bit k % 8 of byte group k / 8 (k - 8q clamped to 8, which
     * the table maps to nothing). */
    const __m128i BIT = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, (char)128, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128i EIGHT = _mm_set1_epi8(8);
    __m128i seen[4];
    for (int q = 0; q < 4; q++) seen[q] = _mm_setzero_si128();
    const __m128i POP = _mm_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m128i NIB = _mm_set1_epi8(0x0F), ZERO = _mm_setzero_si128();
    const __m128i SLO = _mm_set1_epi8((char)slo), SHI = _mm_set1_epi8((char)shi);
    const __m128i SIXTEEN = _mm_set1_epi8(16);
    for (; g + 16 <= N; g += 16) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(mask_lo + g));
        __m128i hi = _mm_loadu_si128((const __m128i *)(mask_hi + g));
        __m128i hit = _mm_or_si128(_mm_and_si128(lo, SLO), _mm_and_si128(hi, SHI));
        __m128i lo2 = _mm_andnot_si128(SLO, lo), hi2 = _mm_andnot_si128(SHI, hi);
        __m128i pc = _mm_add_epi8(
            _mm_add_epi8(_mm_shuffle_epi8(POP, _mm_and_si128(lo2, NIB)),
                         _mm_shuffle_epi8(POP, _mm_and_si128(_mm_srli_epi16(lo2, 4), NIB))),
            _mm_add_epi8(_mm_shuffle_epi8(POP, _mm_and_si128(hi2, NIB)),
                         _mm_shuffle_epi8(POP, _mm_and_si128(_mm_srli_epi16(hi2, 4), NIB))));
        __m128i h16 = _mm_andnot_si128(_mm_cmpeq_epi8(hit, ZERO), SIXTEEN);
        __m128i kv = _mm_add_epi8(pc, h16);
        _mm_storeu_si128((__m128i *)(key + g), kv);
        for (int q = 0; q < 4; q++) {
            __m128i idx = _mm_min_epu8(_mm_sub_epi8(kv, _mm_set1_epi8((char)(8 * q))), EIGHT);
            seen[q] = _mm_or_si128(seen[q], _mm_shuffle_epi8(BIT, idx));
        }
    }
    for (int q = 0; q < 4; q++) {
        uint8_t b[16];
        _mm_storeu_si128((__m128i *)b, seen[q]);
        uint32_t any = 0;
        for (int i = 0; i < 16; i++) any |= b[i];
        present |= any << (8 * q);
    }
#endif
    for (; g < N; g++) {
        unsigned m = (unsigned)mask_lo[g] | (unsigned)mask_hi[g] << 8;
        key[g] = (uint8_t)((m & sbit ? 16 : 0) + __builtin_popcount(m & ~sbit));
        present |= 1u << key[g];
    }
    return present;
}

/* min over guesses of bound(g) (INF if no guess is useful), for probes: bound' from the
 * response masks, grouped by (hit, parts), which is all bound' depends on; groups are visited
 * in increasing bound' and the inexact members of a group are finished by exact_bound() only
 * while they can still beat the best exact bound found. */
#define MASK_MAX 64                       /* sets this big are counted, not masked */
static int64_t probe_bound(const uint16_t *S, int n, int d) {
    BoundCoef bc;
    bound_coef(&bc, d, n);
    Sym *sy = &sym_buf[d];                      /* classes only: equivalent guesses, equal bounds */
    sym_classes(sy, S, n, hist, d);
    if (NR > 16 || d + 10 > MAXD || n >= MASK_MAX) {
        /* Big sets: most guesses would need finishing, counting them all is cheaper (only
         * one guess per family of interchangeable symbols, when that saves enough). */
        int64_t *gb = bound_buf[d];
        int m;
        const uint16_t *list = af_canonical(sy, &m);
        int64_t best = INF;
        if (!fast_counting() && m * 4 < N * 3 && n <= 255 && NR <= 16 && d + 10 <= MAXD) {
            guess_bounds_list(S, n, d, list, m, gb);
            for (int j = 0; j < m; j++)
                if (gb[list[j]] < best) best = gb[list[j]];
        } else {
            guess_bounds(S, n, d, gb);
            for (int g = 0; g < N; g++)
                if (gb[g] < best) best = gb[g];
        }
        return best;
    }
    mask_scan(S, n);
    /* key[g] = hit * 16 + parts (parts: responses other than "solved"), which is all that
     * bound' depends on.  A key is exact when no part can exceed cap[2]; the inexact guesses
     * of a key are finished one by one, class-canonical ones only (equivalent guesses have
     * equal bounds), while they can still beat the best bound found. */
    uint8_t *key = key_buf;
    uint32_t present = probe_keys(key);
    const int thr2 = bc.nt > 1 ? bc.thr[1] : n;
    const int64_t slope1 = bc.nt > 0 ? bc.slope[0] : 0;
    enum { NKEY = 32 };
    int64_t kval[NKEY];
    int order[NKEY], nk = 0;
    for (int k = 0; k < NKEY; k++) {
        int hit = k / 16, parts = k % 16, rest = n - hit;
        if (!(present >> k & 1) || (!hit && parts <= 1)) continue;   /* absent, or useless */
        kval[k] = (hit ? bc.c1 : 0) + (int64_t)rest * bc.c2 + slope1 * (rest - parts);
        int a = nk++;
        while (a > 0 && kval[order[a - 1]] > kval[k]) { order[a] = order[a - 1]; a--; }
        order[a] = k;
    }
    const uint8_t *in = af_entry(sy)->in;
    int64_t best = INF;
    for (int a = 0; a < nk; a++) {
        int k = order[a];
        if (kval[k] >= best) break;
        int hit = k / 16, parts = k % 16;
        if (n - hit - parts + 1 <= thr2) { best = kval[k]; break; }  /* exact: unbeatable */
        for (int g0 = 0; g0 < N; g0 += 16) {             /* key[] is padded past N */
            unsigned hits = 0;
#if defined(__SSSE3__)
            hits = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
                _mm_loadu_si128((const __m128i *)(key + g0)), _mm_set1_epi8((char)k)));
#else
            for (int j = 0; j < 16; j++) hits |= (unsigned)(key[g0 + j] == k) << j;
#endif
            while (hits) {
                int g = g0 + __builtin_ctz(hits);
                hits &= hits - 1;
                if (g >= N || !in[g]) continue;
                int64_t b = exact_bound(S, n, &bc, g);
                if (b < best) best = b;
                if (best <= kval[k]) return best;         /* the group's floor: unbeatable */
            }
        }
    }
    return best;
}

/* Bounds for a search node: exact for every guess that can be a candidate (< beta) or can be
 * the smallest bound left out; the others keep bound' (>= beta and >= that smallest one), so
 * gen_cands() sees the same candidates and the same smallest skipped bound as with exact ones. */
#ifndef SEARCH_MASK_MAX
#define SEARCH_MASK_MAX 15
#endif
static void search_bounds(const uint16_t *S, int n, int d, int64_t beta, int64_t *gbound) {
    if (NR > 16 || d + 10 > MAXD || n > SEARCH_MASK_MAX) {
        guess_bounds(S, n, d, gbound);
        return;
    }
    BoundCoef bc;
    bound_coef(&bc, d, n);
    mask_scan(S, n);
    const unsigned solved_bit = 1u << SOLVED;
    const int thr2 = bc.nt > 1 ? bc.thr[1] : n;
    const int64_t slope1 = bc.nt > 0 ? bc.slope[0] : 0;
    uint8_t *inexact = inexact_buf;
    int64_t m1 = INF;
    int any_inexact = 0;
    for (int g = 0; g < N; g++) {
        unsigned m = (unsigned)mask_lo[g] | (unsigned)mask_hi[g] << 8;
        int hit = (m & solved_bit) != 0;
        int parts = __builtin_popcount(m & ~solved_bit);
        inexact[g] = 0;
        if (!hit && parts <= 1) { gbound[g] = USELESS; continue; }
        int rest = n - hit;
        int64_t b = (hit ? bc.c1 : 0) + (int64_t)rest * bc.c2 + slope1 * (rest - parts);
        gbound[g] = b;
        if (rest - parts + 1 <= thr2) {
            if (b >= beta && b < m1) m1 = b;
        } else {
            inexact[g] = 1;
            any_inexact = 1;
        }
    }
    if (!any_inexact) return;
    for (int g = 0; g < N; g++)
        if (inexact[g] && (gbound[g] < beta || gbound[g] < m1)) gbound[g] = exact_bound(S, n, &bc, g);
}

/* Partition dedup for small sets: a guess whose partition of S (as a set of parts, plus which
 * part is "solved") equals an earlier one's has the same value, so only the first of them (in
 * the order guesses are tried) is searched.  Checked lazily, when a guess is about to be
 * tried: most candidates never are, and the signature reads n scattered table entries.
 * Guesses with equal partitions have equal bounds, so the first in (bound, guess) order is
 * also the smallest guess, whichever of them are tried. */
enum { DEDUP_MAX = 48, DSLOTS = 4096 };
static uint64_t dd_sig[MAXD + 2][DSLOTS];
static uint32_t dd_stamp[MAXD + 2][DSLOTS], dd_gen[MAXD + 2];
static int dd_count[MAXD + 2];

static void dedup_reset(int d) {
    if (++dd_gen[d] == 0) { memset(dd_stamp[d], 0, sizeof(dd_stamp[d])); dd_gen[d] = 1; }
    dd_count[d] = 0;
}

/* 1 if g splits S like a guess already seen at this depth since dedup_reset (then skip g). */
static int dedup_seen(const uint16_t *S, int n, int d, int g) {
    if (n > DEDUP_MAX || dd_count[d] >= DSLOTS / 2) return 0;   /* table full: no dedup */
    /* Signature independent of how the parts are labelled: a part hashes to the sum of its
     * members' random keys (members by position in S), the parts' hashes are mixed and
     * summed; the solved part is tagged. */
    const uint8_t *r = resp + (size_t)g * N;
    uint64_t ph[NRMAX];
    memset(ph, 0, sizeof(uint64_t) * NR);
    for (int i = 0; i < n; i++) ph[r[S[i]]] += member_key[i];
    ph[SOLVED] ^= 0xA5A5A5A5A5A5A5A5ULL;
    uint64_t sig = 0;
    for (int k = 0; k < NR; k++) {
        if (!ph[k]) continue;
        uint64_t z = ph[k] * 0xbf58476d1ce4e5b9ULL;
        z ^= z >> 31;
        z *= 0x94d049bb133111ebULL;
        sig += z ^ (z >> 29);
    }
    size_t slot = sig & (DSLOTS - 1);
    while (dd_stamp[d][slot] == dd_gen[d]) {
        if (dd_sig[d][slot] == sig) return 1;
        slot = (slot + 1) & (DSLOTS - 1);
    }
    dd_stamp[d][slot] = dd_gen[d];
    dd_sig[d][slot] = sig;
    dd_count[d]++;
    return 0;
}

/* The guesses worth trying at a node, in cand_buf[d] sorted by bound (returns how many):
 * canonical under symmetry, useful (they split S or hit it), and with a bound that can still
 * beat beta (guesses with the same partition as an earlier one are left to dedup_seen()).  *skipped receives the smallest bound of the guesses
 * left out for their bound (INF if none), which a failing search still needs. */
static int gen_cands(const uint16_t *S, int n, int d, int64_t beta, int64_t *skipped,
                     int full_sort) {
    Sym *sy = &sym_buf[d];
    sym_setup(sy, S, n, hist, d);
    Cand *cands = cand_buf[d];
    int nc = 0;
    int64_t min_skipped = INF;                     /* smallest bound of a guess left out */
    /* One-ply bounds.  Guesses that only differ by interchangeable symbols (class A or F)
     * have equal bounds, so only the smallest of each such family is bounded at all when
     * that leaves out enough of them to pay for the indirection. */
    int64_t *gbound = bound_buf[d];
    AfList *af = af_entry(sy);
    int m = af->count;
    const uint16_t *list = af->list;
    int use_list = m * 4 < N * 3 && n > SEARCH_MASK_MAX && n <= 255 && NR <= 16 && d + 10 <= MAXD;
    if (use_list && fast_counting()) guess_bounds(S, n, d, gbound);   /* all, then the list */
    else if (use_list) guess_bounds_list(S, n, d, list, m, gbound);
    else search_bounds(S, n, d, beta, gbound);
    int ng = use_list ? m : N;
    for (int j = 0; j < ng; j++) {
        int g = use_list ? list[j] : j;
        int64_t b = gbound[g];
        if (b == USELESS) continue;                    /* learns nothing */
        if (b >= beta) {
            /* Equivalent guesses have equal bounds: no symmetry test needed for a minimum. */
            if (b < min_skipped) min_skipped = b;
            continue;
        }
        if (!is_canonical_af(sy, af, g)) continue;
        cands[nc].bound = b;
        cands[nc].guess = g;
        nc++;
    }
    st_guesses += (uint64_t)nc;
    if (full_sort) sort_cands(cands, nc);
    else heapify_cands(cands, nc);     /* the search takes them in order, most never */
    *skipped = min_skipped;
    return nc;
}

/*
 * value of S at depth d (d == number of guesses in hist).  Exact if < beta; otherwise a lower
 * bound >= beta.  *best_guess receives the best guess when the result is exact.
 *
 * With probe != 0 the node is not searched: the result is only the one-ply lower bound
 * min over guesses of ([g in S] cost[d+1] + sum of the parts' capacity bounds), remembered in
 * the transposition table.  The parent probes every part of a guess before descending into
 * any of them, so a guess whose parts are each a little worse than their size suggests is
 * rejected without a deep search (the deep search of a part would have repeated that same
 * scan anyway).
 */
static int64_t search(const uint16_t *S, int n, int d, int64_t beta, int *best_guess, int probe) {
    *best_guess = -1;
    if (n == 0) return 0;
    if (n == 1) { *best_guess = S[0]; return cost[d + 1]; }
    if (d + 3 > MAXD) return INF;                  /* deeper than we track: hopeless */
    if (n == 2) { *best_guess = S[0]; return cost[d + 1] + cost[d + 2]; }
    int64_t lb = LB(d, n);
    if (lb >= beta) return lb;
    if (n == 3) return solve3(S, d, best_guess);
    st_nodes++;

    /* Transposition table. */
    uint64_t h = hash_set(S, n, d);
    TTEntry *e = tt_find(S, n, d, h);
    if (e->key) {
        st_tt_hits++;
        if (e->exact) { *best_guess = e->guess; return e->value; }
        if (e->value >= beta) return e->value;
        if (e->value > lb) lb = e->value;
        if (probe) return lb;                      /* already probed (or better) */
    }

    /* A member splitting the rest into singletons reaches the capacity bound when n <= NRESP:
     * nothing can beat it. */
    if (n <= NRESP) {
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
        /* Only the smallest one-ply bound matters (see probe_bound()). */
        int64_t v = probe_bound(S, n, d);
        if (v < lb) v = lb;
        if (v > LB(d, n)) tt_store(S, n, d, v, 0, -1);
        return v;
    }

    /* Generate guesses (see gen_cands()). */
    int64_t min_skipped;
    int nc = gen_cands(S, n, d, beta, &min_skipped, 0);
    Cand *cands = cand_buf[d];            /* a heap: popped in (bound, guess) order */

    /* Try guesses in bound order.  For each: probe every part (one-ply bound), then replace
     * each part's bound by its exact value, largest part first, until the running total can
     * no longer beat the best. */
    int64_t best = beta, fail_lb = min_skipped;
    int bestg = -1;
    uint16_t *buf = part_buf[d];
    dedup_reset(d);
    for (int hn = nc; hn > 0;) {
        Cand top = cands[0];
        cands[0] = cands[--hn];
        heap_down(cands, hn, 0);
        int64_t total = top.bound;
        if (total >= best) { if (total < fail_lb) fail_lb = total; break; }
        int g = top.guess;
        if (dedup_seen(S, n, d, g)) continue;
        const uint8_t *r = resp + (size_t)g * N;
        /* Counting sort of S into parts by response. */
        int cnt[NRMAX], start[NRMAX + 1];
        memset(cnt, 0, sizeof(int) * NR);
        for (int i = 0; i < n; i++) cnt[r[S[i]]]++;
        start[0] = 0;
        for (int k = 0; k < NR; k++) start[k + 1] = start[k] + cnt[k];
        int pos[NRMAX];
        memcpy(pos, start, sizeof(int) * NR);
        for (int i = 0; i < n; i++) buf[pos[r[S[i]]]++] = S[i];
        /* Parts largest first (their bounds are the least accurate). */
        int order[NRMAX], no = 0;
        for (int k = 0; k < NR; k++)
            if (cnt[k] && k != SOLVED) order[no++] = k;
        for (int a = 1; a < no; a++) {
            int x = order[a], b2 = a;
            while (b2 > 0 && cnt[order[b2 - 1]] < cnt[x]) { order[b2] = order[b2 - 1]; b2--; }
            order[b2] = x;
        }
        hist[d] = g;
        /* The parts' table slots are read first thing by their probes: start those misses
         * now, all at once, rather than one after the other. */
        for (int a = 0; a < no; a++) {
            int k = order[a];
            if (cnt[k] > 3)
                __builtin_prefetch(&tt[hash_set(buf + start[k], cnt[k], d + 1) & tt_mask]);
        }
        int ok = 1, child_best;
        int64_t plb[NRMAX];
        /* Pass 1: one-ply bounds of all parts (cheap for parts of <= 3, or known ones). */
        for (int a = 0; a < no && ok; a++) {
            int k = order[a];
            int64_t base = LB(d + 1, cnt[k]);
            plb[k] = base;
            if (cnt[k] <= 3) continue;
            int64_t v = search(buf + start[k], cnt[k], d + 1, best - (total - base), &child_best, 1);
            plb[k] = v;
            total += v - base;
            if (total >= best) ok = 0;
        }
        /* Pass 2: exact values. */
        for (int a = 0; a < no && ok; a++) {
            int k = order[a];
            int64_t v = search(buf + start[k], cnt[k], d + 1, best - (total - plb[k]), &child_best, 0);
            total += v - plb[k];
            if (total >= best) ok = 0;
        }
        if (ok) {
            best = total;
            bestg = g;
            if (best <= lb) break;                       /* reached the bound: optimal */
        } else if (total < fail_lb) {
            fail_lb = total;
        }
    }
    if (bestg >= 0) {
        *best_guess = bestg;
        tt_store(S, n, d, best, 1, bestg);
        return best;
    }
    /* Every guess failed against beta.  Each guess's total was a lower bound >= beta when it
     * stopped; guesses never tried had bounds >= the one that stopped the loop or were
     * skipped at generation (min_skipped).  The smallest of all these bounds S. */
    if (fail_lb < beta) fail_lb = beta;                /* (cannot happen; defensive) */
    if (fail_lb > INF / 2) fail_lb = beta;             /* no useful guess at all */
    if (fail_lb < lb) fail_lb = lb;
    tt_store(S, n, d, fail_lb, 0, -1);
    return fail_lb;
}

/* ------------------------------------------------------------------------------------ */
/* Capacities: how many secrets can be solved within j guesses, at most                   */
/* ------------------------------------------------------------------------------------ */
/*
 * cap(S, j) = max_g [g in S] + sum over non-solved parts P of cap(P, j-1), and a subset never
 * does better than the full code set.  Expanding two levels from the full set (the first guess
 * is one code per symmetry class: all codes are equivalent in MOO, five patterns for four-peg
 * Mastermind) and bounding the third level by min(|Q|, cap[j-2]):
 *   cap[j] <= max_g1 (1 + sum_P max_g2 ([g2 in P] + sum_Q min(|Q|, cap[j-2]))).
 * For j = 2, 3 this is exact (Tanaka's Table 1 for ten symbols: 14, 127).
 *
 * How it is computed (init() pays for it once per game, and a fresh `moo analyse` process pays
 * for init(), so this is kept cheap): the inner maximum needs, for every cell P and every
 * guess g2, the counts |Q| of the parts g2 splits P into.  Those counts do not depend on j,
 * so they are counted once per cell, for all guesses at once, by walking the rows of the
 * cell's codes (the table is symmetric: row s lists every guess's response to secret s), and
 * kept while memory allows; each j then only reads them.  The scan of the guesses for one cell
 * stops once a guess reaches min(|P|, 1 + (R-1) cap[j-2]), which no guess can exceed.
 */

/* H[g * NR + q] = how many codes of the cell P (n codes) answer guess g with response q. */
static void cell_hist(const uint16_t *P, int n, uint16_t *H) {
    memset(H, 0, sizeof(uint16_t) * (size_t)N * NR);
    for (int i = 0; i < n; i++) {
        const uint8_t *row = resp + (size_t)P[i] * N;
        for (int g = 0; g < N; g++) H[(size_t)g * NR + row[g]]++;
    }
}

/* max over g2 of [g2 in P] + sum over the other parts Q of min(|Q|, c), from the counts H. */
static int64_t cell_best(const uint16_t *H, int n, int64_t c) {
    int64_t top = 1 + (int64_t)(NR - 1) * c, best = 0;
    if (top > n) top = n;
    for (int g = 0; g < N && best < top; g++) {
        const uint16_t *h = H + (size_t)g * NR;
        int64_t v = h[SOLVED] ? 1 : 0;
        for (int q = 0; q < NR; q++)
            if (q != SOLVED) v += h[q] < c ? h[q] : c;
        if (v > best) best = v;
    }
    return best;
}

/* Kept counts above this many bytes are counted again for every j instead. */
#define CAP_HIST_BUDGET ((size_t)64 << 20)

static int is_canonical(const Sym *sy, int g);

static void compute_caps(void) {
    cap[0] = 0;
    cap[1] = 1;
    uint16_t *all = malloc(sizeof(uint16_t) * N);
    int *firsts = malloc(sizeof(int) * N);
    int nfirst = 0;
    if (!all || !firsts) {                    /* no memory: the trivial capacities */
        for (int j = 2; j <= MAXD + 1; j++) cap[j] = N;
        free(all); free(firsts);
        return;
    }
    for (int i = 0; i < N; i++) all[i] = (uint16_t)i;
    Sym *sy = &sym_buf[0];
    sym_setup(sy, all, N, hist, 0);
    for (int g = 0; g < N; g++)
        if (is_canonical(sy, g)) firsts[nfirst++] = g;
    /* The cells of every first guess: codes sorted by their response to it. */
    size_t hbytes = sizeof(uint16_t) * (size_t)N * NR;
    uint16_t *sorted = malloc(sizeof(uint16_t) * (size_t)N * nfirst);
    int (*start)[NRMAX + 1] = malloc(sizeof(*start) * nfirst);
    uint16_t **kept = calloc((size_t)nfirst * NRMAX, sizeof(uint16_t *));
    uint16_t *scratch = malloc(hbytes);
    if (!sorted || !start || !kept || !scratch) {
        for (int j = 2; j <= MAXD + 1; j++) cap[j] = N;
        free(all); free(firsts); free(sorted); free(start); free(kept); free(scratch);
        return;
    }
    size_t budget = CAP_HIST_BUDGET;
    for (int f = 0; f < nfirst; f++) {
        int cnt[NRMAX] = {0}, pos[NRMAX];
        const uint8_t *r1 = resp + (size_t)firsts[f] * N;
        uint16_t *mine = sorted + (size_t)N * f;
        for (int i = 0; i < N; i++) cnt[r1[i]]++;
        start[f][0] = 0;
        for (int k = 0; k < NR; k++) start[f][k + 1] = start[f][k] + cnt[k];
        memcpy(pos, start[f], sizeof(pos));
        for (int i = 0; i < N; i++) mine[pos[r1[i]]++] = (uint16_t)i;
        for (int k = 0; k < NR; k++) {
            int n = start[f][k + 1] - start[f][k];
            if (!n || k == SOLVED || hbytes > budget) continue;
            uint16_t *h = malloc(hbytes);
            if (!h) { budget = 0; continue; }
            cell_hist(mine + start[f][k], n, h);
            kept[(size_t)f * NRMAX + k] = h;
            budget -= hbytes;
        }
    }
    for (int j = 2; j <= MAXD + 1; j++) {
        if (cap[j - 1] >= N) { cap[j] = N; continue; }
        int64_t best = 0;
        for (int f = 0; f < nfirst; f++) {
            int64_t total = 1;
            for (int k = 0; k < NR; k++) {
                int n = start[f][k + 1] - start[f][k];
                if (!n || k == SOLVED) continue;
                const uint16_t *h = kept[(size_t)f * NRMAX + k];
                if (!h) {
                    cell_hist(sorted + (size_t)N * f + start[f][k], n, scratch);
                    h = scratch;
                }
                total += cell_best(h, n, cap[j - 2]);
            }
            if (total > best) best = total;
        }
        cap[j] = best < N ? best : N;
    }
    for (size_t i = 0; i < (size_t)nfirst * NRMAX; i++) free(kept[i]);
    free(all); free(firsts); free(sorted); free(start); free(kept); free(scratch);
}

/* LB(d, n): fill guess numbers d+1, d+2, ... greedily up to their capacities. */
static void compute_lbtab(void) {
    for (int d = 0; d <= MAXD; d++) {
        for (int n = 0; n <= N; n++) {
            int64_t v = 0;
            int left = n;
            for (int j = 1; left > 0; j++) {
                int64_t room = cap[j] - cap[j - 1];
                if (d + j > MAXD + 1) { v = INF; break; }
                int64_t take = left < room ? left : room;
                v += take * cost[d + j];
                left -= (int)take;
            }
            lbtab[(size_t)d * (N + 1) + n] = v;
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* Python interface                                                                       */
/* ------------------------------------------------------------------------------------ */
static void af_cache_clear(void);
static void free_tables(void) {
    af_cache_clear();
    free(codes); free(index_of); free(lbtab);
    big_free(resp, RESP_BYTES); big_free(tt, TT_BYTES); big_free(arena, ARENA_BYTES);
    codes = NULL; index_of = NULL; resp = NULL; lbtab = NULL; tt = NULL; arena = NULL;
    for (int d = 0; d < MAXD + 2; d++) { free(cand_buf[d]); free(part_buf[d]); cand_buf[d] = NULL; part_buf[d] = NULL; }
}

static void gen_perms(int *cur, int k, int used) {
    if (k == L) { memcpy(perms[nperms++], cur, sizeof(int) * MAXL); return; }
    for (int i = 0; i < L; i++)
        if (!(used >> i & 1)) { cur[k] = i; gen_perms(cur, k + 1, used | 1 << i); }
}

/* Codes in lexicographic order of symbol indices (= the Python rules' `secrets` order). */
static void gen_codes(uint8_t *cur, int k, int used, int *count) {
    if (k == L) { memcpy(codes[*count], cur, MAXL); (*count)++; return; }
    for (int s = 0; s < NSYM; s++)
        if (REPEATS || !(used >> s & 1)) {
            cur[k] = (uint8_t)s;
            gen_codes(cur, k + 1, used | 1 << s, count);
        }
}

/* resp[g * N + s] = score_codes(s, g) for every pair, as raw (bulls, cows) ids, filled by
 * symmetry; seen[r] says which ids occur.  The common-symbol count comes from per-code symbol
 * counts (Mastermind) or symbol sets. */
static void fill_raw_scores(int *seen) {
    uint16_t *set = malloc(sizeof(uint16_t) * (size_t)N);
    uint8_t (*cnt)[MAXSYM] = calloc((size_t)N, sizeof(*cnt));
    if (!set || !cnt) {                        /* no memory for the shortcut: the plain way */
        free(set); free(cnt);
        for (int g = 0; g < N; g++)
            for (int s = 0; s < N; s++) {
                int r = score_codes(codes[s], codes[g]);
                resp[(size_t)g * N + s] = (uint8_t)r;
                seen[r] = 1;
            }
        return;
    }
    for (int i = 0; i < N; i++) {
        set[i] = 0;
        for (int p = 0; p < L; p++) {
            set[i] |= (uint16_t)(1u << codes[i][p]);
            cnt[i][codes[i][p]]++;
        }
    }
    for (int g = 0; g < N; g++) {
        const uint8_t *a = codes[g];
        for (int s = g; s < N; s++) {
            const uint8_t *b = codes[s];
            int bulls = 0, common = 0;
            for (int p = 0; p < L; p++) bulls += a[p] == b[p];
            if (REPEATS) {
                for (int x = 0; x < NSYM; x++)
                    common += cnt[g][x] < cnt[s][x] ? cnt[g][x] : cnt[s][x];
            } else {
                common = __builtin_popcount((unsigned)(set[g] & set[s]));
            }
            int r = bulls * (L + 1) + (common - bulls);
            resp[(size_t)g * N + s] = resp[(size_t)s * N + g] = (uint8_t)r;
            seen[r] = 1;
        }
    }
    free(set);
    free(cnt);
}

/* compact[r]: the id 0..NRESP-1 of raw response r among those that occur (-1 if none). */
static void number_responses(const int *seen, int *compact) {
    NRESP = 0;
    for (int k = 0; k < NR; k++) {
        compact[k] = seen[k] ? NRESP : -1;
        if (seen[k]) rid_code[NRESP++] = k;
    }
}

/* The response table in compact ids, and compact[] (see number_responses).
 *
 * Distinct-symbol MOO, the case a fresh `moo analyse` process pays for: relabelling symbols
 * maps code 0 onto any code and keeps responses, so code 0's responses are every response
 * that occurs; with them numbered first, each row is written once, in order, straight in
 * compact ids (bulls from position-symbol bit masks, common symbols from symbol sets).  That
 * is a few times faster than filling by symmetry, whose column writes miss the cache, and
 * then renumbering the whole table.  Mastermind (and a machine without memory for the masks)
 * takes the general way. */
static void fill_scores(int *compact) {
    int seen[NRMAX] = {0};
    uint64_t *pm = REPEATS ? NULL : malloc(sizeof(uint64_t) * (size_t)N);
    uint16_t *set = REPEATS ? NULL : malloc(sizeof(uint16_t) * (size_t)N);
    if (!pm || !set) {
        free(pm); free(set);
        fill_raw_scores(seen);
        number_responses(seen, compact);
        for (size_t i = 0; i < (size_t)N * N; i++) resp[i] = (uint8_t)compact[resp[i]];
        return;
    }
    for (int i = 0; i < N; i++) {
        pm[i] = 0;
        set[i] = 0;
        for (int p = 0; p < L; p++) {
            pm[i] |= (uint64_t)1 << (p * NSYM + codes[i][p]);
            set[i] |= (uint16_t)(1u << codes[i][p]);
        }
    }
    for (int s = 0; s < N; s++) {
        int bulls = __builtin_popcountll(pm[0] & pm[s]);
        int common = __builtin_popcount((unsigned)(set[0] & set[s]));
        seen[bulls * (L + 1) + (common - bulls)] = 1;
    }
    number_responses(seen, compact);
    /* id[bulls][common] in compact ids; pairs that never occur are never looked up */
    uint8_t id[MAXL + 1][MAXL + 1];
    for (int b = 0; b <= L; b++)
        for (int c = 0; c <= L; c++)
            id[b][c] = (uint8_t)(c >= b && compact[b * (L + 1) + (c - b)] >= 0
                                 ? compact[b * (L + 1) + (c - b)] : 0);
    for (int g = 0; g < N; g++) {
        uint8_t *row = resp + (size_t)g * N;
        uint64_t pg = pm[g];
        unsigned sg = set[g];
        for (int s = 0; s < N; s++)
            row[s] = id[__builtin_popcountll(pg & pm[s])][__builtin_popcount(sg & set[s])];
    }
    free(pm);
    free(set);
}

PyDoc_STRVAR(init_doc,
"init(length, nsym, costs, tt_log2=22, repeats=False) -> caps\n\n"
"Build the tables for codes of `length` distinct symbols out of `nsym` (with `repeats`: every\n"
"code of `length` symbols, scored the Mastermind way); costs[k] is the cost of solving a\n"
"secret with guess number k (k = 0.. at least 20, increasing from k = 1).\n"
"Clears the transposition table. Returns the capacity list cap[j] used by the bound.");

static PyObject *py_init(PyObject *self, PyObject *args) {
    (void)self;
    int length, nsym, tt_log2 = 22, repeats = 0;
    PyObject *costs_obj;
    if (!PyArg_ParseTuple(args, "iiO|ip", &length, &nsym, &costs_obj, &tt_log2, &repeats))
        return NULL;
    if (length < 2 || length > MAXL || nsym < (repeats ? 2 : length) || nsym > MAXSYM) {
        PyErr_SetString(PyExc_ValueError, "unsupported game size");
        return NULL;
    }
    {
        double ncodes = 1;
        for (int i = 0; i < length; i++) ncodes *= repeats ? nsym : nsym - i;
        if (ncodes > 65535) {                  /* code indices are uint16 */
            PyErr_SetString(PyExc_ValueError, "too many codes for the solver (at most 65535)");
            return NULL;
        }
    }
    PyObject *seq = PySequence_Fast(costs_obj, "costs must be a sequence");
    if (!seq) return NULL;
    Py_ssize_t nc = PySequence_Fast_GET_SIZE(seq);
    if (nc < MAXD + 2) { Py_DECREF(seq); PyErr_Format(PyExc_ValueError, "need %d costs", MAXD + 2); return NULL; }
    for (int k = 0; k < MAXD + 2; k++) {
        cost[k] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, k));
    }
    Py_DECREF(seq);
    if (PyErr_Occurred()) return NULL;
    for (int k = 2; k < MAXD + 2; k++)
        if (cost[k] <= cost[k - 1]) { PyErr_SetString(PyExc_ValueError, "costs must increase"); return NULL; }

    free_tables();
#ifdef HAVE_AVX512
    {   /* MOO_SOLVER_NO_AVX512=1 forces the portable kernels (tests compare the two). */
        const char *off = getenv("MOO_SOLVER_NO_AVX512");
        __builtin_cpu_init();
        use_avx512 = __builtin_cpu_supports("avx512bw") && !(off && *off && *off != '0');
    }
#endif
    REPEATS = repeats;
    L = length; NSYM = nsym; NR = (L + 1) * (L + 1); SOLVED = L * (L + 1);
    N = 1;
    for (int i = 0; i < L; i++) N *= REPEATS ? NSYM : NSYM - i;
    codes = malloc(sizeof(*codes) * N);
    int npacked = 1;
    for (int i = 0; i < L; i++) npacked *= NSYM;
    index_of = malloc(sizeof(int32_t) * npacked);
    for (int i = 0; i < npacked; i++) index_of[i] = -1;
    uint8_t cur[MAXL] = {0};
    int count = 0;
    gen_codes(cur, 0, 0, &count);
    for (int i = 0; i < N; i++) index_of[packed(codes[i])] = i;
    resp = big_alloc(RESP_BYTES);               /* padded: the mask kernel reads whole blocks */
    free(mask_lo); free(mask_hi);
    mask_lo = malloc((size_t)N + BLK);
    mask_hi = malloc((size_t)N + BLK);
    {
        uint64_t x = 0x243F6A8885A308D3ULL;                /* splitmix64 */
        for (int i = 0; i < 64; i++) {
            uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            member_key[i] = (z ^ (z >> 31)) | 1;
        }
    }
    free(key_buf);
    key_buf = calloc((size_t)N + BLK, 1);
    free(inexact_buf);
    inexact_buf = malloc((size_t)N);
    /* The responses that occur are numbered 0..NRESP-1 so per-guess count vectors are short. */
    int compact[NRMAX];
    fill_scores(compact);
    SOLVED = compact[SOLVED];
    NR = NRESP;
    int pc[MAXL];
    nperms = 0;
    gen_perms(pc, 0, 0);
    for (int d = 0; d < MAXD + 2; d++) {
        cand_buf[d] = malloc(sizeof(Cand) * N);
        free(bound_buf[d]);
        bound_buf[d] = malloc(sizeof(int64_t) * N);

        part_buf[d] = malloc(sizeof(uint16_t) * N);
    }
    compute_caps();
    lbtab = malloc(sizeof(int64_t) * (size_t)(MAXD + 1) * (N + 1));
    compute_lbtab();
    if (tt_log2 < 10) tt_log2 = 10;
    if (tt_log2 > 28) tt_log2 = 28;
    tt_mask = ((size_t)1 << tt_log2) - 1;
    tt = big_alloc(TT_BYTES);
    arena_cap = (tt_mask + 1) * 16;
    arena = big_alloc(ARENA_BYTES);
    if (!codes || !index_of || !resp || !lbtab || !tt || !arena) { free_tables(); return PyErr_NoMemory(); }
    tt_used = 0;            /* mapped zeroed: already empty, and untouched pages stay free */
    arena_used = 0;
    st_nodes = st_tt_hits = st_tt_stores = st_guesses = st_tt_compactions = 0;
    PyObject *out = PyList_New(0);
    for (int j = 0; j <= MAXD + 1; j++) {
        PyObject *v = PyLong_FromLongLong(cap[j]);
        PyList_Append(out, v);
        Py_DECREF(v);
    }
    return out;
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

PyDoc_STRVAR(solve_doc,
"solve(set, history, beta=None, probe=False) -> (value, guess, exact)\n\n"
"Optimal cost of the candidate `set` (bytes of sorted uint16 code indices) after the guesses\n"
"in `history` (sequence of code indices); the depth is len(history). With `beta`, the search\n"
"stops proving once it knows the value is >= beta (then exact is False). With `probe`, only\n"
"the one-ply lower bound is computed (never exact unless the set is tiny).");

static PyObject *py_solve(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj, *hist_obj, *beta_obj = Py_None;
    int probe = 0;
    if (!PyArg_ParseTuple(args, "OO|Op", &set_obj, &hist_obj, &beta_obj, &probe)) return NULL;
    if (!resp) { PyErr_SetString(PyExc_RuntimeError, "call init() first"); return NULL; }
    PyObject *hs = PySequence_Fast(hist_obj, "history must be a sequence");
    if (!hs) return NULL;
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(hs);
    if (nh > MAXD - 3) { Py_DECREF(hs); PyErr_SetString(PyExc_ValueError, "history too long"); return NULL; }
    for (Py_ssize_t i = 0; i < nh; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(hs, i));
        if (v < 0 || v >= N) { Py_DECREF(hs); if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad code index"); return NULL; }
        hist[i] = (int)v;
    }
    Py_DECREF(hs);
    int64_t beta = INF;
    if (beta_obj != Py_None) { beta = PyLong_AsLongLong(beta_obj); if (PyErr_Occurred()) return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    int guess = -1;
    int64_t v;
    Py_BEGIN_ALLOW_THREADS
    v = search(S, n, (int)nh, beta, &guess, probe);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(LiO)", (long long)v, guess, !probe && v < beta ? Py_True : Py_False);
}

PyDoc_STRVAR(candidates_doc,
"candidates(set, history, beta=None) -> [(bound, guess), ...]\n\n"
"The guesses the search would try at this node, in the order it would try them, with their\n"
"one-ply lower bounds (used to split one node's work across processes).");

static PyObject *py_candidates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj, *hist_obj, *beta_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O", &set_obj, &hist_obj, &beta_obj)) return NULL;
    if (!resp) { PyErr_SetString(PyExc_RuntimeError, "call init() first"); return NULL; }
    PyObject *hs = PySequence_Fast(hist_obj, "history must be a sequence");
    if (!hs) return NULL;
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(hs);
    if (nh > MAXD - 3) { Py_DECREF(hs); PyErr_SetString(PyExc_ValueError, "history too long"); return NULL; }
    for (Py_ssize_t i = 0; i < nh; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(hs, i));
        if (v < 0 || v >= N) { Py_DECREF(hs); if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad code index"); return NULL; }
        hist[i] = (int)v;
    }
    Py_DECREF(hs);
    int64_t beta = INF;
    if (beta_obj != Py_None) { beta = PyLong_AsLongLong(beta_obj); if (PyErr_Occurred()) return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    int64_t skipped;
    int nc = n < 2 ? 0 : gen_cands(S, n, (int)nh, beta, &skipped, 1);
    if (nc) {       /* the ones the search would try: drop repeated partitions here too */
        Cand *cands = cand_buf[nh];
        int kept = 0;
        dedup_reset((int)nh);
        for (int c = 0; c < nc; c++)
            if (!dedup_seen(S, n, (int)nh, cands[c].guess)) cands[kept++] = cands[c];
        nc = kept;
    }
    PyBuffer_Release(&view);
    PyObject *out = PyList_New(nc);
    if (!out) return NULL;
    for (int c = 0; c < nc; c++) {
        PyObject *t = Py_BuildValue("(Li)", (long long)cand_buf[nh][c].bound, cand_buf[nh][c].guess);
        if (!t) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, c, t);
    }
    return out;
}

PyDoc_STRVAR(partition_doc,
"partition(set, guess) -> dict response_id -> bytes\n\n"
"Split a candidate set by the response to `guess`; response_id = bulls * (length+1) + cows.");

static PyObject *py_partition(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *set_obj;
    int g;
    if (!PyArg_ParseTuple(args, "Oi", &set_obj, &g)) return NULL;
    if (!resp || g < 0 || g >= N) { PyErr_SetString(PyExc_ValueError, "bad guess or not initialised"); return NULL; }
    Py_buffer view;
    const uint16_t *S;
    int n;
    if (get_set(set_obj, &view, &S, &n) < 0) return NULL;
    uint16_t *tmp = malloc(sizeof(uint16_t) * (n ? n : 1));
    PyObject *out = PyDict_New();
    const uint8_t *r = resp + (size_t)g * N;
    for (int k = 0; k < NR && out; k++) {
        int m = 0;
        for (int i = 0; i < n; i++) if (r[S[i]] == k) tmp[m++] = S[i];
        if (!m) continue;
        PyObject *key = PyLong_FromLong(rid_code[k]);
        PyObject *val = PyBytes_FromStringAndSize((const char *)tmp, (Py_ssize_t)m * 2);
        if (!key || !val || PyDict_SetItem(out, key, val) < 0) { Py_CLEAR(out); }
        Py_XDECREF(key); Py_XDECREF(val);
    }
    free(tmp);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *py_response(PyObject *self, PyObject *args) {
    (void)self;
    int s, g;
    if (!PyArg_ParseTuple(args, "ii", &s, &g)) return NULL;
    if (!resp || s < 0 || s >= N || g < 0 || g >= N) { PyErr_SetString(PyExc_ValueError, "bad code index"); return NULL; }
    return PyLong_FromLong(rid_code[resp[(size_t)g * N + s]]);
}

static PyObject *py_lower_bound(PyObject *self, PyObject *args) {
    (void)self;
    int n, d;
    if (!PyArg_ParseTuple(args, "ii", &n, &d)) return NULL;
    if (!lbtab || n < 0 || n > N || d < 0 || d > MAXD) { PyErr_SetString(PyExc_ValueError, "out of range"); return NULL; }
    return PyLong_FromLongLong(LB(d, n));
}

static PyObject *py_stats(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return Py_BuildValue("{sKsKsKsKsnsKsK}", "nodes", (unsigned long long)st_nodes,
                         "af_misses", (unsigned long long)st_af_misses,
                         "tt_hits", (unsigned long long)st_tt_hits,
                         "tt_stores", (unsigned long long)st_tt_stores,
                         "guesses", (unsigned long long)st_guesses,
                         "tt_used", (Py_ssize_t)tt_used,
                         "tt_compactions", (unsigned long long)st_tt_compactions);
}

static PyObject *py_clear(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    tt_clear();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", py_init, METH_VARARGS, init_doc},
    {"solve", py_solve, METH_VARARGS, solve_doc},
    {"candidates", py_candidates, METH_VARARGS, candidates_doc},
    {"partition", py_partition, METH_VARARGS, partition_doc},
    {"response", py_response, METH_VARARGS, "response(secret, guess) -> response id"},
    {"lower_bound", py_lower_bound, METH_VARARGS, "lower_bound(n, depth) -> capacity bound"},
    {"stats", py_stats, METH_NOARGS, "search counters since init()"},
    {"clear", py_clear, METH_NOARGS, "empty the transposition table"},
    {NULL, NULL, 0, NULL},
};

/* The same engine is built twice (see _mastermind.c): one module per game family, so that a
 * process can hold a MOO engine and a Mastermind engine at once (each keeps its tables in its
 * own module state). */
#ifndef ENGINE_MODULE
#define ENGINE_MODULE _native
#endif
#define ENGINE_STR2(x) #x
#define ENGINE_STR(x) ENGINE_STR2(x)
#define ENGINE_CAT2(a, b) a##b
#define ENGINE_CAT(a, b) ENGINE_CAT2(a, b)

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, ENGINE_STR(ENGINE_MODULE),
    "Native core of the exact MOO/Mastermind solver (see bots/solver/_native.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC ENGINE_CAT(PyInit_, ENGINE_MODULE)(void) {
    PyObject *m = PyModule_Create(&moduledef);
    if (m && PyModule_AddIntConstant(m, "NCOSTS", MAXD + 2) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
