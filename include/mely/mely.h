/* SPDX-License-Identifier: MIT */
/*
 * mely.h: the public C API of the mely runtime.
 *
 * mely runs event handlers on one worker thread per core. Every event carries a
 * color (a 16-bit number): two events of one color never run at the same time and
 * run in the order they were posted; events of different colors may run in
 * parallel. Each color belongs to one worker at a time (the color map); a worker
 * keeps one color-queue per color it owns, chained into its core-queue by priority.
 *
 * Conventions:
 *  - Functions that can fail return 0 (or a count) on success and a negative
 *    error code (MELY_E*, or a negative errno) on failure; mely_strerror() turns
 *    any of them into a message. The library never aborts on a user error.
 *  - "Any thread" means: a handler running on any worker of any runtime, the
 *    thread that called mely_run(), or a thread the runtime does not know.
 *    It never means a signal handler: no function of this library is
 *    async-signal-safe unless its comment says "also a signal handler"
 *    (mely_now_ns, mely_color_pick, mely_color_hash). A signal can
 *    interrupt a thread inside the runtime, holding a worker's lock or
 *    halfway through a free list; a call from the signal handler then
 *    spins forever on the lock its own thread holds, or corrupts the
 *    runtime. Take signals with mely_signal() instead: it runs a colored
 *    handler, an ordinary event from which every call is allowed, for each
 *    delivery (example there).
 *  - A mely_t is a handle the caller owns (zero it, or leave it as mely_init()
 *    or mely_shutdown() left it). Do not copy it: pass its address.
 */
#ifndef MELY_MELY_H
#define MELY_MELY_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct sockaddr;

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Limits ------------------------------------------------------------ */

/* Ordinary colors are 0 .. MELY_COLORS-1. Color 0 is the default color shared by
 * every unannotated event, so a program that never picks a color stays serial. */
#define MELY_COLORS 65536u

/* The color map stores a worker index in one byte per color (64 KB in all). */
#define MELY_MAX_WORKERS 256u

/* Priorities are 0 (lowest, the default) .. MELY_PRIO_MAX. A color-queue's
 * priority is the highest priority among its pending events; a worker serves
 * its color-queues from the highest priority down. */
#define MELY_PRIO_LEVELS 8
#define MELY_PRIO_DEFAULT 0
#define MELY_PRIO_MAX (MELY_PRIO_LEVELS - 1)

/* The same-color batch threshold of the paper: at most this many events of one
 * color run back to back before the worker moves to its next color-queue. */
#define MELY_BATCH_DEFAULT 10u
/* The largest batch accepted: a color's run of this many events must still let
 * the worker's other colors, timers and I/O in within about a millisecond. */
#define MELY_BATCH_MAX 1024u

/* The longest an idle worker spins before it parks, in microseconds. Each
 * worker learns how much of it to use (doc/runtime.md, "The spin policy"):
 * it spins while work comes within the spin, stops when the CPU goes to a
 * busy thread, and keeps spinning that finds nothing within a tenth of the
 * time it sleeps. */
#define MELY_SPIN_US_DEFAULT 50u

/* ---- Colors ------------------------------------------------------------ */

typedef uint32_t mely_color_t;

#define MELY_COLOR_DEFAULT ((mely_color_t)0)

/* The pinned color of worker w: its events always run on worker w and the color
 * is never stolen (the legacy API's color -(w+1)). Valid for w < mely_workers(). */
#define MELY_COLOR_PINNED(w) ((mely_color_t)(MELY_COLORS + (mely_color_t)(w)))

/* ---- Errors ------------------------------------------------------------ */

#define MELY_EINVAL (-EINVAL)       /* a bad argument or configuration value */
#define MELY_ENOMEM (-ENOMEM)       /* out of memory; nothing was queued */
#define MELY_EBUSY (-EBUSY)         /* the runtime is running (or run twice) */
#define MELY_ESHUTDOWN (-ESHUTDOWN) /* not initialized, or already shut down */
#define MELY_ECOLOR (-1001)         /* color out of range */
#define MELY_EPRIO (-1002)          /* priority out of range */
#define MELY_ENOFN (-1003)          /* NULL handler function */
#define MELY_EAGAIN (-EAGAIN)       /* the event budget is used up (queued
                                       events: mely_config_t.event_budget_mb);
                                       nothing was queued: try again once
                                       events have run */

/* A message for any code returned by this library (or any negative errno).
 * Never returns NULL. Any thread. */
const char *mely_strerror(int err);

/* ---- Configuration ----------------------------------------------------- */

typedef struct mely_config {
    unsigned workers; /* worker threads; 0 = the CPUs this process may run on */
    int pin;          /* 1: pin worker i to the i-th allowed CPU; 0: do not */
    unsigned batch;   /* same-color batch threshold, 1..MELY_BATCH_MAX */
    unsigned spin_us; /* longest idle spin before parking, in us (0: park at
                         once); the spin policy uses what pays of it */
    const char *steal; /* work-stealing policy (below); NULL = "off" */
    const char *engine; /* queueing engine: NULL or "mely" (color-queues chained
                           in core-queues), "legacy" (libasync-smp's one FIFO
                           per core, for comparison) */
    int keep_sigpipe; /* 0 (default): mely_init() ignores SIGPIPE, so that a
                         write to a closed socket returns EPIPE instead of
                         killing the process; 1: leave SIGPIPE alone */
    int keep_malloc;  /* 0 (default): with glibc, mely_init() raises the heap's
                         trim threshold to MELY_TRIM_THRESHOLD (mallopt
                         M_TRIM_THRESHOLD; glibc's default: 128 KiB), unless
                         the environment set it (MALLOC_TRIM_THRESHOLD_,
                         GLIBC_TUNABLES); 1: leave malloc alone. Streams
                         free their buffers in bursts once per turn: with the
                         default threshold glibc gave the heap back and took
                         it again every turn (brk or madvise, page faults
                         and TLB shootdowns: 23% of a broker's time) */
    unsigned event_budget_mb; /* memory for events, in MiB (0: the default,
                                 MELY_EVENT_BUDGET_MB_DEFAULT): below */
} mely_config_t;

/* What mely_init() sets glibc's trim threshold to (keep_malloc): at most this
 * much freed memory at the top of a heap stays mapped for reuse. */
#define MELY_TRIM_THRESHOLD (32u << 20)

