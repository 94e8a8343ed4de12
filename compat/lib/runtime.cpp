/* SPDX-License-Identifier: MIT */
/*
 * runtime.cpp: the compat library's runtime instance, posting (cpucb,
 * cpucb_tail), colors, handler descriptors, tsnow, introspection and amain.
 */
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <dlfcn.h>
#include <unistd.h>


#include "internal.h"

static_assert(MAX_THREADS >= MELY_MAX_WORKERS, "MAX_THREADS must cover every worker count");
static_assert(MAX_COLORS <= (int)MELY_COLORS, "MAX_COLORS must fit the runtime's colors");

namespace mely_compat {

mely_t g_rt;
std::atomic<bool> g_ready{false};
std::atomic<const mely_handler_t *> g_default_handler{nullptr};
unsigned g_workers;

namespace {

std::once_flag g_once;

void create()
{
    int err = mely_init(&g_rt, NULL);
    if (err)
        die("creating the runtime (check MELY_WORKERS, MELY_STEAL... in the environment)", err);
    mely_on_idle(&g_rt, run_atempty, nullptr); /* cannot fail: not running yet */
    g_workers = mely_workers(&g_rt);
    if (g_workers > MAX_THREADS) {
        fprintf(stderr, "mely-compat: %u workers asked for, at most MAX_THREADS (%d) allowed\n",
                g_workers, MAX_THREADS);
        exit(EXIT_FAILURE);
    }
    g_ready.store(true, std::memory_order_release);
}


thread_local timespec t_last_coarse __attribute__((tls_model("initial-exec")));

} // namespace

void create_runtime()
{
    std::call_once(g_once, create);
}

void null_callback(const char *what)
{
    fprintf(stderr, "mely-compat: %s of a NULL callback\n", what);
    exit(EXIT_FAILURE);
}

void die(const char *what, int err)
{
    fprintf(stderr, "mely-compat: %s: %s\n", what, mely_strerror(err));
    exit(EXIT_FAILURE);
}

[[noreturn]] void bad_native_color(int color)
{
    mely_compat_bad_color(color);
}

/* Out of line: its call of workers() would make every poster keep
 * registers across mely_post_ex. */
__attribute__((noinline)) mely_color_t native_color_slow(int color)
{
    if (color < 0) {
        unsigned w = (unsigned)(-(color + 1));
        if (w < workers())
            return MELY_COLOR_PINNED(w);
    }
    bad_native_color(color);
}

namespace {

/* The coarse clock, read before every posted callback: the vDSO's function
 * itself when the C library lets us find it (dlsym on the vDSO, which the
 * kernel maps into every process), a few ns less than clock_gettime(),
 * whose wrapper adds a call through the PLT, a check and another indirect
 * call; clock_gettime() otherwise. */
typedef int (*clock_fn)(clockid_t, timespec *);

int libc_clock(clockid_t id, timespec *ts)
{
    return clock_gettime(id, ts);
}

clock_fn find_vdso_clock()
{
    timespec ts;
    void *vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!vdso)
        return libc_clock;
    void *fn = dlsym(vdso, "__vdso_clock_gettime");
    /* Checked once: the vDSO's function must read the coarse clock. */
    if (!fn || reinterpret_cast<clock_fn>(fn)(CLOCK_REALTIME_COARSE, &ts) != 0)
        return libc_clock;
    return reinterpret_cast<clock_fn>(fn);
}

clock_fn g_coarse_clock = libc_clock; /* until the library's constructor ran */
struct find_clock {
    find_clock() { g_coarse_clock = find_vdso_clock(); }
} g_find_clock;

} // namespace

namespace {

__attribute__((noinline)) void refresh_now(const timespec &coarse)
{
    t_last_coarse = coarse;
    clock_gettime(CLOCK_REALTIME, &tsnow);
}

/* Refreshes this thread's tsnow if it may be stale: a read of the coarse
 * clock (a few ns, no system call), and an exact read once the coarse clock
 * moved (a kernel tick: 1-4 ms) since the last one. */
inline void tick_now()
{
    timespec coarse;
    g_coarse_clock(CLOCK_REALTIME_COARSE, &coarse);
    if (__builtin_expect(coarse.tv_nsec != t_last_coarse.tv_nsec ||
                             coarse.tv_sec != t_last_coarse.tv_sec,
                         0))
        refresh_now(coarse);
}

} // namespace

} // namespace mely_compat

using namespace mely_compat;

/* ---- tsnow ------------------------------------------------------------------- */

thread_local timespec tsnow;
thread_local const time_t &timenow = tsnow.tv_sec;

void mely_compat_refresh_now()
{
    clock_gettime(CLOCK_REALTIME, &tsnow);
}

namespace {
struct main_thread_now {
    main_thread_now() { mely_compat_refresh_now(); }
} g_main_thread_now;
} // namespace

/* ---- Errors from the headers ---------------------------------------------------- */

