/* SPDX-License-Identifier: MIT */
/*
 * kvclient.c: the client of examples/tests/kv-self-test.sh, against examples/kv and
 * bench/e2e/kv_bufferevent (the same protocol, examples/kv.c).
 *
 *   kvclient PORT PID
 *
 * Each check on connections of its own: the commands' replies; malformed
 * lines get an ERROR line and the connection goes on; CRLF, and lines split
 * across sends; 1,000 pipelined commands on different keys answered in order;
 * 8 threads of random commands on keys of their own (checked against a
 * model) and on shared keys; a slow reader of 16 MB of replies; lines over
 * 8 KB get "ERROR line too long" and the connection closes; a client that
 * half-closes after pipelined commands gets every reply, then EOF; last,
 * SIGTERM to PID with connections open: the server closes each of them.
 * Exits 0 when all of that held.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/measure.h"
#include "examples/tests/lineclient.h"

enum { MAX_LINE = 8192, LINE = MAX_LINE + 64, THREADS = 8, OPS = 2000, OWN_KEYS = 20 };

static unsigned port;

static void pause_ms(long ms)
{
    nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL);
}

/* Whether got is want, or starts with want's text before a final '*'. */
static bool matches(const char *got, const char *want)
{
    size_t n = strlen(want);
    return n > 0 && want[n - 1] == '*' ? strncmp(got, want, n - 1) == 0 : strcmp(got, want) == 0;
}

/* Reads a reply line and checks it. */
static bool reply(struct lc *c, const char *what, const char *cmd, const char *want)
{
    static _Thread_local char got[LINE];
    if (!lc_line(c, got, sizeof(got))) {
        lc_fail("%s: \"%.40s\": no reply", what, cmd);
        return false;
    }
    if (!matches(got, want)) {
        lc_fail("%s: \"%.40s\": got \"%.60s\", want \"%.60s\"", what, cmd, got, want);
        return false;
    }
    return true;
}

/* Sends cmd and LF, then checks the reply. */
static bool expect(struct lc *c, const char *what, const char *cmd, const char *want)
{
    static _Thread_local char line[LINE + 1];
    size_t n = strlen(cmd);
    if (n >= LINE)
        n = LINE;
    memcpy(line, cmd, n);
    line[n] = '\n';
    if (!lc_send(c, line, n + 1)) {
        lc_fail("%s: \"%.40s\": send failed", what, cmd);
        return false;
    }
    return reply(c, what, cmd, want);
}

static void basics(void)
{
    static const char *const steps[][2] = {
        {"GET nokey", "NOT_FOUND"}, {"SET a 1", "OK"},        {"GET a", "VALUE 1"},
        {"SET a two words", "OK"},  {"GET a", "VALUE two words"}, {"SET e ", "OK"},
        {"GET e", "VALUE "},        {"DEL a", "OK"},          {"DEL a", "NOT_FOUND"},
        {"GET a", "NOT_FOUND"},     {"DEL e", "OK"},
    };
    char key[256], cmd[600];
    struct lc c;
    if (!lc_connect(&c, port))
        return;
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        expect(&c, "basics", steps[i][0], steps[i][1]);
    memset(key, 'k', 250); /* the longest key */
    key[250] = '\0';
    snprintf(cmd, sizeof(cmd), "SET %s long", key);
    expect(&c, "basics", cmd, "OK");
    snprintf(cmd, sizeof(cmd), "GET %s", key);
    expect(&c, "basics", cmd, "VALUE long");
    /* CRLF, and lines cut anywhere across sends */
    lc_sendstr(&c, "SET c 3\r\nGET c\r\n");
    if (reply(&c, "crlf", "SET c 3", "OK"))
        reply(&c, "crlf", "GET c", "VALUE 3");
    const char *pieces[] = {"GE", "T c\nSET c 4", "\r", "\nGET ", "c\n"};
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
        lc_sendstr(&c, pieces[i]);
        pause_ms(30);
    }
    if (reply(&c, "split", "GET c", "VALUE 3") && reply(&c, "split", "SET c 4", "OK"))
        reply(&c, "split", "GET c", "VALUE 4");
    lc_close(&c);
}

