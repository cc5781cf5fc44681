/* Atomic slots (weft.h, "slots"). Internal: a counter for leak tests. */
#ifndef WEFT_CORE_SLOT_H
#define WEFT_CORE_SLOT_H

#include <stdint.h>

/* Slots handed out and not yet released, process-wide. */
int64_t wf__slots_live(void);

#endif
