/* SPDX-License-Identifier: MIT */
/*
 * pubsub.h: what the publish/subscribe benchmark's brokers and its client
 * share: the protocol (as the issue states it, word for word), its limits and
 * defaults, a line read into a command, the brokers' command line and their
 * two fixed lines. Brokers: bench/e2e/pubsub_bufferevent.c (libevent
 * bufferevents, one thread) and examples/pubsub.c (mely streams); client:
 * bench/e2e/pubsub_client.c; driver: bench/e2e/run-pubsub.sh; test:
 * examples/tests/pubsub-self-test.sh. bench/README.md describes the benchmark.
 *
 * Protocol: text lines, LF or CRLF, at most 4096 bytes (end of line excluded).
 * - `SUB <room>`: subscribe this connection to room. Reply `OK SUB <room>` (also when already subscribed).
 * - `UNSUB <room>`: reply `OK UNSUB <room>` (also when not subscribed).
 * - `PUB <room> <payload>`: no reply. Every connection subscribed to <room> when the broker handles this PUB receives `MSG <room> <payload>` (the publisher too, if subscribed). The payload is the rest of the line (may contain spaces, may be empty).
 * - `QUIT`: reply `BYE`, then the broker closes the connection once everything pending for it is sent.
 * - A room is 1-64 bytes of `[A-Za-z0-9_.-]`; anything else: `ERR bad room`. Unknown command: `ERR unknown command`. A line over 4096 bytes: `ERR line too long`, then the connection closes.
 * - Order: the MSG lines of one publisher for one room reach every subscriber in the order published. Nothing else is ordered.
 * - Slow subscriber: a connection whose pending output exceeds `--max-output` bytes (default 1 MiB = 1048576) is closed at once (nothing more is sent to it); the broker counts it (`cut`).
 * - Idle: a connection with neither input nor output for `--idle-ms` ms (default 60000; 0 = none) gets `ERR idle` and is closed.
 * - SIGTERM or SIGINT: graceful stop: the broker stops accepting and reading, delivers every PUB it has already read to the subscribers of its room, sends everything, closes every connection, prints on stderr exactly one line `pubsub: P published, D delivered, C cut` (P = PUB lines handled, D = MSG lines appended to subscribers' output, C = slow subscribers cut), and exits 0.
 * - Command line: `BROKER [--port P] [--max-output BYTES] [--idle-ms MS]`; `--port 0` (the default) picks a free port. Once listening the broker prints `pubsub: serving 127.0.0.1:PORT` on stdout and flushes. `--help` prints usage. Bad options: exit 2 with a message.
 *
 * How this file reads the places where the protocol leaves a choice (what
 * pubsub_parse() does; the client checks the first three, marked *):
 * - * A connection's own replies (OK, BYE, ERR) come in the order of its
 *   commands; MSG lines may come anywhere between them (a broker may deliver
 *   from another thread).
 * - * The command is the line's first word, up to the first space or the end,
 *   case-sensitive: "SUBX a", "PUBLISH a b" and the empty line are unknown
 *   commands. `SUB`, `UNSUB`, `PUB` alone: the room is empty, so `ERR bad room`.
 * - * "Over 4096 bytes" is known before the LF comes: more than 4097 bytes
 *   without one (4096, and a CR that may end the line) is a line too long.
 * - `PUB <room>` with nothing after the room: an empty payload, delivered as
 *   `MSG <room> ` (the space kept, so that every MSG line has one shape).
 *   `QUIT` with anything after it is an unknown command.
 * - Lines the broker sends end with LF alone. Lines after a QUIT, or after
 *   the broker decided to close, are not read.
 * - Input counts for idleness when bytes arrive, output when a line is
 *   appended to the connection's output.
 * - A cut connection is reset (SO_LINGER 0): its pending output may not
 *   leave while its peer does not read, so a plain close would not be "at
 *   once". The client accepts a reset or an end of stream.
 *
 * Everything here is static inline and strict ISO C11 (the examples are
 * built with -std=c11 -pedantic), so that both brokers may include it.
 */
#ifndef MELY_BENCH_E2E_PUBSUB_H
#define MELY_BENCH_E2E_PUBSUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    PUBSUB_MAX_LINE = 4096, /* bytes of a line, its end (LF or CRLF) excluded */
    PUBSUB_MAX_ROOM = 64,   /* bytes of a room's name */
};
#define PUBSUB_MAX_OUTPUT_DEFAULT 1048576u /* --max-output */
#define PUBSUB_IDLE_MS_DEFAULT 60000u      /* --idle-ms */

/* The broker's two fixed lines: on stdout once listening (then flushed), on
 * stderr once stopped (P, D, C as unsigned long long). */
#define PUBSUB_SERVING_FMT "pubsub: serving 127.0.0.1:%u\n"
#define PUBSUB_STOPPED_FMT "pubsub: %llu published, %llu delivered, %llu cut\n"

enum pubsub_cmd {
    PUBSUB_SUB,
    PUBSUB_UNSUB,
    PUBSUB_PUB,
    PUBSUB_QUIT,
    PUBSUB_BAD_ROOM, /* reply "ERR bad room" */
    PUBSUB_UNKNOWN,  /* reply "ERR unknown command" */
};

