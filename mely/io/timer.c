/* SPDX-License-Identifier: MIT */
/*
 * io/timer.c: timers, delivered as colored events.
 *
 * Where a timer lives: every color has a home worker, fixed for the color's
 * life (color % workers; a pinned color's own worker), whatever steals do to
 * the color afterwards. All timers of one color therefore sit in one heap, so
 * equal deadlines of one color fire in the order they were set (the heap
 * orders by deadline, then by a per-heap sequence number). Timers of different
 * colors may run in parallel anyway, so their relative order is not promised.
 * Spreading colors over home workers also spreads the timer work and the lock.
 *
 * A heap per worker, under a small spinlock of its own (never the worker's
 * lock): set and cancel are O(log n), and 100,000 pending timers cost a few
 * megabytes and no system call. The worker's loop reads `next` without the
 * lock between batches; an idle worker sleeps in its poller until `next`.
 *
 * A timer's life: PENDING in the heap -> POSTED when due (its event, the
 * trampoline fire(), is queued on the color) -> freed when the trampoline
 * starts the user's function, or when a cancel finds it (PENDING: taken out
 * of the heap at once; POSTED: marked CANCELLED, and the trampoline frees it
 * without running it). So a cancel that returns 0 always wins, and a cancel
 * after the function started returns MELY_ENOENT: the slot's generation moved
 * on. Ids are (generation << 32 | slot << 8 | home worker): the low 32 bits,
 * a slot and its heap's worker, are also what a posted timer's event
 * carries (pack() and the id_ functions below).
 *
 * Waking the home worker: setting a timer earlier than `next` from another
 * thread must not leave the home worker asleep with a later deadline. The
 * setter stores `next`, then reads `parked` (mely__wake_if_parked); the
 * worker stores `parked` and only then reads `next` (park.c, step 4). All
 * four accesses are sequentially consistent, so either the worker sees the
 * new deadline, or the setter sees it parked and wakes it.
 *
 * Who may call: mely_timer_* from any thread; mely__timers_expire() only on
 * the home worker's thread.
 */
#include <stdlib.h>
#include <string.h>

#include "mely/remote/colormap.h"
#include "mely/queue/cycles.h"
#include "mely/core/handle.h"
#include "mely/io/iostate.h"
#include "mely/io/timer.h"
#include "mely/core/park.h"
#include "mely/sched/post.h"
#include "mely/observe/runname.h"
#include "mely/runtime.h"

enum { PENDING = 1, POSTED, CANCELLED };

/* Expired timers posted per call: a flood of due timers still leaves the
 * worker's queue its turn between two calls. */
enum { EXPIRE_MAX = 256 };

/* An id's low 32 bits: the slot above WORKER_BITS bits of home worker. */
enum { WORKER_BITS = 8 };
#define WORKER_MASK ((1u << WORKER_BITS) - 1)
_Static_assert(MELY_MAX_WORKERS <= 1u << WORKER_BITS, "a worker index fits in a timer id");

/* Slots per heap: the slot index has 24 bits in an id. */
#define SLOT_MAX (1u << (32 - WORKER_BITS))

struct mely__tslot {
    uint64_t deadline;
    uint64_t seq;
    mely_fn_t fn;
    void *arg;
    mely_to_t to;
    uint32_t gen;      /* bumped when the slot is freed */
    uint32_t heap_pos; /* index in the heap while PENDING; next free slot while free */
    uint8_t state;     /* 0: free */
};

void mely__timers_init(struct mely__timers *t)
{
    memset(t, 0, sizeof(*t));
    mely__spin_init(&t->lock);
    t->free_head = UINT32_MAX;
    atomic_init(&t->next, MELY__NEVER);
}

void mely__timers_free(struct mely__timers *t)
{
    free(t->slots);
    free(t->heap);
    t->slots = NULL;
    t->heap = NULL;
}

size_t mely__timers_queued(const struct mely__timers *t)
{
    size_t n = 0;

    for (uint32_t i = 0; i < t->nslots; i++)
        n += t->slots[i].state == POSTED || t->slots[i].state == CANCELLED;
    return n;
}

/* ---- the heap (under the lock) ---------------------------------------------- */

static bool earlier(const struct mely__timers *t, uint32_t a, uint32_t b)
{
    const struct mely__tslot *x = &t->slots[a], *y = &t->slots[b];
    return x->deadline != y->deadline ? x->deadline < y->deadline : x->seq < y->seq;
}

static void heap_set(struct mely__timers *t, uint32_t pos, uint32_t slot)
{
    t->heap[pos] = slot;
    t->slots[slot].heap_pos = pos;
}

static void sift_up(struct mely__timers *t, uint32_t pos)
{
    uint32_t slot = t->heap[pos];
    while (pos > 0) { /* bounded: log2(nheap) steps */
        uint32_t parent = (pos - 1) / 2;
        if (!earlier(t, slot, t->heap[parent]))
            break;
        heap_set(t, pos, t->heap[parent]);
        pos = parent;
    }
    heap_set(t, pos, slot);
}

