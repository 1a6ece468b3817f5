#!/bin/sh
# Hostile: makes its directory hard to remove (sub-directories and the directory itself left
# without any permission), then answers. Whatever it did, nothing of it may stay behind.
mkdir -p TEMPdir/deeper && touch TEMPdir/deeper/x && chmod 000 TEMPdir/deeper TEMPdir
chmod 000 .
echo SKUNK
