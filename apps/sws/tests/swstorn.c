/* SPDX-License-Identifier: MIT */
/*
 * swstorn.c: the client of apps/sws/tests/sws-torn.sh (issue 26): a small file
 * rewritten in place under SWS while clients fetch it, counting the
 * responses that are torn.
 *
 *   swstorn --port P --file PATH [--url /t.bin] [--seconds S] [--clients N]
 *           [--period-ms MS] [--burst K --quiet-ms Q] [--size BYTES]
 *           [--settle-ms MS]
 *
 * A writer thread rewrites PATH (served as URL) every MS (30) with one
 * pwrite of the whole file, BYTES (8192) long, turn by turn version A (every
 * byte 'a') and version B ('b'): a read that overlaps a write may take some
 * bytes of each. With --burst, it writes K times, then is quiet for Q ms
 * (long enough for the file to settle: SWS then caches it), and so on. N
 * (4) client threads fetch URL on keep-alive connections to
 * 127.0.0.1:P for S seconds (every fourth request with If-None-Match: the
 * last ETag the thread got). A response is:
 *   - torn: a body that is neither A nor B (or of another length);
 *   - mismatched: its ETag came before with the other version's body (an
 *     ETag must name one version: clients revalidate their copy with it);
 *   - tagged: with an ETag (SWS's cached entry);
 *   - fresh: without ETag (a file that had not settled), which must then say
 *     Cache-Control: no-store;
 *   - not modified: a 304 (the thread's copy, checked when it came).
 * Then the writer stops; after the settle period (--settle-ms, SWS's
 * --cache-settle-ms) and 200 ms, one more GET must carry an ETag and the
 * version last written, and a GET with that ETag must get 304.
 *
 * Prints one line, "responses R torn T mismatched M tagged G fresh F
 * not_modified N errors E writes W", and exits 0 if T, M and E are 0 (1
 * otherwise, 2 for a usage error). The first few torn bodies are described
 * on stderr.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static struct {
    unsigned port, clients, period_ms, settle_ms, burst, quiet_ms;
    double seconds;
    size_t size;
    const char *file, *url;
} opt = { .clients = 4, .period_ms = 30, .settle_ms = 1000, .seconds = 5, .size = 8192, .url = "/t.bin" };

static char *version[2]; /* A, B */

static void sleep_us(uint64_t us)
{
    struct timespec ts = { .tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
static atomic_bool stop_clients, stop_writer;
static atomic_uint_fast64_t responses, torn, mismatched, tagged, fresh, not_modified, errors, writes;
static atomic_uint last_written; /* 0: A, 1: B */

/* ---- which version an ETag was served with --------------------------------------- */

/* Open addressing over ETags (at most one per write: 34 a second, so 4096
 * slots hold two minutes of writes; beyond, new tags are not recorded). */
#define TAGS 4096
struct tag {
    char tag[80]; /* "" : a free slot */
    int version;
};
static struct tag tags[TAGS];
static pthread_mutex_t tags_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t tag_hash(const char *t)
{
    uint64_t h = 1469598103934665603ull;
    for (; *t; t++)
        h = (h ^ (unsigned char)*t) * 1099511628211ull;
    return h;
}

/* Records that tag came with version v; returns false if it came before with
 * the other one. */
static bool tag_seen(const char *tag, int v)
{
    bool ok = true;
    pthread_mutex_lock(&tags_mu);
    for (uint64_t i = tag_hash(tag), n = 0; n < TAGS; i++, n++) {
        struct tag *s = &tags[i % TAGS];
        if (!s->tag[0]) {
            snprintf(s->tag, sizeof(s->tag), "%s", tag);
            s->version = v;
            break;
        }
        if (strcmp(s->tag, tag) == 0) {
            ok = s->version == v;
            break;
        }
    }
    pthread_mutex_unlock(&tags_mu);
    return ok;
}

/* ---- a keep-alive HTTP client ------------------------------------------------------------ */

struct conn {
    int fd;
    char buf[65536];
    size_t len;
};

static bool conn_open(struct conn *c)
{
    c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return false; /* (c->fd is -1) */
    struct timeval tv = { .tv_sec = 10 };
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(c->fd);
        c->fd = -1;
        return false;
    }
    return true;
}

struct resp {
    int status;
    char etag[80];
    bool has_etag, no_store;
    const char *body;
    size_t body_len;
};

/* The value of header name in head[0..n) into out, or false. */
static bool header(const char *head, size_t n, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    for (const char *p = head; p < head + n;) {
        const char *eol = memmem(p, (size_t)(head + n - p), "\r\n", 2);
        if (!eol)
            break;
        if ((size_t)(eol - p) > nl + 1 && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (v < eol && *v == ' ')
                v++;
            snprintf(out, outlen, "%.*s", (int)(eol - v), v);
            return true;
        }
        p = eol + 2;
    }
    return false;
}

/* Sends a GET (with If-None-Match inm if not NULL) and reads its response;
 * r->body points into c->buf until consume(). */
static bool fetch(struct conn *c, const char *inm, struct resp *r)
{
    char q[256];
    int ql = inm ? snprintf(q, sizeof(q), "GET %s HTTP/1.1\r\nHost: t\r\nIf-None-Match: %s\r\n\r\n",
                            opt.url, inm)
                 : snprintf(q, sizeof(q), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", opt.url);
    if (write(c->fd, q, (size_t)ql) != ql)
        return false;
    char *end;
    while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4))) {
        if (c->len == sizeof(c->buf))
            return false;
        ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        if (n <= 0)
            return false;
        c->len += (size_t)n;
    }
    size_t head = (size_t)(end - c->buf) + 4;
    char v[80];
    *r = (struct resp){ .status = atoi(c->buf + 9) };
    size_t cl = header(c->buf, head, "Content-Length", v, sizeof(v)) ? strtoul(v, NULL, 10) : 0;
    if (r->status == 304)
        cl = 0;
    r->has_etag = header(c->buf, head, "ETag", r->etag, sizeof(r->etag));
    r->no_store = header(c->buf, head, "Cache-Control", v, sizeof(v)) && strcmp(v, "no-store") == 0;
    if (head + cl > sizeof(c->buf))
        return false;
    while (c->len < head + cl) {
        ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        if (n <= 0)
            return false;
        c->len += (size_t)n;
    }
    r->body = c->buf + head; /* consume() drops head and body */
    r->body_len = cl;
    return true;
}

