/* SPDX-License-Identifier: MIT */
/*
 * kv_load.c: a closed-loop load client for the key-value servers
 * (examples/kv on mely streams, bench/e2e/kv_bufferevent on libevent
 * bufferevents; their protocol: examples/kvstore.h), and the floor its
 * figures are quoted beside. bench/e2e/run-kv.sh runs it.
 *
 *   kv_load --port P [--server-pid PID] [options]    (--help: the options)
 *   kv_load --floor [--floor-pairs N]
 *
 * Load: --clients connections over --threads threads, each thread with an
 * epoll set of its own (level-triggered, non-blocking sockets, TCP_NODELAY).
 * Each connection keeps --pipeline commands in flight: a reply in, the next
 * command out; the commands one read completed leave in one send(). A
 * command is a SET (with probability --set-ratio) or a GET of a key drawn
 * uniformly from --keys ("k0", "k1", ..., shared by every connection), from
 * the connection's own xorshift64 stream (--seed). A connection's buffers,
 * its ring of commands in flight and what it knows of its keys are allocated
 * once at start: nothing is allocated per request.
 *
 * Every reply is checked: a SET gets "OK"; a GET gets "NOT_FOUND" or
 * "VALUE v", v of --value-bytes bytes in the values' form: the run's tag,
 * the writer's connection number and its SET's sequence number (8 hex digits
 * each), then a fixed filler. A value of another tag (an earlier run's, on a
 * server that kept its table; any length) is checked for form only. What a connection can know: the server runs one command
 * of a connection at a time, in order, and no DEL is sent, so a GET sees the
 * connection's last SET of that key sent before it, or a later value of
 * another connection. So a value this connection wrote must be its last SET
 * of the key, and a key it has set is never NOT_FOUND; other connections'
 * values are checked for form. (That knowledge costs 4 bytes per connection
 * and key; beyond 32M of them GETs are checked for form only, said in the
 * report.) The first failed check ends the run (exit status 1).
 *
 * Measuring: connecting (5 s at most), a ramp until every connection has had
 * a reply (10 s at most), --warmup, then the window of --seconds: replies
 * per second; the server's CPU time (utime + stime of /proc/PID/stat, 10 ms
 * ticks) per reply; this process's; what other processes and the hypervisor
 * took meanwhile (/proc/stat, bench_load_note). The threads count their
 * replies in counters of their own (a relaxed store per epoll pass); the main
 * thread reads them, the clock and /proc at the window's ends and sleeps in
 * between. No reply for 2 s is a stall: the run fails.
 *
 * The floor (--floor): one thread writes 32 bytes into a loopback TCP
 * connection and reads them at its other end, --floor-pairs times in 5 runs
 * (the median): the kernel's least cost for one direction of a request. A
 * request that travels alone costs two such pairs of CPU (the command, the
 * reply), client and server together; pipelined commands may share them.
 *
 * Output: a report, then one line for scripts (run-kv.sh):
 *   kv_load: rps=R requests=N seconds=S server_us=U client_us=U server_cores=C
 *            client_cores=C others_pct=P steal_pct=P errors=0|1
 *   kv_load: floor_ns_per_pair=N                              (--floor)
 * Exit status: 0; 1 if the run failed (a check, a stall, a bound); 2 for a
 * usage error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bench/harness.h"

#define MS 1000000ull
#define CONNECT_LIMIT_NS (5000 * MS)
#define RAMP_LIMIT_NS (10000 * MS)
#define STALL_LIMIT_NS (2000 * MS)
#define UNKNOWN UINT32_MAX /* what a GET expects when the connection keeps no knowledge */
#define MAX_KNOWN (1u << 25) /* connections x keys whose last SET is kept */
#define HEAD 24u             /* a value's run tag, writer and sequence, in hex */
#define MAX_THREADS 2
#define FLOOR_RUNS 5

static struct {
    unsigned port, clients, pipeline, keys, value_bytes, threads, floor_pairs;
    int server_pid;
    double seconds, warmup, set_ratio;
    uint64_t seed;
    bool floor, quick;
} o;

