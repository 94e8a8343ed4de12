/* SPDX-License-Identifier: MIT */
/*
 * pubsub_client.h: what the parts of bench/e2e/pubsub_client share: its
 * options; the load (pubsub_load.c), which main() (pubsub_client.c) runs and
 * takes figures around; the protocol checks (pubsub_checks.c). One thread
 * calls these (the load's own threads excepted), once each.
 */
#ifndef MELY_BENCH_E2E_PUBSUB_CLIENT_H
#define MELY_BENCH_E2E_PUBSUB_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

/* The options' limits (the load's arrays are sized by them). */
enum { PC_MAX_THREADS = 2, PC_MAX_RPS = 64, PC_MAX_PUBS = 10000 };

struct pc_opts {
    unsigned port;
    int server_pid;            /* -1: none */
    unsigned subs, rooms, rps; /* rps: rooms per subscriber */
    unsigned pubs, msgs, payload, window, threads;
    double seconds_limit;
    bool csv_line;
    /* modes */
    bool check_protocol, check_slow, check_drain, floor;
    unsigned check_idle_ms; /* 0: not this mode */
    uint64_t max_output;    /* --check-slow: the broker's --max-output */
    const char *server_log; /* --check-drain: the broker's stderr, read once it exited */
};

/* ---- The load (pubsub_load.c) ------------------------------------------------------------ */

/* How long, after the drain's SIGTERM, the subscribers' ends of stream and
 * then the broker's exit may take. */
#define PC_DRAIN_LIMIT_MS 20000

/* What a run of the load gives. */
struct pc_load {
    uint64_t expect;  /* deliveries expected in all */
    uint64_t got;     /* deliveries received (each checked) */
    uint64_t t0, t1;  /* CLOCK_MONOTONIC ns: the first PUB; the last delivery, or the end */
    bool timed_out;   /* --seconds-limit passed */
};

/* Connects the subscribers and the publishers, subscribes, and waits for
 * every OK SUB. Exits 1 on an error (printed), 3 past --seconds-limit. */
void pc_load_setup(const struct pc_opts *o);

/* Publishes and checks until every delivery arrived (--check-drain: every
 * subscriber's end of stream, SIGTERM sent half-way), a stall or an error
 * ends it, or --seconds-limit passes. A load that is not the drain ends with
 * every subscriber's count checked. */
void pc_load_run(struct pc_load *r);

/* --check-drain, after pc_load_run(): per (publisher, room), every subscriber
 * of the room must have received the same number of messages (else errors).
 * @return the PUBs the subscribers saw, in all; *all_rooms: every room had a
 *         subscriber (then that is every PUB the broker handled). */
uint64_t pc_drain_counts(bool *all_rooms);

/* Counts an error of the load or the drain, prints the first few on stderr.
 * Any thread. */
void pc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
unsigned pc_failures(void);

/* ---- The checks (pubsub_checks.c) -------------------------------------------------------- */

/* Each returns the exit status, 0 when the broker behaved as the
 * protocol says, 1 otherwise (every failure printed as "FAIL: ..."). */
int pc_check_protocol(const struct pc_opts *o);
int pc_check_slow(const struct pc_opts *o);
int pc_check_idle(const struct pc_opts *o);

#endif /* MELY_BENCH_E2E_PUBSUB_CLIENT_H */
