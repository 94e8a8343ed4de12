/* SPDX-License-Identifier: MIT */
/*
 * io/watch.c: fd watches and signal watches, readiness as colored events.
 *
 * A watch is a libevent event on the base of one worker's poller, plus a
 * state word that keeps the promises of mely.h:
 *
 *   QUEUED   an event of the watch (watch_run) is queued on its color
 *   RUNNING  the user's handler is running
 *   REMOVED  mely_watch_remove() was called: the handler never starts again
 *   PAUSED   mely_watch_pause() took the watch out of epoll until resumed
 *   bits 8+  the readiness seen since the event was queued
 *
 * Readiness (on_ready, on the poller's worker): if no event is queued, set
 * QUEUED and post watch_run to the watch's color; if one is queued, merge the
 * bits into it: a ready watch is queued once. libevent events of fd watches
 * are persistent and level-triggered, so a readiness left unconsumed is seen
 * again at the next poll, which may come while the handler runs elsewhere:
 * it is then ignored, and the handler's end re-reads nothing (level: the next
 * poll reports it again if still true). Signals are not level-triggered: one
 * arriving while the handler runs queues the next run.
 *
 * Following the color: a watch is armed on the base of the worker that owns
 * its color when it is set. When a steal (or mely_color_move) moves the
 * color, the watch's next event still comes from the old poller, runs on the
 * thief, and at its end watch_run moves the watch to the thief's base (an
 * epoll_ctl DEL and ADD, once per move, counted in watch_moves): from then
 * on readiness is seen where the handler runs, as in the original Mely. Until
 * then the old poller could see the readiness again and again while the event
 * waits on the thief; so, in that case only, on_ready disarms the watch (the
 * thief re-arms it on its own base at the handler's end), and an idle old
 * worker does not spin in its poll.
 *
 * Locks: `mu` (per watch) serializes the libevent calls that arm, disarm and
 * move the watch; it is never held by a poller's callback (on_ready only
 * tries it), since libevent's event_del() waits for a callback of the event
 * that runs on another thread. No runtime spinlock is ever held while calling
 * libevent. The table (fd -> watches, and the signal watches) has a mutex
 * of its own, taken only to set and remove watches.
 *
 * Lifetime: a reference for the user (dropped by remove), one for a queued
 * or running watch_run. remove() does event_del() before dropping its
 * reference, and event_del() waits for a running callback, so no callback
 * runs once the last reference is gone.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "mely/remote/colormap.h"
#include "mely/queue/cycles.h"
#include "mely/core/handle.h"
#include "mely/io/iostate.h"
#include "mely/io/poller.h"
#include "mely/io/watch.h"
#include "mely/sched/post.h"
#include "mely/observe/runname.h"
#include "mely/runtime.h"
#include "mely/steal/steal.h"
#include "mely/observe/trace.h"

enum {
    W_QUEUED = 1u << 0,
    W_RUNNING = 1u << 1,
    W_REMOVED = 1u << 2,
    W_PAUSED = 1u << 3,        /* mely_watch_pause(): not re-armed after a run */
    W_READY_SHIFT = 8,
};

struct mely_watch {
    struct mely__rt *rt;
    struct event *ev;
    int fd;                    /* the signal number for a signal watch */
    unsigned what;             /* MELY_READ/WRITE/ONESHOT, or MELY_SIGNAL */
    mely_to_t to;
    mely_io_fn_t fn;
    void *arg;
    _Atomic uint32_t state;
    _Atomic uint32_t refs;
    pthread_mutex_t mu;        /* arming, disarming, moving */
    _Atomic int worker;        /* whose base `ev` belongs to */
    _Atomic bool armed;        /* ev is pending on that base */
    struct mely_watch *prev, *next; /* in the fd's (or signals') list */
    struct mely_watch *all_prev, *all_next; /* in tab->all until freed */
    mely_fn_t fin;             /* mely_watch_remove_then() */
    void *fin_arg;
};

