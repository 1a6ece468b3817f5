#!/bin/sh
# Hostile: answers its first 'guess' with 100 MB of comment lines on standard output.
while read -r word rest; do
  case $word in
    moo) echo "ready flood" ;;
    guess) yes "# flood flood flood flood flood flood flood flood flood flood" | head -c 100000000 ;;
  esac
done
