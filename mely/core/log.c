/* SPDX-License-Identifier: MIT */
/*
 * log.c: the log hook of mely_set_log() (mely.h), and libevent's log routed
 * through it.
 *
 * The hook is process-wide, not per runtime: libevent's log callback is
 * process-wide, and configuration errors are reported before a runtime exists.
 *
 * The hook (fn, arg) is read under a read lock held for the whole call, and
 * mely_set_log() takes the write lock: once it returns, no call of the old
 * hook is in progress or will start, so the caller may free the old arg.
 * A thread-local flag marks a thread that is inside the hook: a message it
 * raises there goes to the default printer (no re-entry, no self-deadlock on
 * the lock), and mely_set_log() from a hook is refused (MELY_EBUSY).
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include <event2/event.h>

#include "mely/core/log.h"

/* Room for a message naming a path of PATH_MAX bytes. */
#define LOG_MSG_MAX (PATH_MAX + 256)

/* Writers first: under a flood of messages, readers preferred (glibc's
 * default) could keep mely_set_log() waiting for ever. No thread takes the
 * read lock twice (in_hook), which writer preference would deadlock. */
static pthread_rwlock_t hook_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static mely_log_fn_t hook_fn; /* NULL: the default printer */
static void *hook_arg;
static _Thread_local bool in_hook;

/* The default: warnings and errors on stderr, one line each (a single
 * fprintf, which stdio locks, so concurrent lines do not interleave). */
static void print_default(int level, const char *msg)
{
    if (level >= MELY_LOG_WARN)
        fprintf(stderr, "mely: %s\n", msg);
}

static void deliver(int level, const char *msg)
{
    if (in_hook) {
        print_default(level, msg);
        return;
    }
    pthread_rwlock_rdlock(&hook_lock);
    if (hook_fn) {
        in_hook = true;
        hook_fn(level, msg, hook_arg);
        in_hook = false;
    } else {
        print_default(level, msg);
    }
    pthread_rwlock_unlock(&hook_lock);
}

void mely__log(int level, const char *fmt, ...)
{
    char msg[LOG_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    deliver(level, msg);
}

int mely_set_log(mely_log_fn_t fn, void *arg)
{
    if (in_hook)
        return MELY_EBUSY;
    pthread_rwlock_wrlock(&hook_lock);
    hook_fn = fn;
    hook_arg = fn ? arg : NULL;
    pthread_rwlock_unlock(&hook_lock);
    return 0;
}

/* libevent's severities are ours, by value; anything else counts as a warning. */
static int level_of(int severity)
{
    switch (severity) {
    case EVENT_LOG_DEBUG:
        return MELY_LOG_DEBUG;
    case EVENT_LOG_MSG:
        return MELY_LOG_INFO;
    case EVENT_LOG_ERR:
        return MELY_LOG_ERROR;
    default:
        return MELY_LOG_WARN;
    }
}

static void from_libevent(int severity, const char *msg)
{
    mely__log(level_of(severity), "libevent: %s", msg);
}

static pthread_once_t capture_once = PTHREAD_ONCE_INIT;

static void capture(void)
{
    event_set_log_callback(from_libevent);
}

void mely__log_capture_libevent(void)
{
    pthread_once(&capture_once, capture);
}
