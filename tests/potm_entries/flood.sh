#!/bin/sh
# Hostile: endless output.
exec yes AAAAA
