#!/bin/sh
# Breaks the TEMP rule: a TEMP file larger than 1 MB (1.5 MB of zeros), then a legal guess.
head -c 1572864 /dev/zero > TEMP.big
echo AAAAA