/* Drops the response just read (its head and body) from c->buf. */
static void consume(struct conn *c, const struct resp *r)
{
    size_t used = (size_t)(r->body - c->buf) + r->body_len;
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
}

/* 0: A, 1: B, -1: neither. */
static int which(const char *body, size_t n)
{
    if (n != opt.size)
        return -1;
    for (int v = 0; v < 2; v++)
        if (memcmp(body, version[v], n) == 0)
            return v;
    return -1;
}

static void *client(void *arg)
{
    (void)arg;
    struct conn *c = malloc(sizeof(*c));
    if (!c || !conn_open(c)) {
        atomic_fetch_add(&errors, 1);
        free(c);
        return NULL;
    }
    char last[80] = "";
    for (unsigned i = 0; !atomic_load(&stop_clients); i++) {
        struct resp r;
        bool inm = last[0] && i % 4 == 3;
        if (!fetch(c, inm ? last : NULL, &r)) {
            atomic_fetch_add(&errors, 1);
            break;
        }
        atomic_fetch_add(&responses, 1);
        if (r.status == 304 && inm) {
            atomic_fetch_add(&not_modified, 1);
        } else if (r.status != 200) {
            atomic_fetch_add(&errors, 1);
        } else {
            int v = which(r.body, r.body_len);
            if (v < 0 && atomic_fetch_add(&torn, 1) < 5) { /* say what the first ones were */
                size_t first_b = 0;
                while (first_b < r.body_len && r.body[first_b] == r.body[0])
                    first_b++;
                fprintf(stderr, "swstorn: torn: %zu bytes, '%c' up to %zu then '%c', %s\n", r.body_len,
                        r.body_len ? r.body[0] : '-', first_b,
                        first_b < r.body_len ? r.body[first_b] : '-', r.has_etag ? r.etag : "no ETag");
            }
            if (r.has_etag) {
                atomic_fetch_add(&tagged, 1);
                if (v >= 0 && !tag_seen(r.etag, v))
                    atomic_fetch_add(&mismatched, 1);
                snprintf(last, sizeof(last), "%s", r.etag);
            } else {
                atomic_fetch_add(&fresh, 1);
                if (!r.no_store)
                    atomic_fetch_add(&errors, 1); /* a fresh body must not be stored */
            }
        }
        consume(c, &r);
    }
    close(c->fd);
    free(c);
    return NULL;
}

