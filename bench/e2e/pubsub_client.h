/*
 * pubsub_client.h: what the two halves of bench/e2e/pubsub_client share: its
 * options, and the protocol checks (pubsub_checks.c) that main()
 * (pubsub_client.c, also the load and the drain check) runs when asked.
 */
#ifndef MELY_BENCH_E2E_PUBSUB_CLIENT_H
#define MELY_BENCH_E2E_PUBSUB_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

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

/* The checks: each returns the exit status, 0 when the broker behaved as the
 * protocol says, 1 otherwise (every failure printed as "FAIL: ..."). */
int pc_check_protocol(const struct pc_opts *o);
int pc_check_slow(const struct pc_opts *o);
int pc_check_idle(const struct pc_opts *o);

#endif /* MELY_BENCH_E2E_PUBSUB_CLIENT_H */
