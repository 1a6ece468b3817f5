#!/bin/sh
# Breaks the output rule: the right letters with white space around them.
echo " SKUNK "
