/* SPDX-License-Identifier: MIT */
/*
 * log.h: the runtime's messages (configuration errors, cache-map fallbacks,
 * libevent's own log), delivered to the hook of mely_set_log() (mely.h) or,
 * by default, printed on stderr as "mely: <message>" when they are warnings
 * or errors.
 */
#ifndef MELY_LOG_H
#define MELY_LOG_H

#include <mely/mely.h>

/* Formats a message (no trailing newline, no "mely: " prefix) and delivers
 * it at `level` (MELY_LOG_*). Messages longer than about 4 KB are cut.
 * Any thread; it takes a read lock for the hook's call (never on a hot path). */
__attribute__((format(printf, 2, 3))) void mely__log(int level, const char *fmt, ...);

/* Routes libevent's log (event_set_log_callback) to mely__log, as
 * "libevent: <its message>" at the matching level. Idempotent; mely_init()
 * calls it before it creates the first event_base. */
void mely__log_capture_libevent(void);

#endif /* MELY_LOG_H */