static const struct bench_opt options[] = {
    {.name = "port", .kind = OPT_UINT, .var = &o.port, .lo = 1, .hi = 65535, .dflt = 7008,
     .help = "the server's port on 127.0.0.1"},
    {.name = "server-pid", .kind = OPT_INT, .var = &o.server_pid, .lo = -1, .hi = INT_MAX,
     .dflt = -1, .none = "none", .help = "the server's process: its CPU time (/proc)"},
    {.name = "clients", .kind = OPT_UINT, .var = &o.clients, .lo = 1, .hi = 10000, .dflt = 100,
     .help = "connections"},
    {.name = "pipeline", .kind = OPT_UINT, .var = &o.pipeline, .lo = 1, .hi = 256, .dflt = 4,
     .help = "commands in flight on each connection"},
    {.name = "keys", .kind = OPT_UINT, .var = &o.keys, .lo = 1, .hi = 10000000, .dflt = 10000,
     .help = "keys, shared by all connections"},
    {.name = "set-ratio", .kind = OPT_DOUBLE, .var = &o.set_ratio, .lo = 0, .hi = 1, .dflt = 0.1,
     .help = "the share of SETs (the rest: GETs)"},
    {.name = "value-bytes", .kind = OPT_UINT, .var = &o.value_bytes, .lo = HEAD, .hi = 4000,
     .dflt = 32, .help = "a SET's value"},
    {.name = "threads", .kind = OPT_UINT, .var = &o.threads, .lo = 1, .hi = MAX_THREADS,
     .dflt = 1, .help = "client threads (the connections split among them)"},
    {.name = "seconds", .kind = OPT_DOUBLE, .var = &o.seconds, .lo = 0.1, .hi = 600, .dflt = 5,
     .quick = 1, .help = "the measured window"},
    {.name = "warmup", .kind = OPT_DOUBLE, .var = &o.warmup, .lo = 0, .hi = 60, .dflt = 0.5,
     .quick = 0.3, .help = "load before the window"},
    {.name = "seed", .kind = OPT_U64, .var = &o.seed, .lo = 1, .hi = 1e18, .dflt = 1,
     .help = "of the connections' random streams"},
    {.name = "floor", .kind = OPT_FLAG, .var = &o.floor,
     .help = "measure the floor (a loopback TCP write()+read() pair) instead"},
    {.name = "floor-pairs", .kind = OPT_UINT, .var = &o.floor_pairs, .lo = 1000, .hi = 10000000,
     .dflt = 200000, .quick = 50000, .help = "pairs the floor measures"},
    {.name = "quick", .kind = OPT_QUICK, .var = &o.quick, .help = "a 1 s window"},
    {.name = NULL},
};

static struct bench b = {.name = "kv_load"};

/* ---- Connections and their commands ------------------------------------------------- */

struct pending {
    uint32_t key;
    uint32_t expect; /* SET: its sequence; GET: the connection's last SET of key (0: none) */
    bool set;
};

struct conn {
    int fd;
    uint32_t id;       /* the writer in its values */
    uint32_t seq;      /* its SETs so far */
    bool want_out;     /* EPOLLOUT armed: a send was short */
    uint64_t rng;
    uint64_t replies;
    uint32_t *last;    /* per key: the sequence of its last SET (0: none); NULL: not kept */
    struct pending *ring; /* the commands in flight, oldest at head */
    unsigned head, n;
    char *out;         /* commands not sent yet: out[off..len) */
    size_t off, len;
    char *in;          /* received, not parsed yet: in[0..in_len) */
    size_t in_len, in_cap;
};

struct thread {
    pthread_t th;
    int ep;
    struct conn *c;
    unsigned n;
    uint64_t done_own; /* replies: the thread's own count, published in done */
    unsigned ready_own;
    char why[200];     /* why it failed, written before `failed` (release) */
    _Alignas(64) atomic_uint_fast64_t done; /* written by the thread, read by main */
    atomic_uint ready;                      /* its connections that had a reply */
    atomic_bool failed;
};

