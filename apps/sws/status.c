/*
 * status.c: /server-status, plain text or JSON (?format=json): requests,
 * connections and, per worker, SWS's request counts next to the runtime's
 * statistics (events run, steals, events and cycles stolen, polls).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

char *sws_status(struct sws *s, bool json, size_t *len)
{
    struct buf body = { .cap = 1024 };
    body.p = malloc(body.cap);
    if (!body.p)
        return NULL;
    unsigned long long total = 0, errors = 0, bytes = 0;
    for (unsigned w = 0; w < s->workers; w++) {
        total += ld(&s->ws[w].requests);
        errors += ld(&s->ws[w].errors);
        bytes += ld(&s->ws[w].bytes);
    }
    double up = (double)(mely_now_ns() - s->started_ns) / 1e9;
    pthread_mutex_lock(&s->wait_mu);
    unsigned waiting = s->waiting;
    bool held = s->held;
    pthread_mutex_unlock(&s->wait_mu);
    unsigned long long pauses = ld(&s->cap_pauses);
    unsigned long long accepted = ld(&s->accepted), refused = ld(&s->refused),
                       timeouts = ld(&s->timeouts), closed = ld(&s->closed);
    unsigned current = atomic_load(&s->clients);
    const char *steal = s->cfg.steal ? s->cfg.steal : "off";
    const char *engine = s->cfg.engine ? s->cfg.engine : "mely";
    if (json)
        put(&body,
            "{\"uptime_s\":%.3f,\"workers\":%u,\"engine\":\"%s\",\"steal\":\"%s\",\"files\":%zu,"
            "\"requests\":%llu,\"errors\":%llu,\"bytes_out\":%llu,\"connections\":{\"current\":%u,"
            "\"waiting\":%u,\"max\":%u,\"accepted\":%llu,\"closed\":%llu,\"refused\":%llu,"
            "\"timeouts\":%llu,\"accepting\":%s,\"cap_pauses\":%llu},\"per_worker\":[",
            up, s->workers, engine, steal, s->cache.n, total, errors, bytes, current, waiting,
            s->cfg.max_clients, accepted, closed, refused, timeouts, held ? "false" : "true",
            pauses);
    else
        put(&body,
            "SWS server status\nuptime_s: %.3f\nworkers: %u\nengine: %s\nsteal: %s\nfiles: %zu\n"
            "requests: %llu\nerrors: %llu\nbytes_out: %llu\nconnections_current: %u\n"
            "connections_waiting: %u\nconnections_max: %u\nconnections_accepted: %llu\n"
            "connections_closed: %llu\nconnections_refused: %llu\ntimeouts: %llu\n"
            "accepting: %s\ncap_pauses: %llu\n"
            "worker  requests  events  steals  stolen_events  stolen_cycles  steal_cycles  polls  io_ready\n",
            up, s->workers, engine, steal, s->cache.n, total, errors, bytes, current, waiting,
            s->cfg.max_clients, accepted, closed, refused, timeouts, held ? "no" : "yes", pauses);
    for (unsigned w = 0; w < s->workers; w++) {
        mely_stats_t st;
        if (mely_worker_stats(&s->rt, w, &st) != 0)
            memset(&st, 0, sizeof(st));
        if (json)
            put(&body,
                "%s{\"worker\":%u,\"requests\":%llu,\"events\":%llu,\"steals\":%llu,"
                "\"stolen_events\":%llu,\"stolen_cycles\":%llu,\"steal_cycles\":%llu,"
                "\"polls\":%llu,\"io_ready\":%llu}",
                w ? "," : "", w, ld(&s->ws[w].requests), (unsigned long long)st.events_run,
                (unsigned long long)st.steals, (unsigned long long)st.stolen_events,
                (unsigned long long)st.stolen_cycles, (unsigned long long)st.steal_cycles,
                (unsigned long long)st.polls, (unsigned long long)st.io_ready);
        else
            put(&body, "%u %llu %llu %llu %llu %llu %llu %llu %llu\n", w, ld(&s->ws[w].requests),
                (unsigned long long)st.events_run, (unsigned long long)st.steals,
                (unsigned long long)st.stolen_events, (unsigned long long)st.stolen_cycles,
                (unsigned long long)st.steal_cycles, (unsigned long long)st.polls,
                (unsigned long long)st.io_ready);
    }
    if (json)
        put(&body, "]}\n");
    if (body.failed) {
        free(body.p);
        return NULL;
    }
    struct buf out = { .cap = body.len + 256 };
    out.p = malloc(out.cap);
    if (!out.p) {
        free(body.p);
        return NULL;
    }
    put(&out,
        "HTTP/1.1 200 OK\r\nServer: sws\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
        "Cache-Control: no-store\r\n",
        json ? "application/json" : "text/plain; charset=utf-8", body.len);
    if (!out.failed && out.cap - out.len < body.len + 1) {
        char *p = realloc(out.p, out.len + body.len + 1);
        if (!p)
            out.failed = true;
        else
            out.p = p;
    }
    if (out.failed) {
        free(out.p);
        free(body.p);
        return NULL;
    }
    out.p[out.len] = '\0'; /* the head ends here */
    memcpy(out.p + out.len + 1, body.p, body.len);
    *len = out.len + 1 + body.len;
    free(body.p);
    return out.p;
}
