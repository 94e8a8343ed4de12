/* SPDX-License-Identifier: MIT */
/*
 * pubsub_checks.c: pubsub_client's checks of a broker against the protocol of
 * bench/e2e/pubsub.h, beyond the load: --check-protocol, --check-slow,
 * --check-idle MS (examples/tests/pubsub-self-test.sh runs them on every broker).
 *
 * Connections are examples/tests/lineclient.h's: blocking, every read and write
 * bounded by LC_TIMEOUT_MS, so a broker that stops answering fails a check
 * instead of hanging it. A broker may deliver MSG lines from another thread
 * than the one that replies (examples/pubsub), so MSG lines may come between
 * a connection's replies anywhere: a peer keeps the MSG lines it reads while
 * waiting for a reply in an inbox, where the checks that want messages look
 * first. Replies themselves come in the order of the commands.
 *
 * --check-protocol: replies to SUB, UNSUB (also twice, also when not
 *   subscribed), rooms of 64 bytes and bad rooms (65 bytes, a space, a '$',
 *   empty, a byte over 127, in SUB, UNSUB and PUB), unknown commands (also
 *   ones that start like known ones, and the empty line), CRLF, lines split
 *   across sends and commands pipelined in one, delivery (payloads with spaces
 *   or empty; 100 messages in order), a publisher subscribed to its own room
 *   receives its message, UNSUB stops deliveries, a line of exactly 4096
 *   bytes (LF and CRLF) is delivered, a 5000-byte line gets "ERR line too
 *   long" and a close (ended by its LF, and without one), QUIT gets BYE and a
 *   close.
 * --check-slow: a subscriber whose receive buffer is small (4 KB) and that
 *   never reads, in a room with a normal subscriber; a publisher sends 1 KB
 *   messages, at most SLOW_WINDOW ahead of the normal subscriber, until the
 *   slow one's socket shows the cut (a reset, or an end of stream), or at most
 *   --max-output + twice the kernel's largest send buffer + 4 MiB (64 MiB at
 *   most): then the slow one reads what it has, which must end (a broker that
 *   closed without resetting sent the rest first) before all messages. The
 *   slow one's lines must be the first messages in order; the normal one gets
 *   every message in order, also after the cut.
 * --check-idle MS: a connection that sends nothing gets "ERR idle" and a
 *   close no sooner than MS after its connect and no later than MS + 2 s; a
 *   subscriber that sends nothing after its SUB but receives a message every
 *   MS/3 is still open at 4*MS (it answers a SUB), with every message.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/e2e/pubsub.h"
#include "bench/e2e/pubsub_client.h"
#include "common/measure.h"
#include "examples/tests/lineclient.h"

enum {
    LINE = PUBSUB_MAX_LINE + 64, /* a line read back, with room to see one too long */
    INBOX = 128,                 /* MSG lines a peer keeps while waiting for a reply */
    SLOW_PAYLOAD = 1000,
    SLOW_WINDOW = 16, /* messages the normal subscriber may lag: 16 KB, far below the cap */
    SLOW_RCVBUF = 4096,
    SLOW_LIMIT_MS = 30000,
    MAX_SLOW_BYTES = 64 << 20,
};

struct peer {
    struct lc lc;
    const char *name;
    unsigned n; /* MSG lines in inbox */
    char *inbox[INBOX];
};

static unsigned port;

static void peer_open(struct peer *p, const char *name)
{
    p->name = name;
    p->n = 0;
    if (!lc_connect(&p->lc, port))
        exit(1); /* nothing else can be checked */
}

static void peer_close(struct peer *p)
{
    for (unsigned i = 0; i < p->n; i++)
        free(p->inbox[i]);
    p->n = 0;
    lc_close(&p->lc);
}

static bool send_raw(struct peer *p, const char *s, size_t n)
{
    if (lc_send(&p->lc, s, n))
        return true;
    lc_fail("%s: send failed", p->name);
    return false;
}

static bool send_line(struct peer *p, const char *cmd)
{
    size_t n = strlen(cmd);
    char *b = malloc(n + 1);
    memcpy(b, cmd, n);
    b[n] = '\n';
    bool ok = send_raw(p, b, n + 1);
    free(b);
    return ok;
}

/* Reads the next reply (a line that is not MSG) into got; MSG lines go to the
 * inbox. */