static char filler[4000];       /* a value's bytes after its head (the same in every run) */
static uint32_t run_tag;        /* tells this run's values from an earlier run's */
static uint32_t set_threshold;  /* a SET when the random's low 24 bits are below */
static size_t cmd_max;          /* the longest command, LF included */
static atomic_bool stop;        /* main -> threads: the run is over */

static bool tfail(struct thread *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool tfail(struct thread *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why, sizeof(t->why), fmt, ap);
    va_end(ap);
    atomic_store_explicit(&t->failed, true, memory_order_release);
    return false;
}

static size_t put_dec(char *p, uint32_t v)
{
    char tmp[10];
    size_t n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

static void put_hex8(char *p, uint32_t v)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 7; i >= 0; i--, v >>= 4)
        p[i] = hex[v & 15];
}

/* 8 hex digits at p into *v; false if they are not. */
static bool get_hex8(const char *p, uint32_t *v)
{
    uint32_t x = 0;
    for (int i = 0; i < 8; i++) {
        char ch = p[i];
        unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
                     : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10) : 16u;
        if (d == 16)
            return false;
        x = x << 4 | d;
    }
    *v = x;
    return true;
}

/* Queues c's next command (its bytes in out, its record in the ring). */
static void next_command(struct conn *c)
{
    uint64_t r = xorshift64(&c->rng);
    uint32_t key = (uint32_t)((r >> 24) % o.keys);
    struct pending *p = &c->ring[(c->head + c->n++) % o.pipeline];
    char *w = c->out + c->len;

    p->key = key;
    p->set = (r & 0xffffff) < set_threshold;
    memcpy(w, p->set ? "SET k" : "GET k", 5);
    w += 5;
    w += put_dec(w, key);
    if (p->set) {
        *w++ = ' ';
        p->expect = ++c->seq;
        put_hex8(w, run_tag);
        put_hex8(w + 8, c->id);
        put_hex8(w + 16, c->seq);
        memcpy(w + HEAD, filler, o.value_bytes - HEAD);
        w += o.value_bytes;
        if (c->last)
            c->last[key] = c->seq;
    } else {
        p->expect = c->last ? c->last[key] : UNKNOWN;
    }
    *w++ = '\n';
    c->len = (size_t)(w - c->out);
}

/* Sends what c has queued; arms EPOLLOUT on a short send, disarms it once
 * all is out. False on an error (t failed). */