/*
 * The event budget (event_budget_mb, MELY_EVENT_BUDGET_MB). Every event
 * queued, running or on its way to its worker, and the few each worker
 * keeps free for its next posts, lives in event memory (40 bytes an event,
 * in 64 KiB slabs: about 26,000 events per MiB). When a post would take
 * more than the budget, it fails with MELY_EAGAIN and queues nothing;
 * events already accepted are never dropped, and run as usual. Posts
 * succeed again once the events handed out fall to 7/8 of the budget.
 * How exact: the budget is counted in events, 64 at a time, as workers
 * take them from the runtime's shared store. Each worker may hold up to
 * 128 free events beyond it, and posts already on their way when it is
 * reached (at most 512 per worker in its inbox, 32 per worker staged, one
 * per other thread posting at that moment) still get their events. So
 * event memory stays below the budget plus about 30 KB per worker and one
 * 64 KiB slab (while an idle worker gives memory back after a burst, below,
 * new posts may also take fresh slabs beside those it is giving back).
 * At least 1 MiB per worker; at most 4 TiB.
 * Memory comes back after a burst: once free event memory has stayed unused
 * for 100 ms, an idle worker gives every whole free 64 KiB slab of it back
 * to the kernel (madvise), keeping a slab per worker (at most 1 MiB), in
 * steps of about 0.1 ms between which it serves its queues. Event memory
 * is mapped, not malloc'ed, so this does not depend on the program's
 * allocator. Memory that bursts take again within 100 ms stays. After
 * mely_shutdown(), up to 32 MiB of it stays mapped, with its pages, for
 * the process's next runtime.
 */
#define MELY_EVENT_BUDGET_MB_DEFAULT 1024u
#define MELY_EVENT_BUDGET_MB_MAX (4u << 20)

/*
 * Work-stealing policies (mely_config_t.steal, MELY_STEAL). An idle worker
 * runs the steal driver before it parks; the policy decides where it looks,
 * whether a victim qualifies and which color it takes. A policy is "off" (no
 * stealing) or one or more of these words joined with '+':
 *   base      libasync-smp's rules: the most loaded worker first, then the
 *             following ones; a victim needs events of two colors; the first
 *             color that is not running and holds less than half its events;
 *   locality  victims by cache distance (sharing L2, then L3/package, then the
 *             rest), from the cache map (the paper's section 3.1);
 *   timeleft  only worthy colors are taken: those whose expected processing
 *             time (the handlers' timeleft annotations) exceeds the measured
 *             cost of a steal; the largest first, the oldest among similar
 *             (section 3.2); when none is, a color whose events have waited
 *             longer than a steal costs and are expected to take longer than
 *             the steal holds its owner's lock (doc/stealing.md);
 *   penalty   as timeleft (worthiness on time-left alone), and among worthy
 *             colors the one with the lowest handler penalties is taken
 *             (section 3.3);
 *   measured  handlers without a timeleft annotation count their measured
 *             cost (cycles per run, a moving average per descriptor, or
 *             per handler function for events posted without one);
 *   all       locality+timeleft+penalty.
 * "base" alone, or any word without a victim or color rule of its own, falls
 * back to base's rules for the rest. Examples: "base", "locality+timeleft",
 * "all+measured". The legacy engine takes "off" and "base" (with "locality").
 */

/* Fills cfg with the defaults: workers = 0 (usable CPUs), pin = 1,
 * batch = MELY_BATCH_DEFAULT, spin_us = MELY_SPIN_US_DEFAULT, steal = NULL
 * (no stealing), engine = NULL (mely), keep_sigpipe = keep_malloc = 0,
 * event_budget_mb = MELY_EVENT_BUDGET_MB_DEFAULT. Any thread. */
void mely_config_init(mely_config_t *cfg);

/* ---- Life cycle ---------------------------------------------------------- */

typedef struct mely {
    struct mely__rt *rt; /* private */
} mely_t;

/*
 * Creates a runtime in *m from cfg (NULL: defaults). *m must not hold a live
 * runtime: a second mely_init() on it is refused (MELY_EBUSY) and changes
 * nothing; mely_shutdown() it first. Environment variables
 * override cfg: MELY_WORKERS (1..256), MELY_PIN (0/1), MELY_BATCH (1..MELY_BATCH_MAX),
 * MELY_SPIN_US (0..1000000), MELY_STEAL (a policy, as cfg->steal),
 * MELY_ENGINE (as cfg->engine), MELY_KEEP_SIGPIPE (0/1), MELY_KEEP_MALLOC (0/1),
 * MELY_EVENT_BUDGET_MB (workers..MELY_EVENT_BUDGET_MB_MAX). One more has no
 * cfg field: MELY_STALL_MS (0..3600000, default 100; 0: off), the CPU time
 * after which a handler still running gets one MELY_LOG_WARN line through
 * the log hook while it runs ("stall: worker W, color C: handler NAME has
 * run for N ms of CPU so far, M ms of wall time ..."; NAME is the
 * descriptor's name, else the function's symbol as dladdr() or its
 * object's .symtab names it, static functions too, else its address), at
 * most 10 lines a second, each stall counted in mely_stats_t.stalls. CPU
 * time, the worker thread's, so that a worker the kernel descheduled is not
 * blamed on its handler; a handler that sleeps or blocks uses none and is
 * not warned about either. A monitor thread per
 * mely_run() watches for them (doc/runtime.md, "Stall warnings").
 * Each worker's poller (a libevent event_base) is created here, so that
 * watches and timers can be set before mely_run(). No thread starts until mely_run().
 * @return 0; MELY_EINVAL for a bad value in cfg or in the environment (an
 *         event budget below 1 MiB per worker among them), an
 *         unknown steal policy or engine, or a policy the engine cannot run
 *         (a line naming it and the accepted values goes to the log hook,
 *         mely_set_log: stderr by default);
 *         MELY_EBUSY if *m holds a live runtime (also from its own handlers);
 *         MELY_ENOMEM.
 * Threads: any thread, but not concurrently with another call on the same *m.
 */
int mely_init(mely_t *m, const mely_config_t *cfg);

/*
 * Runs the runtime: starts workers 1..n-1 and makes the calling thread worker 0
 * (pinned to the first allowed CPU when pinning is on; its affinity is restored
 * on return). Returns once mely_stop() was called and every worker has finished
 * the handler it was running. Events still queued stay queued: a later
 * mely_run() runs them, mely_shutdown() discards them. A stop requested before
 * mely_run() makes it return at once.
 * @return 0; MELY_ESHUTDOWN; MELY_EBUSY if already running or called from a
 *         handler; a negative errno if a worker thread could not be started.
 * Threads: any one thread that is not a worker.
 */
int mely_run(mely_t *m);