static bool next_reply(struct peer *p, char *got, const char *what)
{
    for (unsigned i = 0; i < 10000; i++) { /* bounded: also by LC_TIMEOUT_MS per line */
        if (!lc_line(&p->lc, got, LINE)) {
            lc_fail("%s: %s: no reply (timeout, end of stream, or a line too long)", p->name, what);
            return false;
        }
        if (strncmp(got, "MSG ", 4) != 0)
            return true;
        if (p->n == INBOX) {
            lc_fail("%s: %s: more than %d MSG lines before a reply", p->name, what, INBOX);
            return false;
        }
        p->inbox[p->n++] = strdup(got);
    }
    lc_fail("%s: %s: no reply among 10000 MSG lines", p->name, what);
    return false;
}

/* Checks that the next reply is want. */
static bool reply(struct peer *p, const char *what, const char *want)
{
    static char got[LINE];
    if (!next_reply(p, got, what))
        return false;
    if (strcmp(got, want) != 0) {
        lc_fail("%s: %.60s: got \"%.80s\", want \"%.80s\"", p->name, what, got, want);
        return false;
    }
    return true;
}

/* Sends cmd and LF, then checks the reply. */
static bool expect(struct peer *p, const char *cmd, const char *want)
{
    return send_line(p, cmd) && reply(p, cmd, want);
}

/* Checks that the next MSG line (the inbox's oldest, else read) is want. */
static bool msg(struct peer *p, const char *want)
{
    static char got[LINE];
    if (p->n > 0) {
        snprintf(got, sizeof(got), "%s", p->inbox[0]);
        free(p->inbox[0]);
        memmove(p->inbox, p->inbox + 1, --p->n * sizeof(p->inbox[0]));
    } else if (!lc_line(&p->lc, got, LINE)) {
        lc_fail("%s: no \"%.60s\" (timeout, end of stream, or a line too long)", p->name, want);
        return false;
    }
    if (strcmp(got, want) != 0) {
        lc_fail("%s: got \"%.80s\", want \"%.80s\"", p->name, got, want);
        return false;
    }
    return true;
}

/* Checks that no MSG line came or comes: waits a little (a broker may deliver
 * late), then a SUB's reply must come first. */
static bool no_msg(struct peer *p, const char *why)
{
    sleep_us(50000);
    if (!expect(p, "SUB zz-marker", "OK SUB zz-marker"))
        return false;
    if (p->n > 0) {
        lc_fail("%s: %s: got \"%.80s\"", p->name, why, p->inbox[0]);
        return false;
    }
    return true;
}

/* Checks that the broker closes p (after the lines it sent, which must be
 * MSG lines or none). */
static bool closed(struct peer *p, const char *what)
{
    static char got[LINE];
    for (unsigned i = 0; i < 10000 && p->lc.len > 0; i++) /* bounded: lines buffered */
        if (lc_line(&p->lc, got, LINE) && strncmp(got, "MSG ", 4) != 0) {
            lc_fail("%s: after %s: got \"%.80s\", want the end", p->name, what, got);
            return false;
        }
    if (!lc_eof(&p->lc)) {
        lc_fail("%s: after %s: the broker did not close the connection", p->name, what);
        return false;
    }
    return true;
}

/* ---- --check-protocol -------------------------------------------------------------------- */

/* A command made of head and then n bytes c. */
static char *repeat(const char *head, char c, size_t n, const char *tail)
{
    size_t h = strlen(head), t = strlen(tail);
    char *s = malloc(h + n + t + 1);
    memcpy(s, head, h);
    memset(s + h, c, n);
    memcpy(s + h + n, tail, t + 1);
    return s;
}

