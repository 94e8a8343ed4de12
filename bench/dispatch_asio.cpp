/* SPDX-License-Identifier: MIT */
/*
 * dispatch_asio.cpp: the Boost.Asio peer of bench/dispatch.
 *
 * The same three workloads as bench/dispatch.c, written the way an Asio user
 * would: one asio::io_context run by W threads (pinned like mely's workers:
 * thread i on the i-th allowed CPU, the calling thread being thread 0), one
 * asio::strand<io_context::executor_type> per color, asio::post(strand, h) per
 * event.
 *
 *   local      one strand; a driver posts 1000 empty handlers to its own strand,
 *              then re-posts itself, until N handlers ran -> ns per handler.
 *   crosscore  a producer strand posts empty handlers round-robin to 64 other
 *              strands, 1000 per producer run, re-posting itself; it only
 *              re-posts itself while more than 100,000 are in flight. The
 *              handler that consumes the N-th event stops the clock -> events/s.
 *              Asio does not tie a strand to a thread, so the consumers may run
 *              on any thread: their counter is a relaxed fetch_add (mely's is a
 *              plain relaxed store, written by worker 1 only).
 *   pingpong   two strands post to each other, N/10 round trips -> ns per trip.
 *              The thread that posts to the other strand usually runs it
 *              itself: each run reports on stderr the share of hops that
 *              changed threads (every hop of mely's ping-pong crosses workers).
 *
 * Each workload runs R times on a fresh io_context; the median is printed on
 * stdout as `asio,<workload>,<value>` (the lines bench/dispatch parses); per-run
 * figures go to stderr. A watchdog stops a run that takes far longer than it
 * should, so the program always ends.
 *
 * Options (--help): --workers N (2), --events N (10,000,000), --runs R (5),
 * --quick. The options, clock, medians and pinning are the harness's
 * (bench/harness.h, common/measure.h), which needs libmely at link time only.
 */
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/asio_run.h"
#include "bench/harness.h"

namespace asio = boost::asio;
using strand_t = asio::strand<asio::io_context::executor_type>;
using mely_bench_asio::limit_for;
using mely_bench_asio::run_context;
using mely_bench_asio::tl_thread;

