/* SPDX-License-Identifier: MIT */
/*
 * loop.cpp: fdcb, timers (timecb, delaycb, lazycb), sigcb and chldcb over the
 * runtime's watches, timers and signals.
 */
#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "handles.h"
#include "internal.h"

using namespace mely_compat;

/* ---- fdcb ---------------------------------------------------------------------- */

namespace {

const char *op_name(selop op)
{
    return op == selread ? "selread" : "selwrite";
}

/* One registration: a counted callback and either a native watch (w), or,
 * for what epoll refuses (regular files, /dev/null...), a chain of posted
 * events (w NULL): such an fd is always ready, as select() and libasync saw
 * it. A watch's entry is freed by the watch's fin once its handler is not
 * running and never will; a chain's by the chain, once `removed` is set. */
struct fd_entry {
    mely_watch_t *w;
    callback<void> *cb;
    int op; /* selread, selwrite; unused for signals */
    int fd;
    std::atomic<bool> removed{false}; /* chains only: fdcb cleared it */
};

struct fd_table {
    std::mutex mu;
    std::vector<fd_entry *> slots; /* 2 per fd: [2*fd + op] */
};

fd_table &fds()
{
    static fd_table *t = new fd_table; /* never destroyed: handlers may run during exit() */
    return *t;
}

/* The fd callback running on this thread (for fdcb_finished). */
thread_local fd_entry *t_fd_entry;
thread_local std::size_t t_fd_slot;

void free_fd_entry(void *arg) noexcept
{
    fd_entry *e = static_cast<fd_entry *>(arg);
    e->cb->refcount_dec();
    delete e;
}

/* Runs an fd entry's callback, as fdcb_finished() expects to find it. */
void run_fd_callback(fd_entry *e)
{
    callback<void> *cb = e->cb;
    /* The callback may remove its own registration (fdcb(fd, op, NULL) or
     * fdcb_finished): keep it alive through the call. e itself stays valid
     * until this run ends (a watch's fin, or the chain, frees it after). */
    cb->refcount_inc();
    fd_entry *outer = t_fd_entry;
    std::size_t outer_slot = t_fd_slot;
    t_fd_entry = e;
    t_fd_slot = 2 * (std::size_t)e->fd + (e->op == selwrite ? 1 : 0);
    mely_compat_refresh_now();
    guard(cb, e->op == selwrite ? "fdcb(selwrite) on fd" : "fdcb(selread) on fd", e->fd,
          [cb] { (*cb)(); });
    t_fd_entry = outer;
    t_fd_slot = outer_slot;
    cb->refcount_dec();
}

void fd_fire(int, unsigned, void *arg) noexcept
{
    run_fd_callback(static_cast<fd_entry *>(arg));
}

/* ---- Always-ready descriptors ---- */

void chain_fire(void *arg) noexcept;

/* Queues the chain's next run at the tail of the callback's color, behind
 * what is already queued there, as a select() loop would serve it next
 * round. */
void chain_post(fd_entry *e)
{
    mely_to_t to = target(e->cb);
    int err = mely_post_ex(runtime(), to.color, to.prio, to.handler, chain_fire, e, 0);
    if (err)
        die("fdcb", err);
}

/* One readiness of an always-ready fd: run the callback, and post the next
 * run while it stays registered. Exactly one event of a chain is queued or
 * running at a time, so the chain alone frees its entry. */
void chain_fire(void *arg) noexcept
{
    fd_entry *e = static_cast<fd_entry *>(arg);
    if (!e->removed.load(std::memory_order_acquire)) {
        run_fd_callback(e);
        if (!e->removed.load(std::memory_order_acquire)) {
            chain_post(e);
            return;
        }
    }
    free_fd_entry(e);
}

/* Ends a registration taken out of its slot: after this, the entry belongs
 * to the watch's fin or to its chain. */
void retire(fd_entry *e)
{
    if (e->w)
        mely_watch_remove_then(e->w, free_fd_entry, e);
    else
        e->removed.store(true, std::memory_order_release);
}

/* A new registration of cb on fd (t.mu held); NULL if the runtime refused it. */
fd_entry *fd_register(int fd, selop op, callback<void> *cb)
{
    fd_entry *e = new fd_entry;
    e->w = nullptr;
    e->cb = cb;
    e->op = (int)op;
    e->fd = fd;
    cb->refcount_inc();
    int err = mely_watch(runtime(), fd, op == selread ? MELY_READ : MELY_WRITE, target(cb),
                         fd_fire, e, &e->w);
    if (err == -EPERM) { /* epoll refuses it (mely.h): always ready, as select() saw it */
        chain_post(e);
        return e;
    }
    if (err) {
        fprintf(stderr, "mely-compat: fdcb(%d, %s): %s\n", fd, op_name(op), mely_strerror(err));
        free_fd_entry(e);
        return nullptr;
    }
    return e;
}

} // namespace

