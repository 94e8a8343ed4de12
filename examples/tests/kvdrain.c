/* SPDX-License-Identifier: MIT */
/*
 * kvdrain.c: the client of examples/tests/kv-drain.sh: a key-value server
 * (examples/kv, bench/e2e/kv_bufferevent; examples/kvstore.h) SIGTERMed
 * under load must not lose a reply.
 *
 *   kvdrain [--rounds R] [--clients N] [--inflight K] [--seed S] -- SERVER [ARG...]
 *
 * A round: starts SERVER ARG... (run it on port 0: it prints "... serving
 * 127.0.0.1:PORT" on stdout, and at exit "kv: N commands executed" on
 * stderr); connects N clients (100), each sending SETs on keys of its own
 * with K in flight (4: a reply in, the next SET out); once every client has
 * had a reply, lets the load run a random 50..300 ms, sends SIGTERM and keeps
 * the load on. Each client keeps sending while the server takes its bytes,
 * and reads until EOF or a reset; it reads replies as they arrive, never
 * leaving them in its socket, so that every reply that reached it before a
 * reset counts (Linux hands out the data queued before a reset, then the
 * error). Replies received by all clients must equal the server's N: a
 * command executed whose reply never reached its client is a reply lost (the
 * client cannot know whether its SET was applied). Half a reply when the
 * connection ends is not a reply (reported as "cut"). The server must also
 * exit with status 0 within 10 s of the signal.
 *
 * Every reply must be "OK"; anything else fails the round. Bounds, per
 * round: 20 s for the port, 5 s to connect, 10 s for the ramp (every client
 * had a reply), 10 s after SIGTERM for the server to exit (then SIGKILL: a
 * failure), 2 s more for the client connections to see their end. The
 * server's other output lines are passed on, prefixed with "  server: ".
 * Prints a line per round and a summary; exit status 0 when no round lost a
 * reply or failed, 1 otherwise, 2 for a usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/measure.h"

enum { MAX_CLIENTS = 1000, MAX_INFLIGHT = 64, CMD_MAX = 48, INBUF = 4096, LINEBUF = 8192 };
enum { LOAD_MIN_MS = 50, LOAD_MAX_MS = 300 };
#define MS 1000000ull
#define PORT_LIMIT_NS (20000 * MS)
#define CONNECT_LIMIT_NS (5000 * MS)
#define RAMP_LIMIT_NS (10000 * MS)
#define EXIT_LIMIT_NS (10000 * MS)
#define CLOSE_LIMIT_NS (2000 * MS)

struct client {
    int fd;            /* -1 once its end was seen */
    unsigned inflight; /* SETs queued or sent, not answered yet */
    unsigned long long seq, replies;
    bool writing; /* the server still takes our bytes */
    size_t out_len, in_len;
    char out[MAX_INFLIGHT * CMD_MAX];
    char in[INBUF];
};

/* One of the server's output pipes, read line by line. */
struct pipe_in {
    int fd; /* -1 at EOF */
    size_t len;
    char buf[LINEBUF];
};

struct round {
    pid_t pid;
    unsigned port;
    struct pipe_in out, err;
    bool have_executed;
    unsigned long long executed;
    unsigned eofs, resets, cut, bad, ready, open;
    char why[200]; /* the first failure, "" if none */
};

static struct {
    unsigned rounds, clients, inflight;
    uint64_t seed;
    char **server;
} o = {.rounds = 20, .clients = 100, .inflight = 4};

static struct client *cl;
static int ep = -1;

static void fail(struct round *r, const char *fmt, const char *detail)
{
    if (!r->why[0])
        snprintf(r->why, sizeof(r->why), fmt, detail);
}

/* ---- The server's process and output --------------------------------------------- */

