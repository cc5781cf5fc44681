/* Compile internals shared with other layers' hooks. Internal. */
#ifndef WEFT_COMPILE_COMPILE_H
#define WEFT_COMPILE_COMPILE_H

#include "weft.h"

/* > 0 while this thread traces a compiled function (compiled calls made now
 * run inline, as part of the outer trace). */
int wf__compile_tracing_depth(void);

#endif
