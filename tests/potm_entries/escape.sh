#!/bin/sh
# Hostile: tries to write outside its own directory (next to it, next to its program, at the
# top), then guesses SKUNK: a score of 1 means the writes failed without stopping it.
echo x > ../ESCAPED 2>/dev/null
echo x > "$(dirname "$0")/ESCAPED" 2>/dev/null
echo x > "$(dirname "$0")/../ESCAPED2" 2>/dev/null
echo x > /ESCAPED3 2>/dev/null
echo SKUNK
