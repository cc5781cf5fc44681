/*
 * Device kinds: which backend's kernel table a node's kernel comes from
 * (DESIGN section 2: a backend adds kernels, not semantics). Internal; the
 * public device handle names one of these.
 */
#ifndef WEFT_CORE_DEVICE_KIND_H
#define WEFT_CORE_DEVICE_KIND_H

enum wf_device_kind { WF_DEVICE_KIND_CPU = 0, WF_DEVICE_KIND_COUNT };

/* "cpu", ... (for messages); "unknown" outside the enum. */
static inline const char *wf__device_kind_name(enum wf_device_kind kind)
{
    switch (kind) {
    case WF_DEVICE_KIND_CPU: return "cpu";
    case WF_DEVICE_KIND_COUNT: break;
    }
    return "unknown";
}

#endif
