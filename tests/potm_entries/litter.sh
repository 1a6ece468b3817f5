#!/bin/sh
# Breaks the file rule: keeps its state in a file whose name does not begin with TEMP.
echo state > notes.txt
echo AAAAA
