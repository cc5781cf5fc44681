/*
 * Devices: the public device handle, the device of a stream and of an
 * array. Only the CPU exists today; a backend added later gets entries in
 * the table and its own stream creation.
 */
#include "runtime/device.h"

#include "core/array.h"
#include "core/error.h"
#include "runtime/stream.h"

static wf_device devices[] = {
    {.id = 0, .type = WF_DEVICE_TYPE_CPU, .kernels = WF_DEVICE_KIND_CPU, .name = "cpu"},
};

enum { DEVICE_COUNT = (int)(sizeof devices / sizeof devices[0]) };

wf_device *wf__device_cpu(void) { return &devices[0]; }

/* Resolves a device handle passed to a public function; NULL (recorded) for
 * NULL or a pointer that is not one of the table's devices. */
static wf_device *device_check(const wf_device *device, const char *op)
{
    if (!device) {
        wf__error(WF_ERR_NULL_ARGUMENT, "%s: device is NULL", op);
        return NULL;
    }
    for (int i = 0; i < DEVICE_COUNT; i++)
        if (device == &devices[i])
            return &devices[i];
    wf__error(WF_ERR_INVALID_ARGUMENT, "%s: %p is not a weft device", op, (const void *)device);
    return NULL;
}

wf_device *wf_device_cpu(void) { return wf__device_cpu(); }

int wf_device_count(void) { return DEVICE_COUNT; }

wf_device *wf_device_get(int index)
{
    if (index < 0 || index >= DEVICE_COUNT) {
        wf__error(WF_ERR_INVALID_ARGUMENT, "wf_device_get: index %d is outside 0..%d", index,
                  DEVICE_COUNT - 1);
        return NULL;
    }
    return &devices[index];
}

wf_device_type wf_device_kind(const wf_device *device)
{
    const wf_device *d = device_check(device, "wf_device_kind");
    return d ? d->type : WF_DEVICE_TYPE_INVALID;
}

const char *wf_device_name(const wf_device *device)
{
    const wf_device *d = device_check(device, "wf_device_name");
    return d ? d->name : NULL;
}

uint64_t wf_device_id(const wf_device *device)
{
    const wf_device *d = device_check(device, "wf_device_id");
    return d ? d->id : UINT64_MAX;
}

wf_stream *wf_device_default_stream(wf_device *device)
{
    if (!device_check(device, "wf_device_default_stream"))
        return NULL;
    return wf_default_stream(); /* the CPU's: the only device */
}

wf_stream *wf_stream_new_on(wf_device *device)
{
    if (!device_check(device, "wf_stream_new_on"))
        return NULL;
    return wf_stream_new(); /* CPU streams: the only kind */
}

wf_device *wf_stream_device(const wf_stream *s)
{
    if (!s) {
        wf__error(WF_ERR_NULL_ARGUMENT, "wf_stream_device: stream is NULL");
        return NULL;
    }
    return wf__stream_device(s);
}

wf_device *wf_array_device(const wf_array *a)
{
    if (!wf__array_check(a, "wf_array_device", "the array"))
        return NULL;
    /* A computed value lives in its buffer, which is host memory today; a
     * lazy one will be computed on its stream's device. */
    wf_stream *s = wf__array_state(a) >= WF_NODE_READY ? NULL : wf__stream_of(a);
    return s ? wf__stream_device(s) : wf__device_cpu();
}
