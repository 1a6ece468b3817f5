#!/bin/sh
# Hostile: never answers and uses no CPU (only the wall-clock cap stops it).
exec sleep 1000