void fdcb_finished(bool finished)
{
    fd_entry *e = t_fd_entry;
    if (!finished || !e)
        return;
    /* Remove the registration now (from its own handler: synchronous), so
     * that the callback may close the fd right after, as Mely programs do. */
    fd_table &t = fds();
    bool mine = false;
    {
        std::lock_guard<std::mutex> g(t.mu);
        if (t_fd_slot < t.slots.size() && t.slots[t_fd_slot] == e) {
            t.slots[t_fd_slot] = nullptr;
            mine = true;
        }
    }
    t_fd_entry = nullptr;
    if (mine)
        retire(e);
}

namespace {

/* The process's descriptor limit, RLIMIT_NOFILE's soft one: no descriptor it
 * can open is at or above it (one it had before the limit was lowered can be:
 * fdcb checks that one with fcntl). */
std::size_t fd_limit()
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > (rlim_t)INT_MAX)
        return (std::size_t)INT_MAX;
    return (std::size_t)rl.rlim_cur;
}

/* Refuses what libasync asserted against (a negative descriptor, one at or
 * past the descriptor limit, an unknown op): a message and exit. */
/* Ends the program: fdcb refused fd. cb (NULL: none) is dropped first, so
 * that a fresh wrap() passed here is freed: the exit is the program's
 * normal end, and leak checkers must not count it as lost. */
[[noreturn]] void bad_fd(int fd, selop op, const char *why, callback<void> *cb)
{
    if (cb) {
        cb->refcount_inc_maybe_fresh();
        cb->release();
    }
    if (op == selread || op == selwrite)
        fprintf(stderr, "mely-compat: fdcb(%d, %s): %s\n", fd, op_name(op), why);
    else
        fprintf(stderr, "mely-compat: fdcb(%d, %d): %s\n", fd, (int)op, why);
    exit(EXIT_FAILURE);
}

} // namespace

void fdcb(int fd, selop op, callback<void> *cb)
{
    if (op != selread && op != selwrite)
        bad_fd(fd, op, "bad operation (selread or selwrite)", cb);
    if (fd < 0)
        bad_fd(fd, op, "negative descriptor", cb);
    /* Only a descriptor the process has may take a slot, so the table grows
     * to the highest one registered, never to a number made up (fdcb(1e8)
     * on nothing cost 1.5 GB for good, fdcb(2^31 - 1) bad_alloc). */
    if (cb && fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
        std::size_t lim = fd_limit();
        if ((std::size_t)fd >= lim) {
            char why[160];
            snprintf(why, sizeof why,
                     "bad descriptor: not open, and past the process's limit "
                     "(RLIMIT_NOFILE: %zu)",
                     lim);
            bad_fd(fd, op, why, cb);
        }
        /* Closed, within the limit: refused as epoll refuses it (the fd's
         * earlier registration ends, as a failed one always did). */
        fprintf(stderr, "mely-compat: fdcb(%d, %s): %s\n", fd, op_name(op),
                mely_strerror(-EBADF));
        cb->refcount_inc(); /* frees a fresh wrap() */
        cb->release();
        cb = nullptr;
    }
    runtime(); /* created outside the table's lock */
    fd_table &t = fds();
    std::size_t i = 2 * (std::size_t)fd + (std::size_t)op;
    fd_entry *old = nullptr;
    {
        std::lock_guard<std::mutex> g(t.mu);
        if (i >= t.slots.size() && cb) { /* a removal never grows the table */
            /* Doubling within twice the limit (two ops per fd), and at least
             * to this fd, which is open (so below a limit the process had). */
            std::size_t want = 2 * (std::size_t)fd + 2;
            std::size_t grow = std::min(std::max<std::size_t>(2 * t.slots.size(), 128),
                                        2 * fd_limit());
            t.slots.resize(std::max(want, grow), nullptr);
        }
        if (i < t.slots.size()) {
            old = t.slots[i];
            t.slots[i] = cb ? fd_register(fd, op, cb) : nullptr;
        }
    }
    if (old)
        retire(old);
}


