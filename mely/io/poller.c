/* SPDX-License-Identifier: MIT */
/*
 * io/poller.c: every worker's poller (the paper's section 4.3: epoll instead of
 * libasync-smp's select loop), a libevent event_base on epoll.
 *
 * What a worker's base holds: the fd watches and signal watches that live on
 * this worker (io/watch.c), the worker's wake-up eventfd (park.c writes it,
 * the poller only reads it), and a timerfd set to the worker's next timer
 * deadline, which ends a blocking poll (io/timer.c keeps the
 * timers themselves: libevent's min-heap does not keep equal deadlines in
 * order). Readiness callbacks only queue colored events; handlers never run
 * inside the poller.
 *
 * When a worker polls (the rule, with its constants):
 *  - busy: between two batches, without blocking, if it has armed watches (or
 *    streams to send: turnend.h) and either MELY_POLL_US (50 us) passed since
 *    its last poll and the work that poll brought has run, or POLL_MAX_US (1
 *    ms) passed. "The work that poll brought": the events queued when it
 *    polled, then, if events are queued once they ran, those too (what they
 *    posted), and a third time the same: POLL_GENERATIONS of them, or fewer
 *    when the queue runs dry. A poll also ends the worker's turn: streams
 *    send what the turn wrote just before it (turnend.h), so the longer the
 *    work a poll brings runs unbroken, the more each send carries (a
 *    publish/subscribe broker, whose readiness events post to rooms, which
 *    write to subscribers: 10.1 M deliveries/s with one generation, 15.1 M
 *    with three, as many as one libevent thread).
 *    Due timers are posted at every batch end (a load of `next` and, only if
 *    there are timers, a clock read). One poll takes what one
 *    epoll_wait returns (at most libevent's 4096 per call) and only queues
 *    events behind those already queued. So a long queue delays I/O by at
 *    most one batch plus 1 ms, and heavy I/O never starves the queue (the
 *    worker runs at least 50 us of batches between two polls, unless its
 *    queue runs dry).
 *    Why wait for the queue: watches are level-triggered, so a connection
 *    whose event is still queued is reported again by every poll. Polling
 *    every 50 us through a backlog of 1,000 ready connections ran 1,000
 *    readiness callbacks per poll for nothing (bench/e2e/echo: 0.2x libevent).
 *  - idle: once without blocking, before stealing; again after spinning;
 *    then it parks: a blocking poll (park.c, idle.c), with the next timer as
 *    the deadline. A post from another thread to a parked worker writes its
 *    eventfd; only a parked worker costs a poster that system call.
 *
 * The line between this layer and the scheduler: the scheduler calls the
 * functions of poller.h (init, poll, tick, block); what the I/O layer does
 * to the scheduler is to post (post.h), to flush the posts its callbacks
 * staged (expire(), below) and to wake a worker (park.h, for a timer set
 * earlier than a parked worker's deadline).
 *
 * Threads: libevent is made thread-aware (evthread_use_pthreads) so that
 * watches may be added and removed on any worker's base from any thread; the
 * base's own loop runs only on its worker's thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "mely/queue/cycles.h"
#include "mely/io/poller.h"
#include "mely/io/timer.h"
#include "mely/sched/turnend.h"
#include "mely/core/log.h"
#include "mely/remote/outbox.h"
#include "mely/sched/placement.h"
#include "mely/runtime.h"
#include "mely/observe/trace.h"

/* The longest a busy worker with watches goes without polling. */
#define POLL_MAX_US 1000u
/* The generations of a poll's work a busy worker waits for (the rule above). */
#define POLL_GENERATIONS 3u

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int threads_err;

/* Once per process, before the first event_base: libevent's locks, and its
 * log routed through mely's hook (log.h) instead of its own stderr lines. */
static void use_threads(void)
{
    mely__log_capture_libevent();
    threads_err = evthread_use_pthreads();
}

/* Drains the eventfd; the wake-up itself was the return from epoll_wait. */
static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    uint64_t n;
    while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR) /* bounded: EINTR only */
        ;
}

