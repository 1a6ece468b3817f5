/* Limits of the native MOO solver core (bots/solver/_native.c). */
#ifndef MOO_SOLVER_NATIVE_H
#define MOO_SOLVER_NATIVE_H

#define MAXL 6          /* longest code supported */
#define MAXSYM 10       /* largest alphabet supported */
#define MAXD 24         /* deepest guess number tracked */

#endif