/* ---- timecb, delaycb ---------------------------------------------------------------- */

/* A timecb_t * is a handle of timer_table() (handles.h), never an address:
 * timecb_remove() of a timer that fired, or was removed, does nothing. The
 * type stays incomplete. */

namespace {

struct timer_rec {
    mely_timer_t id;   /* the native timer (its own id is generation-checked too) */
    callback<void> *cb; /* counted */
};
typedef handle_table<timer_rec> timer_tab;

timer_tab &timer_table()
{
    static timer_tab *t = new timer_tab("timecb"); /* never destroyed: see fds() */
    return *t;
}

void timer_fire(void *arg) noexcept
{
    timer_tab &tab = timer_table();
    uint32_t i = timer_tab::index_of(arg);
    timer_tab::slot &s = tab.at(i);
    callback<void> *cb;
    {
        /* Waits for timer_new() to store the id, if it fired that fast. */
        std::lock_guard<std::mutex> g(s.mu);
        cb = s.val.cb;
        s.gen++; /* fired: the handle is dead (as in libasync) */
    }
    tab.release(i);
    mely_compat_refresh_now();
    guard(cb, "timecb", -1, [cb] { (*cb)(); });
    cb->refcount_dec();
}

timecb_t *timer_new(callback<void> *cb, const timespec *when, uint64_t delay_ns)
{
    uint32_t i;
    timer_tab::slot &s = new_handle(timer_table(), cb, "timecb/delaycb", &i);
    mely_t *rt = runtime();
    /* Under the slot's lock until the id is stored: the timer may fire on
     * another worker before mely_timer_* returns (timer_fire then waits). */
    std::lock_guard<std::mutex> g(s.mu);
    s.val.cb = cb;
    void *h = timer_tab::encode(i, s.gen);
    mely_timer_t id;
    int err = when ? mely_timer_at_wall(rt, when, target(cb), timer_fire, h, &id)
                   : mely_timer_after(rt, delay_ns, target(cb), timer_fire, h, &id);
    if (err)
        die("timecb", err);
    s.val.id = id;
    return static_cast<timecb_t *>(h);
}

const long NS_PER_SEC = 1000000000L;

/* `when` as the runtime takes it (0 <= tv_nsec < 1e9, tv_sec >= 0), as
 * libasync accepted any timespec: tv_nsec out of range carries into tv_sec
 * (either way); a time before the epoch is due now (the epoch is past); one
 * past the end of time_t stays at its last second (never, in practice). */
timespec normalized(const timespec &when)
{
    time_t carry = (time_t)(when.tv_nsec / NS_PER_SEC);
    long ns = when.tv_nsec % NS_PER_SEC;
    if (ns < 0) {
        ns += NS_PER_SEC;
        carry--;
    }
    timespec r;
    if (__builtin_add_overflow(when.tv_sec, carry, &r.tv_sec)) {
        if (carry > 0) {
            r.tv_sec = std::numeric_limits<time_t>::max();
            r.tv_nsec = NS_PER_SEC - 1;
        } else {
            r.tv_sec = 0;
            r.tv_nsec = 0;
        }
        return r;
    }
    r.tv_nsec = ns;
    if (r.tv_sec < 0) {
        r.tv_sec = 0;
        r.tv_nsec = 0;
    }
    return r;
}

/* sec seconds and nsec nanoseconds in nanoseconds: 0 if negative, UINT64_MAX
 * (584 years: the runtime's "never") if larger. */
uint64_t delay_ns(time_t sec, uint64_t nsec)
{
    const uint64_t G = (uint64_t)NS_PER_SEC;
    if (sec < 0) {
        /* nsec < 2^32 is at most 4 s: only a small negative sec can leave
         * something ahead. */
        if (sec < -5)
            return 0;
        int64_t t = (int64_t)sec * (int64_t)G + (int64_t)nsec;
        return t > 0 ? (uint64_t)t : 0;
    }
    if ((uint64_t)sec > (UINT64_MAX - nsec) / G)
        return UINT64_MAX;
    return (uint64_t)sec * G + nsec;
}

} // namespace

