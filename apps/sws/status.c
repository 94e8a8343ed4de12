/* SPDX-License-Identifier: MIT */
/*
 * status.c: the status page (/server-status by default), plain text or JSON
 * (?format=json): requests, connections and, per worker, SWS's request counts
 * next to the runtime's statistics (events run, steals, events and cycles
 * stolen, polls, stalls: handlers past MELY_STALL_MS of CPU time; colors
 * placed on it now, its connections under --placement load). Also
 * who may see it: by default only loopback peers, since it tells anyone who
 * asks how loaded the server is; everyone else gets the file of that name,
 * if the root has one, or 404.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "apps/sws/http.h"
#include "apps/sws/sws.h"

struct buf {
    char *p;
    size_t len, cap;
    bool failed;
};

__attribute__((format(printf, 2, 3))) static void put(struct buf *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static unsigned long long ld(atomic_uint_fast64_t *v)
{
    return (unsigned long long)atomic_load_explicit(v, memory_order_relaxed);
}

/* The counters the summary prints. Each is read on its own: the status is a
 * sample taken while workers run, not a consistent snapshot. */
struct summary {
    double up; /* seconds since start */
    unsigned long long total, errors, bytes; /* summed over the workers */
    unsigned waiting, current;
    bool held;
    unsigned long long pauses, exhausted, accepted, refused, timeouts, closed;
    unsigned long long stalls; /* the runtime's, summed over the workers */
};

static void read_summary(struct sws *s, struct summary *m)
{
    m->total = m->errors = m->bytes = m->stalls = 0;
    for (unsigned w = 0; w < s->workers; w++) {
        mely_stats_t st;
        if (mely_worker_stats(&s->rt, w, &st) == 0)
            m->stalls += st.stalls;
        m->total += ld(&s->ws[w].requests);
        m->errors += ld(&s->ws[w].errors);
        m->bytes += ld(&s->ws[w].bytes);
    }
    m->up = (double)(mely_now_ns() - s->started_ns) / 1e9;
    pthread_mutex_lock(&s->wait_mu);
    m->waiting = s->waiting;
    m->held = s->held;
    /* The drain closes the listener under wait_mu, keeping its count. */
    m->exhausted = s->listener ? mely_listener_pauses(s->listener) : s->listener_pauses;
    pthread_mutex_unlock(&s->wait_mu);
    m->pauses = ld(&s->cap_pauses);
    m->accepted = ld(&s->accepted);
    m->refused = ld(&s->refused);
    m->timeouts = ld(&s->timeouts);
    m->closed = ld(&s->closed);
    m->current = atomic_load(&s->clients);
}

/* The server-wide part; the text form ends with the per-worker table's
 * header, the JSON form opens the per_worker array. */
static void put_summary(struct buf *b, const struct sws *s, const struct summary *m, bool json)
{
    const char *steal = s->cfg.steal ? s->cfg.steal : "off";
    const char *engine = s->cfg.engine ? s->cfg.engine : "mely";
    const char *placement = s->pool ? "load" : "fd";

    if (json)
        put(b,
            "{\"uptime_s\":%.3f,\"workers\":%u,\"engine\":\"%s\",\"steal\":\"%s\",\"placement\":\"%s\",\"files\":%zu,"
            "\"requests\":%llu,\"errors\":%llu,\"bytes_out\":%llu,\"stalls\":%llu,\"connections\":{\"current\":%u,"
            "\"waiting\":%u,\"max\":%u,\"accepted\":%llu,\"closed\":%llu,\"refused\":%llu,"
            "\"timeouts\":%llu,\"accepting\":%s,\"cap_pauses\":%llu,\"exhaustion_pauses\":%llu},"
            "\"per_worker\":[",
            m->up, s->workers, engine, steal, placement, s->cache.n, m->total, m->errors, m->bytes,
            m->stalls, m->current, m->waiting, s->cfg.max_clients, m->accepted, m->closed, m->refused,
            m->timeouts, m->held ? "false" : "true", m->pauses, m->exhausted);
    else
        put(b,
            "SWS server status\nuptime_s: %.3f\nworkers: %u\nengine: %s\nsteal: %s\nplacement: %s\nfiles: %zu\n"
            "requests: %llu\nerrors: %llu\nbytes_out: %llu\nstalls: %llu\nconnections_current: %u\n"
            "connections_waiting: %u\nconnections_max: %u\nconnections_accepted: %llu\n"
            "connections_closed: %llu\nconnections_refused: %llu\ntimeouts: %llu\n"
            "accepting: %s\ncap_pauses: %llu\nexhaustion_pauses: %llu\n"
            "worker  requests  events  steals  stolen_events  stolen_cycles  steal_cycles  polls  io_ready  stalls  placed\n",
            m->up, s->workers, engine, steal, placement, s->cache.n, m->total, m->errors, m->bytes,
            m->stalls, m->current, m->waiting, s->cfg.max_clients, m->accepted, m->closed, m->refused,
            m->timeouts, m->held ? "no" : "yes", m->pauses, m->exhausted);
}

/* Worker w's row: SWS's request count beside the runtime's statistics
 * (zeros if the runtime cannot give them). */