static void check_commands(void)
{
    struct peer a;
    peer_open(&a, "commands");
    expect(&a, "SUB news", "OK SUB news");
    expect(&a, "SUB news", "OK SUB news"); /* already subscribed */
    expect(&a, "UNSUB never", "OK UNSUB never");
    expect(&a, "UNSUB never", "OK UNSUB never");
    expect(&a, "SUB Az09_.-", "OK SUB Az09_.-");
    char *room64 = repeat("SUB ", 'x', 64, ""), *ok64 = repeat("OK SUB ", 'x', 64, "");
    char *room65 = repeat("UNSUB ", 'x', 65, "");
    expect(&a, room64, ok64);
    expect(&a, room65, "ERR bad room");
    free(room64), free(ok64), free(room65);
    static const char *const bad_rooms[] = {
        "SUB a b", "SUB r$", "SUB ", "SUB", "SUB caf\xc3\xa9", "UNSUB x/y", "UNSUB ",
        "PUB bad/room hello", "PUB  hello", "PUB",
    };
    for (size_t i = 0; i < sizeof(bad_rooms) / sizeof(bad_rooms[0]); i++)
        expect(&a, bad_rooms[i], "ERR bad room");
    static const char *const unknown[] = {
        "HELLO", "SUBX news", "PUBLISH news x", "UNSUBSCRIBE news", "sub news", "QUITX", "",
        " SUB news",
    };
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
        expect(&a, unknown[i], "ERR unknown command");
    /* CRLF, and lines split across sends (the CR and LF too) */
    if (send_raw(&a, "SUB crlf\r\n", 10))
        reply(&a, "SUB crlf with CRLF", "OK SUB crlf");
    static const char *const parts[] = {"UNS", "UB cr", "lf\r", "\n"};
    for (size_t i = 0; i < 4; i++) {
        send_raw(&a, parts[i], strlen(parts[i]));
        sleep_us(20000);
    }
    reply(&a, "UNSUB crlf split in 4 sends", "OK UNSUB crlf");
    /* pipelined in one send: replies in order */
    static const char pipe[] = "SUB p1\nSUB p2\r\nUNSUB p1\nHELLO\nUNSUB p2\n";
    send_raw(&a, pipe, sizeof(pipe) - 1);
    reply(&a, "pipelined SUB p1", "OK SUB p1");
    reply(&a, "pipelined SUB p2", "OK SUB p2");
    reply(&a, "pipelined UNSUB p1", "OK UNSUB p1");
    reply(&a, "pipelined HELLO", "ERR unknown command");
    reply(&a, "pipelined UNSUB p2", "OK UNSUB p2");
    /* an ERR does not close: QUIT still answers */
    expect(&a, "QUIT", "BYE");
    closed(&a, "QUIT");
    peer_close(&a);
}

static void check_delivery(void)
{
    struct peer a, b, c;
    char line[256];
    peer_open(&a, "subscriber A");
    peer_open(&b, "publisher B");
    peer_open(&c, "subscriber C");
    expect(&a, "SUB news", "OK SUB news");
    send_line(&b, "PUB news hello world");
    msg(&a, "MSG news hello world");
    send_line(&b, "PUB news ");
    msg(&a, "MSG news ");
    send_line(&b, "PUB news  two  spaces ");
    msg(&a, "MSG news  two  spaces ");
    send_raw(&b, "PUB news crlf\r\n", 15);
    msg(&a, "MSG news crlf");
    send_line(&b, "PUB nobody x"); /* no subscriber, no reply */
    /* 100 messages in one send: in order */
    char *burst = malloc(100 * 32), *e = burst;
    for (int i = 0; i < 100; i++)
        e += sprintf(e, "PUB news m%d\n", i);
    send_raw(&b, burst, (size_t)(e - burst));
    free(burst);
    for (int i = 0; i < 100; i++) {
        snprintf(line, sizeof(line), "MSG news m%d", i);
        if (!msg(&a, line))
            break;
    }
    no_msg(&b, "a PUB has no reply, and B subscribed to nothing");
    /* a publisher subscribed to its own room receives its message */
    expect(&b, "SUB self", "OK SUB self");
    expect(&c, "SUB self", "OK SUB self");
    send_line(&b, "PUB self mine");
    msg(&b, "MSG self mine");
    msg(&c, "MSG self mine");
    no_msg(&a, "A is not in room self");
    /* UNSUB stops deliveries: C, still in news, is the witness that the PUB was handled */
    expect(&c, "SUB news", "OK SUB news");
    expect(&a, "UNSUB news", "OK UNSUB news");
    send_line(&b, "PUB news after");
    msg(&c, "MSG news after");
    no_msg(&a, "after UNSUB news");
    /* a line of exactly 4096 bytes, with LF and with CRLF, is a line */
    char *max = repeat("PUB news ", 'y', PUBSUB_MAX_LINE - 9, "");
    char *want = repeat("MSG news ", 'y', PUBSUB_MAX_LINE - 9, "");
    send_line(&b, max);
    msg(&c, want);
    char *max_crlf = repeat("PUB news ", 'y', PUBSUB_MAX_LINE - 9, "\r\n");
    send_raw(&b, max_crlf, strlen(max_crlf));
    msg(&c, want);
    free(max), free(want), free(max_crlf);
    expect(&b, "QUIT", "BYE");
    closed(&b, "QUIT");
    expect(&c, "QUIT", "BYE");
    closed(&c, "QUIT");
    expect(&a, "QUIT", "BYE");
    closed(&a, "QUIT");
    peer_close(&a), peer_close(&b), peer_close(&c);
}

