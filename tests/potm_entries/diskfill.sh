#!/bin/sh
# Hostile: fills its directory with files under the file-size limit (2 MB each), then answers.
for i in 1 2 3 4 5 6; do head -c 2000000 /dev/zero > "junk$i"; done
echo AAAAA