struct mely__watchtab {
    pthread_mutex_t mu;
    struct mely_watch **by_fd; /* heads of per-fd lists */
    size_t nfds;
    struct mely_watch *signals;
    struct mely_watch *all;    /* every watch not yet freed (shutdown frees them) */
};

static bool level(const struct mely_watch *wt)
{
    return !(wt->what & (MELY_ONESHOT | MELY_SIGNAL));
}

static short ev_flags(unsigned what)
{
    if (what & MELY_SIGNAL)
        return EV_SIGNAL | EV_PERSIST;
    return (short)(((what & MELY_READ) ? EV_READ : 0) | ((what & MELY_WRITE) ? EV_WRITE : 0) |
                   ((what & MELY_ONESHOT) ? 0 : EV_PERSIST));
}

static unsigned ready_bits(short events)
{
    if (events & EV_SIGNAL)
        return MELY_SIGNAL;
    return ((events & EV_READ) ? MELY_READ : 0u) | ((events & EV_WRITE) ? MELY_WRITE : 0u);
}

/* Under tab->mu. */
static void all_link(struct mely__watchtab *tab, struct mely_watch *wt)
{
    wt->all_prev = NULL;
    wt->all_next = tab->all;
    if (tab->all)
        tab->all->all_prev = wt;
    tab->all = wt;
}

static void all_unlink(struct mely__watchtab *tab, struct mely_watch *wt)
{
    if (wt->all_prev)
        wt->all_prev->all_next = wt->all_next;
    else
        tab->all = wt->all_next;
    if (wt->all_next)
        wt->all_next->all_prev = wt->all_prev;
}

static void destroy(struct mely_watch *wt)
{
    event_free(wt->ev);
    pthread_mutex_destroy(&wt->mu);
    if (wt->fin)
        wt->fin(wt->fin_arg);
    free(wt);
}

static void unref(struct mely_watch *wt)
{
    if (atomic_fetch_sub(&wt->refs, 1) != 1)
        return;
    struct mely__watchtab *tab = wt->rt->io->watches;
    pthread_mutex_lock(&tab->mu);
    all_unlink(tab, wt);
    pthread_mutex_unlock(&tab->mu);
    destroy(wt);
}

/* ---- arming (under wt->mu) ---------------------------------------------------- */

static void on_ready(evutil_socket_t fd, short events, void *arg);

/* Arms wt on worker i's base, moving it there if it was elsewhere. Returns 0
 * or a negative errno. */
static int arm_on(struct mely_watch *wt, unsigned i)
{
    struct mely__rt *rt = wt->rt;
    int was = atomic_load(&wt->worker);

    if (atomic_load(&wt->armed)) {
        if (was == (int)i)
            return 0;
        event_del(wt->ev);
        atomic_store(&wt->armed, false);
        atomic_fetch_sub(&mely__io_of(rt, was)->poller.nwatches, 1);
    }
    if (was != (int)i) {
        event_assign(wt->ev, mely__io_of(rt, i)->poller.base, wt->fd, ev_flags(wt->what),
                     on_ready, wt);
        atomic_store(&wt->worker, (int)i);
    }
    /* Armed before event_add(): a one-shot event may fire at once, and its
     * callback must find the flag set to clear it (on_ready). */
    atomic_fetch_add(&mely__io_of(rt, i)->poller.nwatches, 1);
    atomic_store(&wt->armed, true);
    errno = 0;
    if (event_add(wt->ev, NULL) != 0) {
        int err = errno ? -errno : MELY_ENOMEM;
        if (atomic_exchange(&wt->armed, false))
            atomic_fetch_sub(&mely__io_of(rt, i)->poller.nwatches, 1);
        return err;
    }
    return 0;
}

static void disarm(struct mely_watch *wt)
{
    event_del(wt->ev);
    if (atomic_exchange(&wt->armed, false))
        atomic_fetch_sub(&mely__io_of(wt->rt, atomic_load(&wt->worker))->poller.nwatches, 1);
}

/* ---- the events ------------------------------------------------------------------ */

/* The epoll_ctl calls that follow a color to another worker are part of what
 * a steal costs: the steal driver folds them into its cost estimate at the
 * next steal (steal.c). */