static void check_too_long(void)
{
    struct peer w, d, e;
    peer_open(&w, "witness");
    peer_open(&d, "long line");
    peer_open(&e, "long line without LF");
    expect(&w, "SUB news", "OK SUB news");
    expect(&d, "SUB news", "OK SUB news");
    char *line = repeat("PUB news ", 'z', 5000 - 9, "\n");
    send_raw(&d, line, strlen(line));
    reply(&d, "a 5000-byte line", "ERR line too long");
    closed(&d, "ERR line too long");
    line[5000 - 1] = 'z'; /* no LF: the broker must not wait for one */
    send_raw(&e, line, 5000);
    reply(&e, "5000 bytes without LF", "ERR line too long");
    closed(&e, "ERR line too long");
    free(line);
    no_msg(&w, "the lines too long were not published");
    peer_close(&w), peer_close(&d), peer_close(&e);
}

int pc_check_protocol(const struct pc_opts *o)
{
    port = o->port;
    check_commands();
    check_delivery();
    check_too_long();
    if (lc_failures() > 0)
        return 1;
    printf("check-protocol: pass\n");
    return 0;
}

/* ---- --check-slow ------------------------------------------------------------------------ */

/* A connection with a small receive buffer (set before connect, so that the
 * window stays small). */
static void open_small(struct peer *p, const char *name)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = LC_TIMEOUT_MS / 1000};
    p->name = name;
    p->n = 0;
    p->lc.len = 0;
    p->lc.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->lc.fd < 0 ||
        setsockopt(p->lc.fd, SOL_SOCKET, SO_RCVBUF, &(int){SLOW_RCVBUF}, sizeof(int)) != 0 ||
        setsockopt(p->lc.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        connect(p->lc.fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        lc_fail("%s: connect: %s", name, strerror(errno));
        exit(1);
    }
}

/* The kernel's largest TCP send buffer (the broker's socket may hold that
 * much of the slow subscriber's output beyond --max-output). */
static uint64_t wmem_max(void)
{
    unsigned long long lo, def, max = 4 << 20;
    FILE *f = fopen("/proc/sys/net/ipv4/tcp_wmem", "r");
    if (f) {
        if (fscanf(f, "%llu %llu %llu", &lo, &def, &max) != 3)
            max = 4 << 20;
        fclose(f);
    }
    return max;
}

/* Reads and checks the normal subscriber's lines that are there (poll said
 * readable): "MSG slow <k>:" and padding, k in order. */
static bool normal_read(struct peer *n, unsigned *got)
{
    static char line[LINE];
    char want[32];
    do {
        if (!lc_line(&n->lc, line, LINE)) {
            lc_fail("%s: lost after %u messages", n->name, *got);
            return false;
        }
        int h = snprintf(want, sizeof(want), "MSG slow %u:", *got);
        if (strncmp(line, want, (size_t)h) != 0 || strlen(line) != 9 + SLOW_PAYLOAD) {
            lc_fail("%s: got \"%.40s...\", want \"%s...\" of %d bytes", n->name, line, want,
                    9 + SLOW_PAYLOAD);
            return false;
        }
        (*got)++;
    } while (memchr(n->lc.buf, '\n', n->lc.len)); /* bounded: the lines buffered */
    return true;
}

/* Publishes message k (its payload is "<k>:" padded to SLOW_PAYLOAD). */
static bool slow_pub(struct peer *p, unsigned k)
{
    static char line[16 + SLOW_PAYLOAD];
    int h = snprintf(line, sizeof(line), "PUB slow %u:", k);
    memset(line + h, '.', (size_t)(9 + SLOW_PAYLOAD - h));
    line[9 + SLOW_PAYLOAD] = '\n';
    return send_raw(p, line, 10 + SLOW_PAYLOAD);
}

/* Reads the slow subscriber to its end: its complete lines must be the first
 * messages in order (a line cut short by a reset is dropped). true if the
 * stream ended (an end of stream or a reset), false if a read timed out. */
