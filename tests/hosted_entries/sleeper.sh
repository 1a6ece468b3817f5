#!/bin/sh
# Hostile: says ready, then never answers a 'guess' (it sleeps forever).
while read -r word rest; do
  case $word in
    moo) echo "ready sleeper" ;;
    guess) exec sleep infinity ;;
  esac
done