static void put_worker(struct buf *b, struct sws *s, unsigned w, bool json)
{
    mely_stats_t st;

    if (mely_worker_stats(&s->rt, w, &st) != 0)
        memset(&st, 0, sizeof(st));
    if (json)
        put(b,
            "%s{\"worker\":%u,\"requests\":%llu,\"events\":%llu,\"steals\":%llu,"
            "\"stolen_events\":%llu,\"stolen_cycles\":%llu,\"steal_cycles\":%llu,"
            "\"polls\":%llu,\"io_ready\":%llu,\"stalls\":%llu,\"placed\":%llu}",
            w ? "," : "", w, ld(&s->ws[w].requests), (unsigned long long)st.events_run,
            (unsigned long long)st.steals, (unsigned long long)st.stolen_events,
            (unsigned long long)st.stolen_cycles, (unsigned long long)st.steal_cycles,
            (unsigned long long)st.polls, (unsigned long long)st.io_ready,
            (unsigned long long)st.stalls, (unsigned long long)st.placed_now);
    else
        put(b, "%u %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n", w, ld(&s->ws[w].requests),
            (unsigned long long)st.events_run, (unsigned long long)st.steals,
            (unsigned long long)st.stolen_events, (unsigned long long)st.stolen_cycles,
            (unsigned long long)st.steal_cycles, (unsigned long long)st.polls,
            (unsigned long long)st.io_ready, (unsigned long long)st.stalls,
            (unsigned long long)st.placed_now);
}

/* The response around `body`: the head, a NUL where it ends, then the body
 * (conn.c sends the two parts as they are). Frees the body; NULL if out of
 * memory. */
static char *with_head(struct buf *body, bool json, size_t *len)
{
    struct buf out = { .cap = body->len + 256 };

    out.p = malloc(out.cap);
    if (!out.p) {
        free(body->p);
        return NULL;
    }
    put(&out,
        "HTTP/1.1 200 OK\r\nServer: sws\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
        "Cache-Control: no-store\r\n",
        json ? "application/json" : "text/plain; charset=utf-8", body->len);
    if (!out.failed && out.cap - out.len < body->len + 1) {
        char *p = realloc(out.p, out.len + body->len + 1);
        if (!p)
            out.failed = true;
        else
            out.p = p;
    }
    if (out.failed) {
        free(out.p);
        free(body->p);
        return NULL;
    }
    out.p[out.len] = '\0'; /* the head ends here */
    memcpy(out.p + out.len + 1, body->p, body->len);
    *len = out.len + 1 + body->len;
    free(body->p);
    return out.p;
}

char *sws_status(struct sws *s, bool json, size_t *len)
{
    struct buf body = { .cap = 1024 };
    struct summary m;

    body.p = malloc(body.cap);
    if (!body.p)
        return NULL;
    read_summary(s, &m);
    put_summary(&body, s, &m, json);
    for (unsigned w = 0; w < s->workers; w++)
        put_worker(&body, s, w, json);
    if (json)
        put(&body, "]}\n");
    if (body.failed) {
        free(body.p);
        return NULL;
    }
    return with_head(&body, json, len);
}

/* ---- where the page is, and who sees it ---------------------------------------- */

/* Whether a request's decoded path can ever equal p: absolute, no query or
 * fragment, no "." or ".." segment (http.c refuses those). */
static bool reachable(const char *p)
{
    if (p[0] != '/' || strlen(p) > HTTP_MAX_PATH || strpbrk(p, "?#"))
        return false;
    for (const char *seg = p; *seg;) {
        while (*seg == '/')
            seg++;
        size_t n = strcspn(seg, "/");
        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return false;
        seg += n;
    }
    return true;
}

/* One stat at start-up: the file cache may load lazily, and this is only a
 * hint to whoever reads the log. */
static void warn_shadowed(const struct sws *s)
{
    char p[4096];
    struct stat st;
    if (!s->cfg.root ||
        snprintf(p, sizeof(p), "%s%s", s->cfg.root, s->status_path) >= (int)sizeof(p) ||
        stat(p, &st) != 0)
        return;
    fprintf(stderr,
            "sws: warning: %s exists; %s answers with the status page to %s, "
            "so they never get that file (--status-path moves the page)\n",
            p, s->status_path, s->cfg.status_public ? "every client" : "loopback clients");
}

int sws_status_setup(struct sws *s, char *err, size_t errlen)
{
    const char *p = s->cfg.status_path ? s->cfg.status_path : "/server-status";
    s->status_path = NULL;
    s->status_len = 0;
    if (strcmp(p, "off") == 0)
        return 0;
    if (!reachable(p)) {
        snprintf(err, errlen,
                 "status path \"%s\": expected an absolute path without a query and "
                 "without . or .. segments (or off)", p);
        return -1;
    }
    s->status_path = p;
    s->status_len = strlen(p);
    warn_shadowed(s);
    return 0;
}

bool sws_peer_loopback(const struct sockaddr *peer, unsigned peerlen)
{
    if (!peer)
        return false;
    if (peer->sa_family == AF_INET && peerlen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)peer;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (peer->sa_family == AF_INET6 && peerlen >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)peer)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

bool sws_status_allowed(const struct sws *s, const struct sockaddr *peer, unsigned peerlen)
{
    return s->status_path && (s->cfg.status_public || sws_peer_loopback(peer, peerlen));
}