/*
 * Asks mely_run() to return. Handlers that are running finish; no new handler
 * starts after the workers notice the request.
 * @return 0; MELY_ESHUTDOWN.
 * Threads: any thread, including handlers; not a signal handler, for which
 * it is not written (for one, it would wait forever for a mely_shutdown()
 * that the signal interrupted on the same thread): to stop on SIGINT or
 * SIGTERM, call it from a mely_signal() handler (example there).
 */
int mely_stop(mely_t *m);

/*
 * Frees everything the runtime holds (of its event memory, up to 32 MiB stays
 * mapped for the process's next runtime, as glibc keeps freed heap: see
 * MELY_EVENT_BUDGET_MB_DEFAULT). Events still queued are discarded without
 * running (their arguments are not touched). Timers that have not run, due or
 * not, are dropped too, but they are not events and are not counted. With
 * MELY_STATS=1 in the environment, every worker's statistics are printed to
 * stderr first, followed by the cache map (its source, which workers share
 * which cache, the steal orders). (A program that ends with exit() instead, as legacy programs
 * do, gets the tables of its runtimes still live then, printed by an exit
 * handler that mely_init() installs; each table is printed once.)
 * @return the number of events discarded (>= 0): posts and I/O events queued
 *         but not run; MELY_ESHUTDOWN; MELY_EBUSY if mely_run() is in progress
 *         (also when it starts while the shutdown waits, below), if called
 *         from a handler, or if another mely_shutdown() of *m is in progress.
 * Threads: any thread that is not a worker of *m. Calls on *m from other
 * threads at the same time are safe: the shutdown clears *m first, then waits
 * for the calls already inside the runtime to return before it frees anything
 * (they finish normally; their events are counted as discarded); calls that
 * come later return MELY_ESHUTDOWN. So a foreign thread may keep posting
 * until it sees MELY_ESHUTDOWN. The wait is for calls in progress on any
 * runtime of the process, microseconds, never for a handler.
 * Afterwards every call on *m returns MELY_ESHUTDOWN until mely_init().
 */
int mely_shutdown(mely_t *m);

/* ---- Events ---------------------------------------------------------------- */

typedef void (*mely_fn_t)(void *arg);

/*
 * A handler descriptor: annotations shared by every event of one handler, read
 * by the work-stealing heuristics. Keep it alive (usually static, may be
 * const) while events that point to it are queued. Zero-initialize it. The
 * runtime never writes to it.
 */
typedef struct mely_handler {
    const char *name;       /* for statistics and traces; may be NULL */
    uint64_t timeleft;      /* expected processing cycles per event; 0: unknown */
    uint32_t penalty;       /* work-stealing penalty: an event counts as
                               timeleft / penalty for stealing; 0 or 1: none */
    uint64_t mely_private_[2]; /* reserved; leave zero */
} mely_handler_t;

/*
 * The measured cost of h's handler on runtime *m: a moving average of the TSC
 * cycles its runs took, kept while the runtime has a "measured" steal policy,
 * for descriptors without a timeleft annotation (up to a few thousand
 * descriptors and functions); 0 if never measured, or *m not initialized. Use it to write
 * down a timeleft annotation after a profiling run.
 * Threads: any thread (the figure may lag the latest runs).
 */
uint64_t mely_handler_measured(const mely_t *m, const mely_handler_t *h);

/*
 * The measured cost of the handler function fn, for its events posted without
 * a descriptor (mely_post, mely_post_head, MELY_TO without a handler): one
 * average per function, kept under the same policy and bounds as
 * mely_handler_measured(); 0 if never measured, fn NULL or *m not initialized.
 * Threads: any thread (the figure may lag the latest runs).
 */
uint64_t mely_fn_measured(const mely_t *m, mely_fn_t fn);

#define MELY_POST_HEAD 1u /* queue at the head of the color's queue (cpucb) */

/*
 * Queues fn(arg) as an event of `color` at priority `prio`, described by h
 * (may be NULL), at the tail of the color's queue (flags 0: libasync-smp's
 * cpucb_tail) or at its head (MELY_POST_HEAD: cpucb; it runs before the color's
 * other pending events). Events of one color run one at a time, in post order:
 * of two posts to one color where the first happens before the second (made
 * by the same thread or handler, or by a handler that the first post's
 * thread caused to run, through posts, steals or locks), the first runs
 * first; concurrent posts run in some order.
 * Posting works before mely_run(), between runs, and while running.
 * A handler's posts to colors of other workers reach them in batches, at the
 * latest when the handler returns: a handler that posts and then computes
 * for long delays them (post last, or split the handler). They travel
 * through the owner's inbox (a bounded ring) and never wait: a full inbox
 * makes the post take the owner's lock instead.
 * @return 0; MELY_ESHUTDOWN; MELY_ECOLOR (color >= MELY_COLORS and not a valid
 *         MELY_COLOR_PINNED); MELY_EPRIO (prio outside 0..MELY_PRIO_MAX);
 *         MELY_ENOFN (fn NULL); MELY_EINVAL (unknown flag); MELY_EAGAIN
 *         (the event budget is used up: see MELY_EVENT_BUDGET_MB_DEFAULT;
 *         a handler that gets it should not spin on it, since the events
 *         that must run first may be its own worker's); MELY_ENOMEM (no
 *         memory could be mapped, or, for a color's first event, malloc
 *         failed). On error nothing was queued, and the posts accepted
 *         before it still run, in order.
 * Threads: any thread, but never a signal handler: a post spins on its
 * owner's lock, and the thread the signal interrupted may be the holder,
 * inside a post or between batches (a deadlock); it also takes events from
 * the thread's own free list, which the interrupted code may be changing.
 * To post when a signal arrives, post from a mely_signal() handler (example
 * there). Cost: O(1), no malloc in the steady state.
 */
int mely_post_ex(mely_t *m, mely_color_t color, int prio, const mely_handler_t *h,
                 mely_fn_t fn, void *arg, unsigned flags);

/* mely_post_ex(m, color, MELY_PRIO_DEFAULT, NULL, fn, arg, 0): a tail post.
 * Threads: as mely_post_ex (never a signal handler). */
int mely_post(mely_t *m, mely_color_t color, mely_fn_t fn, void *arg);

/* mely_post_ex(m, color, MELY_PRIO_DEFAULT, NULL, fn, arg, MELY_POST_HEAD).
 * Threads: as mely_post_ex (never a signal handler). */
int mely_post_head(mely_t *m, mely_color_t color, mely_fn_t fn, void *arg);

/* ---- Introspection ----------------------------------------------------------- */

