/* SPDX-License-Identifier: MIT */
/* error.c: messages for the library's error codes. */
#include <string.h>

#include <mely/mely.h>

const char *mely_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case MELY_EINVAL:
        return "invalid argument or configuration value";
    case MELY_ENOMEM:
        return "out of memory (nothing was queued)";
    case MELY_EBUSY:
        return "the runtime is running (or this call is not allowed from a handler)";
    case MELY_ESHUTDOWN:
        return "the runtime is not initialized or was shut down";
    case MELY_ECOLOR:
        return "color out of range (0..65535, or a pinned color of an existing worker)";
    case MELY_EPRIO:
        return "priority out of range (0..MELY_PRIO_MAX)";
    case MELY_ENOFN:
        return "NULL handler function";
    case MELY_EAGAIN:
        return "the event budget is used up (nothing was queued; try again once events have run)";
    }
    /* strerrordesc_np, unlike strerror, returns a constant string: thread-safe. */
    const char *msg = err < 0 && err > -4096 ? strerrordesc_np(-err) : NULL;
    return msg ? msg : "unknown mely error code";
}
