#!/bin/sh
# Legal: counts its runs in TEMP.count and answers AAAAA, AAAAA, then SKUNK on the third run,
# so it scores 3 on SKUNK only if its TEMP file survives between the runs of one word; on a
# first run it prints LEAKED (not a word) if the file is still there from the previous word.
read -r a b c
if [ -z "$b" ]; then
    [ -e TEMP.count ] && { echo "LEAKED"; exit 0; }
    echo 1 > TEMP.count
    echo AAAAA
else
    k=$(cat TEMP.count); k=$((k + 1)); echo "$k" > TEMP.count
    if [ "$k" -ge 3 ]; then echo SKUNK; else echo AAAAA; fi
fi