static void errors(void)
{
    static const char *const bad[] = {"", "FOO a", "GET", "GET ", "get a", "GETa", "GET a b",
                                      "DEL a b", "SET a", "SET  a 1", " GET a", "SET"};
    static const char binary[] = {'\x01', '\xff', '\0', 'x', ' ', '\0', '\n'};
    char cmd[300] = "GET ";
    struct lc c;
    if (!lc_connect(&c, port))
        return;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        expect(&c, "errors", bad[i], "ERROR *");
    memset(cmd + 4, 'k', 251); /* one byte too long a key */
    cmd[255] = '\0';
    expect(&c, "errors", cmd, "ERROR *");
    lc_send(&c, binary, sizeof(binary));
    reply(&c, "errors", "(binary)", "ERROR *");
    expect(&c, "errors", "GET zz", "NOT_FOUND"); /* the connection goes on */
    lc_close(&c);
}

/* 500 SET and 500 GET in one send, each on another key than the one before. */
static void pipeline(void)
{
    static char buf[40000];
    char want[64];
    size_t n = 0;
    struct lc c;
    if (!lc_connect(&c, port))
        return;
    for (unsigned i = 0; i < 500; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "SET p%u v%u\nGET p%u\n", i, i * 7,
                              (i * 37) % (i + 1));
    if (!lc_send(&c, buf, n))
        lc_fail("pipeline: send failed");
    for (unsigned i = 0; i < 500; i++) {
        snprintf(want, sizeof(want), "VALUE v%u", (i * 37) % (i + 1) * 7);
        if (!reply(&c, "pipeline", "SET", "OK") || !reply(&c, "pipeline", "GET", want))
            break;
    }
    lc_close(&c);
}

/* Random commands on keys of this thread's own, checked against a model,
 * and on 4 shared keys, whose values must be one some thread set. */
static void *random_client(void *arg)
{
    unsigned t = (unsigned)(size_t)arg;
    uint64_t seed = t * 0x9e3779b97f4a7c15u + 1;
    int model[OWN_KEYS]; /* -1: absent */
    char cmd[64], want[64];
    struct lc c;
    if (!lc_connect(&c, port))
        return NULL;
    for (unsigned k = 0; k < OWN_KEYS; k++)
        model[k] = -1;
    for (unsigned i = 0; i < OPS; i++) {
        uint64_t r = xorshift64(&seed);
        unsigned k = (unsigned)(r >> 8) % OWN_KEYS, op = (unsigned)(r >> 40) % 3;
        bool shared = (r >> 20) % 8 == 0, ok;
        if (shared) {
            snprintf(cmd, sizeof(cmd), "%s s%u%s", op == 0 ? "GET" : op == 1 ? "SET" : "DEL",
                     k % 4, op == 1 ? " shared" : "");
            ok = expect(&c, "threads", cmd, op == 0 ? "*" : op == 1 ? "OK" : "*");
        } else {
            snprintf(cmd, sizeof(cmd), "%s t%uk%u", op == 0 ? "GET" : op == 1 ? "SET" : "DEL", t,
                     k);
            if (op == 1)
                snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " %u", i);
            if (op == 0 && model[k] >= 0)
                snprintf(want, sizeof(want), "VALUE %d", model[k]);
            else
                snprintf(want, sizeof(want), "%s", op == 1 || model[k] >= 0 ? "OK" : "NOT_FOUND");
            ok = expect(&c, "threads", cmd, want);
            model[k] = op == 1 ? (int)i : op == 2 ? -1 : model[k];
        }
        if (!ok)
            break;
    }
    lc_close(&c);
    return NULL;
}