/* The color of the running handler, or -1 outside a handler. Any thread. */
int mely_current_color(void);

/* The index of the calling worker (0 .. workers-1), or -1 if the calling thread
 * is not a worker. Any thread. */
int mely_current_worker(void);

/* The number of workers of the runtime, or 0 if *m is not initialized. Any thread. */
unsigned mely_workers(const mely_t *m);

/*
 * The worker that owns `color` now (its events are queued there).
 * @return 0 .. workers-1; MELY_ESHUTDOWN; MELY_ECOLOR.
 * Threads: any thread; the answer may be stale once work stealing moves colors.
 */
int mely_color_owner(const mely_t *m, mely_color_t color);

/*
 * Places `color` on worker `worker`: its future events queue and run there
 * (until a steal moves it again). Only an idle color moves: one with no
 * pending event that is not running. Use it to choose an initial placement
 * other than the hash (color % workers), or to gather colors before a phase.
 * @return 0 (also when it already lives there); MELY_ESHUTDOWN; MELY_ECOLOR
 *         (out of range, or a pinned color); MELY_EINVAL (worker out of range);
 *         MELY_EBUSY (the color has pending events, posted ones still on their
 *         way included, or is running); MELY_ENOMEM (the current owner's
 *         reserve of events is not full: out of memory; nothing changed).
 * Threads: any thread. Cost: two worker locks, and a short wait for the
 * other workers' posts in flight.
 */
int mely_color_move(mely_t *m, mely_color_t color, unsigned worker);

/* ---- Color ranges ---------------------------------------------------------------
 *
 * Planning the color space (doc/colors.md): colors are 16-bit, and two
 * unrelated uses of one color serialize each other. Keep the low colors,
 * 0 .. MELY_COLOR_RANGE_FLOOR-1, for the program's fixed roles (0: the
 * default, shared by everything unannotated; 1: the accept loop; ...), and
 * give each family of keys (connections, keys of a table, users) a range
 * reserved from the runtime: mely_color_pick maps any key, however large
 * (an fd, an id, a hash), into it. A range of n colors serves at most n
 * keys in parallel; two keys sharing a color only run one after the other.
 * A few times the number of workers is enough to keep every worker busy;
 * the stealing heuristics like more (a color is the unit they move).
 */

/* Ranges are carved from the top of the space down to this color. */
#define MELY_COLOR_RANGE_FLOOR 1024u

typedef struct mely_color_range {
    mely_color_t base; /* the first color of the range */
    uint32_t n;        /* how many */
} mely_color_range_t;

/*
 * Reserves n consecutive colors of *m that no other range of *m includes,
 * all at or above MELY_COLOR_RANGE_FLOOR. Reservations last as long as the
 * runtime. Colors stay ordinary colors: nothing stops a program from
 * posting to them directly.
 * @return 0 and *out; MELY_ESHUTDOWN; MELY_EINVAL (n 0, out NULL);
 *         -ENOSPC (fewer than n colors left above the floor).
 * Threads: any thread.
 */
int mely_color_range(mely_t *m, uint32_t n, mely_color_range_t *out);

/* The color of `key` in range r: base + key % n, so consecutive keys (fds,
 * ids) take consecutive colors, which the color map spreads over the
 * workers. Any thread, also a signal handler. */
static inline mely_color_t mely_color_pick(const mely_color_range_t *r, uint64_t key)
{
    return r->base + (mely_color_t)(key % r->n);
}

/* The color of a key given as bytes (a string, a struct): a hash (FNV-1a,
 * 64-bit) of the len bytes at key, picked into r. Any thread, also a signal
 * handler. */
mely_color_t mely_color_hash(const mely_color_range_t *r, const void *key, size_t len);

/* ---- Placement by load ------------------------------------------------------
 *
 * A color's first owner is the hash (color % workers). For connections that
 * is placement by chance: SWS colored a connection by its descriptor, so a
 * connection's worker followed the descriptor's parity, whatever either
 * worker had to do. A color pool places them by load instead: the program
 * takes a color for each new connection (mely_color_place) and gives it back
 * when the connection ends (mely_color_release), and the pool hands out a
 * free color owned by the least loaded of two workers drawn at random (all
 * workers when there are at most 4). A worker's load, read without a lock:
 * the colors of pools placed on it now, plus its backlog (the events its
 * polls leave queued, averaged over its last polls, and the posts waiting
 * in its inbox). So new connections go where there are fewer connections
 * and less backlog, and a worker that falls behind gets fewer of them
 * until it catches up.
 * doc/runtime.md ("Placement by load") has the reasons and the figures.
 *
 *     static mely_color_pool_t *pool;           // mely_color_pool(&m, 4096, &pool)
 *     static void on_accept(int fd, const struct sockaddr *peer, unsigned len, void *arg)
 *     {
 *         mely_color_t c;
 *         if (mely_color_place(&m, pool, &c) != 0)
 *             c = mely_color_pick(&range, fd);  // the pool is empty: share a color
 *         ... watch fd on color c; on c, when the connection ends:
 *         mely_color_release(&m, pool, c);      // from c's own last handler
 *     }
 *
 * Placement is a hint, never a rule: a steal may move a placed color later,
 * and mely_color_move() too. Colors of a pool stay ordinary colors: the
 * invariants (one at a time, in post order) hold as for any color, also
 * for a color released and placed again at once, whose new events simply
 * run after the old ones.
 */

typedef struct mely_color_pool mely_color_pool_t;

/*
 * Reserves n colors of *m as a pool (as mely_color_range does: above
 * MELY_COLOR_RANGE_FLOOR, shared with no other range or pool), all of them
 * free. The pool lasts as long as the runtime: mely_shutdown() frees it.
 * Size it for the connections served at once; a place beyond it fails
 * with -ENOSPC (the program then shares a color, mely_color_pick).
 * @return 0 and *out; MELY_ESHUTDOWN; MELY_EINVAL (n 0, out NULL);
 *         -ENOSPC (fewer than n colors left above the floor); MELY_ENOMEM.
 *         Memory: about 6 bytes per color and a cache line per worker.
 * Threads: any thread.
 */
int mely_color_pool(mely_t *m, uint32_t n, mely_color_pool_t **out);

