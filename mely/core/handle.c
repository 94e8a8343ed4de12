/* SPDX-License-Identifier: MIT */
/*
 * handle.c: the registry of live runtimes and the foreign-call grace period
 * (handle.h has the protocol).
 */
#include <pthread.h>

#include "mely/queue/backoff.h"
#include "mely/core/handle.h"

_Atomic unsigned long mely__foreign_calls;
_Atomic unsigned mely__draining;

/* Serializes drains: each waits for the count to reach zero, so two at once
 * must not each hold an entry the other waits for. */
static pthread_mutex_t drain_mu = PTHREAD_MUTEX_INITIALIZER;

void mely__handle_wait_drain(void)
{
    struct mely__backoff b = mely__backoff_start(MELY__BACKOFF_SPINS);

    while (atomic_load(&mely__draining)) /* bounded: a drain lasts as long as
                                            the calls it waits for */
        mely__backoff_wait(&b);
}

/* Live runtimes, linked through rt->live_next. A process holds a handful, and
 * the list is walked only by init and shutdown. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mely__rt *live_head;

/* Under live_mu. */
static bool registered(const struct mely__rt *rt)
{
    for (const struct mely__rt *r = live_head; r; r = r->live_next)
        if (r == rt)
            return true;
    return false;
}

bool mely__handle_live(const mely_t *m)
{
    /* Whatever *m holds (a zeroed, stale or garbage pointer) is only
     * compared, never followed, unless the registry knows it. */
    struct mely__rt *rt = __atomic_load_n(&m->rt, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&live_mu);
    bool live = rt && registered(rt);
    pthread_mutex_unlock(&live_mu);
    return live;
}

int mely__handle_publish(mely_t *m, struct mely__rt *rt)
{
    pthread_mutex_lock(&live_mu);
    struct mely__rt *old = __atomic_load_n(&m->rt, __ATOMIC_SEQ_CST);
    if (old && registered(old)) {
        pthread_mutex_unlock(&live_mu);
        return MELY_EBUSY;
    }
    rt->live_next = live_head;
    live_head = rt;
    __atomic_store_n(&m->rt, rt, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&live_mu);
    return 0;
}

void mely__handle_forget(struct mely__rt *rt)
{
    pthread_mutex_lock(&live_mu);
    for (struct mely__rt **p = &live_head; *p; p = &(*p)->live_next)
        if (*p == rt) {
            *p = rt->live_next;
            break;
        }
    pthread_mutex_unlock(&live_mu);
}

void mely__handle_each_live(void (*fn)(struct mely__rt *rt))
{
    pthread_mutex_lock(&live_mu);
    for (struct mely__rt *r = live_head; r; r = r->live_next)
        fn(r);
    pthread_mutex_unlock(&live_mu);
}

void mely__handle_retire(mely_t *m)
{
    __atomic_store_n(&m->rt, NULL, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&drain_mu);
    atomic_store(&mely__draining, 1);
    /* Calls in progress are short (no call blocks on an event), so this
     * waits microseconds; it also waits for calls on other runtimes, which
     * is harmless. */
    struct mely__backoff b = mely__backoff_start(MELY__BACKOFF_SPINS);
    while (atomic_load(&mely__foreign_calls) != 0)
        mely__backoff_wait(&b);
    atomic_store(&mely__draining, 0);
    pthread_mutex_unlock(&drain_mu);
}

void mely__handle_restore(mely_t *m, struct mely__rt *rt)
{
    __atomic_store_n(&m->rt, rt, __ATOMIC_SEQ_CST);
}
