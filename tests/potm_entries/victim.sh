#!/bin/sh
# The entry another one tries to read: its program holds POTM-VICTIM-SECRET.
echo AAAAA