static bool flush(struct thread *t, struct conn *c)
{
    while (c->off < c->len) { /* bounded: each pass sends bytes or returns */
        ssize_t n = send(c->fd, c->out + c->off, c->len - c->off, MSG_NOSIGNAL);
        if (n > 0) {
            c->off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
            if (!c->want_out && epoll_ctl(t->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
                return tfail(t, "epoll_ctl: %s", strerror(errno));
            c->want_out = true;
            return true;
        } else {
            return tfail(t, "send: %s", n < 0 ? strerror(errno) : "sent nothing");
        }
    }
    c->off = c->len = 0;
    if (c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(t->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
            return tfail(t, "epoll_ctl: %s", strerror(errno));
        c->want_out = false;
    }
    return true;
}

/* Checks one reply line (without its LF) against c's oldest command. */
static bool check_reply(struct thread *t, struct conn *c, const char *line, size_t len)
{
    if (c->n == 0)
        return tfail(t, "connection %u: a reply to no command: \"%.60s\"", c->id, line);
    struct pending p = c->ring[c->head];
    c->head = (c->head + 1) % o.pipeline;
    c->n--;
    if (p.set) {
        if (len != 2 || memcmp(line, "OK", 2) != 0)
            return tfail(t, "connection %u: SET k%u got \"%.*s\"", c->id, p.key,
                         (int)(len < 60 ? len : 60), line);
        return true;
    }
    if (len == 9 && memcmp(line, "NOT_FOUND", 9) == 0) {
        if (p.expect != 0 && p.expect != UNKNOWN)
            return tfail(t, "connection %u: GET k%u: NOT_FOUND after its SET #%u", c->id, p.key,
                         p.expect);
        return true;
    }
    uint32_t tag, writer, seq;
    size_t vlen = len - 6; /* another run's values may have another length */
    if (len < 6 + HEAD || vlen > sizeof(filler) || memcmp(line, "VALUE ", 6) != 0 ||
        !get_hex8(line + 6, &tag) || !get_hex8(line + 14, &writer) ||
        !get_hex8(line + 22, &seq) ||
        (tag == run_tag && (vlen != o.value_bytes || writer >= o.clients || seq == 0)) ||
        memcmp(line + 6 + HEAD, filler, vlen - HEAD) != 0)
        return tfail(t, "connection %u: GET k%u got \"%.*s\"", c->id, p.key,
                     (int)(len < 70 ? len : 70), line);
    if (tag == run_tag && p.expect != UNKNOWN && writer == c->id && seq != p.expect)
        return tfail(t, "connection %u: GET k%u got its own SET #%u, not its last one (#%u)",
                     c->id, p.key, seq, p.expect);
    return true;
}

/* One readiness of c: one recv(), its whole replies checked, as many new
 * commands queued and sent. */
static bool on_readable(struct thread *t, struct conn *c)
{
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n <= 0)
        return tfail(t, "connection %u: %s", c->id,
                     n == 0 ? "the server closed it" : strerror(errno));
    c->in_len += (size_t)n;
    char *line = c->in, *end = c->in + c->in_len, *nl;
    unsigned got = 0;
    while ((nl = memchr(line, '\n', (size_t)(end - line)))) {
        if (!check_reply(t, c, line, (size_t)(nl - line)))
            return false;
        line = nl + 1;
        got++;
    }
    c->in_len = (size_t)(end - line);
    memmove(c->in, line, c->in_len);
    if (c->in_len == c->in_cap)
        return tfail(t, "connection %u: a reply over %zu bytes", c->id, c->in_cap);
    if (got == 0)
        return true;
    t->ready_own += c->replies == 0;
    c->replies += got;
    t->done_own += got;
    if (c->off > 0) { /* a short send left bytes: they go first */
        memmove(c->out, c->out + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    for (unsigned i = 0; i < got; i++)
        next_command(c);
    return flush(t, c);
}

static void *thread_main(void *arg)
{
    enum { MAXEV = 256 };
    struct thread *t = arg;
    struct epoll_event ev[MAXEV];

    for (unsigned i = 0; i < t->n; i++) {
        for (unsigned k = 0; k < o.pipeline; k++)
            next_command(&t->c[i]);
        if (!flush(t, &t->c[i]))
            return NULL;
    }
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int n = epoll_wait(t->ep, ev, MAXEV, 50);
        if (n < 0 && errno != EINTR) {
            tfail(t, "epoll_wait: %s", strerror(errno));
            return NULL;
        }
        for (int k = 0; k < n; k++) {
            struct conn *c = ev[k].data.ptr;
            if ((ev[k].events & EPOLLOUT) && !flush(t, c))
                return NULL;
            if ((ev[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !on_readable(t, c))
                return NULL;
        }
        atomic_store_explicit(&t->done, t->done_own, memory_order_relaxed);
        atomic_store_explicit(&t->ready, t->ready_own, memory_order_relaxed);
    }
    return NULL;
}

/* ---- Setting up ----------------------------------------------------------------------- */

/* Allocates connection i's buffers. False if out of memory. */
static bool conn_init(struct conn *c, uint32_t i, bool know)
{
    size_t reply_max = 6 + o.value_bytes + 2;
    c->fd = -1;
    c->id = i;
    c->rng = o.seed * 0x9e3779b97f4a7c15u + i + 1;
    c->in_cap = (size_t)o.pipeline * reply_max;
    c->in_cap = c->in_cap < 4096 ? 4096 : c->in_cap > 65536 ? 65536 : c->in_cap;
    c->in_cap = c->in_cap < 2 * reply_max ? 2 * reply_max : c->in_cap;
    c->ring = calloc(o.pipeline, sizeof(*c->ring));
    c->out = malloc((size_t)o.pipeline * cmd_max);
    c->in = malloc(c->in_cap);
    c->last = know ? calloc(o.keys, sizeof(uint32_t)) : NULL;
    return c->ring && c->out && c->in && (!know || c->last);
}

static void conn_free(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->ring);
    free(c->out);
    free(c->in);
    free(c->last);
}

/* Connects c to the server and adds it to ep. */
static bool conn_open(struct conn *c, int ep, char *why, size_t size)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
    struct timeval tv = {.tv_sec = 2}, zero = {0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* blocking, bounded by SO_SNDTIMEO (loopback completes it at once while the
     * backlog has room); then non-blocking */
    if (c->fd < 0 || setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof(zero)) != 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) != 0 ||
        set_nonblocking(c->fd) != 0 ||
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd,
                  &(struct epoll_event){.events = EPOLLIN, .data.ptr = c}) != 0) {
        snprintf(why, size, "connection %u to 127.0.0.1:%u: %s%s", c->id, o.port,
                 strerror(errno), errno == EMFILE ? " (raise ulimit -n)" : "");
        return false;
    }
    return true;
}

/* ---- Measuring -------------------------------------------------------------------------- */

static struct thread threads[MAX_THREADS];

static uint64_t replies_so_far(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < o.threads; i++)
        n += atomic_load_explicit(&threads[i].done, memory_order_relaxed);
    return n;
}

