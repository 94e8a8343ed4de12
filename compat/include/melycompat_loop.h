/* SPDX-License-Identifier: MIT */
/*
 * melycompat_loop.h (mely-compat): the event loop of libasync, libasync-smp and
 * the original Mely, over the mely runtime. Included by async.h and by the
 * legacy mely.h, which then name the callback types (cbv...) their own way:
 * the functions here take callbacks as plain pointers, so that a
 * callback<void>::ref, a ::ptr, a fresh wrap() and a Mely-style raw cbv all
 * convert to them. A posted callback holds a count until it has run.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_LOOP_H
#define MELY_COMPAT_LOOP_H

#include <sys/types.h>
#include <netinet/in.h>
#include <time.h>

#include "callback.h"

/* The runtime runs up to this many workers (MELY_WORKERS may ask for fewer);
 * per-worker arrays may be sized with it. */
#ifndef MAX_THREADS
#define MAX_THREADS 256
#endif

/* ---- Running -------------------------------------------------------------- */

/* Runs the event loop on the calling thread (it becomes worker 0) and the
 * other workers; never returns. End the program with exit(). */
[[noreturn]] void amain();

/* ---- Posting (libasync-smp) ------------------------------------------------ */

/* Queue cb on its color: at the head of the color's queue (cpucb), or at the
 * tail (cpucb_tail). Any thread, before amain() too. */
void cpucb(callback<void> *cb);
void cpucb_tail(callback<void> *cb);

/* ---- File descriptors -------------------------------------------------------- */

#ifndef MELY_COMPAT_SELOP
#define MELY_COMPAT_SELOP /* amisc.h's fdwait takes it too */
enum selop { selread = 0, selwrite = 1 };
#endif

/* From now on run cb (with its color) whenever fd is readable (selread) or
 * writable (selwrite); level-triggered; until fdcb(fd, op, NULL) or
 * fdcb_finished(true) from cb. The fd should be non-blocking. What epoll
 * refuses (regular files, directories, /dev/null) is always ready, as in
 * libasync: cb runs again and again, each run an ordinary event at the tail
 * of its color, until removed. Any thread. */
void fdcb(int fd, selop op, callback<void> *cb);
/* From an fd callback: true ends its watch at once (the callback may then
 * close the fd, with no fdcb(fd, op, NULL) needed). */
void fdcb_finished(bool finished);

/* ---- Timers -------------------------------------------------------------------- */

/* A timer's handle: not an address (it encodes a slot and a generation, see
 * doc/porting.md), never NULL. */
struct timecb_t;
/* One-shot timers at a wall-clock time (CLOCK_REALTIME; a time_t: that
 * second) or after a delay; cb runs with its color and priority. Any thread.
 * Any time is accepted, as libasync did: tv_nsec outside 0..999999999
 * carries into the seconds, a past time (before the epoch too) is due now,
 * and a delay or a time too far to count saturates (never, in practice).
 * timecb_remove: a timer still pending is cancelled (cb never runs); a stale
 * handle (the timer's event started or ran, the timer was removed already)
 * does nothing, even once a new timer took its slot. Any thread, any time. */
timecb_t *timecb(const timespec &when, callback<void> *cb);
timecb_t *timecb(time_t when, callback<void> *cb);
timecb_t *delaycb(time_t sec, u_int32_t nsec, callback<void> *cb);
timecb_t *delaycb(time_t sec, callback<void> *cb);
void timecb_remove(timecb_t *t);

/* The loop's notion of now (CLOCK_REALTIME), one per worker thread: read
 * from the clock before every timer, fd and signal callback, and before a
 * posted callback once the clock ticked (it lags by at most a kernel tick,
 * 1-4 ms, there). */
extern thread_local timespec tsnow;
extern thread_local const time_t &timenow;
/* Reads the clock into this thread's tsnow now. */
void mely_compat_refresh_now();

struct lazycb_t; /* a handle, as timecb_t */
/* Runs cb every min_interval seconds (after it last ran) until lazycb_remove:
 * no run starts after it returned (one under way on another core finishes); a
 * second lazycb_remove does nothing. Any thread. */
lazycb_t *lazycb(time_t min_interval, callback<void> *cb);
void lazycb_remove(lazycb_t *l);

/* ---- Signals and children --------------------------------------------------------- */

/* Run cb as an ordinary event (its color) when sig arrives; returns the
 * previous callback; NULL restores the default disposition. flags: ignored. */
callback<void>::ptr sigcb(int sig, callback<void> *cb, int flags = 0);
/* Run cb with the exit status (as waitpid reports it) once child pid exits. */
void chldcb(pid_t pid, callback<void, int> *cb);

/* ---- Colors and workers -------------------------------------------------------------- */

int get_current_color();
unsigned int get_current_proc();
int task_get_nthreads();
int async_get_nthreads();
void register_atexit_handler(void (*fn)(void));
void register_atempty_handler(void (*fn)(void));

/* ---- New here: the native runtime under the compat layer ----------------------------- */

/* The runtime the compat functions use (created on first use), for the native
 * API of <mely/mely.h>: statistics (mely_worker_stats), color placement
 * (mely_color_move), listeners... */
struct mely;
struct mely *mely_compat_runtime();

#endif /* MELY_COMPAT_LOOP_H */