/* The timer deadline passed: the blocking poll returns, timers expire. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct mely__poller *p = arg;
    uint64_t n;
    if (read(fd, &n, sizeof(n)) == sizeof(n))
        p->timer_armed = MELY__NEVER;
}

/* wake_fd: the worker's wake-up eventfd (park.c), read here, written by wakers. */
static int poller_init(struct mely__poller *p, int wake_fd)
{
    p->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    p->timer_armed = MELY__NEVER;
    if (p->timer_fd < 0)
        return -errno;
    /* libevent keeps no timers here: blocking polls end at the timer_fd,
     * which has the nanosecond precision of the runtime's own deadlines
     * (epoll_wait's timeout is in milliseconds, and libevent's precise-timer
     * mode re-arms a timerfd before every poll, blocking or not). */
    p->base = event_base_new();
    if (p->base) {
        p->wake_ev = event_new(p->base, wake_fd, EV_READ | EV_PERSIST, on_wake, NULL);
        p->timer_ev = event_new(p->base, p->timer_fd, EV_READ | EV_PERSIST, on_timer, p);
    }
    if (!p->base || !p->wake_ev || !p->timer_ev || event_add(p->wake_ev, NULL) != 0 ||
        event_add(p->timer_ev, NULL) != 0)
        return MELY_ENOMEM;
    atomic_init(&p->nwatches, 0);
    return 0;
}

static void poller_free(struct mely__poller *p)
{
    if (p->wake_ev)
        event_free(p->wake_ev);
    if (p->timer_ev)
        event_free(p->timer_ev);
    if (p->base)
        event_base_free(p->base);
    if (p->timer_fd >= 0)
        close(p->timer_fd);
    memset(p, 0, sizeof(*p));
    p->timer_fd = -1;
}

/* Sets the timer_fd to `deadline` unless it is set to it already: repeated
 * blocking polls for one deadline cost one system call. */
