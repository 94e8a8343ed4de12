/*
 * poller.h: every worker's poller, a libevent event_base (internal; the
 * design is in poller.c).
 */
#ifndef MELY_POLLER_H
#define MELY_POLLER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct event;
struct event_base;
struct mely__rt;
struct mely__worker;

struct mely__poller {
    struct event_base *base;
    int wake_fd;               /* eventfd: a waker writes it (mely__wake) */
    struct event *wake_ev;     /* persistent read event on wake_fd */
    int timer_fd;              /* timerfd at the next timer deadline: ends a
                                  blocking poll (timer_ev reads it) */
    struct event *timer_ev;
    uint64_t timer_armed;      /* own thread: the deadline timer_fd is set to */
    uint64_t last_poll_ns;     /* own thread: when the base was last polled */
    uint64_t poll_target;      /* own thread: events_run once the events queued
                                  at the last poll have run (poller.c) */
    _Atomic uint32_t nwatches; /* armed watches on the base (watch.c): a busy
                                  worker polls only if there are some */
};

/* Creates (frees) every worker's poller. mely__pollers_init returns 0 or
 * MELY_ENOMEM; it also makes libevent thread-aware, once per process. */
int mely__pollers_init(struct mely__rt *rt);
void mely__pollers_free(struct mely__rt *rt);

/* Between two batches: polls the base without blocking if MELY_POLL_US
 * passed since the last poll and there are watches, and posts due timers.
 * Nothing but two loads when the worker has neither. Own thread only. */
void mely__poller_tick_slow(struct mely__worker *w);

/* Polls the base now without blocking (if it has watches) and posts due
 * timers. Own thread only. */
void mely__poller_poll(struct mely__worker *w);

/* Sleeps in the base until readiness, a wake-up or the next timer, then
 * posts due timers. Called by park.c with `parked` set. Own thread only. */
void mely__poller_block(struct mely__worker *w);

/* Interrupts w's blocking poll (the system call half of a wake-up). */
void mely__poller_wake(struct mely__worker *w);

/* Wakes w if it is parked, so that it sees a new, earlier deadline
 * (timer.c). Any thread; self (may be NULL) is charged for a wake-up. */
void mely__poller_kick(struct mely__worker *w, struct mely__worker *self);

/* watch.c: the table of fd and signal watches; _free (at shutdown, no worker
 * running) frees every watch left, before the pollers go. */
int mely__watchtab_init(struct mely__rt *rt);
void mely__watchtab_free(struct mely__rt *rt);

/* Sets the function a watch's destruction runs (mely_watch_remove_then's),
 * from its creation on: listen.c counts its sockets' watches with it. */
struct mely_watch;
void mely__watch_set_fin(struct mely_watch *w, void (*fin)(void *), void *arg);

/* listen.c: closes the listeners left at shutdown. */
void mely__listeners_free(struct mely__rt *rt);

/* The internal post of an I/O or timer event (post.c). */
struct mely_to;
int mely__post_to(struct mely__rt *rt, const struct mely_to *to, void (*fn)(void *), void *arg);

#endif