void mely_compat_bad_color(int color)
{
    /* Before the runtime exists the worker count is not known yet. */
    char pinned[96];
    if (!g_ready.load())
        snprintf(pinned, sizeof pinned, "-(i+1) for worker i's pinned color");
    else if (g_workers == 1)
        snprintf(pinned, sizeof pinned, "-1 for the worker's pinned color");
    else
        snprintf(pinned, sizeof pinned, "-1..-%u for a worker's pinned color", g_workers);
    fprintf(stderr, "mely-compat: incorrect color %d (colors are 0..%d, or %s)\n", color,
            MAX_COLORS - 1, pinned);
    fflush(NULL);
    _exit(EXIT_FAILURE); /* as the original's abort: no exit-time code runs */
}

void mely_compat_posted_with_arguments()
{
    fprintf(stderr, "mely-compat: a callback that takes arguments was posted\n");
    abort();
}

void mely_compat_ref_null(void)
{
    fprintf(stderr, "mely-compat: a NULL pointer was assigned to a ref<>\n");
    abort();
}

/* ---- Handler descriptors ----------------------------------------------------------- */

const void *mely_compat_handler(uint64_t timeleft, uint32_t penalty)
{
    /* One descriptor per (timeleft, penalty), never freed: queued events may
     * point to it at any time. A one-entry cache per thread skips the lock. */
    static std::mutex *mu = new std::mutex;
    static auto *tab = new std::unordered_map<uint64_t, mely_handler_t *>;
    thread_local uint64_t last_key = UINT64_MAX;
    thread_local const mely_handler_t *last;
    if (timeleft > UINT32_MAX)
        timeleft = UINT32_MAX;
    uint64_t key = (timeleft << 32) | penalty;
    if (key == last_key)
        return last;
    std::lock_guard<std::mutex> g(*mu);
    mely_handler_t *&h = (*tab)[key];
    if (!h) {
        h = new mely_handler_t();
        h->timeleft = timeleft;
        h->penalty = penalty;
    }
    last_key = key;
    last = h;
    return h;
}

uint32_t mely_compat_handler_timeleft(const void *h) noexcept
{
    return (uint32_t)static_cast<const mely_handler_t *>(h)->timeleft; /* at most UINT32_MAX */
}

uint32_t mely_compat_handler_penalty(const void *h) noexcept
{
    return static_cast<const mely_handler_t *>(h)->penalty;
}

void mely_compat_set_default_handler(const void *h)
{
    g_default_handler.store(static_cast<const mely_handler_t *>(h), std::memory_order_relaxed);
}

/* ---- Posting ----------------------------------------------------------------------- */

static void run_posted(void *arg) noexcept
{
    callback<void> *cb = static_cast<callback<void> *>(arg);
    tick_now();
    guard(cb, "cpucb", -1, [cb] { cb->mely_compat_run_posted(); });
}

__attribute__((noinline, cold)) static void post_failed(int err)
{
    die("cpucb", err);
}

__attribute__((always_inline)) static inline void post(callback<void> *cb, unsigned flags)
{
    require_callback(cb, "cpucb");
    mely_t *rt = runtime();
    mely_to_t to = target(cb);
    cb->refcount_inc_maybe_fresh(); /* usually a fresh wrap(): no atomic RMW */
    int err = mely_post_ex(rt, to.color, to.prio, to.handler, run_posted, cb, flags);
    if (__builtin_expect(err != 0, 0))
        post_failed(err);
}

void cpucb(callback<void> *cb)
{
    post(cb, MELY_POST_HEAD);
}

void cpucb_tail(callback<void> *cb)
{
    post(cb, 0);
}

/* ---- Introspection -------------------------------------------------------------------- */

int get_current_color()
{
    int c = mely_current_color();
    if (c < 0)
        return 0; /* outside a handler: the main thread's implicit color */
    if ((unsigned)c >= MELY_COLORS)
        return -(int)((unsigned)c - MELY_COLORS) - 1;
    return c;
}

unsigned int get_current_proc()
{
    int w = mely_current_worker();
    return w < 0 ? 0u : (unsigned)w;
}

int task_get_nthreads()
{
    return (int)workers();
}

int async_get_nthreads()
{
    return task_get_nthreads();
}

void register_atexit_handler(void (*fn)(void))
{
    if (fn && atexit(fn) != 0) {
        fprintf(stderr, "mely-compat: register_atexit_handler: too many handlers\n");
        exit(EXIT_FAILURE);
    }
}

struct mely *mely_compat_runtime()
{
    return runtime();
}

/* ---- amain ----------------------------------------------------------------------------- */

void amain()
{
    mely_t *rt = runtime();
    int err;
    try {
        err = mely_run(rt);
    } catch (...) {
        /* Not from a compat callback (their trampolines catch): from a
         * native handler the program posted itself (mely_compat_runtime()),
         * and it has unwound through the runtime's frames already. */
        callback_threw(nullptr, nullptr, "a native handler, unwound through the runtime", -1);
    }
    if (err)
        die("amain", err);
    /* Only mely_stop() (not part of the legacy API) makes mely_run return. */
    exit(EXIT_SUCCESS);
}