/* A parsed line: pointers into it. */
struct pubsub_req {
    const char *room;
    size_t room_len;
    const char *payload; /* PUB: the rest of the line after "<room> " */
    size_t payload_len;
};

/* Whether room[0..len) is a valid room name. O(len). */
static inline bool pubsub_room_ok(const char *room, size_t len)
{
    if (len < 1 || len > PUBSUB_MAX_ROOM)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)room[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* The length of the line p[0..n) without a CR that ends it: p[0..n) is what
 * precedes the LF. */
static inline size_t pubsub_chomp(const char *p, size_t n)
{
    return n > 0 && p[n - 1] == '\r' ? n - 1 : n;
}

/* Reads one line, its end of line removed (pubsub_chomp), into a command and
 * its parts (*r: pointers into line). O(length of the line). */
static inline enum pubsub_cmd pubsub_parse(const char *line, size_t len, struct pubsub_req *r)
{
    const char *sp = memchr(line, ' ', len);
    size_t wlen = sp ? (size_t)(sp - line) : len;
    const char *rest = sp ? sp + 1 : line + len;
    size_t rlen = len - (size_t)(rest - line);

    r->room = rest;
    r->room_len = rlen;
    r->payload = rest + rlen;
    r->payload_len = 0;
    if (wlen == 3 && memcmp(line, "SUB", 3) == 0)
        return pubsub_room_ok(rest, rlen) ? PUBSUB_SUB : PUBSUB_BAD_ROOM;
    if (wlen == 5 && memcmp(line, "UNSUB", 5) == 0)
        return pubsub_room_ok(rest, rlen) ? PUBSUB_UNSUB : PUBSUB_BAD_ROOM;
    if (wlen == 4 && memcmp(line, "QUIT", 4) == 0 && !sp)
        return PUBSUB_QUIT;
    if (wlen != 3 || memcmp(line, "PUB", 3) != 0)
        return PUBSUB_UNKNOWN;
    const char *sp2 = memchr(rest, ' ', rlen);
    r->room_len = sp2 ? (size_t)(sp2 - rest) : rlen;
    if (sp2) {
        r->payload = sp2 + 1;
        r->payload_len = rlen - r->room_len - 1;
    }
    return pubsub_room_ok(r->room, r->room_len) ? PUBSUB_PUB : PUBSUB_BAD_ROOM;
}

/* The brokers' options. */
struct pubsub_opts {
    unsigned port;     /* 0: a free port */
    size_t max_output; /* bytes of pending output beyond which a connection is cut */
    unsigned idle_ms;  /* 0: no idle timeout */
};

/* Reads one option's value: a whole number in lo..hi. */
static inline bool pubsub_arg_num(const char *s, unsigned long long lo, unsigned long long hi,
                                  unsigned long long *v)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return false;
    *v = strtoull(s, &end, 10);
    return *end == '\0' && *v >= lo && *v <= hi;
}

/* Parses `name [--port P] [--max-output BYTES] [--idle-ms MS]` (also
 * --opt=value) into *o, the defaults first. Returns 0: run; 1: --help was
 * printed (exit 0); 2: a message was printed on stderr (exit 2). */
static inline int pubsub_args(int argc, char **argv, struct pubsub_opts *o)
{
    static const char usage[] =
        "usage: %s [--port P] [--max-output BYTES] [--idle-ms MS]\n"
        "  a publish/subscribe broker on 127.0.0.1 (protocol: bench/e2e/pubsub.h)\n"
        "  --port P            0..65535, default 0: a free port (printed once listening)\n"
        "  --max-output BYTES  a connection with more pending output is cut,\n"
        "                      1..2^40, default 1048576\n"
        "  --idle-ms MS        a connection without input or output that long is closed,\n"
        "                      0 (none)..86400000, default 60000\n";
    const char *name = argc > 0 ? argv[0] : "broker";

    o->port = 0;
    o->max_output = PUBSUB_MAX_OUTPUT_DEFAULT;
    o->idle_ms = PUBSUB_IDLE_MS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
        size_t alen = eq ? (size_t)(eq - a) : strlen(a);
        unsigned long long v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf(usage, name);
            return 1;
        }
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        if (alen == 6 && memcmp(a, "--port", 6) == 0 && pubsub_arg_num(val, 0, 65535, &v))
            o->port = (unsigned)v;
        else if (alen == 12 && memcmp(a, "--max-output", 12) == 0 &&
                 pubsub_arg_num(val, 1, 1ull << 40, &v) && v <= SIZE_MAX)
            o->max_output = (size_t)v;
        else if (alen == 9 && memcmp(a, "--idle-ms", 9) == 0 &&
                 pubsub_arg_num(val, 0, 86400000, &v))
            o->idle_ms = (unsigned)v;
        else {
            fprintf(stderr, "%s: bad option or value: %s%s%s\n", name, a, eq || !val ? "" : " ",
                    eq || !val ? "" : val);
            fprintf(stderr, usage, name);
            return 2;
        }
    }
    return 0;
}

#endif /* MELY_BENCH_E2E_PUBSUB_H */