static void charge_move(struct mely__rt *rt, uint64_t since)
{
    mely__steal_charge(rt, mely__cycles_end() - since);
}

/* The trace record of a watch moved to self from worker `from` (-1: none). */
static void trace_move(const struct mely_watch *wt, struct mely__worker *self, int from,
                       uint64_t since)
{
    struct mely__trec *r = mely__trace_note(self->trace, MELY__TR_MOVE, since,
                                            mely__cycles() - since, wt->to.color,
                                            from < 0 ? UINT16_MAX : (unsigned)from);
    r->u.fd = wt->fd;
}

/* The colored event of a watch: runs the user's handler unless removed, then
 * makes sure the watch is armed where its color now runs. Stall warnings and
 * traces name the run by the user's handler, not by watch_run (runname.h). */
static void watch_run(void *arg)
{
    struct mely_watch *wt = arg;
    uint32_t old = atomic_load(&wt->state), now;

    do {
        if (old & W_REMOVED) {
            unref(wt);
            return;
        }
        now = (old & ~(W_QUEUED | ~0u << W_READY_SHIFT)) | W_RUNNING;
    } while (!atomic_compare_exchange_weak(&wt->state, &old, now));

    /* The run is the program's handler's (its descriptor's, if `to` has
     * one), to stall warnings and traces (runname.h); the re-arming below
     * counts to it. */
    mely__name_run(wt->to.handler, (const void *)wt->fn);
    wt->fn(wt->fd, old >> W_READY_SHIFT, wt->arg);
    old = atomic_fetch_and(&wt->state, ~(uint32_t)W_RUNNING);

    struct mely__worker *self = mely__self;
    if (!(old & W_REMOVED) && level(wt) &&
        (atomic_load(&wt->worker) != (int)self->index || !atomic_load(&wt->armed))) {
        pthread_mutex_lock(&wt->mu);
        if (!(atomic_load(&wt->state) & (W_REMOVED | W_PAUSED))) {
            int from = atomic_load(&wt->worker);
            uint64_t t0 = mely__cycles_begin();
            /* A failure (the fd closed behind the runtime's back) leaves the
             * watch disarmed: there is nothing left to watch. */
            if (arm_on(wt, self->index) == 0 && from != (int)self->index) {
                mely__count(&self->ctr.watch_moves, 1);
                if (self->trace)
                    trace_move(wt, self, from, t0);
            }
            charge_move(wt->rt, t0);
        }
        pthread_mutex_unlock(&wt->mu);
    }
    unref(wt);
}

/* A readiness seen while the watch's event waits on another worker: disarm,
 * so that this poller does not report it again and again (the file's
 * comment). Only tries the lock: see "Locks". */
static void disarm_elsewhere(struct mely_watch *wt, struct mely__worker *self)
{
    if (!level(wt) || mely__owner(wt->rt, wt->to.color) == self->index)
        return;
    if (pthread_mutex_trylock(&wt->mu) != 0)
        return;
    if (atomic_load(&wt->worker) == (int)self->index && atomic_load(&wt->armed)) {
        uint64_t t0 = mely__cycles_begin();
        disarm(wt);
        charge_move(wt->rt, t0);
    }
    pthread_mutex_unlock(&wt->mu);
}