static unsigned ready_so_far(void)
{
    unsigned n = 0;
    for (unsigned i = 0; i < o.threads; i++)
        n += atomic_load_explicit(&threads[i].ready, memory_order_relaxed);
    return n;
}

/* Watches the threads in 10 ms sleeps until `until` (or, ramp, until every
 * connection had a reply). False, why set, on a thread's failure, a stall
 * (no reply for 2 s) or a ramp that did not end in time. */
static bool watch(uint64_t until, bool ramp, char *why, size_t size)
{
    static uint64_t last, progress_at;
    for (uint64_t now = now_ns(); now < until; now = now_ns()) { /* bounded by until */
        for (unsigned i = 0; i < o.threads; i++)
            if (atomic_load_explicit(&threads[i].failed, memory_order_acquire)) {
                snprintf(why, size, "%s", threads[i].why);
                return false;
            }
        uint64_t d = replies_so_far();
        if (d != last || progress_at == 0) {
            last = d;
            progress_at = now;
        } else if (now - progress_at > STALL_LIMIT_NS) {
            snprintf(why, size, "no reply for 2 s (%" PRIu64 " so far)", d);
            return false;
        }
        if (ramp && ready_so_far() == o.clients)
            return true;
        sleep_us(10000);
    }
    if (ramp)
        snprintf(why, size, "after 10 s, %u of %u connections had no reply yet",
                 o.clients - ready_so_far(), o.clients);
    return !ramp;
}

/* A /proc/stat probe whose "self" includes the server, so that "others" is
 * what neither this client nor the server used. */
static struct bench_probe probe(void)
{
    struct bench_probe p = bench_probe_now();
    double srv = o.server_pid > 0 ? proc_cpu_s(o.server_pid) : -1;
    p.self_s += srv > 0 ? srv : 0;
    return p;
}

