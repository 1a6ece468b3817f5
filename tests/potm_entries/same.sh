#!/bin/sh
# Legal output but never learns: AAAAA forever (more than 100 guesses scores 999).
echo AAAAA