static void on_ready(evutil_socket_t fd, short events, void *arg)
{
    (void)fd;
    struct mely_watch *wt = arg;
    struct mely__worker *self = mely__self;
    uint32_t bits = ready_bits(events) << W_READY_SHIFT;
    uint32_t old = atomic_load(&wt->state);

    if (wt->what & MELY_ONESHOT && atomic_exchange(&wt->armed, false))
        atomic_fetch_sub(&self->io->poller.nwatches, 1); /* libevent disarmed it */
    for (;;) { /* bounded: retries only when another thread changed the state */
        if (old & W_REMOVED)
            return;
        if (old & W_QUEUED || (old & W_RUNNING && level(wt))) {
            if ((old & W_QUEUED) &&
                !atomic_compare_exchange_weak(&wt->state, &old, old | bits))
                continue;
            disarm_elsewhere(wt, self);
            return;
        }
        if (atomic_compare_exchange_weak(&wt->state, &old, old | W_QUEUED | bits))
            break;
    }
    atomic_fetch_add(&wt->refs, 1);
    mely__count(&self->ctr.io_ready, 1);
    if (mely__post_to(wt->rt, &wt->to, watch_run, wt) != 0) {
        /* No memory for the event, or the event budget is used up
         * (MELY_EAGAIN): drop it; a level-triggered watch reports the
         * readiness again at the next poll, once events have run. */
        atomic_fetch_and(&wt->state, ~(W_QUEUED | ~0u << W_READY_SHIFT));
        unref(wt);
    }
}

/* ---- the table -------------------------------------------------------------------- */

int mely__watchtab_init(struct mely__rt *rt)
{
    rt->io->watches = calloc(1, sizeof(*rt->io->watches));
    if (!rt->io->watches)
        return MELY_ENOMEM;
    pthread_mutex_init(&rt->io->watches->mu, NULL);
    return 0;
}

static struct mely_watch **list_of(struct mely__watchtab *tab, const struct mely_watch *wt)
{
    return wt->what & MELY_SIGNAL ? &tab->signals : &tab->by_fd[wt->fd];
}

/* Under tab->mu. */
static int tab_link(struct mely__watchtab *tab, struct mely_watch *wt)
{
    if (!(wt->what & MELY_SIGNAL) && (size_t)wt->fd >= tab->nfds) {
        size_t n = tab->nfds ? tab->nfds : 64;
        while (n <= (size_t)wt->fd)
            n *= 2;
        struct mely_watch **by_fd = realloc(tab->by_fd, n * sizeof(*by_fd));
        if (!by_fd)
            return MELY_ENOMEM;
        memset(by_fd + tab->nfds, 0, (n - tab->nfds) * sizeof(*by_fd));
        tab->by_fd = by_fd;
        tab->nfds = n;
    }
    struct mely_watch **head = list_of(tab, wt);
    wt->prev = NULL;
    wt->next = *head;
    if (*head)
        (*head)->prev = wt;
    *head = wt;
    return 0;
}

/* Under tab->mu. */
static void tab_unlink(struct mely__watchtab *tab, struct mely_watch *wt)
{
    if (wt->prev)
        wt->prev->next = wt->next;
    else
        *list_of(tab, wt) = wt->next;
    if (wt->next)
        wt->next->prev = wt->prev;
    wt->prev = wt->next = NULL;
}

/* Disarms for good and drops the user's reference; wt is unlinked. */
static void release(struct mely_watch *wt)
{
    pthread_mutex_lock(&wt->mu);
    atomic_fetch_or(&wt->state, W_REMOVED);
    disarm(wt);
    pthread_mutex_unlock(&wt->mu);
    unref(wt);
}

/* ---- the API ------------------------------------------------------------------------- */

/* The fd checks epoll would make, done first so that libevent logs nothing. */
/* Whether epoll takes fd: tried on a private epoll set, so that a refusal
 * is an error code here, not a warning libevent prints on the user's
 * stderr. Only for character devices (a tty can be polled, /dev/null not):
 * three system calls per such watch. */
static bool epoll_takes(int fd)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return true; /* cannot tell: libevent will */
    struct epoll_event ev = {.events = EPOLLIN};
    bool ok = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 || errno != EPERM;
    close(ep);
    return ok;
}

/* fstat alone finds a closed descriptor (EBADF): one system call per watch
 * of a socket, which a connection-per-request server makes per request. */
static int check_fd(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        return -EBADF;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || (S_ISCHR(st.st_mode) && !epoll_takes(fd)))
        return -EPERM;
    return 0;
}

/* Creates, links and arms a watch; the worker is the color's owner, or
 * worker 0 for signals (libevent takes signals on one base only). */