timecb_t *timecb(const timespec &when, callback<void> *cb)
{
    timespec ts = normalized(when);
    return timer_new(cb, &ts, 0);
}

timecb_t *timecb(time_t when, callback<void> *cb)
{
    timespec ts;
    ts.tv_sec = when;
    ts.tv_nsec = 0;
    return timecb(ts, cb);
}

timecb_t *delaycb(time_t sec, u_int32_t nsec, callback<void> *cb)
{
    return timer_new(cb, nullptr, delay_ns(sec, nsec));
}

timecb_t *delaycb(time_t sec, callback<void> *cb)
{
    return delaycb(sec, 0, cb);
}

void timecb_remove(timecb_t *t)
{
    timer_tab &tab = timer_table();
    timer_tab::slot *s = tab.find(t);
    if (!s)
        return;
    callback<void> *cb;
    {
        std::lock_guard<std::mutex> g(s->mu);
        if (s->gen != timer_tab::gen_of(t))
            return; /* fired or removed already; the slot may be another timer's now */
        /* MELY_ENOENT: the callback has started (timer_fire waits for this
         * lock, then ends the generation itself). */
        if (mely_timer_cancel(runtime(), s->val.id) != 0)
            return;
        s->gen++;
        cb = s->val.cb;
    }
    tab.release(timer_tab::index_of(t));
    cb->refcount_dec();
}

/* ---- lazycb ---------------------------------------------------------------------------- */

/* A lazycb_t * is a handle of lazy_table(), as timecb_t * is: lazycb_remove()
 * of a removed lazycb does nothing. */

namespace {

struct lazy_rec {
    time_t interval;
    mely_timer_t id; /* the next run's timer */
    callback<void> *cb; /* counted */
    bool running;       /* the callback runs (the slot's lock is not held meanwhile) */
    bool removed;       /* lazycb_remove() came while a run was due or under way */
};
typedef handle_table<lazy_rec> lazy_tab;

lazy_tab &lazy_table()
{
    static lazy_tab *t = new lazy_tab("lazycb");
    return *t;
}

/* Arms the next run (the slot's lock held). */
void lazy_arm(lazy_tab::slot &s, void *h);

/* Frees slot i, removed and not running (its generation moved on already). */
void lazy_free(uint32_t i, callback<void> *cb)
{
    lazy_table().release(i);
    cb->refcount_dec();
}

void lazy_fire(void *arg) noexcept
{
    lazy_tab::slot &s = lazy_table().at(lazy_tab::index_of(arg));
    callback<void> *cb;
    bool removed;
    {
        std::lock_guard<std::mutex> g(s.mu);
        cb = s.val.cb;
        removed = s.val.removed; /* while this run was due: it never starts */
        s.val.running = !removed;
    }
    if (!removed) {
        mely_compat_refresh_now();
        guard(cb, "lazycb", -1, [cb] { (*cb)(); });
        std::lock_guard<std::mutex> g(s.mu);
        s.val.running = false;
        removed = s.val.removed;
        if (!removed)
            lazy_arm(s, arg);
    }
    if (removed)
        lazy_free(lazy_tab::index_of(arg), cb);
}

void lazy_arm(lazy_tab::slot &s, void *h)
{
    int err = mely_timer_after(runtime(), delay_ns(s.val.interval, 0),
                               target(s.val.cb), lazy_fire, h, &s.val.id);
    if (err)
        die("lazycb", err);
}

} // namespace

lazycb_t *lazycb(time_t min_interval, callback<void> *cb)
{
    uint32_t i;
    lazy_tab::slot &s = new_handle(lazy_table(), cb, "lazycb", &i);
    std::lock_guard<std::mutex> g(s.mu);
    s.val = lazy_rec{min_interval < 0 ? 0 : min_interval, 0, cb, false, false};
    void *h = lazy_tab::encode(i, s.gen);
    lazy_arm(s, h);
    return static_cast<lazycb_t *>(h);
}

void lazycb_remove(lazycb_t *l)
{
    lazy_tab::slot *s = lazy_table().find(l);
    if (!s)
        return;
    callback<void> *cb;
    {
        std::lock_guard<std::mutex> g(s->mu);
        if (s->gen != lazy_tab::gen_of(l))
            return; /* removed already */
        s->gen++;
        /* Cancelled before it fired: nobody else holds the slot. Otherwise
         * the run that is due (or under way) frees it. */
        if (s->val.running || mely_timer_cancel(runtime(), s->val.id) != 0) {
            s->val.removed = true;
            return;
        }
        cb = s->val.cb;
    }
    lazy_free(lazy_tab::index_of(l), cb);
}

