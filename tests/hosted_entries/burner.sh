#!/bin/sh
# Hostile: answers its first 'guess' by starting children that burn CPU, and waits for them.
while read -r word rest; do
  case $word in
    moo) echo "ready burner" ;;
    guess) for i in 1 2 3; do (while :; do :; done) & done; wait ;;
  esac
done