/*
 * Takes a free color of pool p for a new connection (or any new unit of
 * work that lives a while) and places it by load: it draws two workers at
 * random (with up to 4 workers, it looks at each), and takes a free color
 * that the less loaded one owns (ties: the first drawn). A worker's load is
 * the colors of every pool of *m placed on it and not released, plus the
 * events it has queued after its polls (an average: the backlog it keeps),
 * plus the posts waiting in its inbox (with the Mely engine). When
 * that worker owns no free color of p, a free color of another worker is
 * moved to it (mely_color_move); if the move is refused (the color is
 * still finishing its last handler), the color is handed out where it is.
 * Use *out as a color of your own: post to it, watch on it, until you
 * release it.
 * @return 0 and *out; MELY_ESHUTDOWN; MELY_EINVAL (p or out NULL, or p
 *         belongs to another runtime); -ENOSPC (every color of p is placed).
 * Threads: any thread, not a signal handler. Cost: no lock in the common
 * case; a few cache lines of other workers read, one compare-and-swap on
 * the chosen worker's free list and one atomic add on its load; the
 * move, when it happens, takes two worker locks (mely_color_move).
 */
int mely_color_place(mely_t *m, mely_color_pool_t *p, mely_color_t *out);

/*
 * Gives color back to pool p: its load leaves the worker it was placed on,
 * and the color can be placed again at once. Release it when the
 * connection is done: from the color's last handler (nothing of the old
 * connection then runs beside a new one), or from anywhere once no event
 * of it is queued. Events still queued on it, and those posted to it
 * later, run as usual, in order with the next connection's.
 * @return 0; MELY_ESHUTDOWN; MELY_EINVAL (p NULL, p of another runtime,
 *         color not of p, or not placed now: a second release).
 * Threads: any thread, not a signal handler. Cost: one compare-and-swap on
 * a free list, one atomic add.
 */
int mely_color_release(mely_t *m, mely_color_pool_t *p, mely_color_t color);

/*
 * The colors of p placed on `worker` now (placed, not yet released; counted
 * on the worker it was placed on, even if a steal moved it since).
 * @return a count >= 0; MELY_ESHUTDOWN; MELY_EINVAL (p NULL, p of another
 *         runtime, worker out of range).
 * Threads: any thread (a snapshot that may be stale at once).
 */
int mely_color_pool_placed(const mely_t *m, const mely_color_pool_t *p, unsigned worker);

/* ---- I/O, timers and signals (the per-worker pollers) --------------------
 *
 * Every worker owns a poller (a libevent event_base on epoll). Readiness of a
 * file descriptor, a timer's expiry and a signal all become ordinary colored
 * events: they run wherever their color lives, one at a time per color, in the
 * worker's queue with everything else. An idle worker sleeps in its poller
 * (no busy polling); a busy one polls without blocking between batches (at
 * most every MELY_POLL_US, at least every millisecond, and whenever its queue
 * runs dry; doc/io.md).
 */

/* Where an I/O, timer or signal event goes: its color, priority and handler
 * descriptor (may be NULL), as in mely_post_ex(). MELY_TO(c) is color c at
 * the default priority without a descriptor. */
typedef struct mely_to {
    mely_color_t color;
    int prio;
    const mely_handler_t *handler;
} mely_to_t;

#ifdef __cplusplus
/* C++ has no compound literals (an error with -pedantic-errors). */
static inline mely_to_t mely_to(mely_color_t color)
{
    mely_to_t to = { color, MELY_PRIO_DEFAULT, NULL };
    return to;
}
#define MELY_TO(c) (mely_to((mely_color_t)(c)))
#else
#define MELY_TO(c) ((mely_to_t){ (mely_color_t)(c), MELY_PRIO_DEFAULT, NULL })
#endif

/* A busy worker polls for I/O without blocking at most this often (and only
 * once the work its last poll brought has run, or 1 ms passed: doc/io.md). */
#define MELY_POLL_US 50u

/* Readiness bits (the `what` of a watch and the `ready` of its handler). */
#define MELY_READ 0x1u     /* readable, or the peer hung up, or an error */
#define MELY_WRITE 0x2u    /* writable */
#define MELY_ONESHOT 0x4u  /* flag of mely_watch(): disarm after one readiness */
#define MELY_SIGNAL 0x8u   /* the `ready` of a signal watch's handler (mely_signal) */

#define MELY_ENOENT (-ENOENT) /* no such timer (fired, cancelled or never set) */

typedef struct mely_watch mely_watch_t;

/* An fd watch's handler: fd is the watched descriptor (the signal number for
 * mely_signal), ready the MELY_READ/MELY_WRITE bits seen (MELY_SIGNAL for a
 * signal), arg the watch's argument. */
typedef void (*mely_io_fn_t)(int fd, unsigned ready, void *arg);

/*
 * Watches fd for readiness: `what` is MELY_READ and/or MELY_WRITE, plus
 * MELY_ONESHOT for a watch that disarms after one readiness (mely_watch_rearm
 * arms it again). A watch is level-triggered: while fd stays ready and the
 * watch armed, fn runs again after each run. A ready watch is queued once: no
 * second event of it is queued before the first has run, and it is re-armed
 * after its handler returned. fn(fd, ready, arg) runs as an event of to.color
 * (SWS's habit: the fd number), wherever that color lives; when a steal moves
 * the color, its watches move to the thief's poller at their next run. Any
 * number of watches may share an fd (a read and a write watch, say). The fd
 * must be non-blocking for a handler to be safe, and must stay open until the
 * watch is removed (mely_close() does both). Works before mely_run().
 * @return 0 and *out; MELY_ESHUTDOWN; MELY_EINVAL (what has no READ/WRITE or
 *         an unknown bit, fn or out NULL); MELY_ECOLOR; MELY_EPRIO; -EBADF (fd
 *         not open); -EPERM (fd cannot be polled: a regular file, a
 *         directory, a device epoll refuses such as /dev/null);
 *         MELY_ENOMEM; -ENOSPC (the system's epoll watch limit).
 * Threads: any thread.
 */
int mely_watch(mely_t *m, int fd, unsigned what, mely_to_t to, mely_io_fn_t fn, void *arg,
               mely_watch_t **out);

/*
 * Removes a watch (of mely_watch, mely_signal) and frees its handle. After it
 * returns, fn never starts again, even if an event of the watch was queued.
 * Called from the watch's own color (its handler, or any event of that color)
 * it is also synchronous: fn is not running anywhere, so fn's argument may be
 * freed. From elsewhere, a run that had already started on another worker may
 * still be finishing: remove from the watch's color before freeing the
 * argument.
 * @return 0; MELY_EINVAL (w NULL).
 * Threads: any thread; w must not be used afterwards.
 */
int mely_watch_remove(mely_watch_t *w);