static void sift_down(struct mely__timers *t, uint32_t pos)
{
    uint32_t slot = t->heap[pos];
    for (;;) { /* bounded: log2(nheap) steps */
        uint32_t child = 2 * pos + 1;
        if (child >= t->nheap)
            break;
        if (child + 1 < t->nheap && earlier(t, t->heap[child + 1], t->heap[child]))
            child++;
        if (!earlier(t, t->heap[child], slot))
            break;
        heap_set(t, pos, t->heap[child]);
        pos = child;
    }
    heap_set(t, pos, slot);
}

static void heap_remove(struct mely__timers *t, uint32_t pos)
{
    uint32_t last = t->heap[--t->nheap];
    if (pos == t->nheap)
        return;
    heap_set(t, pos, last);
    sift_down(t, pos);
    sift_up(t, t->slots[last].heap_pos);
}

/* Puts PENDING slot i, its deadline and sequence set, into the heap;
 * returns true if it is now the earliest (`next` is then published). */
static bool heap_push(struct mely__timers *t, uint32_t i)
{
    t->slots[i].state = PENDING;
    t->slots[i].heap_pos = t->nheap;
    t->heap[t->nheap++] = i;
    sift_up(t, t->slots[i].heap_pos);
    if (t->heap[0] != i)
        return false;
    atomic_store(&t->next, t->slots[i].deadline);
    return true;
}

static void publish_next(struct mely__timers *t)
{
    atomic_store(&t->next, t->nheap ? t->slots[t->heap[0]].deadline : MELY__NEVER);
}

/* ---- slots (under the lock) -------------------------------------------------- */

static bool grow(struct mely__timers *t)
{
    uint32_t n = t->nslots ? t->nslots * 2 : 64;
    if (n > SLOT_MAX)
        n = SLOT_MAX;
    if (n == t->nslots)
        return false;
    struct mely__tslot *slots = realloc(t->slots, n * sizeof(*slots));
    if (!slots)
        return false;
    t->slots = slots;
    uint32_t *heap = realloc(t->heap, n * sizeof(*heap));
    if (!heap)
        return false; /* the larger slot array is kept; the next grow retries */
    t->heap = heap;
    for (uint32_t i = n; i-- > t->nslots;) {
        slots[i] = (struct mely__tslot){ .gen = 1, .heap_pos = t->free_head };
        t->free_head = i;
    }
    t->nslots = n;
    return true;
}

static uint32_t slot_alloc(struct mely__timers *t)
{
    if (t->free_head == UINT32_MAX && !grow(t))
        return UINT32_MAX;
    uint32_t i = t->free_head;
    t->free_head = t->slots[i].heap_pos;
    return i;
}

static void slot_free(struct mely__timers *t, uint32_t i)
{
    struct mely__tslot *s = &t->slots[i];
    s->state = 0;
    s->gen++;
    s->heap_pos = t->free_head;
    t->free_head = i;
}

/* ---- ids ---------------------------------------------------------------------- */

/* A slot of a worker's heap, in 32 bits. */
static uint32_t pack(unsigned worker, uint32_t slot)
{
    return slot << WORKER_BITS | worker;
}

static mely_timer_t make_id(unsigned worker, uint32_t slot, uint32_t gen)
{
    return (uint64_t)gen << 32 | pack(worker, slot);
}

static unsigned id_worker(uint64_t id) { return (unsigned)(id & WORKER_MASK); }
static uint32_t id_slot(uint64_t id) { return (uint32_t)(id >> WORKER_BITS) & (SLOT_MAX - 1); }
static uint32_t id_gen(mely_timer_t id) { return (uint32_t)(id >> 32); }

/* The worker whose heap holds the color's timers: its home (colormap.h). */
static struct mely__worker *home(struct mely__rt *rt, mely_color_t color)
{
    return &rt->workers[mely__color_home(rt, color)];
}

/* ---- firing ------------------------------------------------------------------- */

/* The event a due timer posts: runs the user's function unless cancelled,
 * under that function's name for stall warnings and traces (runname.h). The
 * argument is pack(home worker, slot). */
static void fire(void *arg)
{
    uintptr_t packed = (uintptr_t)arg;
    struct mely__worker *w = mely__self; /* not the home worker, in general */
    struct mely__rt *rt = w->rt;
    struct mely__timers *t = &mely__io_of(rt, id_worker(packed))->timers;
    uint32_t i = id_slot(packed);

    mely__spin_lock(&t->lock, &w->ctr);
    struct mely__tslot *s = &t->slots[i];
    bool run = s->state == POSTED;
    mely_fn_t fn = s->fn;
    void *fn_arg = s->arg;
    const mely_handler_t *desc = s->to.handler;
    slot_free(t, i);
    mely__spin_unlock(&t->lock);
    if (run) {
        mely__name_run(desc, (const void *)fn); /* fn's run (or desc's), not fire's */
        fn(fn_arg);
    }
}