namespace {

/* ---- Parameters (kept equal to bench/dispatch.c) ------------------------------ */

constexpr unsigned kChunk = 1000;         /* events posted per driver/producer run */
constexpr unsigned kConsumers = 64;       /* consumer strands in crosscore */
constexpr uint64_t kMaxInFlight = 100000; /* crosscore flow control */
constexpr uint64_t kPingPongDivisor = 10; /* round trips = N / 10 */
constexpr int kCacheLine = 64;

struct options {
    unsigned workers, runs;
    uint64_t events;
    bool quick;
} o;

const bench_opt options[] = {
    bench_opt_of("workers", OPT_UINT, &o.workers, "threads", 2, 256, 2),
    bench_opt_of("events", OPT_U64, &o.events, "N for local and crosscore", 1000, 1e10, 1e7, 5e5),
    bench_opt_of("runs", OPT_UINT, &o.runs, "runs, the median printed", 1, 1000, 5, 3),
    bench_opt_of("quick", OPT_QUICK, &o.quick, "small counts"),
    bench_opt{},
};

/* A run's figure and a note on where its handlers ran; value < 0: stopped. */
struct result {
    double value = -1.0;
    std::string note;
};

double median_of(std::vector<double> v) { return median(v.data(), v.size()); }

/* ---- (i) local: one strand, driver + empty handlers ----------------------------- */

struct local_state {
    asio::io_context *ctx;
    strand_t *strand;
    uint64_t total;   /* N: empty handlers + driver runs */
    uint64_t ran = 0; /* handlers that have run, as seen by the driver */
    uint64_t runs = 0;
    uint64_t on_other = 0; /* driver runs on another thread than the previous one */
    unsigned last_thread = 0;
    uint64_t t0 = 0, t1 = 0;
};

struct empty_handler {
    void operator()() const {}
};

struct local_driver {
    local_state *s;
    void operator()() const
    {
        uint64_t t = now_ns();
        if (s->runs++ == 0)
            s->t0 = t;
        else if (tl_thread != s->last_thread)
            s->on_other++;
        s->last_thread = tl_thread;
        s->ran++; /* this run; the empties posted before it ran before it (FIFO) */
        if (s->ran >= s->total) {
            s->t1 = t;
            s->ctx->stop();
            return;
        }
        uint64_t k = std::min<uint64_t>(kChunk, s->total - s->ran - 1);
        for (uint64_t i = 0; i < k; i++)
            asio::post(*s->strand, empty_handler{});
        s->ran += k; /* they will have run when the driver runs next */
        asio::post(*s->strand, local_driver{s});
    }
};

/* ns per handler. */
result run_local(unsigned workers, uint64_t n)
{
    result r;
    asio::io_context ctx((int)workers);
    strand_t strand = asio::make_strand(ctx);
    local_state s;
    s.ctx = &ctx;
    s.strand = &strand;
    s.total = n;

    asio::post(strand, local_driver{&s});
    if (!run_context(ctx, workers, limit_for(n, 5000)) || s.t1 == 0)
        return r;
    /* From the driver's first run to its last: the N-1 handlers before the last. */
    r.value = (double)(s.t1 - s.t0) / (double)(n - 1);
    r.note = "the strand changed threads between driver runs " + std::to_string(s.on_other) +
             " times in " + std::to_string(s.runs - 1);
    return r;
}

/* ---- (ii) crosscore: producer strand -> 64 consumer strands --------------------- */

struct alignas(kCacheLine) consumed_counter {
    std::atomic<uint64_t> n{0};
};

struct cross_state {
    asio::io_context *ctx;
    strand_t *producer;
    std::vector<strand_t> consumers;
    uint64_t total;
    alignas(kCacheLine) uint64_t posted = 0; /* producer only */
    unsigned next = 0;
    uint64_t t0 = 0;
    bool started = false;
    consumed_counter consumed; /* written by consumers only, own line */
    alignas(kCacheLine) uint64_t t1 = 0;
};

struct consumer_handler {
    cross_state *s;
    void operator()() const
    {
        uint64_t c = s->consumed.n.fetch_add(1, std::memory_order_relaxed) + 1;
        if (c == s->total) {
            s->t1 = now_ns();
            s->ctx->stop();
        }
    }
};

struct producer_handler {
    cross_state *s;
    void operator()() const
    {
        if (!s->started) {
            s->started = true;
            s->t0 = now_ns();
        }
        uint64_t done = s->consumed.n.load(std::memory_order_relaxed);
        if (s->posted - done <= kMaxInFlight) {
            uint64_t k = std::min<uint64_t>(kChunk, s->total - s->posted);
            for (uint64_t i = 0; i < k; i++) {
                asio::post(s->consumers[s->next], consumer_handler{s});
                s->next = (s->next + 1) % kConsumers;
            }
            s->posted += k;
        }
        if (s->posted < s->total)
            asio::post(*s->producer, producer_handler{s});
    }
};

/* events/s. */
result run_crosscore(unsigned workers, uint64_t n)
{
    result r;
    asio::io_context ctx((int)workers);
    strand_t producer = asio::make_strand(ctx);
    cross_state s;
    s.ctx = &ctx;
    s.producer = &producer;
    s.total = n;
    for (unsigned i = 0; i < kConsumers; i++)
        s.consumers.push_back(asio::make_strand(ctx));

    asio::post(producer, producer_handler{&s});
    if (!run_context(ctx, workers, limit_for(n, 5000)) || s.t1 == 0)
        return r;
    r.value = (double)n * 1e9 / (double)(s.t1 - s.t0);
    return r;
}

/* ---- (iii) pingpong: two strands ------------------------------------------------ */

struct pp_state {
    asio::io_context *ctx;
    strand_t *a, *b;
    uint64_t trips;
    uint64_t count = 0; /* A's handler only */
    uint64_t crossed = 0; /* hops that ran on another thread than the previous handler */
    unsigned last_thread = 0;
    uint64_t t0 = 0, t1 = 0;
};

struct pong_handler;

struct ping_handler {
    pp_state *s;
    void operator()() const;
};

struct pong_handler {
    pp_state *s;
    void operator()() const
    {
        s->crossed += tl_thread != s->last_thread;
        s->last_thread = tl_thread;
        asio::post(*s->a, ping_handler{s});
    }
};

void ping_handler::operator()() const
{
    if (s->count == 0)
        s->t0 = now_ns();
    else
        s->crossed += tl_thread != s->last_thread;
    s->last_thread = tl_thread;
    if (s->count == s->trips) {
        s->t1 = now_ns();
        s->ctx->stop();
        return;
    }
    s->count++;
    asio::post(*s->b, pong_handler{s});
}

/* Both strands on one io_context run by W threads: ns per round trip. */
result run_pingpong(unsigned workers, uint64_t trips)
{
    result r;
    asio::io_context ctx((int)workers);
    strand_t a = asio::make_strand(ctx);
    strand_t b = asio::make_strand(ctx);
    pp_state s;
    s.ctx = &ctx;
    s.a = &a;
    s.b = &b;
    s.trips = trips;

    asio::post(a, ping_handler{&s});
    if (!run_context(ctx, workers, limit_for(trips, 200000)) || s.t1 == 0)
        return r;
    r.value = (double)(s.t1 - s.t0) / (double)trips;
    char note[96];
    snprintf(note, sizeof(note), "%.1f%% of the hops changed threads",
             100.0 * (double)s.crossed / (double)(2 * trips));
    r.note = note;
    return r;
}

/* ---- Driver --------------------------------------------------------------------- */

/* Runs fn R times, prints each run on stderr and the median on stdout. */
template <typename Fn>
bool measure(const char *workload, const char *unit, unsigned runs, Fn fn)
{
    std::vector<double> ok;
    for (unsigned r = 0; r < runs; r++) {
        result res = fn();
        if (res.value < 0)
            fprintf(stderr, "asio %-22s run %u: stopped by the watchdog\n", workload, r + 1);
        else {
            fprintf(stderr, "asio %-22s run %u: %.2f %s%s%s\n", workload, r + 1, res.value, unit,
                    res.note.empty() ? "" : "   ", res.note.c_str());
            ok.push_back(res.value);
        }
    }
    if (ok.empty())
        return false;
    printf("asio,%s,%.3f\n", workload, median_of(ok));
    fflush(stdout);
    return true;
}

} // namespace

int main(int argc, char **argv)
{
    int rc = bench_options("dispatch-asio [options]: prints asio,<workload>,<value> for "
                           "local_ns_per_event, crosscore_events_per_s and pingpong_ns_per_rt "
                           "(medians of R runs)",
                           options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;

    uint64_t trips = std::max<uint64_t>(1, o.events / kPingPongDivisor);
    fprintf(stderr, "asio peer: %u threads, N=%" PRIu64 ", %" PRIu64 " round trips, %u runs\n",
            o.workers, o.events, trips, o.runs);

    bool all = true;
    all &= measure("local_ns_per_event", "ns/event", o.runs,
                   [&] { return run_local(o.workers, o.events); });
    all &= measure("crosscore_events_per_s", "events/s", o.runs,
                   [&] { return run_crosscore(o.workers, o.events); });
    all &= measure("pingpong_ns_per_rt", "ns/round trip", o.runs,
                   [&] { return run_pingpong(o.workers, trips); });
    return all ? 0 : 1;
}
