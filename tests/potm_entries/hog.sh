#!/bin/sh
# Hostile: allocates memory without end (stopped by the address-space limit).
exec awk 'BEGIN { s = "xxxxxxxxxxxxxxxx"; while (1) s = s s; print s }'
