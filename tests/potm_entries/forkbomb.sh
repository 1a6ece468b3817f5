#!/bin/sh
# Hostile: a fork bomb (bounded by the referee's process limit, then killed).
bomb() { bomb | bomb & }
bomb