/*
 * As mely_watch_remove(), and then fin(fin_arg) runs (fin may be NULL) once
 * the watch's handler is not running and never will: at once on the calling
 * thread, or on the worker where a run that had started ends. Use it to free
 * the handler's argument when removing from outside the watch's color. Also
 * run by mely_shutdown() for a watch whose last event it discards.
 * @return 0; MELY_EINVAL (w NULL).
 * Threads: any thread; w must not be used afterwards.
 */
int mely_watch_remove_then(mely_watch_t *w, mely_fn_t fin, void *fin_arg);

/*
 * Arms a MELY_ONESHOT watch again (after its handler ran, or from it).
 * @return 0; MELY_EINVAL (w NULL or not one-shot); -EBADF, MELY_ENOMEM as
 *         mely_watch().
 * Threads: any thread.
 */
int mely_watch_rearm(mely_watch_t *w);

/*
 * Pauses a persistent fd watch: readiness is no longer reported (the fd
 * leaves epoll) until mely_watch_resume(); an event of the watch already
 * queued still runs. For backpressure: a reader whose buffer is full pauses
 * its read watch instead of removing it and watching again later.
 * mely_watch_resume() arms it again, on the calling worker's poller when
 * called from a worker of the runtime. Both do nothing on a removed watch.
 * @return 0; MELY_EINVAL (w NULL, one-shot or a signal watch); resume also
 *         -EBADF, MELY_ENOMEM as mely_watch().
 * Threads: any thread.
 */
int mely_watch_pause(mely_watch_t *w);
int mely_watch_resume(mely_watch_t *w);

/*
 * Removes every watch of fd (as mely_watch_remove), then closes fd: the
 * order epoll needs. Handles of those watches become invalid. The fd number
 * can come back from the next accept() or open() at once, also on another
 * worker: clear any table indexed by fd before calling this, and do not take
 * a later event of color fd for the closed connection (a generation number
 * tells them apart).
 * @return 0; MELY_ESHUTDOWN; -EBADF (fd was not open); what close() reports.
 * Threads: any thread.
 */
int mely_close(mely_t *m, int fd);

/* Monotonic clock, in nanoseconds (the clock of mely_timer_at). Any thread,
 * also a signal handler (clock_gettime). */
uint64_t mely_now_ns(void);

/* A timer, named by a 64-bit id (never 0) that carries a generation, so that
 * cancelling a timer that fired is a clean MELY_ENOENT (an id comes back
 * only after its slot was reused 2^32 times). */
typedef uint64_t mely_timer_t;

/*
 * Runs fn(arg) as an event of to.color after delay_ns (mely_timer_after) or at
 * `deadline_ns` of the monotonic clock (mely_timer_at; a past deadline fires
 * at once), or at a wall-clock time (mely_timer_at_wall, CLOCK_REALTIME,
 * converted to the monotonic clock when set: a later clock change does not
 * move it). A timer never fires early; on an idle machine it fires within a
 * millisecond or two. Timers of one color with equal deadlines fire in the
 * order they were set. Cost: O(log n) in the pending timers of one worker.
 * @return 0 and *out (out may be NULL); MELY_ESHUTDOWN; MELY_ECOLOR;
 *         MELY_EPRIO; MELY_ENOFN; MELY_EINVAL (ts invalid); MELY_ENOMEM.
 * Threads: any thread, not a signal handler (the timers' lock, as a post's);
 * works before mely_run() (the clock runs meanwhile).
 */
int mely_timer_after(mely_t *m, uint64_t delay_ns, mely_to_t to, mely_fn_t fn, void *arg,
                     mely_timer_t *out);
int mely_timer_at(mely_t *m, uint64_t deadline_ns, mely_to_t to, mely_fn_t fn, void *arg,
                  mely_timer_t *out);
int mely_timer_at_wall(mely_t *m, const struct timespec *ts, mely_to_t to, mely_fn_t fn,
                       void *arg, mely_timer_t *out);

/*
 * Cancels a timer: when it returns 0, fn will not run (also if the timer had
 * expired and its event was queued but had not started).
 * @return 0; MELY_ENOENT (fn has started or finished, or the timer was
 *         cancelled or never existed); MELY_ESHUTDOWN.
 * Threads: any thread, not a signal handler.
 */
int mely_timer_cancel(mely_t *m, mely_timer_t t);

/*
 * Runs fn(signo, MELY_SIGNAL, arg) as an ordinary event of to.color each time
 * signal signo arrives (never inside the signal handler). Deliveries that
 * arrive while an event of this watch is queued are merged into it, as the
 * kernel merges pending signals. Several watches may share a signal. Remove
 * with mely_watch_remove(); when a signal's last watch goes, its previous
 * disposition is restored. Signals are caught process-wide: one runtime at a
 * time should watch a given signal.
 * This is the safe way to act on a signal: fn is a handler like any other,
 * so it may post, set timers, stop the runtime. A signal handler of the
 * program's own may call none of these (Conventions, at the top). E.g., stop
 * on SIGINT or SIGTERM, and have SIGHUP post a reload to color 1:
 *
 *     static void on_stop(int signo, unsigned ready, void *arg)
 *     {
 *         mely_stop(arg);
 *     }
 *     static void on_hup(int signo, unsigned ready, void *arg)
 *     {
 *         mely_post(arg, 1, reload, NULL);
 *     }
 *     ...
 *     mely_watch_t *w[3];
 *     if (mely_signal(&m, SIGINT, MELY_TO(0), on_stop, &m, &w[0]) ||
 *         mely_signal(&m, SIGTERM, MELY_TO(0), on_stop, &m, &w[1]) ||
 *         mely_signal(&m, SIGHUP, MELY_TO(0), on_hup, &m, &w[2]))
 *         ...
 *
 * A program that must keep a sigaction() handler of its own (it needs the
 * siginfo_t, say) writes a byte to a pipe there (write() is
 * async-signal-safe) and posts from the handler of a mely_watch() on the
 * pipe's other end.
 * The synchronous faults SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP and SIGSYS
 * are refused: the kernel raises them at an instruction of the thread
 * itself, and a watch notes the signal and returns, so the instruction runs
 * again. A crash would become an endless loop, without a core dump (SIGTRAP
 * and SIGSYS continue instead, past an instruction nobody acted on). A
 * program that handles them does so in its own sigaction() handler.
 * @return 0 and *out; MELY_ESHUTDOWN; MELY_EINVAL (signo not catchable,
 *         SIGKILL and SIGSTOP, a synchronous fault above, out of range, or
 *         fn/out NULL); MELY_ECOLOR; MELY_EPRIO; MELY_ENOMEM.
 * Threads: any thread (not a signal handler).
 */
