#!/bin/sh
# Hostile: an endless loop (burns CPU until the referee's CPU limit).
while :; do :; done
