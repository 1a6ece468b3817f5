/*
 * The exact solver's engine for Mastermind (codes with repeated symbols): the very same source
 * as _native.c, built as a second module so that a process can keep a MOO engine and a
 * Mastermind engine side by side (each engine keeps its tables in module state).  Which game
 * a module plays is chosen by init(..., repeats=True); nothing here is Mastermind-only.
 */
#define ENGINE_MODULE _mastermind
#include "_native.c"