static int watch_new(struct mely__rt *rt, int fd, unsigned what, const mely_to_t *to,
                     mely_io_fn_t fn, void *arg, mely_watch_t **out)
{
    struct mely_watch *wt = calloc(1, sizeof(*wt));
    if (!wt)
        return MELY_ENOMEM;
    unsigned i = what & MELY_SIGNAL ? 0 : mely__owner(rt, to->color);
    wt->rt = rt;
    wt->fd = fd;
    wt->what = what;
    wt->to = *to;
    wt->fn = fn;
    wt->arg = arg;
    atomic_init(&wt->state, 0);
    atomic_init(&wt->refs, 1);
    atomic_init(&wt->worker, (int)i);
    atomic_init(&wt->armed, false);
    pthread_mutex_init(&wt->mu, NULL);
    wt->ev = event_new(mely__io_of(rt, i)->poller.base, fd, ev_flags(what), on_ready, wt);
    if (!wt->ev) {
        pthread_mutex_destroy(&wt->mu);
        free(wt);
        return MELY_ENOMEM;
    }

    struct mely__watchtab *tab = rt->io->watches;
    pthread_mutex_lock(&tab->mu);
    int err = tab_link(tab, wt);
    if (!err)
        all_link(tab, wt);
    pthread_mutex_unlock(&tab->mu);
    if (err) {
        destroy(wt);
        return err;
    }
    pthread_mutex_lock(&wt->mu);
    err = arm_on(wt, i);
    pthread_mutex_unlock(&wt->mu);
    if (err) {
        pthread_mutex_lock(&tab->mu);
        tab_unlink(tab, wt);
        all_unlink(tab, wt);
        pthread_mutex_unlock(&tab->mu);
        destroy(wt);
        return err;
    }
    *out = wt;
    return 0;
}

static int watch_in(struct mely__rt *rt, int fd, unsigned what, mely_to_t to, mely_io_fn_t fn,
                    void *arg, mely_watch_t **out)
{
    if (!fn || !out || !(what & (MELY_READ | MELY_WRITE)) ||
        (what & ~(MELY_READ | MELY_WRITE | MELY_ONESHOT)))
        return MELY_EINVAL;
    int err = mely__to_check(rt, &to);
    if (!err)
        err = check_fd(fd);
    return err ? err : watch_new(rt, fd, what, &to, fn, arg, out);
}

int mely_watch(mely_t *m, int fd, unsigned what, mely_to_t to, mely_io_fn_t fn, void *arg,
               mely_watch_t **out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, watch_in(rt, fd, what, to, fn, arg, out)) : MELY_ESHUTDOWN;
}

/*
 * Whether signo may be watched. SIGKILL and SIGSTOP cannot be caught. The
 * synchronous faults are refused: the kernel raises them at an instruction
 * of the thread itself, and a watch only notes the signal and returns. For
 * SIGSEGV, SIGBUS, SIGFPE and SIGILL that return runs the faulting
 * instruction again, which faults again: a crash became an endless loop,
 * with no core dump. SIGTRAP (a breakpoint, a single step) and SIGSYS (a
 * seccomp trap, whose system call then "returns" its own number) do not
 * loop, but a handler that runs later cannot act on the instruction either,
 * and their default action, a core dump, is worth more than an event. A
 * program that must handle them does so with sigaction(), in the handler.
 */
static bool signal_watchable(int signo)
{
    switch (signo) {
    case SIGKILL:
    case SIGSTOP:
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGTRAP:
    case SIGSYS:
        return false;
    default:
        return signo > 0 && signo < NSIG;
    }
}

static int signal_in(struct mely__rt *rt, int signo, mely_to_t to, mely_io_fn_t fn, void *arg,
                     mely_watch_t **out)
{
    if (!fn || !out || !signal_watchable(signo))
        return MELY_EINVAL;
    int err = mely__to_check(rt, &to);
    return err ? err : watch_new(rt, signo, MELY_SIGNAL, &to, fn, arg, out);
}

int mely_signal(mely_t *m, int signo, mely_to_t to, mely_io_fn_t fn, void *arg,
                mely_watch_t **out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, signal_in(rt, signo, to, fn, arg, out)) : MELY_ESHUTDOWN;
}

