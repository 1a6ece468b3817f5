#!/bin/sh
# Breaks the TEMP rule in total: two TEMP files of 600 kB each (1.2 MB together).
head -c 614400 /dev/zero > TEMP.a
head -c 614400 /dev/zero > TEMP.b
echo AAAAA
