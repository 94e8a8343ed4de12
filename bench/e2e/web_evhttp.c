/* SPDX-License-Identifier: MIT */
/* web_evhttp: a plain libevent evhttp static file server, the third column of
 * bench/e2e/run-web.sh next to SWS and nginx.
 *
 *   web_evhttp --root DIR [--port N] [--threads 1|2]
 *
 * Every regular file directly under DIR is read into memory at start-up (one
 * evbuffer each, plus its Content-Type); requests for "/name" are answered
 * from memory with GET or HEAD (keep-alive is evhttp's default for HTTP/1.1),
 * "/" maps to index.html, anything else is 404, other methods 405.
 * With --threads 2 each thread has its own event_base and evhttp bound to its
 * own listening socket on the same port (SO_REUSEPORT: the kernel spreads the
 * connections) and is pinned to CPU i. SIGINT/SIGTERM stop every loop (each
 * base checks a flag every 100 ms, so no base needs libevent's locking). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "bench/harness.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define MAX_FILES 256
#define MAX_THREADS 2

struct file {
    char path[256]; /* "/name" */
    const char *type;
    char *data;
    size_t len;
};

static struct file files[MAX_FILES];
static int nfiles;

struct worker {
    int idx;
    int fd;
    struct event_base *base;
    struct evhttp *http;
    struct event *tick; /* checks the stop flag */
    pthread_t tid;
};

static struct worker workers[MAX_THREADS];
static int nworkers = 1;

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot) return "application/octet-stream";
    if (!strcmp(dot, ".html") || !strcmp(dot, ".htm")) return "text/html";
    if (!strcmp(dot, ".txt")) return "text/plain";
    if (!strcmp(dot, ".css")) return "text/css";
    if (!strcmp(dot, ".js")) return "application/javascript";
    if (!strcmp(dot, ".png")) return "image/png";
    if (!strcmp(dot, ".jpg") || !strcmp(dot, ".jpeg")) return "image/jpeg";
    return "application/octet-stream";
}

static int load_root(const char *root)
{
    DIR *d = opendir(root);
    if (!d) {
        fprintf(stderr, "web_evhttp: %s: %s\n", root, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", root, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (nfiles == MAX_FILES || strlen(e->d_name) + 2 > sizeof files[0].path) {
            fprintf(stderr, "web_evhttp: skipping %s\n", full);
            continue;
        }
        struct file *f = &files[nfiles];
        FILE *fp = fopen(full, "rb");
        if (!fp) continue;
        f->len = (size_t)st.st_size;
        f->data = malloc(f->len ? f->len : 1);
        if (!f->data || fread(f->data, 1, f->len, fp) != f->len) {
            fclose(fp);
            free(f->data);
            fprintf(stderr, "web_evhttp: cannot read %s\n", full);
            continue;
        }
        fclose(fp);
        snprintf(f->path, sizeof f->path, "/%s", e->d_name);
        f->type = content_type(e->d_name);
        nfiles++;
    }
    closedir(d);
    return 0;
}

static const struct file *lookup(const char *uri)
{
    char path[256];
    size_t n = strcspn(uri, "?#");
    if (n == 0 || n >= sizeof path) return NULL;
    memcpy(path, uri, n);
    path[n] = '\0';
    if (!strcmp(path, "/")) strcpy(path, "/index.html");
    for (int i = 0; i < nfiles; i++)
        if (!strcmp(files[i].path, path)) return &files[i];
    return NULL;
}

static void cleanup_noop(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    (void)arg;
}

