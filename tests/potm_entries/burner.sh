#!/bin/sh
# Hostile: a child burns CPU that the entry never waits for: the first process only blocks,
# reading a FIFO that nobody writes. Only the CPU of the whole tree can stop it.
( while :; do :; done ) &
rm -f TEMP.fifo
mkfifo TEMP.fifo
read -r x < TEMP.fifo
echo AAAAA