static void threads(void)
{
    pthread_t th[THREADS];
    unsigned started = 0;
    for (unsigned t = 0; t < THREADS; t++)
        started += pthread_create(&th[t], NULL, random_client, (void *)(size_t)t) == 0;
    if (started != THREADS)
        lc_fail("threads: %u of %d started", started, THREADS);
    for (unsigned t = 0; t < started; t++)
        pthread_join(th[t], NULL);
}

/* 2,000 GETs of an 8,000-byte value sent before reading any reply. */
static void slow_reader(void)
{
    static char cmd[8100], want[8100];
    struct lc c;
    if (!lc_connect(&c, port))
        return;
    memcpy(cmd, "SET big ", 8);
    memset(cmd + 8, 'b', 8000);
    cmd[8008] = '\0';
    snprintf(want, sizeof(want), "VALUE %s", cmd + 8);
    expect(&c, "slow reader", cmd, "OK");
    for (unsigned i = 0; i < 2000; i++)
        if (!lc_sendstr(&c, "GET big\n")) {
            lc_fail("slow reader: send %u failed", i);
            break;
        }
    pause_ms(300); /* the server fills its output and stops reading meanwhile */
    for (unsigned i = 0; i < 2000; i++)
        if (!reply(&c, "slow reader", "GET big", want))
            break;
    lc_close(&c);
}

/* A line over the limit, cut (no LF yet) or whole: an error, then the end.
 * Cut, the limit is one byte more (a CR may still wait for its LF). */
static void too_long(bool whole)
{
    static char line[MAX_LINE + 3];
    struct lc c;
    if (!lc_connect(&c, port))
        return;
    memset(line, 'x', sizeof(line));
    line[MAX_LINE + 1] = whole ? '\n' : 'x';
    lc_send(&c, line, MAX_LINE + 2);
    if (reply(&c, whole ? "too long (whole)" : "too long (cut)", "xxx", "ERROR line too long") &&
        !lc_eof(&c))
        lc_fail("too long: the connection stayed open");
    lc_close(&c);
    /* the longest line allowed passes */
    if (!lc_connect(&c, port))
        return;
    memcpy(line, "SET x ", 6);
    line[MAX_LINE] = '\0';
    expect(&c, "longest line", line, "OK");
    lc_close(&c);
}

static void half_close(void)
{
    struct lc c;
    if (!lc_connect(&c, port))
        return;
    lc_sendstr(&c, "SET h 1\nGET h\nDEL h\nGET h\n");
    shutdown(c.fd, SHUT_WR);
    if (reply(&c, "half close", "SET h", "OK") && reply(&c, "half close", "GET h", "VALUE 1") &&
        reply(&c, "half close", "DEL h", "OK") && reply(&c, "half close", "GET h", "NOT_FOUND") &&
        !lc_eof(&c))
        lc_fail("half close: no EOF after the replies");
    lc_close(&c);
}

/* SIGTERM with connections open: each is closed. */
static void sigterm(int pid)
{
    struct lc c[5];
    unsigned opened = 0, closed;
    for (unsigned i = 0; i < 5; i++)
        if (lc_connect(&c[i], port) && expect(&c[i], "sigterm", "GET nokey", "NOT_FOUND"))
            opened++;
    if (kill(pid, SIGTERM) != 0)
        lc_fail("cannot signal the server (pid %d)", pid);
    closed = lc_all_closed(c, 5);
    if (closed != 5)
        lc_fail("SIGTERM: the server closed %u of its %u open connections", closed, opened);
}

int main(int argc, char **argv)
{
    int pid;
    if (!lc_args(argc, argv, &port, &pid))
        return 2;
    basics();
    errors();
    pipeline();
    threads();
    slow_reader();
    too_long(false);
    too_long(true);
    half_close();
    sigterm(pid);
    printf("kvclient: %u failure(s)\n", lc_failures());
    return lc_failures() ? 1 : 0;
}
