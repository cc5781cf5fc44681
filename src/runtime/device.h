/*
 * Devices (DESIGN section 2: src/runtime). Internal.
 *
 * A device is a static object that lives as long as the process: the CPU
 * today, device 0. Its id is its index in the table, never an address, so
 * compile cache keys and bindings may store it.
 */
#ifndef WEFT_RUNTIME_DEVICE_H
#define WEFT_RUNTIME_DEVICE_H

#include <stdint.h>

#include "core/device_kind.h"
#include "weft.h"

struct wf_device {
    uint64_t id; /* index in the device table */
    wf_device_type type;
    enum wf_device_kind kernels; /* which kernel table runs its nodes */
    const char *name;
};

/* The CPU device (static, never NULL). */
wf_device *wf__device_cpu(void);

#endif
