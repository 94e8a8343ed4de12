/*
 * echo.c: an echo server on the native API (doc/io.md).
 *
 *   echo [PORT]        serves 127.0.0.1:PORT (default 7007) until SIGINT/SIGTERM
 *   echo --self-test   serves a free port, runs 50 clients against it, checks
 *                      every byte, and exits 0 on success (`make check` runs it)
 *
 * Every connection's events have the connection's fd as their color, so two
 * connections are served in parallel and one connection's handlers never run
 * at the same time: no lock anywhere. Bytes that the socket does not take at
 * once wait in the connection's buffer, and a write watch drains them.
 */
#define _POSIX_C_SOURCE 200809L /* ISO C alone (-std=c11) declares no sockets */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "mely/mely.h"

static mely_t rt;
static _Atomic int live; /* open connections */

struct conn {
    int fd;
    mely_watch_t *rd, *wr; /* wr only while bytes wait */
    size_t len;            /* bytes waiting in out */
    char out[16384];
};

static void conn_close(struct conn *c)
{
    mely_close(&rt, c->fd); /* removes both watches, then closes */
    free(c);                /* safe: we run on the watches' color */
    live--;
}

static void on_writable(int fd, unsigned ready, void *arg);

/* Sends what waits; returns false if the connection failed. */
static bool flush(struct conn *c)
{
    while (c->len > 0) { /* bounded: every pass sends bytes or returns */
        ssize_t n = write(c->fd, c->out, c->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0)
            return false;
        memmove(c->out, c->out + n, c->len - (size_t)n);
        c->len -= (size_t)n;
    }
    if (c->len > 0 && !c->wr)
        return mely_watch(&rt, c->fd, MELY_WRITE, MELY_TO(c->fd), on_writable, c, &c->wr) == 0;
    if (c->len == 0 && c->wr) {
        mely_watch_remove(c->wr);
        c->wr = NULL;
    }
    return true;
}

static void on_writable(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    struct conn *c = arg;
    if (!flush(c))
        conn_close(c);
}

static void on_readable(int fd, unsigned ready, void *arg)
{
    (void)ready;
    struct conn *c = arg;
    if (c->len == sizeof(c->out))
        return; /* the peer does not read: wait for the write watch */
    ssize_t n = read(fd, c->out + c->len, sizeof(c->out) - c->len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t)n;
    if (!flush(c))
        conn_close(c);
}

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer;
    (void)peerlen;
    (void)arg;
    struct conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    c->fd = fd;
    live++;
    int err = mely_watch(&rt, fd, MELY_READ, MELY_TO(fd), on_readable, c, &c->rd);
    if (err) {
        fprintf(stderr, "echo: watch: %s\n", mely_strerror(err));
        close(fd);
        free(c);
        live--;
    }
}

static void on_signal(int signo, unsigned ready, void *arg)
{
    (void)signo;
    (void)ready;
    (void)arg;
    mely_stop(&rt);
}

/* ---- the self-test's clients: plain blocking sockets on a thread ---------------- */

enum { CLIENTS = 50, ROUNDS = 20, MSG = 1000 };

static int self_test_port;
static int self_test_failures;

static int client_connect(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)self_test_port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = { .tv_sec = 10 }; /* never hang the test */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static bool exchange(int fd, unsigned client, unsigned round)
{
    char msg[MSG], got[MSG];
    for (unsigned i = 0; i < MSG; i++)
        msg[i] = (char)(client * 31 + round * 7 + i);
    if (write(fd, msg, MSG) != MSG)
        return false;
    size_t have = 0;
    while (have < MSG) { /* bounded by SO_RCVTIMEO */
        ssize_t n = read(fd, got + have, MSG - have);
        if (n <= 0)
            return false;
        have += (size_t)n;
    }
    return memcmp(msg, got, MSG) == 0;
}

static void *clients(void *arg)
{
    (void)arg;
    int fds[CLIENTS];
    for (unsigned c = 0; c < CLIENTS; c++)
        if ((fds[c] = client_connect()) < 0)
            self_test_failures++;
    for (unsigned r = 0; r < ROUNDS; r++)
        for (unsigned c = 0; c < CLIENTS; c++)
            if (fds[c] >= 0 && !exchange(fds[c], c, r))
                self_test_failures++;
    for (unsigned c = 0; c < CLIENTS; c++)
        if (fds[c] >= 0)
            close(fds[c]);
    /* Stop once the server has seen every close (at most 10 s), so that
     * every connection's buffer is freed. */
    for (int i = 0; i < 10000 && live > 0; i++)
        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    if (live > 0)
        self_test_failures++;
    mely_stop(&rt);
    return NULL;
}

int main(int argc, char **argv)
{
    bool self_test = argc > 1 && strcmp(argv[1], "--self-test") == 0;
    unsigned port = self_test ? 0 : argc > 1 ? (unsigned)atoi(argv[1]) : 7007;
    mely_listener_t *l;
    mely_watch_t *sigint, *sigterm;
    int err;

    if ((err = mely_init(&rt, NULL)) != 0 ||
        (err = mely_listen(&rt, "127.0.0.1", port, 0, 0, MELY_TO(1), on_accept, NULL, &l)) != 0 ||
        (err = mely_signal(&rt, SIGINT, MELY_TO(0), on_signal, NULL, &sigint)) != 0 ||
        (err = mely_signal(&rt, SIGTERM, MELY_TO(0), on_signal, NULL, &sigterm)) != 0) {
        fprintf(stderr, "echo: %s\n", mely_strerror(err));
        return 1;
    }
    pthread_t t;
    if (self_test) {
        self_test_port = (int)mely_listener_port(l);
        pthread_create(&t, NULL, clients, NULL);
    } else {
        printf("echo: serving 127.0.0.1:%u (Ctrl-C stops)\n", mely_listener_port(l));
    }
    err = mely_run(&rt);
    if (self_test) {
        pthread_join(t, NULL);
        printf("echo self-test: %d clients x %d messages of %d bytes, %d failures\n", CLIENTS,
               ROUNDS, MSG, self_test_failures);
    }
    mely_listener_close(l);
    mely_watch_remove(sigint);
    mely_watch_remove(sigterm);
    mely_shutdown(&rt); /* frees the watches left; connections left open at a
                           signal keep their buffers until exit */
    return err == 0 && self_test_failures == 0 ? 0 : 1;
}
