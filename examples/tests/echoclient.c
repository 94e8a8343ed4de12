/* SPDX-License-Identifier: MIT */
/*
 * echoclient.c: the client of examples/tests/echo-self-test.sh, against examples/echo.
 *
 *   echoclient PORT PID
 *
 * 50 connections each exchange 20 messages of 1,000 bytes, checked byte by
 * byte; then one connection streams 4 MB while a thread of its own reads
 * them back (so the server's output fills and its backpressure works); then,
 * with the 50 connections open and idle, SIGTERM to PID: the server must
 * close every one of them (EOF) in time, its graceful stop (mely_drain).
 * Exits 0 when all of that held; the script checks the server's own exit.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/tests/lineclient.h"

enum { CLIENTS = 50, ROUNDS = 20, MSG = 1000, STREAM_BYTES = 4 << 20, CHUNK = 65536 };

static char pattern_byte(size_t i, unsigned seed)
{
    return (char)(i * 131 + seed * 7 + (i >> 11));
}

static bool exchange(struct lc *c, unsigned client, unsigned round)
{
    char msg[MSG], got[MSG];
    for (unsigned i = 0; i < MSG; i++)
        msg[i] = pattern_byte(i, client * ROUNDS + round);
    return lc_send(c, msg, MSG) && lc_recv(c, got, MSG) && memcmp(msg, got, MSG) == 0;
}

static void *stream_writer(void *arg)
{
    static char chunk[CHUNK];
    struct lc *c = arg;
    for (size_t off = 0; off < STREAM_BYTES; off += CHUNK) {
        for (size_t i = 0; i < CHUNK; i++)
            chunk[i] = pattern_byte(off + i, 99);
        if (!lc_send(c, chunk, CHUNK)) {
            lc_fail("stream: send failed at byte %zu", off);
            break;
        }
    }
    return NULL;
}

/* 4 MB written by a thread while this one reads them back. */
static void stream(unsigned port)
{
    static char got[CHUNK];
    struct lc c;
    pthread_t writer;
    if (!lc_connect(&c, port))
        return;
    if (pthread_create(&writer, NULL, stream_writer, &c) != 0) {
        lc_fail("stream: no writer thread");
        lc_close(&c);
        return;
    }
    for (size_t off = 0; off < STREAM_BYTES; off += CHUNK) {
        if (!lc_recv(&c, got, CHUNK)) {
            lc_fail("stream: the echo stopped at byte %zu of %d", off, STREAM_BYTES);
            break;
        }
        for (size_t i = 0; i < CHUNK; i++)
            if (got[i] != pattern_byte(off + i, 99)) {
                lc_fail("stream: byte %zu differs", off + i);
                off = STREAM_BYTES;
                break;
            }
    }
    pthread_join(writer, NULL);
    lc_close(&c);
}

int main(int argc, char **argv)
{
    static struct lc conns[CLIENTS];
    unsigned port, wrong = 0, opened = 0, closed;
    int pid;
    if (!lc_args(argc, argv, &port, &pid))
        return 2;
    for (unsigned c = 0; c < CLIENTS; c++)
        opened += lc_connect(&conns[c], port);
    for (unsigned r = 0; r < ROUNDS; r++)
        for (unsigned c = 0; c < CLIENTS; c++)
            if (conns[c].fd >= 0 && !exchange(&conns[c], c, r))
                wrong++;
    if (wrong)
        lc_fail("%u of %u exchanges went wrong", wrong, opened * ROUNDS);
    stream(port);
    if (kill(pid, SIGTERM) != 0)
        lc_fail("cannot signal the server (pid %d)", pid);
    closed = lc_all_closed(conns, CLIENTS);
    if (closed != opened)
        lc_fail("SIGTERM: the server closed %u of its %u open connections", closed, opened);
    printf("echoclient: %u clients x %d messages of %d bytes, a %d MB stream, %u connections "
           "closed by SIGTERM: %u failure(s)\n",
           opened, ROUNDS, MSG, STREAM_BYTES >> 20, closed, lc_failures());
    return lc_failures() ? 1 : 0;
}