int mely_signal(mely_t *m, int signo, mely_to_t to, mely_io_fn_t fn, void *arg,
                mely_watch_t **out);

/* ---- Listening sockets ------------------------------------------------------- */

typedef struct mely_listener mely_listener_t;

/* A new connection: fd is non-blocking and close-on-exec and belongs to the
 * handler (watch it, or mely_close it); peer is the client's address. */
typedef void (*mely_accept_fn_t)(int fd, const struct sockaddr *peer, unsigned peerlen,
                                 void *arg);

#define MELY_LISTEN_REUSEPORT 0x1u /* one SO_REUSEPORT socket per worker */

/*
 * Listens on TCP host:port (host NULL: 127.0.0.1; numeric IPv4 or IPv6; port
 * 0: any free port, see mely_listener_port) with the given backlog (0:
 * SOMAXCONN). fn(fd, peer, peerlen, arg) runs for every accepted connection,
 * as an event of to.color; with MELY_LISTEN_REUSEPORT every worker gets a
 * socket of its own and accepts on its pinned color MELY_COLOR_PINNED(i)
 * instead (the kernel spreads connections). Accepting takes at most 64
 * connections per readiness; it retries EINTR, skips ECONNABORTED and
 * EPROTO, stops at EAGAIN, and on EMFILE/ENFILE/ENOBUFS/ENOMEM pauses
 * accepting for 100 ms (counted in mely_listener_pauses) instead of spinning.
 * @return 0 and *out; MELY_ESHUTDOWN; MELY_EINVAL (bad host, flags, fn or
 *         out); MELY_ECOLOR; MELY_EPRIO; MELY_ENOMEM; a negative errno from
 *         socket/bind/listen (e.g. -EADDRINUSE).
 * Threads: any thread.
 */
int mely_listen(mely_t *m, const char *host, unsigned port, int backlog, unsigned flags,
                mely_to_t to, mely_accept_fn_t fn, void *arg, mely_listener_t **out);

/* The port the listener is bound to (useful after port 0). Any thread. */
unsigned mely_listener_port(const mely_listener_t *l);

/* Times accepting was paused for lack of descriptors or memory. Any thread. */
uint64_t mely_listener_pauses(const mely_listener_t *l);

/*
 * Holds accepting until mely_listener_resume(): the listening socket(s) leave
 * epoll and new connections wait in the kernel's backlog (beyond it, the
 * kernel drops SYNs and clients retry). For a cap on clients: pause at the
 * cap, resume when one leaves. Once pause returns, no accept starts (an
 * accept loop running on another worker at that moment may still take one
 * connection per socket, and hands it to fn). Not nested: one resume ends
 * any number of pauses; pausing a paused listener, or resuming a running
 * one, does nothing.
 * @return 0; MELY_EINVAL (l NULL); resume also mely_watch_resume()'s errors
 *         (-EBADF, MELY_ENOMEM).
 * Threads: any thread, also from fn itself.
 */
int mely_listener_pause(mely_listener_t *l);
int mely_listener_resume(mely_listener_t *l);

/* 1 while accepting is held by mely_listener_pause(), else 0. Any thread. */
int mely_listener_paused(const mely_listener_t *l);

/*
 * Stops accepting and closes the listening socket(s); connections already
 * accepted are unaffected. As mely_watch_remove(), fn never starts again once
 * it returns.
 * @return 0; MELY_EINVAL (l NULL).
 * Threads: any thread; l must not be used afterwards.
 */
int mely_listener_close(mely_listener_t *l);

/* ---- Idle hook ------------------------------------------------------------------ */

/*
 * Sets the function every worker calls when it is about to sleep: its queue is
 * empty and it found nothing to steal. fn(arg) runs on that worker's thread,
 * outside any handler (mely_current_color() is -1, mely_current_worker()
 * names the worker); events it posts run before the worker sleeps. fn NULL
 * removes the hook. Used for libasync-smp's register_atempty_handler (compat/).
 * Keep it short: it runs each time a worker goes idle.
 * @return 0; MELY_ESHUTDOWN; MELY_EBUSY while mely_run() is in progress.
 * Threads: any thread, while the runtime does not run.
 */
int mely_on_idle(mely_t *m, mely_fn_t fn, void *arg);

/* ---- Tracing -------------------------------------------------------------------- */

/*
 * Starts recording what every worker does into a trace written to `path`
 * (created or truncated now, written when tracing stops): each handler run
 * (its color, its name, its start and duration), steals (the victim, the
 * color, its events and their expected cycles, how long the steal took),
 * parks (how long the worker slept, whether another thread woke it), polls
 * (duration, watch events they queued), expired timers and fd watches that
 * moved to a worker after their color did. MELY_TRACE=path in the
 * environment does the same from mely_init() on (an unusable path makes
 * mely_init() fail with its error).
 * Each worker records into a ring of its own, allocated now, without a lock
 * or an allocation; a full ring overwrites its oldest records.
 * MELY_TRACE_RECORDS sets the ring's size in records (32 bytes each; default
 * 65536, rounded up to a power of two). Tracing off costs a worker one load
 * and branch per handler batch, steal, park and poll.
 * Running workers begin at their next batch. The file is Chrome/Perfetto
 * Trace Event JSON (ui.perfetto.dev, chrome://tracing open it): one track
 * per worker ("worker N"), one slice per handler run named after the
 * handler (its descriptor's name, else its symbol as dladdr() or its
 * object's .symtab names it, static functions too, else its address) with
 * args {color, cycles}; otherData.dropped_records counts the overwritten
 * records. `mely-trace FILE` summarizes it (per worker busy, polling,
 * stealing and parked shares; per handler and color percentiles; the steals; `--png` draws the timeline): doc/observability.md.
 * @return 0; MELY_ESHUTDOWN; MELY_EINVAL (path NULL); MELY_EBUSY if already
 *         tracing; MELY_ENOMEM; a negative errno if the file cannot be
 *         created.
 * Threads: any thread, also a handler, whether or not mely_run() runs.
 */
int mely_trace_start(mely_t *m, const char *path);