unsigned mely__timers_expire(struct mely__worker *w, uint64_t now)
{
    struct mely__timers *t = &w->io->timers;
    struct { uint32_t slot; mely_to_t to; } due[EXPIRE_MAX];
    unsigned n = 0;

    mely__spin_lock(&t->lock, &w->ctr);
    while (n < EXPIRE_MAX && t->nheap && t->slots[t->heap[0]].deadline <= now) {
        uint32_t i = t->heap[0];
        heap_remove(t, 0);
        t->slots[i].state = POSTED;
        due[n].slot = i;
        due[n].to = t->slots[i].to;
        n++;
    }
    publish_next(t);
    mely__spin_unlock(&t->lock);

    /* Posted outside the timer lock: a post takes worker locks. A post can
     * fail only for lack of memory or of event budget (MELY_EAGAIN); the
     * timer then fires 1 ms later. */
    for (unsigned k = 0; k < n; k++) {
        void *packed = (void *)(uintptr_t)pack(w->index, due[k].slot);
        if (mely__post_to(w->rt, &due[k].to, fire, packed) != 0) {
            mely__spin_lock(&t->lock, &w->ctr);
            struct mely__tslot *s = &t->slots[due[k].slot];
            if (s->state == POSTED) {
                s->deadline = now + 1000000;
                heap_push(t, due[k].slot);
            } else {
                slot_free(t, due[k].slot);
            }
            mely__spin_unlock(&t->lock);
        }
    }
    mely__count(&w->ctr.timers_fired, n);
    return n;
}

/* ---- the API --------------------------------------------------------------------- */

static int timer_at(struct mely__rt *rt, uint64_t deadline_ns, mely_to_t to, mely_fn_t fn,
                    void *arg, mely_timer_t *out)
{
    if (!fn)
        return MELY_ENOFN;
    int err = mely__to_check(rt, &to);
    if (err)
        return err;

    struct mely__worker *self = mely__self_in(rt);
    struct mely__worker *w = home(rt, to.color);
    struct mely__timers *t = &mely__io_of(rt, w->index)->timers;

    mely__spin_lock(&t->lock, self ? &self->ctr : NULL);
    uint32_t i = slot_alloc(t);
    if (i == UINT32_MAX) {
        mely__spin_unlock(&t->lock);
        return MELY_ENOMEM;
    }
    struct mely__tslot *s = &t->slots[i];
    s->deadline = deadline_ns;
    s->seq = t->seq++;
    s->fn = fn;
    s->arg = arg;
    s->to = to;
    bool earliest = heap_push(t, i);
    mely_timer_t id = make_id(w->index, i, s->gen);
    mely__spin_unlock(&t->lock);

    if (earliest && w != self)
        mely__wake_if_parked(w, self);
    if (out)
        *out = id;
    return 0;
}

int mely_timer_at(mely_t *m, uint64_t deadline_ns, mely_to_t to, mely_fn_t fn, void *arg,
                  mely_timer_t *out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, timer_at(rt, deadline_ns, to, fn, arg, out))
              : MELY_ESHUTDOWN;
}

int mely_timer_after(mely_t *m, uint64_t delay_ns, mely_to_t to, mely_fn_t fn, void *arg,
                     mely_timer_t *out)
{
    uint64_t now = mely__now_ns();
    uint64_t deadline = delay_ns > MELY__NEVER - 1 - now ? MELY__NEVER - 1 : now + delay_ns;
    return mely_timer_at(m, deadline, to, fn, arg, out);
}

int mely_timer_at_wall(mely_t *m, const struct timespec *ts, mely_to_t to, mely_fn_t fn,
                       void *arg, mely_timer_t *out)
{
    if (!ts || ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)
        return MELY_EINVAL;
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    uint64_t now = mely__now_ns();
    int64_t ahead = (int64_t)(ts->tv_sec - real.tv_sec) * 1000000000 + (ts->tv_nsec - real.tv_nsec);
    if (ts->tv_sec - real.tv_sec > 100LL * 365 * 86400) /* no overflow: a century */
        ahead = 100LL * 365 * 86400 * 1000000000;
    return mely_timer_at(m, ahead > 0 ? now + (uint64_t)ahead : now, to, fn, arg, out);
}

static int timer_cancel(struct mely__rt *rt, mely_timer_t id)
{
    if (id_worker(id) >= rt->nworkers)
        return MELY_ENOENT;

    struct mely__worker *self = mely__self_in(rt);
    struct mely__timers *t = &mely__io_of(rt, id_worker(id))->timers;
    uint32_t i = id_slot(id);
    int err = MELY_ENOENT;

    mely__spin_lock(&t->lock, self ? &self->ctr : NULL);
    struct mely__tslot *s = i < t->nslots ? &t->slots[i] : NULL;
    if (s && s->gen == id_gen(id)) {
        if (s->state == PENDING) {
            heap_remove(t, s->heap_pos);
            slot_free(t, i);
            publish_next(t); /* a later deadline: at worst one early wake-up */
            err = 0;
        } else if (s->state == POSTED) {
            s->state = CANCELLED; /* fire() frees it */
            err = 0;
        }
    }
    mely__spin_unlock(&t->lock);
    return err;
}

int mely_timer_cancel(mely_t *m, mely_timer_t id)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, timer_cancel(rt, id)) : MELY_ESHUTDOWN;
}

uint64_t mely_now_ns(void)
{
    return mely__now_ns();
}