static int run_load(void)
{
    struct bench_machine mc;
    char why[256] = "", load[64] = "";
    unsigned started = 0;
    int rc = 1;
    bool know = (uint64_t)o.clients * o.keys <= MAX_KNOWN;

    bench_machine_get(&mc, stdout);
    printf("kv_load: 127.0.0.1:%u, %u connections on %u thread(s), %u command(s) in flight "
           "each, %u keys, %.0f%% SET, %u-byte values; %.1f s warm-up, %.1f s measured; GETs "
           "checked %s\n",
           o.port, o.clients, o.threads, o.pipeline, o.keys, o.set_ratio * 100, o.value_bytes,
           o.warmup, o.seconds, know ? "against what each connection wrote" : "for form only");
    for (unsigned i = 0; i < sizeof(filler); i++)
        filler[i] = (char)('a' + i % 26);
    run_tag = (uint32_t)(now_ns() ^ (uint64_t)getpid() << 20);
    set_threshold = (uint32_t)(o.set_ratio * (1u << 24));
    cmd_max = 5 + 10 + 1 + o.value_bytes + 1;
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(o.clients + 64);

    struct conn *conns = calloc(o.clients, sizeof(*conns));
    for (unsigned t = 0; t < MAX_THREADS; t++)
        threads[t].ep = -1;
    for (unsigned i = 0; conns && i < o.clients; i++)
        conns[i].fd = -1;
    for (unsigned i = 0; conns && i < o.clients; i++)
        if (!conn_init(&conns[i], i, know))
            break;
    if (!conns || !conns[o.clients - 1].ring) {
        snprintf(why, sizeof(why), "out of memory");
        goto out;
    }
    /* Thread t serves a contiguous slice of the connections. */
    unsigned per = (o.clients + o.threads - 1) / o.threads;
    uint64_t limit = now_ns() + CONNECT_LIMIT_NS;
    for (unsigned t = 0; t < o.threads; t++) {
        unsigned first = t * per < o.clients ? t * per : o.clients;
        threads[t].c = conns + first;
        threads[t].n = o.clients - first < per ? o.clients - first : per;
        threads[t].ep = epoll_create1(EPOLL_CLOEXEC);
        if (threads[t].ep < 0) {
            snprintf(why, sizeof(why), "epoll_create1: %s", strerror(errno));
            goto out;
        }
        for (unsigned i = 0; i < threads[t].n; i++)
            if (!conn_open(&threads[t].c[i], threads[t].ep, why, sizeof(why)))
                goto out;
        if (now_ns() > limit) {
            snprintf(why, sizeof(why), "connecting took over 5 s");
            goto out;
        }
    }
    uint64_t t_ramp = now_ns();
    for (; started < o.threads; started++)
        if (pthread_create(&threads[started].th, NULL, thread_main, &threads[started]) != 0) {
            snprintf(why, sizeof(why), "pthread_create failed");
            goto out;
        }
    if (!watch(t_ramp + RAMP_LIMIT_NS, true, why, sizeof(why)))
        goto out;
    double ramp_ms = (double)(now_ns() - t_ramp) / 1e6;
    if (!watch(now_ns() + (uint64_t)(o.warmup * 1e9), false, why, sizeof(why)))
        goto out;

    struct bench_probe p0 = probe();
    uint64_t t0 = now_ns(), d0 = replies_so_far();
    double srv0 = o.server_pid > 0 ? proc_cpu_s(o.server_pid) : -1, cli0 = cpu_s(RUSAGE_SELF);
    if (!watch(t0 + (uint64_t)(o.seconds * 1e9), false, why, sizeof(why)))
        goto out;
    uint64_t t1 = now_ns(), d1 = replies_so_far();
    double srv1 = o.server_pid > 0 ? proc_cpu_s(o.server_pid) : -1, cli1 = cpu_s(RUSAGE_SELF);
    struct bench_probe p1 = probe();

    double secs = (double)(t1 - t0) / 1e9, n = (double)(d1 - d0);
    double srv = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1, cli = cli1 - cli0;
    double others = -1, steal = -1; /* unknown: a window under 0.5 s, or no /proc/stat */
    bench_load_note(&b, &p0, &p1, load, sizeof(load));
    if (load[0])
        sscanf(load, ", others %lf%%, steal %lf%%", &others, &steal);
    if (d1 == d0) {
        snprintf(why, sizeof(why), "no reply in the window");
        goto out;
    }
    char srvtxt[80] = "server CPU unknown (no --server-pid)";
    if (srv >= 0)
        snprintf(srvtxt, sizeof(srvtxt), "server CPU %.2f us/req (%.2f cores)", srv * 1e6 / n,
                 srv / secs);
    printf("kv_load: %.0f requests in %.2f s: %.0f req/s; %s; client CPU %.2f us/req (%.2f "
           "cores); ramp %.0f ms%s\n",
           n, secs, n / secs, srvtxt, cli * 1e6 / n, cli / secs, ramp_ms, load);
    printf("kv_load: rps=%.0f requests=%.0f seconds=%.3f server_us=%.3f client_us=%.3f "
           "server_cores=%.3f client_cores=%.3f others_pct=%.0f steal_pct=%.0f errors=0\n",
           n / secs, n, secs, srv >= 0 ? srv * 1e6 / n : -1, cli * 1e6 / n,
           srv >= 0 ? srv / secs : -1, cli / secs, others, steal);
    rc = 0;
out:
    atomic_store(&stop, true);
    for (unsigned t = 0; t < started; t++)
        pthread_join(threads[t].th, NULL);
    if (rc != 0) {
        for (unsigned t = 0; t < o.threads && !why[0]; t++)
            if (atomic_load(&threads[t].failed))
                snprintf(why, sizeof(why), "%s", threads[t].why);
        printf("kv_load: FAIL: %s\nkv_load: errors=1\n", why);
    }
    for (unsigned i = 0; conns && i < o.clients; i++)
        conn_free(&conns[i]);
    free(conns);
    for (unsigned t = 0; t < o.threads; t++)
        if (threads[t].ep >= 0)
            close(threads[t].ep);
    return rc;
}

