"""The response of every guess against every secret, as small integers, shared by all bots.

Heuristic bots ask one question thousands of times: "how does guess *g* split the candidates
still left?" Answering it from :func:`moo.rules.score` costs a Python call per pair, so the
table is built once per process and per :class:`~moo.rules.Rules` with vectorised numpy and
then sliced. For the standard game the full 5040 x 5040 matrix is 25 MB of ``uint8``; variants
whose matrix would be too large (5 or 6 positions) compute the rows they need on the fly with
the same vectorised kernel, so the bots stay rules-agnostic.

Response ids are indexes into :attr:`ResponseTable.responses`, which for distinct-symbol guesses
is exactly ``rules.responses`` (Tanaka's order). With ``repeats_in_guess`` the 1971 scoring can
also produce responses such as 3B1C, so the list is every bulls + cows <= length there.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from moo.rules import Response, Rules

__all__ = ["ResponseTable", "table_for"]

IntArray = npt.NDArray[np.intp]
ByteArray = npt.NDArray[np.uint8]

#: Above this many (guess, secret) pairs the matrix is not stored; rows are computed on demand.
FULL_MATRIX_LIMIT = 40_000_000
#: Elements per temporary block while building or counting; bounds peak memory (~tens of MB).
_BLOCK_ELEMENTS = 1 << 22


def _encode(codes: tuple[str, ...], alphabet: str) -> npt.NDArray[np.int8]:
    index = {ch: i for i, ch in enumerate(alphabet)}
    return np.array([[index[ch] for ch in code] for code in codes], dtype=np.int8)


class ResponseTable:
    """Response ids of ``rules.guesses`` (rows) against ``rules.secrets`` (columns)."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.guesses: tuple[str, ...] = rules.guesses
        self.secrets: tuple[str, ...] = rules.secrets
        length = rules.length
        if rules.repeats_in_guess:
            self.responses: tuple[Response, ...] = tuple(
                Response(b, c)
                for b in range(length, -1, -1)
                for c in range(length - b, -1, -1)
            )
        else:
            self.responses = rules.responses
        self.solved_id = self.responses.index(rules.solved)
        # raw bulls*(length+1)+cows -> compact id (255 marks a response that cannot occur)
        lookup = np.full((length + 1) ** 2, 255, dtype=np.uint8)
        for rid, (b, c) in enumerate(self.responses):
            lookup[b * (length + 1) + c] = rid
        self._lookup = lookup
        self._response_id = {r: i for i, r in enumerate(self.responses)}
        self.guess_index = {g: i for i, g in enumerate(self.guesses)}
        self.secret_index = {s: i for i, s in enumerate(self.secrets)}
        #: guess index of each secret (guess and secret spaces differ only with repeats)
        self.secret_as_guess: IntArray = np.array(
            [self.guess_index[s] for s in self.secrets], dtype=np.intp
        )
        self._gcodes = _encode(self.guesses, rules.alphabet)
        self._scodes = _encode(self.secrets, rules.alphabet)
        #: has[s, a] = 1 if secret s contains symbol a
        self._has = np.zeros((len(self.secrets), len(rules.alphabet)), dtype=np.uint8)
        np.put_along_axis(self._has, self._scodes.astype(np.intp), np.uint8(1), axis=1)
        #: the guesses' symbols, one index array per position (gather keys for ``_has``)
        self._gcols = [self._gcodes[:, pos].astype(np.intp) for pos in range(length)]
        self._by_secret: ByteArray | None = None
        self._by_guess: ByteArray | None = None
        if len(self.guesses) * len(self.secrets) <= FULL_MATRIX_LIMIT:
            self._by_secret = self._compute(np.arange(len(self.secrets), dtype=np.intp))
            # Filtering reads one guess against many secrets: a contiguous row is several
            # times faster than a strided column. Without repeats the matrix is symmetric
            # (bulls and common symbols do not care which code is the secret), so one copy
            # serves both ways.
            self._by_guess = (
                np.ascontiguousarray(self._by_secret.T)
                if rules.repeats_in_guess
                else self._by_secret
            )

    # -- building ---------------------------------------------------------------------------
    def _compute(self, secret_idx: IntArray) -> ByteArray:
        """Response ids, shape (len(secret_idx), guesses), by the 1971 per-position rule.

        A guessed symbol is a bull if it sits in the secret's same position, otherwise a cow if
        the secret contains it anywhere: so cows = (guessed symbols found in the secret) - bulls,
        and "found" is a gather from the secret's symbol-membership row. Everything stays in
        uint8 (at most 6 bulls, 7 * 6 + 6 < 256), which keeps the passes memory-light.
        """
        out = np.empty((len(secret_idx), len(self.guesses)), dtype=np.uint8)
        width = np.uint8(self.rules.length + 1)
        step = max(1, _BLOCK_ELEMENTS // max(1, len(self.guesses)))
        g = self._gcodes
        for lo in range(0, len(secret_idx), step):
            rows = secret_idx[lo : lo + step]
            s = self._scodes[rows]
            has = self._has[rows]
            bulls = np.zeros((len(rows), len(self.guesses)), dtype=np.uint8)
            found = np.zeros_like(bulls)
            for pos in range(self.rules.length):
                bulls += s[:, pos, None] == g[None, :, pos]
                found += has[:, self._gcols[pos]]
            out[lo : lo + step] = self._lookup[bulls * width + (found - bulls)]
        return out

    # -- queries ----------------------------------------------------------------------------
    def response_id(self, response: Response | tuple[int, int]) -> int:
        return self._response_id[Response(*response)]

    def rows(self, secret_idx: IntArray) -> ByteArray:
        """Response ids of every guess against the given secrets, shape (n, guesses)."""
        if self._by_secret is not None:
            return self._by_secret[secret_idx]
        return self._compute(secret_idx)

    def against(self, guess: int, secret_idx: IntArray) -> ByteArray:
        """Response ids of one guess against the given secrets."""
        if self._by_guess is not None:
            return np.asarray(self._by_guess[guess][secret_idx], dtype=np.uint8)
        # One column only: computing whole rows would score every guess (151200 of them for
        # 6 of 10) to keep one.
        width = np.uint8(self.rules.length + 1)
        s = self._scodes[secret_idx]
        has = self._has[secret_idx]
        g = self._gcodes[guess]
        bulls = np.zeros(len(secret_idx), dtype=np.uint8)
        found = np.zeros_like(bulls)
        for pos in range(self.rules.length):
            bulls += s[:, pos] == g[pos]
            found += has[:, int(g[pos])]
        return np.asarray(self._lookup[bulls * width + (found - bulls)], dtype=np.uint8)

    def filter(self, candidates: IntArray, guess: int, response: int) -> IntArray:
        """The candidates (secret indexes, order kept) that answer ``guess`` with ``response``."""
        return np.asarray(candidates[self.against(guess, candidates) == response], dtype=np.intp)

    def partition_counts(self, candidates: IntArray) -> npt.NDArray[np.int64]:
        """Part sizes of ``candidates`` under every guess: shape (guesses, responses).

        One ``bincount`` over (guess, response) keys per block of candidates, so the cost is a
        few passes over a (candidates x guesses) byte array whatever the number of responses.
        """
        n_guess, n_resp = len(self.guesses), len(self.responses)
        counts = np.zeros(n_guess * n_resp, dtype=np.int64)
        offsets = np.arange(n_guess, dtype=np.int64) * n_resp
        step = max(1, _BLOCK_ELEMENTS // n_guess)
        for lo in range(0, len(candidates), step):
            block = self.rows(candidates[lo : lo + step])
            keys = block + offsets[None, :]
            counts += np.bincount(keys.ravel(), minlength=n_guess * n_resp)
        return counts.reshape(n_guess, n_resp)

    def counts_for(self, candidates: IntArray, guess_idx: IntArray) -> npt.NDArray[np.int64]:
        """Part sizes of ``candidates`` under the guesses ``guess_idx`` only: shape
        (len(guess_idx), responses).

        The generic heuristics' path for variants whose guess space is too large to score
        whole (5-6 positions, 16 symbols): they score a symmetry-reduced or shortlisted set
        of guesses, so only those columns are computed, with the same kernel as
        :meth:`_compute`.
        """
        n_guess, n_resp = len(guess_idx), len(self.responses)
        counts = np.zeros(n_guess * n_resp, dtype=np.int64)
        if n_guess == 0 or len(candidates) == 0:
            return counts.reshape(n_guess, n_resp)
        offsets = np.arange(n_guess, dtype=np.int64) * n_resp
        step = max(1, _BLOCK_ELEMENTS // n_guess)
        width = np.uint8(self.rules.length + 1)
        g = self._gcodes[guess_idx]
        gcols = [col[guess_idx] for col in self._gcols]
        for lo in range(0, len(candidates), step):
            rows = candidates[lo : lo + step]
            if self._by_secret is not None:
                block = self._by_secret[rows][:, guess_idx]
            else:
                s = self._scodes[rows]
                has = self._has[rows]
                bulls = np.zeros((len(rows), n_guess), dtype=np.uint8)
                found = np.zeros_like(bulls)
                for pos in range(self.rules.length):
                    bulls += s[:, pos, None] == g[None, :, pos]
                    found += has[:, gcols[pos]]
                block = self._lookup[bulls * width + (found - bulls)]
            keys = block + offsets[None, :]
            counts += np.bincount(keys.ravel(), minlength=n_guess * n_resp)
        return counts.reshape(n_guess, n_resp)

    def symbols_used(self, guess_idx: list[int]) -> npt.NDArray[np.bool_]:
        """``used[a]``: symbol ``a`` (an alphabet index) occurs in one of these guesses."""
        used = np.zeros(len(self.rules.alphabet), dtype=bool)
        for g in guess_idx:
            used[self._gcodes[g].astype(np.intp)] = True
        return used

    def canonical_guesses(self, used: npt.NDArray[np.bool_]) -> IntArray:
        """Indexes of the guesses that are the smallest of their class under every
        permutation of the symbols no guess so far has used (``used[a]`` is True for a symbol
        some earlier guess contains).

        The candidates left after any history are invariant under such permutations (the
        responses so far cannot tell those symbols apart), so two guesses of one class split
        the candidates into parts of the same sizes and are equally good; so is being a
        candidate. The smallest member of a class (in ``guesses`` order, which is ascending
        for a sorted alphabet) is the one whose unused symbols, read left to right, are the
        smallest unused symbols in ascending order: that is what is kept.
        """
        n = len(self.guesses)
        fresh = ~used
        rank = np.cumsum(fresh) - 1  # rank of each unused symbol among the unused ones
        ok = np.ones(n, dtype=bool)
        seen = np.zeros(n, dtype=np.int64)
        codes = self._gcodes.astype(np.intp)
        for pos in range(self.rules.length):
            sym = codes[:, pos]
            first = fresh[sym].copy()
            for earlier in range(pos):
                first &= codes[:, earlier] != sym
            ok &= ~first | (rank[sym] == seen)
            seen += first
        return np.flatnonzero(ok).astype(np.intp)

    def candidate_mask(self, candidates: IntArray) -> npt.NDArray[np.bool_]:
        """Which guesses are themselves still-possible secrets."""
        mask = np.zeros(len(self.guesses), dtype=bool)
        mask[self.secret_as_guess[candidates]] = True
        return mask

    def all_secrets(self) -> IntArray:
        return np.arange(len(self.secrets), dtype=np.intp)


@functools.cache
def table_for(rules: Rules) -> ResponseTable:
    """The process-wide table for ``rules`` (built on first use: ~0.5 s for 4 of 10)."""
    return ResponseTable(rules)
