/* SPDX-License-Identifier: MIT */
/*
 * server.c: the server object. Start-up (site, runtime, listener, signals),
 * the Accept and DecClientAccepted handlers with the client cap, the
 * graceful shutdown, and the clean-up.
 *
 * The client cap. When the connections being served reach max_clients,
 * Accept pauses the listener (mely_listener_pause): new connections wait in
 * the kernel's backlog, unaccepted, as with nginx at worker_connections.
 * Each DecClientAccepted (a client left) resumes it. With --reuseport, an
 * accept loop on another worker may take one more connection before the
 * pause reaches its socket: such a connection is parked, accepted but unread,
 * in a FIFO of at most max_waiting, and started by the next departure;
 * beyond max_waiting it gets a 503 and is closed. cap_sync() decides pause
 * or resume under wait_mu after every change of the count, so the last
 * change decides, whichever worker makes it. Accept and DecClientAccepted
 * share the accept color, so with a single listener they never run at once;
 * the counter is atomic anyway because /server-status and --reuseport (one
 * accept color per worker) read and write it elsewhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>
#include <unistd.h>

#include "apps/sws/sws.h"

struct sws *sws_current;

/* The most colors the connections' pool takes (of 64,512 above the floor). */
#define POOL_MAX 16384u

/*
 * The handlers' descriptors. timeleft is in TSC cycles per run, measured on
 * the 2-core development machine with `sws --steal all --measured-costs
 * --print-costs` under a keep-alive 1 KB load (8 pipelined requests per
 * round trip) and a connection-per-request load, and rounded (WriteResponse
 * and Accept include their system calls: writev, accept4; the machine was
 * busy, so take them as orders of magnitude);
 * penalty marks the handlers whose data is hot in the cache of the worker that
 * read the request (the parse and lookup touch the bytes ReadRequest just
 * read): stealing them costs cache misses (the paper's section 3.3).
 */
static const mely_handler_t annotated[H_COUNT] = {
    [H_ACCEPT] = { .name = "Accept", .timeleft = 14000, .penalty = 1 },
    [H_READ] = { .name = "ReadRequest", .timeleft = 4000, .penalty = 1 },
    [H_PARSE] = { .name = "ParseRequest", .timeleft = 400, .penalty = 2 },
    [H_CACHE] = { .name = "CheckInCache", .timeleft = 200, .penalty = 2 },
    [H_WRITE] = { .name = "WriteResponse", .timeleft = 20000, .penalty = 1 },
    [H_CLOSE] = { .name = "Close", .timeleft = 7000, .penalty = 1 },
    [H_DEC] = { .name = "DecClientAccepted", .timeleft = 100, .penalty = 1 },
    [H_BAD] = { .name = "BadRequest", .timeleft = 150, .penalty = 1 },
    [H_NOTFOUND] = { .name = "404", .timeleft = 150, .penalty = 1 },
    [H_START] = { .name = "StartConnection", .timeleft = 6000, .penalty = 1 },
    [H_TIMER] = { .name = "Timeout", .timeleft = 300, .penalty = 1 },
    [H_DRAIN] = { .name = "Drain", .timeleft = 300, .penalty = 1 },
    [H_EPOLL] = { .name = "Epoll", .timeleft = 3000, .penalty = 1 },
    [H_FILE] = { .name = "ReadFile", .timeleft = 4000, .penalty = 1 }, /* a check: ~2,700 */
};

/* The same without timeleft: the "measured" policy word counts their
 * measured costs (mely_handler_measured). */
static const mely_handler_t bare[H_COUNT] = {
    [H_ACCEPT] = { .name = "Accept" },         [H_READ] = { .name = "ReadRequest" },
    [H_PARSE] = { .name = "ParseRequest" },    [H_CACHE] = { .name = "CheckInCache" },
    [H_WRITE] = { .name = "WriteResponse" },   [H_CLOSE] = { .name = "Close" },
    [H_DEC] = { .name = "DecClientAccepted" }, [H_BAD] = { .name = "BadRequest" },
    [H_NOTFOUND] = { .name = "404" },          [H_START] = { .name = "StartConnection" },
    [H_TIMER] = { .name = "Timeout" },         [H_DRAIN] = { .name = "Drain" },
    [H_EPOLL] = { .name = "Epoll" },          [H_FILE] = { .name = "ReadFile" },
};