static void *writer(void *arg)
{
    (void)arg;
    int fd = open(opt.file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "swstorn: %s: %s\n", opt.file, strerror(errno));
        atomic_fetch_add(&errors, 1);
        return NULL;
    }
    for (unsigned v = 1, n = 0; !atomic_load(&stop_writer); v ^= 1) {
        sleep_us((uint64_t)opt.period_ms * 1000);
        if (pwrite(fd, version[v], opt.size, 0) != (ssize_t)opt.size) { /* one write, in place */
            atomic_fetch_add(&errors, 1);
            break;
        }
        atomic_store(&last_written, v);
        atomic_fetch_add(&writes, 1);
        if (opt.burst && ++n % opt.burst == 0)
            sleep_us((uint64_t)opt.quiet_ms * 1000); /* the file settles */
    }
    close(fd);
    return NULL;
}

/* Once quiet and settled: the last version with an ETag, and 304 for it. */
static bool settled_check(void)
{
    sleep_us(((uint64_t)opt.settle_ms + 200) * 1000);
    struct conn *c = malloc(sizeof(*c));
    struct resp r;
    bool ok = c && conn_open(c);
    if (c && !ok)
        c->fd = -1;
    if (ok && (ok = fetch(c, NULL, &r))) {
        int v = which(r.body, r.body_len);
        char tag[80];
        snprintf(tag, sizeof(tag), "%s", r.etag);
        ok = r.status == 200 && v == (int)atomic_load(&last_written) && r.has_etag;
        if (!ok)
            fprintf(stderr, "swstorn: settled: status %d, version %d (last written %u), %s\n", r.status, v,
                    atomic_load(&last_written), r.has_etag ? r.etag : "no ETag");
        consume(c, &r);
        if (ok && (ok = fetch(c, tag, &r)) && !(ok = r.status == 304))
            fprintf(stderr, "swstorn: settled: If-None-Match %s: status %d\n", tag, r.status);
    }
    if (c && c->fd >= 0)
        close(c->fd);
    free(c);
    return ok;
}

static int usage(void)
{
    fprintf(stderr, "usage: swstorn --port P --file PATH [--url /t.bin] [--seconds S] [--clients N]\n"
                    "               [--period-ms MS] [--burst K --quiet-ms Q] [--size BYTES]\n"
                    "               [--settle-ms MS]\n");
    return 2;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        if (strcmp(a, "--port") == 0)
            opt.port = (unsigned)atoi(v);
        else if (strcmp(a, "--file") == 0)
            opt.file = v;
        else if (strcmp(a, "--url") == 0)
            opt.url = v;
        else if (strcmp(a, "--seconds") == 0)
            opt.seconds = atof(v);
        else if (strcmp(a, "--clients") == 0)
            opt.clients = (unsigned)atoi(v);
        else if (strcmp(a, "--period-ms") == 0)
            opt.period_ms = (unsigned)atoi(v);
        else if (strcmp(a, "--size") == 0)
            opt.size = strtoul(v, NULL, 10);
        else if (strcmp(a, "--burst") == 0)
            opt.burst = (unsigned)atoi(v);
        else if (strcmp(a, "--quiet-ms") == 0)
            opt.quiet_ms = (unsigned)atoi(v);
        else if (strcmp(a, "--settle-ms") == 0)
            opt.settle_ms = (unsigned)atoi(v);
        else
            return usage();
        i++;
    }
    if (!opt.port || !opt.file || opt.seconds <= 0 || !opt.clients || opt.clients > 64 || !opt.size ||
        opt.size > 32768)
        return usage();
    for (int v = 0; v < 2; v++) {
        version[v] = malloc(opt.size);
        memset(version[v], 'a' + v, opt.size);
    }
    /* start from A, quiet */
    int fd = open(opt.file, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0 || write(fd, version[0], opt.size) != (ssize_t)opt.size) {
        fprintf(stderr, "swstorn: %s: %s\n", opt.file, strerror(errno));
        return 1;
    }
    close(fd);
    pthread_t w, th[64];
    pthread_create(&w, NULL, writer, NULL);
    for (unsigned i = 0; i < opt.clients; i++)
        pthread_create(&th[i], NULL, client, NULL);
    sleep_us((uint64_t)(opt.seconds * 1e6));
    atomic_store(&stop_clients, true);
    for (unsigned i = 0; i < opt.clients; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop_writer, true);
    pthread_join(w, NULL);
    bool settled = settled_check();
    if (!settled)
        atomic_fetch_add(&errors, 1);
    printf("responses %llu torn %llu mismatched %llu tagged %llu fresh %llu not_modified %llu errors %llu "
           "writes %llu\n",
           (unsigned long long)responses, (unsigned long long)torn, (unsigned long long)mismatched,
           (unsigned long long)tagged, (unsigned long long)fresh, (unsigned long long)not_modified, (unsigned long long)errors,
           (unsigned long long)writes);
    return torn || mismatched || errors || !responses ? 1 : 0;
}
