/* SPDX-License-Identifier: MIT */
/*
 * compat_post_asio.h: bench/compat_post's shapes on Boost.Asio (one strand
 * per color, asio::post per event, as bench/dispatch_asio.cpp), in a
 * translation unit of their own: the legacy headers compat_post.cpp includes
 * (async.h: New, ref, ptr, str, vec...) and Boost's are kept apart.
 * Each function runs one workload on a fresh io_context and returns ns per
 * event, or -1 (watchdog, or built without Boost.Asio); the one-thread
 * workloads also give the CPU time of their thread per event (*cpu).
 */
#ifndef MELY_BENCH_COMPAT_POST_ASIO_H
#define MELY_BENCH_COMPAT_POST_ASIO_H

/* True if the program was built with Boost.Asio (configure found it). */
bool asio_available();

/* One thread (pinned to the first allowed CPU), one strand: a driver posts
 * `burst` empty handlers to its strand and re-posts itself, until n ran. */
double asio_bulk(long n, int burst, double *cpu);

/* One thread, one strand: each handler posts the next one, n in all. */
double asio_chained(long n, double *cpu);

/* `threads` threads: a producer strand posts round-robin to `consumers`
 * strands, `burst` per run, at most `max_in_flight` unconsumed, re-posting
 * itself until it sees n consumed. */
double asio_cross(long n, unsigned threads, int consumers, int burst, long max_in_flight);

#endif