void sws_config_init(struct sws_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->host = "127.0.0.1";
    cfg->port = 8080;
    cfg->pin = 1;
    cfg->max_clients = 10000;
    cfg->timeout_ms = 30000;
    cfg->drain_ms = 5000;
    cfg->cache.budget = (size_t)CACHE_DEFAULT_MB << 20;
    cfg->cache.max_file = (size_t)CACHE_DEFAULT_FILE_KB << 10;
    cfg->cache.valid_ms = CACHE_DEFAULT_VALID_MS;
    cfg->cache.settle_ms = CACHE_DEFAULT_SETTLE_MS;
}

void sws_count(struct sws *s, int status, uint64_t bytes)
{
    int w = mely_current_worker();
    if (w < 0 || (unsigned)w >= s->workers)
        w = 0;
    struct sws_wstat *ws = &s->ws[w];
    /* Only worker w writes its slot: a load and a store, no locked add
     * (except in the rare fallback above, where a lost count is harmless). */
    atomic_store_explicit(&ws->requests, atomic_load_explicit(&ws->requests, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    atomic_store_explicit(&ws->bytes, atomic_load_explicit(&ws->bytes, memory_order_relaxed) + bytes,
                          memory_order_relaxed);
    if (status >= 400)
        atomic_store_explicit(&ws->errors,
                              atomic_load_explicit(&ws->errors, memory_order_relaxed) + 1,
                              memory_order_relaxed);
}

/* ---- Accept, DecClientAccepted --------------------------------------------- */

static void refuse(struct sws *s, int fd)
{
    const struct sws_file *e = cache_error(503);
    static const char tail[] = "Connection: close\r\n\r\n";
    struct iovec iov[3] = { { (void *)e->head, e->head_len }, { (void *)tail, sizeof(tail) - 1 },
                            { (void *)e->body, e->body_len } };
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
    (void)!sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL); /* best effort */
    shutdown(fd, SHUT_WR);
    /* Drop what the client already sent, so that the close is less likely
     * to become a reset that destroys the 503 before it is read. */
    char junk[2048];
    for (int i = 0; i < 4 && recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0; i++)
        ;
    close(fd);
    atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
}

static void start(struct sws *s, struct conn *c)
{
    int fd = conn_fd(c);
    mely_color_t color = conn_place(c);
    atomic_store(&s->conns[fd], c);
    atomic_store(&s->keys[fd], conn_key(c));
    if (mely_post_ex(&s->rt, color, MELY_PRIO_DEFAULT, &s->h[H_START], conn_start, c, 0) != 0) {
        atomic_store(&s->keys[fd], 0);
        atomic_store(&s->conns[fd], NULL);
        conn_unplace(c);
        conn_free_at_exit(c);
        atomic_fetch_sub(&s->clients, 1);
    }
}

/* Pauses accepting at the cap (or while connections are parked) and resumes
 * it below. Under wait_mu: the listener cannot be closed meanwhile (sws_drain
 * closes it under wait_mu), and of two workers changing the count, the later
 * call sees the later count. */
static void cap_sync(struct sws *s)
{
    pthread_mutex_lock(&s->wait_mu);
    bool full = atomic_load(&s->clients) >= s->cfg.max_clients || s->waiting > 0;
    if (s->listener && full != s->held) {
        int err = full ? mely_listener_pause(s->listener) : mely_listener_resume(s->listener);
        if (err == 0) {
            s->held = full;
            if (full)
                atomic_fetch_add_explicit(&s->cap_pauses, 1, memory_order_relaxed);
        } else {
            fprintf(stderr, "sws: %s accepting: %s\n", full ? "pausing" : "resuming",
                    mely_strerror(err));
        }
    }
    pthread_mutex_unlock(&s->wait_mu);
}

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    struct sws *s = arg;
    if (atomic_load(&s->draining)) {
        close(fd);
        return;
    }
    atomic_fetch_add_explicit(&s->accepted, 1, memory_order_relaxed);
    if ((unsigned)fd >= s->nconns) {
        refuse(s, fd);
        return;
    }
    int color = mely_current_color();
    struct conn *c = conn_new(s, fd, color >= 0 ? (mely_color_t)color : 1,
                              sws_status_allowed(s, peer, peerlen));
    if (!c) {
        refuse(s, fd);
        return;
    }
    /* Reserve a slot; at the cap, park or refuse. */
    unsigned n = atomic_load(&s->clients);
    for (;;) {
        if (n >= s->cfg.max_clients)
            break;
        if (atomic_compare_exchange_weak(&s->clients, &n, n + 1)) {
            if (n + 1 >= s->cfg.max_clients)
                cap_sync(s); /* before the client can ask /server-status */
            start(s, c);
            return;
        }
    }
    pthread_mutex_lock(&s->wait_mu);
    bool parked = s->waiting < s->cfg.max_waiting;
    if (parked) {
        *conn_wait_next(c) = NULL;
        if (s->wait_tail)
            *conn_wait_next(s->wait_tail) = c;
        else
            s->wait_head = c;
        s->wait_tail = c;
        s->waiting++;
    }
    pthread_mutex_unlock(&s->wait_mu);
    if (!parked) {
        free(c); /* nothing else was set up */
        refuse(s, fd);
        return;
    }
    /* A client may have left between the check and the parking. */
    sws_dec_client(NULL);
    cap_sync(s);
}