static bool spawn(struct round *r)
{
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        return false;
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]), close(out[1]);
        return false;
    }
    fflush(NULL);
    r->pid = fork();
    if (r->pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        execvp(o.server[0], o.server);
        fprintf(stderr, "kvdrain: cannot run %s: %s\n", o.server[0], strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    r->out.fd = out[0];
    r->err.fd = err[0];
    if (r->pid < 0) {
        close(out[0]), close(err[0]);
        r->out.fd = r->err.fd = -1;
        return false;
    }
    set_nonblocking(out[0]);
    set_nonblocking(err[0]);
    return true;
}

/* A whole line of the server's: its port, its count, or passed on. */
static void server_line(struct round *r, const char *line)
{
    const char *at = strstr(line, "serving 127.0.0.1:");
    if (!r->port && at && sscanf(at, "serving 127.0.0.1:%u", &r->port) == 1)
        return;
    if (sscanf(line, "kv: %llu commands executed", &r->executed) == 1) {
        r->have_executed = true;
        return;
    }
    fprintf(stderr, "  server: %s\n", line);
}

/* Reads what the pipe holds (at most a few reads: it is drained again at the
 * next readiness); lines go to server_line. */
static void pipe_read(struct round *r, struct pipe_in *p)
{
    for (int i = 0; i < 4 && p->fd >= 0; i++) {
        ssize_t n = read(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            close(p->fd); /* also leaves the epoll set */
            p->fd = -1;
            n = 0;
        }
        p->len += (size_t)n;
        p->buf[p->len] = '\0';
        char *line = p->buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            server_line(r, line);
            line = nl + 1;
        }
        p->len -= (size_t)(line - p->buf);
        memmove(p->buf, line, p->len + 1);
        if (p->len == sizeof(p->buf) - 1 || (p->fd < 0 && p->len > 0)) {
            server_line(r, p->buf); /* a line too long, or the last without LF */
            p->len = 0;
        }
    }
}

/* ---- The clients ------------------------------------------------------------------- */

/* Sends what c has queued; a refusal ends its writing, not its reading. */
static void flush(struct client *c)
{
    while (c->writing && c->out_len > 0) { /* bounded: each pass sends bytes or returns */
        ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = (uint32_t)(c - cl)};
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            return;
        }
        if (n <= 0) {
            c->writing = false; /* EPIPE, ECONNRESET: the server closed; read on */
            c->out_len = 0;
            return;
        }
        memmove(c->out, c->out + n, c->out_len - (size_t)n);
        c->out_len -= (size_t)n;
    }
}

/* Queues client i's next SET (not sent yet: flush). */
static void queue_set(unsigned i)
{
    struct client *c = &cl[i];
    c->seq++;
    c->out_len += (size_t)snprintf(c->out + c->out_len, sizeof(c->out) - c->out_len,
                                   "SET c%uk%llu %llu\n", i, c->seq % 16, c->seq);
    c->inflight++;
}

/* The end of client i's connection: counted, closed (which leaves the set). */
static void client_end(struct round *r, unsigned i, bool reset)
{
    struct client *c = &cl[i];
    r->eofs += !reset;
    r->resets += reset;
    r->cut += c->in_len > 0; /* half a reply */
    close(c->fd);
    c->fd = -1;
    r->open--;
}

/* Reads what client i has (level-triggered: at most a few reads now); each
 * "OK" line is a reply, and the next SET leaves while the server takes them. */
static void client_read(struct round *r, unsigned i)
{
    struct client *c = &cl[i];
    for (int k = 0; k < 4 && c->fd >= 0; k++) {
        ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            client_end(r, i, n < 0);
            return;
        }
        c->in_len += (size_t)n;
        char *line = c->in, *end = c->in + c->in_len, *nl;
        while ((nl = memchr(line, '\n', (size_t)(end - line)))) {
            if (nl - line != 2 || memcmp(line, "OK", 2) != 0) {
                r->bad++;
                fail(r, "a reply is not OK: \"%.60s\"", line);
            }
            if (c->inflight == 0) {
                r->bad++;
                fail(r, "a reply to no command%s", "");
            } else {
                c->inflight--;
            }
            if (c->replies++ == 0)
                r->ready++;
            if (c->writing)
                queue_set(i);
            line = nl + 1;
        }
        c->in_len = (size_t)(end - line);
        memmove(c->in, line, c->in_len);
        if (c->in_len == sizeof(c->in)) {
            fail(r, "a reply line over %s bytes", "4096");
            c->in_len = 0;
        }
    }
    if (c->fd >= 0)
        flush(c);
}

static bool connect_all(struct round *r)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->port)};
    struct timeval tv = {.tv_sec = 2};
    uint64_t limit = now_ns() + CONNECT_LIMIT_NS;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (unsigned i = 0; i < o.clients; i++) {
        struct client *c = &cl[i];
        memset(c, 0, offsetof(struct client, out));
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
            fail(r, "socket: %s", strerror(errno));
            return false;
        }
        r->open++;
        c->writing = true;
        /* blocking, bounded by SO_SNDTIMEO: loopback completes it at once
         * while the backlog has room */
        if (setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
            connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
            setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) != 0 ||
            set_nonblocking(c->fd) != 0 ||
            epoll_ctl(ep, EPOLL_CTL_ADD, c->fd,
                      &(struct epoll_event){.events = EPOLLIN, .data.u32 = i}) != 0) {
            fail(r, "connect: %s", strerror(errno));
            return false;
        }
        if (now_ns() > limit) {
            fail(r, "connecting took over %s s", "5");
            return false;
        }
    }
    return true;
}