/* ---- sigcb --------------------------------------------------------------------------------- */

namespace {

struct sig_table {
    std::mutex mu;
    fd_entry *slots[NSIG] = {};
};

sig_table &sigs()
{
    static sig_table *t = new sig_table;
    return *t;
}

void sig_fire(int, unsigned, void *arg) noexcept
{
    fd_entry *e = static_cast<fd_entry *>(arg);
    callback<void> *cb = e->cb;
    cb->refcount_inc();
    mely_compat_refresh_now();
    guard(cb, "sigcb of signal", e->fd, [cb] { (*cb)(); });
    cb->refcount_dec();
}

} // namespace

callback<void>::ptr sigcb(int sig, callback<void> *cb, int)
{
    if (sig <= 0 || sig >= NSIG) {
        fprintf(stderr, "mely-compat: sigcb: bad signal %d\n", sig);
        exit(EXIT_FAILURE);
    }
    mely_t *rt = runtime();
    sig_table &t = sigs();
    callback<void>::ptr prev;
    fd_entry *old;
    {
        std::lock_guard<std::mutex> g(t.mu);
        old = t.slots[sig];
        t.slots[sig] = nullptr;
        if (old)
            prev = old->cb;
        if (cb) {
            fd_entry *e = new fd_entry{nullptr, cb, -1, sig};
            cb->refcount_inc();
            int err = mely_signal(rt, sig, target(cb), sig_fire, e, &e->w);
            if (err)
                die("sigcb", err);
            t.slots[sig] = e;
        }
        /* Remove the old watch after the new one exists, so that the signal's
         * disposition is not restored in between. */
        if (old)
            mely_watch_remove_then(old->w, free_fd_entry, old);
    }
    return prev;
}

/* ---- chldcb ----------------------------------------------------------------------------------- */

namespace {

struct chld_table {
    std::mutex mu;
    std::unordered_map<pid_t, callback<void, int> *> waiting;
    mely_watch_t *w = nullptr;
};

chld_table &chlds()
{
    static chld_table *t = new chld_table;
    return *t;
}

/* Reaps the children we wait for and posts their callbacks with the status. */
void reap()
{
    chld_table &t = chlds();
    std::vector<std::pair<callback<void, int> *, int>> done;
    {
        std::lock_guard<std::mutex> g(t.mu);
        for (auto it = t.waiting.begin(); it != t.waiting.end();) {
            int status;
            pid_t r = waitpid(it->first, &status, WNOHANG);
            if (r == it->first || (r < 0 && errno == ECHILD)) {
                done.emplace_back(it->second, r < 0 ? -1 : status);
                it = t.waiting.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto &d : done) {
        callback<void> *run = wrap(d.first, d.second);
        run->setcolor(d.first->getcolor());
        run->setprio(d.first->getprio());
        cpucb_tail(run);
        d.first->refcount_dec();
    }
}

/* reap's event: compat's own code, but what it allocates may throw. */
void reap_event(void *) noexcept
{
    guard(nullptr, "chldcb", -1, [] { reap(); });
}

void reap_signal(int, unsigned, void *) noexcept
{
    reap_event(nullptr);
}

} // namespace

void chldcb(pid_t pid, callback<void, int> *cb)
{
    mely_t *rt = runtime();
    chld_table &t = chlds();
    {
        std::lock_guard<std::mutex> g(t.mu);
        if (!t.w) {
            int err = mely_signal(rt, SIGCHLD, MELY_TO(0), reap_signal, nullptr, &t.w);
            if (err)
                die("chldcb", err);
        }
        auto it = t.waiting.find(pid);
        if (it != t.waiting.end()) {
            it->second->refcount_dec();
            t.waiting.erase(it);
        }
        if (cb) {
            cb->refcount_inc();
            t.waiting[pid] = cb;
        }
    }
    /* The child may have exited before the SIGCHLD watch existed. */
    int err = mely_post(rt, 0, reap_event, nullptr);
    if (err)
        die("chldcb", err);
}