static void finish(struct sws *s)
{
    if (!atomic_exchange(&s->stopped, true))
        mely_stop(&s->rt);
}

/* DecClientAccepted (arg: the server; NULL: only start parked clients if a
 * slot is free, without counting a departure). */
void sws_dec_client(void *arg)
{
    struct sws *s = arg ? arg : sws_current;
    if (arg)
        atomic_fetch_sub(&s->clients, 1);
    if (atomic_load(&s->draining)) {
        if (atomic_load(&s->clients) == 0)
            finish(s);
        return;
    }
    for (;;) { /* start parked clients while slots are free */
        unsigned n = atomic_load(&s->clients);
        if (n >= s->cfg.max_clients)
            break;
        pthread_mutex_lock(&s->wait_mu);
        struct conn *c = s->wait_head;
        if (c && atomic_compare_exchange_strong(&s->clients, &n, n + 1)) {
            s->wait_head = *conn_wait_next(c);
            if (!s->wait_head)
                s->wait_tail = NULL;
            s->waiting--;
        } else if (c) {
            pthread_mutex_unlock(&s->wait_mu);
            continue; /* the count moved: look again */
        }
        pthread_mutex_unlock(&s->wait_mu);
        if (!c)
            break;
        start(s, c);
    }
    if (arg)
        cap_sync(s);
}

/* ---- shutdown ---------------------------------------------------------------------- */

static void drain_deadline(void *arg)
{
    finish(arg);
}

void sws_drain(struct sws *s)
{
    if (atomic_exchange(&s->draining, true))
        return;
    pthread_mutex_lock(&s->wait_mu);
    if (s->listener) {
        s->listener_pauses = mely_listener_pauses(s->listener);
        mely_listener_close(s->listener);
        s->listener = NULL;
    }
    struct conn *c = s->wait_head;
    s->wait_head = s->wait_tail = NULL;
    s->waiting = 0;
    pthread_mutex_unlock(&s->wait_mu);
    while (c) { /* parked clients were never served: close them */
        struct conn *nx = *conn_wait_next(c);
        conn_free_at_exit(c);
        c = nx;
    }
    for (unsigned fd = 0; fd < s->nconns; fd++) {
        uint64_t key = atomic_load_explicit(&s->keys[fd], memory_order_relaxed);
        if (key)
            mely_post_ex(&s->rt, conn_key_color(key), MELY_PRIO_DEFAULT, &s->h[H_DRAIN], conn_drain,
                         (void *)(uintptr_t)key, 0);
    }
    if (atomic_load(&s->clients) == 0)
        finish(s);
    else if (mely_timer_after(&s->rt, (uint64_t)s->cfg.drain_ms * 1000000u, MELY_TO(0), drain_deadline,
                              s, NULL) != 0)
        finish(s);
}

