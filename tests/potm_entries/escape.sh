#!/bin/sh
# Hostile: tries to write outside its own directory, then guesses AAAAA forever.
echo x > ../ESCAPED 2>/dev/null
echo x > "$(dirname "$0")/ESCAPED" 2>/dev/null
echo x > "$(dirname "$0")/../ESCAPED2" 2>/dev/null
echo AAAAA