/* ---- A round ------------------------------------------------------------------------ */

enum phase { P_PORT, P_RAMP, P_LOAD, P_DRAIN, P_DONE };

/* One epoll pass: the clients' and the pipes' readiness. */
static void poll_once(struct round *r, int timeout_ms)
{
    struct epoll_event ev[256];
    int n = epoll_wait(ep, ev, 256, timeout_ms);
    for (int k = 0; k < n; k++) {
        uint32_t i = ev[k].data.u32;
        if (i == MAX_CLIENTS) {
            pipe_read(r, &r->out);
        } else if (i == MAX_CLIENTS + 1) {
            pipe_read(r, &r->err);
        } else if (cl[i].fd >= 0) {
            if (ev[k].events & EPOLLOUT) {
                epoll_ctl(ep, EPOLL_CTL_MOD, cl[i].fd,
                          &(struct epoll_event){.events = EPOLLIN, .data.u32 = i});
                flush(&cl[i]);
            }
            if (ev[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                client_read(r, i);
        }
    }
}

/* Runs round `no` and prints its line; *lost: the replies it lost (< 0: more
 * replies than commands). False if it failed otherwise. */
static bool run_round(unsigned no, long long *lost)
{
    struct round r = {.out.fd = -1, .err.fd = -1};
    enum phase ph = P_PORT;
    uint64_t t0 = now_ns(), load_ms = LOAD_MIN_MS + xorshift64(&o.seed) %
                                      (LOAD_MAX_MS - LOAD_MIN_MS + 1);
    uint64_t limit = t0 + PORT_LIMIT_NS, term_at = 0, exited_at = 0;
    unsigned long long replies = 0;
    int status = -1;

    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0 || !spawn(&r)) {
        printf("round %u: cannot start %s: %s\n", no, o.server[0], strerror(errno));
        *lost = 0;
        if (ep >= 0)
            close(ep);
        return false;
    }
    epoll_ctl(ep, EPOLL_CTL_ADD, r.out.fd,
              &(struct epoll_event){.events = EPOLLIN, .data.u32 = MAX_CLIENTS});
    epoll_ctl(ep, EPOLL_CTL_ADD, r.err.fd,
              &(struct epoll_event){.events = EPOLLIN, .data.u32 = MAX_CLIENTS + 1});
    while (ph != P_DONE) { /* bounded: every phase has its limit */
        poll_once(&r, 10);
        uint64_t now = now_ns();
        if (!exited_at && waitpid(r.pid, &status, WNOHANG) == r.pid)
            exited_at = now;
        if (ph < P_DRAIN && (r.why[0] || exited_at)) {
            fail(&r, "the server ended before the signal%s", "");
            if (!exited_at) {
                kill(r.pid, SIGKILL);
                waitpid(r.pid, &status, 0);
                exited_at = now_ns();
            }
            break;
        }
        if (ph == P_PORT && r.port) {
            ph = P_RAMP;
            limit = now + RAMP_LIMIT_NS;
            if (!connect_all(&r))
                continue;
            for (unsigned i = 0; i < o.clients; i++) {
                for (unsigned k = 0; k < o.inflight; k++)
                    queue_set(i);
                flush(&cl[i]);
            }
        } else if (ph == P_RAMP && r.ready == o.clients) {
            ph = P_LOAD;
            limit = now + load_ms * MS;
        } else if (ph == P_LOAD && now >= limit) {
            kill(r.pid, SIGTERM);
            term_at = now;
            ph = P_DRAIN;
            limit = now + EXIT_LIMIT_NS;
        } else if (ph == P_DRAIN && exited_at && r.open == 0) {
            ph = P_DONE;
        } else if (ph == P_DRAIN && exited_at && now > exited_at + CLOSE_LIMIT_NS) {
            char n[16];
            snprintf(n, sizeof(n), "%u", r.open);
            fail(&r, "%s client connection(s) still open 2 s after the server exited", n);
            break;
        } else if (now >= limit && !exited_at) {
            static const char *const what[] = {
                [P_PORT] = "the server did not say its port in 20 s%s",
                [P_RAMP] = "some clients had no reply in 10 s%s",
                [P_DRAIN] = "the server did not exit within 10 s of SIGTERM: killed%s"};
            fail(&r, what[ph], "");
            kill(r.pid, SIGKILL);
            waitpid(r.pid, &status, 0);
            exited_at = now_ns();
            break;
        }
    }
    /* the rest of the server's output: its pipes end with it */
    for (uint64_t end = now_ns() + CLOSE_LIMIT_NS; (r.out.fd >= 0 || r.err.fd >= 0) &&
                                                   now_ns() < end;)
        poll_once(&r, 10);
    for (unsigned i = 0; i < o.clients; i++) {
        replies += cl[i].replies;
        if (cl[i].fd >= 0)
            close(cl[i].fd);
        cl[i].fd = -1;
    }
    if (r.out.fd >= 0)
        close(r.out.fd);
    if (r.err.fd >= 0)
        close(r.err.fd);
    close(ep);

    bool exit0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (term_at && exited_at && !exit0) {
        char how[32];
        snprintf(how, sizeof(how), WIFEXITED(status) ? "status %d" : "signal %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        fail(&r, "the server ended with %s", how);
    }
    if (term_at && !r.have_executed)
        fail(&r, "the server did not say \"kv: N commands executed\"%s", "");
    *lost = r.have_executed ? (long long)r.executed - (long long)replies : 0;
    printf("round %2u: %3llu ms of load, executed %llu, replies %llu, lost %lld; "
           "clients' ends: EOF %u, reset %u, cut %u; server exited %s%.0f ms after SIGTERM%s%s\n",
           no, (unsigned long long)load_ms, r.executed, replies, *lost,
           r.eofs, r.resets, r.cut, exit0 ? "with 0 " : "",
           term_at && exited_at ? (double)(exited_at - term_at) / 1e6 : -1.0,
           r.why[0] ? "; FAIL: " : "", r.why);
    fflush(stdout);
    return !r.why[0];
}

static bool parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *v)
{
    char *end;
    unsigned long x = strtoul(s, &end, 10);
    if (end == s || *end || x < lo || x > hi)
        return false;
    *v = (unsigned)x;
    return true;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"rounds", required_argument, NULL, 'r'},
                                         {"clients", required_argument, NULL, 'c'},
                                         {"inflight", required_argument, NULL, 'k'},
                                         {"seed", required_argument, NULL, 's'},
                                         {NULL, 0, NULL, 0}};
    bool ok = true;
    int c;
    o.seed = now_ns() ^ ((uint64_t)getpid() << 32);
    while (ok && (c = getopt_long(argc, argv, "+", opts, NULL)) != -1)
        ok = c == 'r'   ? parse_uint(optarg, 1, 1000, &o.rounds)
             : c == 'c' ? parse_uint(optarg, 1, MAX_CLIENTS, &o.clients)
             : c == 'k' ? parse_uint(optarg, 1, MAX_INFLIGHT, &o.inflight)
             : c == 's' ? (o.seed = strtoull(optarg, NULL, 10)) != 0
                        : false;
    if (!ok || optind >= argc) {
        fprintf(stderr, "usage: kvdrain [--rounds 1..1000 (20)] [--clients 1..%d (100)] "
                        "[--inflight 1..%d (4)] [--seed S] -- SERVER [ARG...]\n",
                MAX_CLIENTS, MAX_INFLIGHT);
        return 2;
    }
    o.server = argv + optind;
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(o.clients + 64);
    cl = calloc(o.clients, sizeof(*cl));
    if (!cl)
        return 1;
    for (unsigned i = 0; i < o.clients; i++)
        cl[i].fd = -1; /* a round that fails while connecting closes those it opened */
    printf("kvdrain: %s: %u rounds of %u clients, %u SETs in flight each, SIGTERM after "
           "%u..%u ms of load (seed %" PRIu64 ")\n",
           o.server[0], o.rounds, o.clients, o.inflight, LOAD_MIN_MS, LOAD_MAX_MS, o.seed);
    unsigned failed = 0, losing = 0;
    long long lost, total = 0, most = 0;
    for (unsigned i = 1; i <= o.rounds; i++) {
        failed += !run_round(i, &lost);
        losing += lost != 0;
        total += lost;
        most = lost > most ? lost : most;
    }
    if (failed || losing)
        printf("kvdrain: %s: FAIL: %lld replies lost in %u of %u rounds (at most %lld in a "
               "round); %u round(s) failed otherwise%s\n",
               o.server[0], total, losing, o.rounds, most, failed,
               failed ? " (their FAIL: above)" : "");
    else
        printf("kvdrain: %s: pass: 0 replies lost in %u rounds\n", o.server[0], o.rounds);
    free(cl);
    return failed || losing ? 1 : 0;
}