/* SIGINT/SIGTERM: drain; a second one stops at once. */
static void on_signal(int signo, unsigned ready, void *arg)
{
    (void)signo;
    (void)ready;
    struct sws *s = arg;
    if (atomic_load(&s->draining))
        finish(s);
    else
        sws_drain(s);
}

/* ---- start, run, free ---------------------------------------------------------------- */

/* The configuration's unset fields take their defaults. */
static void config_defaults(struct sws *s, const struct sws_config *cfg)
{
    s->cfg = *cfg;
    if (!s->cfg.host)
        s->cfg.host = "127.0.0.1";
    if (s->cfg.max_clients == 0)
        s->cfg.max_clients = 1;
    if (s->cfg.max_waiting == 0)
        s->cfg.max_waiting = s->cfg.max_clients;
    if (s->cfg.timeout_ms == 0)
        s->cfg.timeout_ms = 30000;
    s->timeout_ns = (uint64_t)s->cfg.timeout_ms * 1000000u;
}

/* The connection table, indexed by descriptor: as many slots as the process
 * may open descriptors (at least 65,536, at most 2^20). 0 or -1. */
static int conns_alloc(struct sws *s)
{
    struct rlimit rl;
    unsigned n = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > n)
        n = rl.rlim_cur > (1u << 20) ? 1u << 20 : (unsigned)rl.rlim_cur;
    s->conns = calloc(n, sizeof(*s->conns));
    s->keys = calloc(n, sizeof(*s->keys));
    if (!s->conns || !s->keys)
        return -1;
    s->nconns = n;
    return 0;
}

/* The mely runtime (a "measured" steal policy added for measured costs) and
 * its trace, and the per-worker table. 0, or -1 with err set. */