static void handle(struct evhttp_request *req, void *arg)
{
    (void)arg;
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(out, "Allow", "GET, HEAD");
        evhttp_send_error(req, 405, "Method Not Allowed");
        return;
    }
    const struct file *f = lookup(evhttp_request_get_uri(req));
    if (!f) {
        evhttp_send_error(req, 404, "Not Found");
        return;
    }
    evhttp_add_header(out, "Content-Type", f->type);
    /* Set here: evhttp drops the body of a HEAD reply before it would add
     * Content-Length itself. */
    char len[24];
    snprintf(len, sizeof len, "%zu", f->len);
    evhttp_add_header(out, "Content-Length", len);
    struct evbuffer *body = evbuffer_new();
    /* The file stays in memory for the whole run: reference it, no copy.
     * evhttp leaves the body out for HEAD. */
    evbuffer_add_reference(body, f->data, f->len, cleanup_noop, NULL);
    evhttp_send_reply(req, 200, "OK", body);
    evbuffer_free(body);
}

static int listen_socket(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    /* Accepted sockets inherit it on Linux: evhttp writes the headers and the
     * body separately, and with Nagle a 100 KB reply's tail waits for the
     * client's delayed ACK (40 ms). nginx and SWS set it too. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 4096) != 0) {
        fprintf(stderr, "web_evhttp: port %d: %s\n", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void on_tick(evutil_socket_t fd, short ev, void *arg)
{
    (void)fd;
    (void)ev;
    if (stop) event_base_loopbreak(arg);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (nworkers > 1 && ncpu > 0)
        pin_self(w->idx % (int)ncpu);
    event_base_dispatch(w->base);
    return NULL;
}

static const char *root;
static unsigned port, threads;

static const struct bench_opt options[] = {
    {.name = "root", .kind = OPT_STR, .var = &root, .help = "serve the regular files under it"},
    {.name = "port", .kind = OPT_UINT, .var = &port, .lo = 1, .hi = 65535, .dflt = 8080,
     .help = "on 127.0.0.1"},
    {.name = "threads", .kind = OPT_UINT, .var = &threads, .lo = 1, .hi = MAX_THREADS, .dflt = 1,
     .help = "2: one event_base per thread, SO_REUSEPORT sockets, thread i pinned to CPU i"},
    {.name = NULL},
};

/* Worker i's socket, base, evhttp and stop-flag tick; false (reported) on failure. */
static bool start_worker(struct worker *w, int i)
{
    static const struct timeval tick = {0, 100000};

    w->idx = i;
    w->fd = listen_socket((int)port);
    if (w->fd < 0)
        return false;
    w->base = event_base_new();
    w->http = w->base ? evhttp_new(w->base) : NULL;
    w->tick = w->base ? event_new(w->base, -1, EV_PERSIST, on_tick, w->base) : NULL;
    if (!w->http || !w->tick || !evhttp_accept_socket_with_handle(w->http, w->fd) ||
        event_add(w->tick, &tick) != 0) {
        fprintf(stderr, "web_evhttp: evhttp set-up failed\n");
        return false;
    }
    evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS);
    evhttp_set_gencb(w->http, handle, NULL);
    return true;
}

int main(int argc, char **argv)
{
    struct sigaction sa;

    int rc = bench_options("web_evhttp --root DIR [options]", options, 0, 0, argc, argv);
    if (rc <= 0 || !root) {
        if (rc > 0)
            fprintf(stderr, "web_evhttp: --root DIR is required\n");
        return rc ? 2 : 0;
    }
    nworkers = (int)threads;
    if (load_root(root) != 0 || nfiles == 0) {
        fprintf(stderr, "web_evhttp: no files under %s\n", root);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < nworkers; i++)
        if (!start_worker(&workers[i], i))
            return 1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    printf("web_evhttp: %d files from %s on 127.0.0.1:%u, %d thread(s)\n", nfiles, root, port,
           nworkers);
    fflush(stdout);
    for (int i = 1; i < nworkers; i++) pthread_create(&workers[i].tid, NULL, run, &workers[i]);
    run(&workers[0]);
    for (int i = 1; i < nworkers; i++) pthread_join(workers[i].tid, NULL);
    for (int i = 0; i < nworkers; i++) {
        event_free(workers[i].tick);
        evhttp_free(workers[i].http);
        event_base_free(workers[i].base);
    }
    for (int i = 0; i < nfiles; i++) free(files[i].data);
    return 0;
}
