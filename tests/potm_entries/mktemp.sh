#!/bin/sh
# Legal: a standard temporary file (mktemp, in $TMPDIR = /tmp) removed before it exits, as the
# 1999 rules ask of files in /tmp; then SKUNK.
t=$(mktemp) || exit 1
echo scratch > "$t"
rm -f "$t"
echo SKUNK