static void arm_timer(struct mely__poller *p, uint64_t deadline)
{
    if (deadline == p->timer_armed)
        return;
    struct itimerspec its = {
        .it_value = { .tv_sec = (time_t)(deadline / 1000000000u),
                      .tv_nsec = (long)(deadline % 1000000000u) },
    };
    if (timerfd_settime(p->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        p->timer_armed = deadline;
}

int mely__pollers_init(struct mely__rt *rt)
{
    pthread_once(&threads_once, use_threads);
    if (threads_err)
        return MELY_ENOMEM;
    for (unsigned i = 0; i < rt->nworkers; i++) {
        mely__timers_init(&rt->io->workers[i].timers);
        int err = poller_init(&rt->io->workers[i].poller, rt->workers[i].wake_fd);
        if (err)
            return err;
    }
    return 0;
}

void mely__pollers_free(struct mely__rt *rt)
{
    for (unsigned i = 0; i < rt->nworkers; i++) {
        poller_free(&rt->io->workers[i].poller);
        mely__timers_free(&rt->io->workers[i].timers);
    }
}

/* Runs the base once and records it: its time and the watch events it queued. */
static void trace_poll(struct mely__worker *w, int flags)
{
    uint64_t ready = mely__counter_read(&w->ctr.io_ready);
    uint64_t start = mely__cycles();
    event_base_loop(w->io->poller.base, flags | EVLOOP_ONCE);
    mely__trace_note(w->trace, MELY__TR_POLL, start, mely__cycles() - start, 0,
                     (unsigned)(mely__counter_read(&w->ctr.io_ready) - ready));
}

/* A poll's wave begins: it is done when the events queued now have run (the
 * busy rule above; wave_done). */
static void new_wave(struct mely__worker *w)
{
    uint32_t queued = atomic_load_explicit(&w->nevents, memory_order_relaxed);
    w->io->poller.poll_target = mely__counter_read(&w->ctr.events_run) + queued;
    w->io->poll_generation = 0;
    mely__placement_sample(w, queued);
}

/* Runs the base once (readiness callbacks stage their posts to other workers
 * in the outbox: expire() flushes it). EVLOOP_ONCE always: with EVLOOP_NONBLOCK
 * alone, libevent polls again as long as a poll finds something, and a
 * level-triggered fd whose event waits in the queue is found every time. */
static void loop_base(struct mely__worker *w, int flags)
{
    mely__count(&w->ctr.polls, 1);
    if (w->trace)
        trace_poll(w, flags);
    else
        event_base_loop(w->io->poller.base, flags | EVLOOP_ONCE);
    new_wave(w);
}

/* Posts the due timers' events; every poller entry point ends here. The
 * posts of readiness callbacks and timers to colors of other workers are
 * staged in the outbox: flushed here, or they would wait, maybe while this
 * worker sleeps, for its next handler. */
static void expire(struct mely__worker *w, uint64_t now)
{
    /* Once stopping, due timers stay in their heap: their events would only
     * be discarded, uncounted as timers (a later mely_run fires them). */
    if (mely__timers_next(&w->io->timers) <= now && !mely__stopping(w->rt)) {
        unsigned fired = mely__timers_expire(w, now);
        if (w->trace && fired)
            mely__trace_note(w->trace, MELY__TR_TIMERS, mely__cycles(), 0, 0, fired);
    }
    if (mely__outbox_pending(&w->outbox))
        mely__outbox_flush(w);
}

static void poll_nonblock(struct mely__worker *w, uint64_t now)
{
    w->io->poller.last_poll_ns = now;
    loop_base(w, EVLOOP_NONBLOCK);
}

/* The turn is over (turnend.h): what it wrote leaves before more is read. */
static void end_turn(struct mely__worker *w, uint64_t now)
{
    mely__turnend_run(w);
    w->io->turn_ns = now;
}

void mely__poller_end_turn(struct mely__worker *w)
{
    end_turn(w, mely__now_ns());
}

static void turn_over(struct mely__worker *w, uint64_t now)
{
    end_turn(w, now);
    w->io->poller.last_poll_ns = now;
    if (mely__poller_watched(w))
        loop_base(w, EVLOOP_NONBLOCK);
    else
        new_wave(w); /* the turn's rhythm without a poll */
}

/* Whether the work the last poll brought has run, with what it posted: when
 * the events queued at the poll have run and more are queued, those are its
 * next generation, waited for in turn, up to POLL_GENERATIONS. */
static bool wave_done(struct mely__worker *w)
{
    uint64_t ran = mely__counter_read(&w->ctr.events_run);
    if (ran < w->io->poller.poll_target)
        return false;
    uint32_t queued = atomic_load_explicit(&w->nevents, memory_order_relaxed);
    if (!queued || ++w->io->poll_generation >= POLL_GENERATIONS)
        return true;
    w->io->poller.poll_target = ran + queued;
    return false;
}

void mely__poller_tick_slow(struct mely__worker *w)
{
    uint64_t now = mely__now_ns();
    uint64_t since = now - w->io->poller.last_poll_ns;
    /* The turn's own limit too: an idle worker's polls do not end it, and a
     * worker that keeps finding work while idle for a moment would keep it
     * going without one. */
    if ((mely__poller_watched(w) || w->turn_end) &&
        (since >= POLL_MAX_US * 1000u || now - w->io->turn_ns >= POLL_MAX_US * 1000u ||
         (since >= MELY_POLL_US * 1000u && wave_done(w))))
        turn_over(w, now);
    expire(w, now);
}

void mely__poller_poll(struct mely__worker *w)
{
    uint64_t now = mely__now_ns();
    if (mely__poller_watched(w))
        poll_nonblock(w, now);
    expire(w, now);
}

void mely__poller_block(struct mely__worker *w, uint64_t wake_by)
{
    /* Read after `parked` was set (timer.c explains the order). */
    uint64_t next = mely__timers_next(&w->io->timers);
    uint64_t now = mely__now_ns();

    if (wake_by < next) /* the timer_fd wakes the base; expire() finds no timer due */
        next = wake_by;
    if (next <= now) {
        expire(w, now);
        return;
    }
    /* With no timer left (next is NEVER), a timer_fd still set for a
     * cancelled timer costs at most one early return. */
    if (next != MELY__NEVER)
        arm_timer(&w->io->poller, next);
    loop_base(w, EVLOOP_ONCE);
    now = mely__now_ns();
    w->io->poller.last_poll_ns = now;
    expire(w, now);
}
