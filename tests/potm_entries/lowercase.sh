#!/bin/sh
# Breaks the output rule: letters, but lower case.
read -r n rest
echo aaaaa
