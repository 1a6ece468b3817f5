#!/bin/sh
# Checks the referee's stdin against the POTM rules' own example (the word SKUNK): first
# "5", then "ABCDE 0 5", then "SKIPS 2 2", "GUPPY 0 4"; on any difference it prints "wrong"
# (not a guess: the word ends at once).
read -r line
k=0
[ -e TEMP.k ] && k=$(cat TEMP.k)
k=$((k + 1)); echo "$k" > TEMP.k
case "$k:$line" in
    "1:5") echo ABCDE ;;
    "2:ABCDE 0 5") echo SKIPS ;;
    "3:SKIPS 2 2") echo GUPPY ;;
    "4:GUPPY 0 4") echo SKUNK ;;
    *) echo wrong ;;
esac
