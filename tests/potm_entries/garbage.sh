#!/bin/sh
# Hostile: prints something that is not a guess.
echo "hello, referee"
