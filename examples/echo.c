/* SPDX-License-Identifier: MIT */
/* echo.c: an echo server on streams (include/mely/stream.h): `echo [PORT]` (default 7007, 0: a free
 * port). Each connection has a color of a range; SIGINT or SIGTERM flush, close them and stop. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <mely/stream.h>

static mely_t rt;
static mely_color_range_t conns; /* the connections' colors */

static void on_read(mely_stream_t *s, void *arg)
{
    (void)arg;
    mely_stream_write_buffer(s, mely_stream_input(s)); /* moves the bytes, no copy */
}

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer, (void)peerlen, (void)arg; /* no event callback: EOF and errors close */
    int err = mely_stream_open(&rt, fd, MELY_TO(mely_color_pick(&conns, (uint64_t)fd)),
                               &(mely_stream_ops_t){.read = on_read}, NULL, NULL);
    if (err)
        fprintf(stderr, "echo: %s\n", mely_strerror(err));
}

static void on_signal(int signo, unsigned ready, void *arg)
{
    (void)signo, (void)ready, (void)arg;
    mely_drain(&rt, 5000000000u); /* then mely_run returns, within 5 s */
}

int main(int argc, char **argv)
{
    mely_listener_t *l;
    mely_watch_t *w;
    int err = mely_init(&rt, NULL);
    if (err || (err = mely_color_range(&rt, 1024, &conns)) ||
        (err = mely_signal(&rt, SIGINT, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_signal(&rt, SIGTERM, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_listen(&rt, "127.0.0.1", argc > 1 ? (unsigned)atoi(argv[1]) : 7007, 0, 0,
                           MELY_TO(1), on_accept, NULL, &l))) {
        fprintf(stderr, "echo: %s\n", mely_strerror(err));
        return 1;
    }
    printf("echo: serving 127.0.0.1:%u\n", mely_listener_port(l));
    fflush(stdout);
    err = mely_run(&rt);
    mely_shutdown(&rt); /* frees the listener, the watches and any stream left */
    return err ? 1 : 0;
}
