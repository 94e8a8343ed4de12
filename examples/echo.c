/* SPDX-License-Identifier: MIT */
/* echo.c: an echo server on streams (include/mely/stream.h): `echo [PORT]` (default 7007, 0: a
 * free port). Each connection gets a color of a pool, placed on the less loaded worker, and
 * gives it back when it closes. SIGINT or SIGTERM flush, close them and stop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <mely/stream.h>

static mely_t rt;
static mely_color_pool_t *pool;  /* the connections' colors, placed by load */
static mely_color_range_t spare; /* shared colors once the pool is all out */

static void on_read(mely_stream_t *s, void *arg)
{
    (void)arg;
    mely_stream_write_buffer(s, mely_stream_input(s)); /* moves the bytes, no copy */
}

static void on_closed(mely_stream_t *s, void *pooled)
{
    if (pooled) /* the stream's last callback: its color is free for the next connection */
        mely_color_release(&rt, pool, mely_stream_color(s));
}

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer, (void)peerlen, (void)arg; /* no event callback: EOF and errors close */
    mely_color_t c;
    int pooled = mely_color_place(&rt, pool, &c) == 0;
    if (!pooled)
        c = mely_color_pick(&spare, (uint64_t)fd);
    int err = mely_stream_open(&rt, fd, MELY_TO(c),
                               &(mely_stream_ops_t){.read = on_read, .closed = on_closed},
                               pooled ? &rt : NULL, NULL);
    if (err) {
        if (pooled) /* fd is closed, and no callback will run */
            mely_color_release(&rt, pool, c);
        fprintf(stderr, "echo: %s\n", mely_strerror(err));
    }
}

static void on_signal(int signo, unsigned ready, void *arg)
{
    (void)signo, (void)ready, (void)arg;
    mely_drain(&rt, 5000000000u); /* then mely_run returns, within 5 s */
}

/* The port argument, 0..65535 in decimal; -1 if it is anything else (`echo --help` served
 * on a free port when this was atoi). */
static long port_arg(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s >= '0' && *s <= '9' && *end == '\0' && v <= 65535 ? v : -1;
}

int main(int argc, char **argv)
{
    mely_listener_t *l;
    mely_watch_t *w;
    long port = argc > 1 ? port_arg(argv[1]) : 7007;
    if (argc > 2 || port < 0) {
        fprintf(stderr, "usage: echo [PORT]   (0..65535; default 7007, 0: a free port)\n");
        return 2;
    }
    int err = mely_init(&rt, NULL);
    if (err || (err = mely_color_pool(&rt, 4096, &pool)) ||
        (err = mely_color_range(&rt, 1024, &spare)) ||
        (err = mely_signal(&rt, SIGINT, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_signal(&rt, SIGTERM, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_listen(&rt, "127.0.0.1", (unsigned)port, 0, 0,
                           MELY_TO(1), on_accept, NULL, &l))) {
        fprintf(stderr, "echo: %s\n", mely_strerror(err));
        return 1;
    }
    printf("echo: serving 127.0.0.1:%u\n", mely_listener_port(l));
    fflush(stdout);
    err = mely_run(&rt);
    mely_shutdown(&rt); /* frees the listener, the watches, any stream left and the pool */
    return err ? 1 : 0;
}
