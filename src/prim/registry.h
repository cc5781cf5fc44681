/* Every built-in primitive, in one list (transforms walk it to check that
 * each has its rules; tests check that each has a kernel). Internal. */
#ifndef WEFT_PRIM_REGISTRY_H
#define WEFT_PRIM_REGISTRY_H

#include <stddef.h>

#include "core/array.h"

/* The primitives (static storage) and their number in *count. */
const wf_prim_def *const *wf__prim_registry(size_t *count);

#endif
