#!/bin/sh
# A MOO bot in POSIX sh + awk, speaking docs/bot-protocol.md on stdin/stdout.
#
# Strategy: "first consistent". Keep every code still consistent with all the responses so far
# and always guess the first one (in ascending order). It is the deterministic cousin of
# Appleyard's random-consistent guesser and averages 5.56 guesses on the standard game.
#
# Try it by hand:   printf 'moo 1\nnew 4 0123456789\nguess\nresult 0123 1 2\nguess\nquit\n' | ./first_consistent.sh
# Play on a server: moo bot --cmd ./examples/bots/first_consistent.sh --url ws://127.0.0.1:8765/

# mawk buffers its input unless told to be interactive; without that it would wait for more
# lines than the runner will ever send before answering. gawk and busybox awk read line by line.
if awk -W version 2>/dev/null | grep -qi mawk; then
    set -- -W interactive
else
    set --
fi

exec awk "$@" '
# All codes of length L with distinct symbols from alpha, ascending, into cand[1..n].
function build(prefix,   i, ch) {
    if (length(prefix) == L) { cand[++n] = prefix; return }
    for (i = 1; i <= A; i++) {
        ch = substr(alpha, i, 1)
        if (index(prefix, ch) == 0) build(prefix ch)
    }
}

# Keep the candidates that would have answered guess g with b bulls and c cows.
# Scored per guessed position, as the server does: a symbol in place is a bull, elsewhere a cow.
function filter(g, b, c,   i, k, m, bb, cc, ch) {
    m = 0
    for (i = 1; i <= n; i++) {
        bb = 0; cc = 0
        for (k = 1; k <= L; k++) {
            ch = substr(g, k, 1)
            if (substr(cand[i], k, 1) == ch) bb++
            else if (index(cand[i], ch)) cc++
        }
        if (bb == b + 0 && cc == c + 0) cand[++m] = cand[i]
    }
    n = m
}

$1 == "moo"    { print "ready first-consistent-awk"; fflush(); next }
$1 == "new"    { L = $2 + 0; alpha = $3; A = length(alpha); n = 0; build(""); next }
$1 == "guess"  {
    if (n > 0) print cand[1]
    else { print "# the responses contradict each other"; print substr(alpha, 1, L) }
    fflush(); next
}
$1 == "result" { filter($2, $3, $4); next }
$1 == "quit"   { exit 0 }
# "opponent" and "end" lines need no answer; this bot ignores them.
'