static bool slow_drain(struct peer *s, unsigned *got)
{
    struct lc *c = &s->lc;
    for (;;) { /* bounded: each pass reads bytes or returns; SO_RCVTIMEO */
        char *nl;
        while ((nl = memchr(c->buf, '\n', c->len))) { /* bounded: the lines buffered */
            char want[32];
            int h = snprintf(want, sizeof(want), "MSG slow %u:", *got);
            if (nl - c->buf < h || memcmp(c->buf, want, (size_t)h) != 0) {
                lc_fail("slow subscriber: got \"%.*s...\", want \"%s...\"",
                        (int)(nl - c->buf < 40 ? nl - c->buf : 40), c->buf, want);
                return true;
            }
            (*got)++;
            c->len -= (size_t)(nl + 1 - c->buf);
            memmove(c->buf, nl + 1, c->len);
        }
        if (c->len == sizeof(c->buf)) {
            lc_fail("slow subscriber: a line of %zu bytes or more", sizeof(c->buf));
            return true;
        }
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return true;
        if (n < 0)
            return false; /* EAGAIN: SO_RCVTIMEO passed, the connection is open */
        c->len += (size_t)n;
    }
}

int pc_check_slow(const struct pc_opts *o)
{
    struct peer slow, normal, pub;
    uint64_t limit_bytes = o->max_output + 2 * wmem_max() + (4 << 20);
    unsigned sent = 0, got = 0, after = 0;
    bool cut = false;
    port = o->port;
    if (limit_bytes > MAX_SLOW_BYTES)
        limit_bytes = MAX_SLOW_BYTES;
    open_small(&slow, "slow subscriber");
    peer_open(&normal, "normal subscriber");
    peer_open(&pub, "publisher");
    if (!expect(&slow, "SUB slow", "OK SUB slow") || !expect(&normal, "SUB slow", "OK SUB slow"))
        return 1;
    uint64_t start = now_ns(), stop = start + (uint64_t)SLOW_LIMIT_MS * 1000000u;
    /* Publish until the cut shows (then 100 more), the normal one at most
     * SLOW_WINDOW behind. */
    while (now_ns() < stop && lc_failures() == 0 && (!cut || after < 100) &&
           (uint64_t)sent * (10 + SLOW_PAYLOAD) < limit_bytes) { /* bounded: stop, limit_bytes */
        struct pollfd pf[2] = {{.fd = normal.lc.fd, .events = POLLIN},
                               {.fd = slow.lc.fd, .events = POLLRDHUP}};
        bool credit = sent - got < SLOW_WINDOW;
        if (poll(pf, 2, credit ? 0 : 100) < 0)
            continue;
        if (pf[0].revents && !normal_read(&normal, &got))
            break;
        if (!cut && (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
            cut = true;
            printf("check-slow: the slow subscriber's socket shows the cut after %u messages"
                   " (%.1f MB)\n", sent, (double)sent * (10 + SLOW_PAYLOAD) / 1e6);
        }
        if (sent - got < SLOW_WINDOW && slow_pub(&pub, sent)) {
            sent++;
            after += cut;
        }
    }
    /* The last ones (at most SLOW_WINDOW, each read bounded by the client's
     * timeout), also when publishing used up the time limit: a loaded
     * machine did, and one message still on its way was counted lost. */
    while (lc_failures() == 0 && got < sent) /* bounded: SLOW_WINDOW reads */
        if (!normal_read(&normal, &got))
            break;
    unsigned slow_got = 0;
    bool ended = lc_failures() == 0 && slow_drain(&slow, &slow_got);
    if (lc_failures() == 0 && (!ended || slow_got >= sent))
        lc_fail("slow subscriber: not cut: it received %u of %u messages%s (%.1f MB published,"
                " --max-output %llu)", slow_got, sent, ended ? "" : " and its connection is open",
                (double)sent * (10 + SLOW_PAYLOAD) / 1e6, (unsigned long long)o->max_output);
    if (lc_failures() == 0 && got != sent)
        lc_fail("normal subscriber: %u of %u messages", got, sent);
    peer_close(&slow), peer_close(&normal), peer_close(&pub);
    if (lc_failures() > 0)
        return 1;
    printf("check-slow: pass: the slow subscriber was cut after %u of %u messages, the normal"
           " one got all, in order (%.2f s)\n", slow_got, sent, (double)(now_ns() - start) / 1e9);
    return 0;
}

/* ---- --check-idle MS --------------------------------------------------------------------- */

int pc_check_idle(const struct pc_opts *o)
{
    struct peer idle, sub, pub;
    uint64_t ms = o->check_idle_ms, t0 = now_ns(), t_err = 0, t_end = 0;
    unsigned ticks = 0, received = 0; /* messages published, and received by sub */
    static char line[LINE];
    port = o->port;
    peer_open(&idle, "idle connection");
    peer_open(&sub, "receiving subscriber");
    peer_open(&pub, "publisher");
    if (!expect(&sub, "SUB idle", "OK SUB idle"))
        return 1;
    /* A message every ms/3 for 4*ms; the idle connection watched meanwhile. */
    uint64_t until = t0 + 4 * ms * 1000000u, limit = t0 + (ms + 2000) * 1000000u;
    while (lc_failures() == 0 && (now_ns() < until || (!t_end && now_ns() < limit))) {
        uint64_t now = now_ns(), next = t0 + (ticks + 1) * ms * 1000000u / 3;
        if (now >= next && now < until) {
            char cmd[64];
            snprintf(cmd, sizeof(cmd), "PUB idle tick %u", ticks);
            send_line(&pub, cmd);
            ticks++;
            continue;
        }
        struct pollfd pf[2] = {{.fd = idle.lc.fd, .events = t_end ? 0 : POLLIN},
                               {.fd = sub.lc.fd, .events = POLLIN}};
        int wait = (int)((next > now ? next - now : 0) / 1000000u) + 1;
        if (poll(pf, 2, wait) < 0)
            continue;
        if (pf[0].revents && !t_err) { /* the line (whole: the broker sends it at once) */
            uint64_t t = now_ns();
            line[0] = '\0';
            if (!lc_line(&idle.lc, line, LINE) || strcmp(line, "ERR idle") != 0) {
                lc_fail("idle connection: got %s%s%s after %.0f ms, want \"ERR idle\"",
                        line[0] ? "\"" : "an end of stream", line, line[0] ? "\"" : "",
                        (double)(t - t0) / 1e6);
                break;
            }
            t_err = t;
        } else if (pf[0].revents && !t_end) { /* then the end: readable, so recv won't wait */
            if (!lc_eof(&idle.lc)) {
                lc_fail("idle connection: more after ERR idle, or no close");
                break;
            }
            t_end = now_ns();
        }
        while (pf[1].revents && lc_failures() == 0) { /* bounded: the lines buffered */
            char want[64];
            snprintf(want, sizeof(want), "MSG idle tick %u", received);
            line[0] = '\0';
            if (!lc_line(&sub.lc, line, LINE) || strcmp(line, want) != 0) {
                lc_fail("receiving subscriber: got \"%.60s\", want \"%s\" at %.0f ms", line,
                        want, (double)(now_ns() - t0) / 1e6);
                break;
            }
            received++;
            if (!memchr(sub.lc.buf, '\n', sub.lc.len))
                break;
        }
    }
    if (lc_failures() == 0 && !t_end)
        lc_fail("idle connection: %s %llu ms + 2 s", t_err ? "ERR idle but no close within" :
                "neither ERR idle nor a close within", (unsigned long long)ms);
    else if (lc_failures() == 0 && t_err - t0 < ms * 1000000u)
        lc_fail("idle connection: ERR idle after %.0f ms, before --idle-ms %llu",
                (double)(t_err - t0) / 1e6, (unsigned long long)ms);
    /* The subscriber lived through 4*ms of output only: still open, every tick received. */
    if (lc_failures() == 0 && expect(&sub, "SUB idle-still-open", "OK SUB idle-still-open")) {
        received += sub.n; /* the last ticks may come with the reply (in the inbox) */
        if (received != ticks)
            lc_fail("receiving subscriber: %u of %u messages", received, ticks);
    }
    peer_close(&idle), peer_close(&sub), peer_close(&pub);
    if (lc_failures() > 0)
        return 1;
    printf("check-idle: pass: ERR idle after %.0f ms and a close after %.0f ms (--idle-ms %llu);"
           " a subscriber receiving every %llu ms stayed open %.0f ms\n",
           (double)(t_err - t0) / 1e6, (double)(t_end - t0) / 1e6, (unsigned long long)ms,
           (unsigned long long)ms / 3, (double)(now_ns() - t0) / 1e6);
    return 0;
}
