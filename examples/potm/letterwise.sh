#!/bin/sh
#  POTM ENTRY:  letterwise
#  Language:    POSIX sh + awk (no dictionary, as the 1999 rules require)
#  Run:         chmod +x letterwise.sh; moo potm letterwise.sh --length 5 --dictionary
#
#  Strategy: first count each letter with a guess of that letter only (AAAAA has as many
#  hits as the word has A's; letters tried in English frequency order) until the counts add
#  up to N and a letter absent from the word is known.  Then place the letters: a guess of
#  the absent letter everywhere but one position scores one hit exactly when that position
#  holds the tried letter.  A position left with one possible letter is filled without a
#  guess.  At most 26 + 36 + 1 guesses for 9 letters, well under the limit of 100.
#
#  State: TEMP.letterwise in the working directory (N, then one "GUESS H M" line per run);
#  every run re-derives its guess from the whole history, so nothing else is remembered.
STATE=TEMP.letterwise
read -r word hits misses || exit 1
if [ -z "$hits" ]; then
    printf '%s\n' "$word" > "$STATE"
else
    printf '%s %s %s\n' "$word" "$hits" "$misses" >> "$STATE"
fi
exec awk '
NR == 1 { n = $1 + 0; next }
{ k++; g[k] = $1; h[k] = $2 + 0 }
END {
    order = "ESIARNTOLCDUGPMKHBYFVWZXQJ"
    found = 0; filler = ""
    for (i = 1; i <= k; i++) {
        c = substr(g[i], 1, 1); uniform = 1
        for (j = 2; j <= n; j++) if (substr(g[i], j, 1) != c) uniform = 0
        if (uniform) {
            cnt[c] = h[i]; tested[c] = 1; found += h[i]
            if (h[i] == 0 && filler == "") filler = c
        }
    }
    if (found < n || filler == "") {
        for (i = 1; i <= 26; i++) {
            c = substr(order, i, 1)
            if (!(c in tested)) { print same(c); exit }
        }
    }
    for (i = 1; i <= k; i++) {          # position tests: filler everywhere but one place
        p = 0
        for (j = 1; j <= n; j++) if (substr(g[i], j, 1) != filler) { if (p) p = -1; else p = j }
        if (p <= 0) continue
        c = substr(g[i], p, 1)
        if (h[i] == 1) pos[p] = c; else no[p, c] = 1
    }
    for (i = 1; i <= 26; i++) { c = substr(order, i, 1); rem[c] = cnt[c] + 0 }
    for (j = 1; j <= n; j++) if (j in pos) rem[pos[j]]--
    do {                                # fill positions that have one letter left
        changed = 0
        for (j = 1; j <= n; j++) {
            if (j in pos) continue
            m = 0
            for (i = 1; i <= 26; i++) {
                c = substr(order, i, 1)
                if (rem[c] > 0 && !((j, c) in no)) { m++; only = c }
            }
            if (m == 1) { pos[j] = only; rem[only]--; changed = 1 }
        }
    } while (changed)
    for (j = 1; j <= n; j++) {
        if (j in pos) continue
        for (i = 1; i <= 26; i++) {
            c = substr(order, i, 1)
            if (rem[c] > 0 && !((j, c) in no)) {
                s = ""
                for (q = 1; q <= n; q++) s = s (q == j ? c : filler)
                print s; exit
            }
        }
    }
    s = ""
    for (j = 1; j <= n; j++) s = s pos[j]
    print s
}
function same(c,    s, j) { s = ""; for (j = 1; j <= n; j++) s = s c; return s }
' "$STATE"