/* ---- The floor ------------------------------------------------------------------------ */

/* A connected loopback TCP pair (TCP_NODELAY, blocking): fd[0] writes, fd[1]
 * reads. False if it cannot be made. */
static bool loopback_pair(int fd[2])
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t alen = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fd[0] = fd[1] = -1;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &alen) != 0 ||
        (fd[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        connect(fd[0], (struct sockaddr *)&a, sizeof(a)) != 0 ||
        (fd[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0 ||
        setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) != 0) {
        if (l >= 0)
            close(l);
        return false;
    }
    close(l);
    return true;
}

static int run_floor(void)
{
    char msg[32], buf[32];
    double ns[FLOOR_RUNS], cpu[FLOOR_RUNS];
    int fd[2];
    unsigned per = o.floor_pairs / FLOOR_RUNS;

    memset(msg, 'f', sizeof(msg));
    if (!loopback_pair(fd)) {
        printf("kv_load: FAIL: floor: cannot connect over loopback: %s\nkv_load: errors=1\n",
               strerror(errno));
        return 1;
    }
    for (unsigned r = 0; r < FLOOR_RUNS; r++) {
        uint64_t t0 = now_ns();
        double c0 = cpu_s(RUSAGE_THREAD);
        for (unsigned i = 0; i < per; i++) {
            size_t got = 0;
            if (write(fd[0], msg, sizeof(msg)) != (ssize_t)sizeof(msg))
                goto failed;
            while (got < sizeof(buf)) { /* bounded: one read, in practice */
                ssize_t n = read(fd[1], buf + got, sizeof(buf) - got);
                if (n <= 0)
                    goto failed;
                got += (size_t)n;
            }
        }
        ns[r] = (double)(now_ns() - t0) / per;
        cpu[r] = (cpu_s(RUSAGE_THREAD) - c0) * 1e9 / per;
    }
    close(fd[0]);
    close(fd[1]);
    double m = median(ns, FLOOR_RUNS), mc = median(cpu, FLOOR_RUNS);
    printf("kv_load: floor: a loopback TCP write()+read() pair of 32 bytes, one thread: %.0f ns "
           "(CPU %.0f ns; median of %d runs of %u): a request that travels alone costs 2 pairs, "
           "%.2f us of CPU for client and server together\n",
           m, mc, FLOOR_RUNS, per, 2 * m / 1000);
    printf("kv_load: floor_ns_per_pair=%.0f\n", m);
    return 0;
failed:
    printf("kv_load: FAIL: floor: %s\nkv_load: errors=1\n", strerror(errno));
    close(fd[0]);
    close(fd[1]);
    return 1;
}

int main(int argc, char **argv)
{
    int rc = bench_options("kv_load --port P [--server-pid PID] [options] | kv_load --floor",
                           options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    return o.floor ? run_floor() : run_load();
}