int mely_watch_remove(mely_watch_t *wt)
{
    return mely_watch_remove_then(wt, NULL, NULL);
}

int mely_watch_remove_then(mely_watch_t *wt, mely_fn_t fin, void *fin_arg)
{
    if (!wt)
        return MELY_EINVAL;
    if (fin) {
        wt->fin = fin;
        wt->fin_arg = fin_arg;
    }
    struct mely__watchtab *tab = wt->rt->io->watches;
    pthread_mutex_lock(&tab->mu);
    tab_unlink(tab, wt);
    pthread_mutex_unlock(&tab->mu);
    release(wt);
    return 0;
}

void mely__watch_set_fin(struct mely_watch *wt, mely_fn_t fin, void *arg)
{
    wt->fin = fin;
    wt->fin_arg = arg;
}

/* Under wt->mu: arms a disarmed watch on the calling worker's poller (its
 * last one from another thread). */
static int arm_here(struct mely_watch *wt)
{
    struct mely__worker *self = mely__self_in(wt->rt);
    int err = check_fd(wt->fd);
    return err ? err : arm_on(wt, self ? self->index : (unsigned)atomic_load(&wt->worker));
}

int mely_watch_rearm(mely_watch_t *wt)
{
    if (!wt || !(wt->what & MELY_ONESHOT))
        return MELY_EINVAL;
    pthread_mutex_lock(&wt->mu);
    int err = atomic_load(&wt->armed) ? 0 : arm_here(wt);
    pthread_mutex_unlock(&wt->mu);
    return err;
}

int mely_watch_pause(mely_watch_t *wt)
{
    if (!wt || !level(wt))
        return MELY_EINVAL;
    pthread_mutex_lock(&wt->mu);
    if (!(atomic_fetch_or(&wt->state, W_PAUSED) & W_REMOVED))
        disarm(wt);
    pthread_mutex_unlock(&wt->mu);
    return 0;
}

int mely_watch_resume(mely_watch_t *wt)
{
    if (!wt || !level(wt))
        return MELY_EINVAL;
    int err = 0;
    pthread_mutex_lock(&wt->mu);
    uint32_t old = atomic_fetch_and(&wt->state, ~(uint32_t)W_PAUSED);
    if ((old & W_PAUSED) && !(old & W_REMOVED)) {
        err = arm_here(wt);
        if (err)
            atomic_fetch_or(&wt->state, W_PAUSED); /* still paused: nothing armed */
    }
    pthread_mutex_unlock(&wt->mu);
    return err;
}

int mely__close_fd(struct mely__rt *rt, int fd)
{
    if (fd < 0)
        return -EBADF;

    struct mely__watchtab *tab = rt->io->watches;
    struct mely_watch *list = NULL;
    pthread_mutex_lock(&tab->mu);
    if ((size_t)fd < tab->nfds) {
        list = tab->by_fd[fd];
        tab->by_fd[fd] = NULL;
    }
    pthread_mutex_unlock(&tab->mu);
    while (list) { /* bounded: the fd's watches */
        struct mely_watch *next = list->next;
        list->prev = list->next = NULL;
        release(list);
        list = next;
    }
    return close(fd) == 0 ? 0 : -errno;
}

int mely_close(mely_t *m, int fd)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, mely__close_fd(rt, fd)) : MELY_ESHUTDOWN;
}

/* At shutdown, no worker running: frees every watch still set, and those
 * removed whose last event was queued (shutdown discards it). */
void mely__watchtab_free(struct mely__rt *rt)
{
    struct mely__watchtab *tab = rt->io->watches;
    if (!tab)
        return;
    while (tab->all) { /* bounded: each pass frees one */
        struct mely_watch *wt = tab->all;
        all_unlink(tab, wt);
        event_del(wt->ev);
        destroy(wt);
    }
    free(tab->by_fd);
    pthread_mutex_destroy(&tab->mu);
    free(tab);
    rt->io->watches = NULL;
}
