/* SPDX-License-Identifier: MIT */
/*
 * compat_post_asio.cpp: bench/compat_post's three shapes on Boost.Asio
 * (compat_post_asio.h). Built with stubs when configure did not find Boost.
 */
#include "bench/compat_post_asio.h"

#ifdef MELY_BENCH_ASIO

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <ctime>
#include <vector>

#include "bench/asio_run.h"

namespace asio = boost::asio;
using strand_t = asio::strand<asio::io_context::executor_type>;
using mely_bench_asio::limit_for;
using mely_bench_asio::run_context;

bool asio_available() { return true; }

namespace {

double thread_cpu_ns()
{
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ---- bulk ------------------------------------------------------------------------- */

struct bulk_state {
    asio::io_context *ctx;
    strand_t *strand;
    long n, ran = 0;
    int burst;
    uint64_t t0 = 0, t1 = 0;
    double c0 = 0, c1 = 0;
};

struct bulk_empty {
    bulk_state *s;
    void operator()() const { s->ran++; }
};

struct bulk_driver {
    bulk_state *s;
    void operator()() const
    {
        if (s->ran == 0) {
            s->t0 = now_ns();
            s->c0 = thread_cpu_ns();
        }
        s->ran++;
        if (s->ran >= s->n) {
            s->t1 = now_ns();
            s->c1 = thread_cpu_ns();
            s->ctx->stop();
            return;
        }
        for (int i = 0; i < s->burst; i++)
            asio::post(*s->strand, bulk_empty{s});
        asio::post(*s->strand, bulk_driver{s});
    }
};

/* ---- chained ---------------------------------------------------------------------- */

struct chain_state {
    asio::io_context *ctx;
    strand_t *strand;
    long n, ran = 0;
    uint64_t t0 = 0, t1 = 0;
    double c0 = 0, c1 = 0;
};

struct chain_link {
    chain_state *s;
    void operator()() const
    {
        if (s->ran == 0) {
            s->t0 = now_ns();
            s->c0 = thread_cpu_ns();
        }
        if (++s->ran >= s->n) {
            s->t1 = now_ns();
            s->c1 = thread_cpu_ns();
            s->ctx->stop();
            return;
        }
        asio::post(*s->strand, chain_link{s});
    }
};

/* ---- cross ------------------------------------------------------------------------ */

/* Per consumer strand; its handlers run one at a time (in order, each seeing
 * the previous one's writes), on any thread. */
struct alignas(64) consumed_count {
    std::atomic<long> n{0};
};

struct cross_state {
    asio::io_context *ctx;
    strand_t *producer;
    std::vector<strand_t> consumers;
    std::vector<consumed_count> consumed;
    long n, posted = 0, runs = 0;
    int next = 0, burst;
    long max_in_flight;
    uint64_t t0 = 0, t1 = 0;

    cross_state(int k) : consumed(k) {}
};

struct cross_consume {
    std::atomic<long> *n;
    void operator()() const { n->store(n->load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
};

struct cross_produce {
    cross_state *s;
    void operator()() const
    {
        if (s->runs++ == 0)
            s->t0 = now_ns();
        long done = 0;
        for (auto &c : s->consumed)
            done += c.n.load(std::memory_order_relaxed);
        if (done >= s->n) {
            s->t1 = now_ns();
            s->ctx->stop();
            return;
        }
        int k = (int)s->consumers.size();
        for (int i = 0; i < s->burst && s->posted < s->n && s->posted - done < s->max_in_flight;
             i++) {
            asio::post(s->consumers[s->next], cross_consume{&s->consumed[s->next].n});
            s->next = (s->next + 1) % k;
            s->posted++;
        }
        asio::post(*s->producer, cross_produce{s});
    }
};

} // namespace

double asio_bulk(long n, int burst, double *cpu)
{
    asio::io_context ctx(1);
    strand_t strand = asio::make_strand(ctx);
    bulk_state s;
    s.ctx = &ctx;
    s.strand = &strand;
    s.n = n;
    s.burst = burst;
    asio::post(strand, bulk_driver{&s});
    if (!run_context(ctx, 1, limit_for((uint64_t)n, 5000)) || s.t1 == 0)
        return -1;
    *cpu = (s.c1 - s.c0) / (double)(s.ran - 1);
    return (double)(s.t1 - s.t0) / (double)(s.ran - 1);
}

double asio_chained(long n, double *cpu)
{
    asio::io_context ctx(1);
    strand_t strand = asio::make_strand(ctx);
    chain_state s;
    s.ctx = &ctx;
    s.strand = &strand;
    s.n = n;
    asio::post(strand, chain_link{&s});
    if (!run_context(ctx, 1, limit_for((uint64_t)n, 5000)) || s.t1 == 0)
        return -1;
    *cpu = (s.c1 - s.c0) / (double)(s.ran - 1);
    return (double)(s.t1 - s.t0) / (double)(s.ran - 1);
}

double asio_cross(long n, unsigned threads, int consumers, int burst, long max_in_flight)
{
    asio::io_context ctx((int)threads);
    strand_t producer = asio::make_strand(ctx);
    cross_state s(consumers);
    s.ctx = &ctx;
    s.producer = &producer;
    for (int i = 0; i < consumers; i++)
        s.consumers.push_back(asio::make_strand(ctx));
    s.n = n;
    s.burst = burst;
    s.max_in_flight = max_in_flight;
    asio::post(producer, cross_produce{&s});
    if (!run_context(ctx, threads, limit_for((uint64_t)n, 5000)) || s.t1 == 0)
        return -1;
    return (double)(s.t1 - s.t0) / (double)n;
}

#else /* !MELY_BENCH_ASIO */

bool asio_available() { return false; }
double asio_bulk(long, int, double *) { return -1; }
double asio_chained(long, double *) { return -1; }
double asio_cross(long, unsigned, int, int, long) { return -1; }

#endif