/*
 * Stops tracing and writes the trace file: waits until every worker has let
 * go of its ring (each does at its next batch; a parked worker is woken for
 * it; one inside a long handler is waited for), and until 20 ms have passed
 * since tracing started, to measure the time-stamp counter's rate against
 * the monotonic clock. mely_shutdown() does it for a trace still on, and so
 * does exit() (legacy programs end so): there, a worker still inside a
 * handler after 200 ms is not waited for, and its records are left out of
 * the file (otherData.unwritten_workers names it, and a warning says so).
 * @return the number of records dropped by full rings (>= 0, capped at
 *         INT32_MAX); MELY_ESHUTDOWN; MELY_EINVAL if not tracing;
 *         MELY_EBUSY from a handler of this runtime (its own ring would never
 *         be let go); a negative errno if the file could not be written
 *         (tracing is stopped anyway).
 * Threads: any thread but the runtime's own workers, whether or not
 * mely_run() runs.
 */
int mely_trace_stop(mely_t *m);

/* ---- Log hook ------------------------------------------------------------------- */

/* Message levels, as libevent's severities (EVENT_LOG_DEBUG .. EVENT_LOG_ERR). */
#define MELY_LOG_DEBUG 0
#define MELY_LOG_INFO 1
#define MELY_LOG_WARN 2
#define MELY_LOG_ERROR 3

/* A log hook: level is a MELY_LOG_*, msg one line without its newline (valid
 * during the call only), arg the argument given to mely_set_log(). */
typedef void (*mely_log_fn_t)(int level, const char *msg, void *arg);

/*
 * Sends the runtime's messages to fn(level, msg, arg); fn NULL restores the
 * default, which prints "mely: <msg>" on stderr for MELY_LOG_WARN and
 * MELY_LOG_ERROR and drops the rest. The messages: mely_init()'s refusals of
 * a configuration or environment value (MELY_LOG_ERROR), a cache map that
 * falls back to the flat order (MELY_LOG_WARN), one built by hwloc because
 * sysfs has no cache information (MELY_LOG_INFO), stall warnings
 * (MELY_LOG_WARN, from the stall monitor's thread: see mely_init()), and libevent's own log as
 * "libevent: <its message>" at its severity (e.g. "libevent: Epoll ADD(1) on
 * fd 7 failed. ..." at MELY_LOG_WARN). MELY_STATS's table is not a message:
 * it still goes to stderr. The hook is process-wide, for every runtime.
 * libevent's log is routed here from the first mely_init() on (libevent's
 * event_set_log_callback, once per process): a program that uses libevent
 * itself and wants its messages elsewhere sets its own callback after that.
 * @return 0; MELY_EBUSY when called from inside a hook.
 * Threads: mely_set_log() from any thread. fn may be called from any thread:
 * the one calling mely_init(), any worker (libevent's messages while it
 * polls), any thread that adds or removes a watch; calls may be concurrent,
 * so fn must be thread-safe. fn must not call the runtime or libevent (a
 * libevent message is delivered from inside libevent, which holds its
 * locks); a message the hook's own thread raises meanwhile goes to the
 * default printer. Once mely_set_log() returns, the previous hook is not
 * running and will not be called again: its arg may be freed.
 */
int mely_set_log(mely_log_fn_t fn, void *arg);

/* ---- Statistics ---------------------------------------------------------------- */

typedef struct mely_stats {
    uint64_t events_run;     /* handlers this worker ran */
    uint64_t posts_local;    /* posts by this worker to colors it owned */
    uint64_t posts_remote;   /* posts by this worker to other workers' colors */
    uint64_t posts_foreign;  /* posts to this worker from threads that are no worker */
    uint64_t parks;          /* times this worker went to sleep */
    uint64_t wakeups;        /* times it was woken from sleep by a post or stop */
    uint64_t wakes_sent;     /* wake-ups this worker issued to others */
    uint64_t lock_contended; /* runtime lock acquisitions that had to wait */
    uint64_t lock_cycles;    /* TSC cycles spent waiting for runtime locks */
    uint64_t steal_attempts; /* times this worker, idle, ran the steal driver */
    uint64_t steals;         /* attempts that took a color from another worker */
    uint64_t steal_cycles;   /* TSC cycles spent in successful attempts (their
                                mean: steal_cycles / steals) */
    uint64_t steal_cycles_median; /* median over the last 1024 successful
                                     attempts; 0 before the first */
    uint64_t stolen_events;  /* events those colors held when taken */
    uint64_t stolen_cycles;  /* expected cycles of work those events held (their
                                timeleft annotations, or measured costs, each
                                rounded to 32 cycles and capped at 2,097,120;
                                divided by penalties under "penalty"); 0 for
                                unannotated handlers */
    uint64_t polls;          /* times this worker's poller was polled */
    uint64_t io_ready;       /* watch events its poller queued (readiness) */
    uint64_t timers_fired;   /* timers of this worker that expired */
    uint64_t watch_moves;    /* watches moved to this worker's poller */
    uint64_t stalls;         /* handlers of this worker that used more than
                                MELY_STALL_MS of CPU time (each counted once,
                                whether or not the rate limit let its
                                warning through) */
    uint64_t stream_sends;   /* system calls (writev) that sent streams' output
                                on this worker: one per stream per batch at
                                most (include/mely/stream.h) */
    uint64_t stream_bytes;   /* bytes they sent (stream_bytes / stream_sends:
                                what a send carries) */
    uint64_t spins;          /* idle spins before parking (the spin policy,
                                doc/runtime.md, decides their length) */
    uint64_t spins_found;    /* spins that ended with work to run */
    uint64_t spin_ns;        /* time spent in them, in ns */
    uint64_t park_ns;        /* time spent parked, in ns (spin_ns / (spin_ns +
                                park_ns): the spinning share of idle time) */
    uint64_t places;         /* colors mely_color_place() placed on this worker */
    uint64_t placed_now;     /* of those, not yet released: the placement
                                part of its load (the only field that can
                                fall: a level, not a counter) */
    uint64_t steal_fail_cycles; /* TSC cycles spent in steal attempts that took
                                   nothing (steal_attempts - steals of them):
                                   with steal_cycles, all that looking for
                                   work to steal cost */
    uint64_t steal_hold_cycles; /* TSC cycles the successful attempts held
                                   both workers' locks: what the steals cost
                                   their victims, whose queues were locked
                                   (mean: / steals) */
    uint64_t idle_cycles;    /* TSC cycles this worker had nothing to run: from
                                finding its queue empty to having work again
                                (polling, stealing, spinning, parked) */
} mely_stats_t;

/*
 * Copies worker `worker`'s counters into *out. Counters only grow, from
 * mely_init() on (placed_now excepted, a level); each is read atomically,
 * the set is not a snapshot.
 * @return 0; MELY_ESHUTDOWN; MELY_EINVAL (worker out of range or out NULL).
 * Threads: any thread.
 */
int mely_worker_stats(const mely_t *m, unsigned worker, mely_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* MELY_MELY_H */