static int runtime_start(struct sws *s, char *err, size_t errlen)
{
    mely_config_t mc;
    mely_config_init(&mc);
    mc.workers = s->cfg.workers;
    mc.pin = s->cfg.pin;
    char steal[128];
    const char *policy = s->cfg.steal && strcmp(s->cfg.steal, "off") != 0 ? s->cfg.steal : NULL;
    if (policy && s->cfg.measured_costs && !strstr(policy, "measured")) {
        snprintf(steal, sizeof(steal), "%s+measured", policy);
        policy = steal;
    }
    mc.steal = policy;
    mc.engine = s->cfg.engine;
    int e = mely_init(&s->rt, &mc);
    if (e != 0) {
        snprintf(err, errlen, "runtime: %s", mely_strerror(e));
        return -1;
    }
    if (s->cfg.trace && (e = mely_trace_start(&s->rt, s->cfg.trace)) != 0) {
        snprintf(err, errlen, "trace %s: %s", s->cfg.trace, mely_strerror(e));
        return -1;
    }
    s->tracing = s->cfg.trace != NULL;
    s->workers = mely_workers(&s->rt);
    /* A color per client served at once (a full pool shares descriptor
     * colors); at most a quarter of the space above the floor, whatever
     * --max-clients says. */
    uint32_t ncolors = s->cfg.max_clients < POOL_MAX ? s->cfg.max_clients : POOL_MAX;
    if (!s->cfg.place_by_fd && (e = mely_color_pool(&s->rt, ncolors, &s->pool)) != 0) {
        snprintf(err, errlen, "color pool of %u: %s", ncolors, mely_strerror(e));
        return -1;
    }
    s->ws = calloc(s->workers, sizeof(*s->ws));
    if (!s->ws) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* What brings requests in: the listener, the optional epoll handler's
 * watch, the signals. 0, or -1 with err set. */
static int inputs_start(struct sws *s, char *err, size_t errlen)
{
    int e = mely_listen(&s->rt, s->cfg.host, s->cfg.port, 0,
                        s->cfg.reuseport ? MELY_LISTEN_REUSEPORT : 0,
                        (mely_to_t){ 1, MELY_PRIO_DEFAULT, &s->h[H_ACCEPT] }, on_accept, s,
                        &s->listener);
    if (e != 0) {
        snprintf(err, errlen, "listen on %s:%u: %s", s->cfg.host, s->cfg.port, mely_strerror(e));
        return -1;
    }
    if (s->cfg.epoll_handler) {
        s->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (s->epfd < 0) {
            snprintf(err, errlen, "epoll_create1: %s", strerror(errno));
            return -1;
        }
        e = mely_watch(&s->rt, s->epfd, MELY_READ, (mely_to_t){ 0, MELY_PRIO_DEFAULT, &s->h[H_EPOLL] },
                       sws_epoll, s, &s->epoll_watch);
        if (e != 0) {
            snprintf(err, errlen, "epoll watch: %s", mely_strerror(e));
            return -1;
        }
    }
    if (s->cfg.signals &&
        ((e = mely_signal(&s->rt, SIGINT, MELY_TO(0), on_signal, s, &s->sigint)) != 0 ||
         (e = mely_signal(&s->rt, SIGTERM, MELY_TO(0), on_signal, s, &s->sigterm)) != 0)) {
        snprintf(err, errlen, "signals: %s", mely_strerror(e));
        return -1;
    }
    return 0;
}

int sws_start(struct sws *s, const struct sws_config *cfg, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    s->epfd = -1;
    config_defaults(s, cfg);
    s->h = s->cfg.measured_costs ? bare : annotated;
    pthread_mutex_init(&s->wait_mu, NULL);
    s->started_ns = mely_now_ns();

    if (cache_errors_init() != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (sws_status_setup(s, err, errlen) != 0)
        return -1;
    int rc = s->cfg.root ? cache_init(&s->cache, s->cfg.root, &s->cfg.cache, err, errlen)
                         : cache_init_sample(&s->cache, &s->cfg.cache, err, errlen);
    if (rc != 0)
        return -1;
    if (conns_alloc(s) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (runtime_start(s, err, errlen) != 0)
        return -1;
    sws_current = s;
    return inputs_start(s, err, errlen);
}

unsigned sws_port(const struct sws *s)
{
    return s->listener ? mely_listener_port(s->listener) : 0;
}

int sws_url(char *out, size_t n, const char *host, unsigned port)
{
    /* --host is numeric (inet_pton): a colon means IPv6, and no zone ("%eth0"). */
    const char *fmt = strchr(host, ':') ? "http://[%s]:%u/" : "http://%s:%u/";
    return snprintf(out, n, fmt, host, port);
}

int sws_run(struct sws *s)
{
    return mely_run(&s->rt);
}

void sws_print_costs(const struct sws *s, FILE *out)
{
    fprintf(out, "handler             measured cycles  (timeleft annotation)\n");
    for (int i = 0; i < H_COUNT; i++)
        fprintf(out, "%-20s %15llu  (%llu)\n", bare[i].name,
                (unsigned long long)mely_handler_measured(&s->rt, &s->h[i]),
                (unsigned long long)annotated[i].timeleft);
}

void sws_free(struct sws *s)
{
    if (s->listener)
        mely_listener_close(s->listener);
    if (s->sigint)
        mely_watch_remove(s->sigint);
    if (s->sigterm)
        mely_watch_remove(s->sigterm);
    if (s->tracing) {
        int dropped = mely_trace_stop(&s->rt);
        if (dropped < 0)
            fprintf(stderr, "sws: trace %s: %s\n", s->cfg.trace, mely_strerror(dropped));
        else if (dropped > 0)
            fprintf(stderr, "sws: trace %s: the oldest %d records were overwritten "
                    "(MELY_TRACE_RECORDS keeps more)\n", s->cfg.trace, dropped);
    }
    mely_shutdown(&s->rt); /* frees the watches and timers left; discards events */
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->conns)
        for (unsigned fd = 0; fd < s->nconns; fd++) {
            struct conn *c = atomic_load(&s->conns[fd]);
            if (c)
                conn_free_at_exit(c);
        }
    for (struct conn *c = s->wait_head; c;) {
        struct conn *nx = *conn_wait_next(c);
        conn_free_at_exit(c);
        c = nx;
    }
    free(s->conns);
    free(s->keys);
    free(s->ws);
    cache_free(&s->cache);
    cache_errors_free();
    pthread_mutex_destroy(&s->wait_mu);
    if (sws_current == s)
        sws_current = NULL;
    memset(s, 0, sizeof(*s));
}
