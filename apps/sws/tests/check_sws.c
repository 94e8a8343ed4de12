/* SPDX-License-Identifier: MIT */
/*
 * check_sws.c: SWS served in-process on 2 workers and talked to over
 * loopback with raw sockets (apps/sws/tests/swsclient.h):
 *  - every file of a document root byte-exact with its headers (type, length,
 *    Last-Modified, ETag), HEAD, "/" and "/dir/" to index.html, "/dir" 301,
 *    dot files and symbolic links never served; a 4 MB file to a slow reader
 *    with a small receive buffer (partial writes, the write watch);
 *  - keep-alive (1.1 by default, 1.0 on request, Connection: close); a close
 *    the client asked for is immediate, an error's lingers;
 *    pipelined requests answered in order; If-None-Match and 304;
 *  - placement: by load, every Close gives its color back to the pool (60
 *    connections come and go, then the pool counts the 10 still open, on
 *    both workers); by descriptor (--placement fd), no pool, served alike;
 *  - every error status (400, 404, 405 with Allow, 408, 413, 414, 431, 501,
 *    505), and the connection closed where it must be; a corpus of hostile
 *    requests; traversal attempts;
 *  - slow clients trickling bytes do not stop another client; the client cap
 *    (accepting pauses, and resumes as clients leave); idle timeouts;
 *  - graceful shutdown under load (no truncated response), the binary's
 *    SIGTERM; /server-status; --reuseport, the legacy engine with stealing,
 *    the Epoll handler.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/sws/tests/swsclient.h"
#include "tests/testutil.h"

/* ---- a document root ------------------------------------------------------------ */

#define BIG (4u << 20)

static char root[64];

static void put_file(const char *rel, const void *data, size_t n)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    FILE *f = fopen(p, "wb");
    ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
    ck_assert_int_eq((int)fwrite(data, 1, n, f), (int)n);
    fclose(f);
}

static char *big_data(void)
{
    char *b = malloc(BIG);
    unsigned x = 7;
    for (size_t i = 0; i < BIG; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (char)(x >> 16);
    }
    return b;
}

static const char index_html[] = "<html>index</html>\n";
static const char sub_index[] = "<html>sub</html>\n";
static const char a_txt[] = "plain text\n";
static const char b_json[] = "{\"b\": 1}\n";

static void make_root(void)
{
    strcpy(root, "/tmp/sws-test-XXXXXX");
    ck_assert(mkdtemp(root) != NULL);
    char p[256];
    snprintf(p, sizeof(p), "%s/sub", root);
    mkdir(p, 0755);
    put_file("index.html", index_html, sizeof(index_html) - 1);
    put_file("sub/index.html", sub_index, sizeof(sub_index) - 1);
    put_file("a.txt", a_txt, sizeof(a_txt) - 1);
    put_file("sub/b.json", b_json, sizeof(b_json) - 1);
    put_file(".secret", "secret", 6);
    put_file("empty.css", "", 0);
    char *b = big_data();
    put_file("big.bin", b, BIG);
    free(b);
    snprintf(p, sizeof(p), "%s/link", root);
    ck_assert_int_eq(symlink("/etc/passwd", p), 0);
    files_settle(); /* served with their ETags from the first request */
}

static void remove_root(void)
{
    rm_tree(root);
    root[0] = '\0';
}

static unsigned start_root(unsigned timeout_ms)
{
    make_root();
    struct sws_config cfg;
    srv_config(&cfg);
    cfg.root = root;
    cfg.timeout_ms = timeout_ms;
    return srv_start(&cfg);
}

static void finish(void)
{
    ck_assert_msg(srv_stop(5000), "the server did not drain in time");
    remove_root();
}

/* One request on c; checks the status and returns the response. */
static void req(struct cl *c, const char *request, int status, struct resp *r)
{
    ck_assert_msg(cl_sendstr(c, request), "send");
    ck_assert_msg(cl_read(c, r, strncmp(request, "HEAD", 4) == 0), "no response to %s", request);
    ck_assert_msg(r->status == status, "%s: status %d, expected %d", request, r->status, status);
}

/* ---- files ------------------------------------------------------------------------ */

START_TEST(test_files)
{
    unsigned port = start_root(10000);
    char *big = big_data();
    const struct {
        const char *url, *type;
        const char *data;
        size_t len;
    } files[] = {
        { "/index.html", "text/html; charset=utf-8", index_html, sizeof(index_html) - 1 },
        { "/", "text/html; charset=utf-8", index_html, sizeof(index_html) - 1 },
        { "/sub/", "text/html; charset=utf-8", sub_index, sizeof(sub_index) - 1 },
        { "/sub/index.html", "text/html; charset=utf-8", sub_index, sizeof(sub_index) - 1 },
        { "/a.txt", "text/plain; charset=utf-8", a_txt, sizeof(a_txt) - 1 },
        { "/sub/b.json", "application/json", b_json, sizeof(b_json) - 1 },
        { "/empty.css", "text/css; charset=utf-8", "", 0 },
        { "/big.bin", "application/octet-stream", big, BIG },
        { "/%61.txt", "text/plain; charset=utf-8", a_txt, sizeof(a_txt) - 1 },
        { "/a.txt?query=1", "text/plain; charset=utf-8", a_txt, sizeof(a_txt) - 1 },
    };
    struct cl c;
    ck_assert(cl_connect(&c, port, 5000));
    for (int i = 0; i < NELEM(files); i++) {
        char q[256];
        struct resp r;
        snprintf(q, sizeof(q), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", files[i].url);
        req(&c, q, 200, &r);
        ck_assert_str_eq(resp_header(&r, "Content-Type"), files[i].type);
        ck_assert_int_eq((int)strtoul(resp_header(&r, "Content-Length"), NULL, 10), (int)files[i].len);
        ck_assert(resp_header(&r, "Last-Modified") != NULL);
        ck_assert(resp_header(&r, "Date") != NULL);
        ck_assert_msg(r.body_len == files[i].len && memcmp(r.body, files[i].data, r.body_len) == 0,
                      "%s: body differs", files[i].url);
        char etag[128];
        snprintf(etag, sizeof(etag), "%s", resp_header(&r, "ETag"));
        ck_assert(etag[0] == '"');
        resp_free(&r);
        /* HEAD: the same head, no body */
        snprintf(q, sizeof(q), "HEAD %s HTTP/1.1\r\nHost: t\r\n\r\n", files[i].url);
        req(&c, q, 200, &r);
        ck_assert_str_eq(resp_header(&r, "ETag"), etag);
        ck_assert_int_eq((int)strtoul(resp_header(&r, "Content-Length"), NULL, 10), (int)files[i].len);
        resp_free(&r);
    }
    struct resp r;
    req(&c, "GET /sub HTTP/1.1\r\nHost: t\r\n\r\n", 301, &r);
    ck_assert_str_eq(resp_header(&r, "Location"), "/sub/");
    resp_free(&r);
    const char *missing[] = { "/.secret", "/link", "/nope", "/sub/nope", "/index.html/", "/A.txt" };
    for (int i = 0; i < NELEM(missing); i++) {
        char q[256];
        snprintf(q, sizeof(q), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", missing[i]);
        req(&c, q, 404, &r); /* and the connection stays */
        resp_free(&r);
    }
    cl_close(&c);
    free(big);
    finish();
}
END_TEST

/* A slow reader with a small receive buffer: the 4 MB response goes out in
 * many partial writes, through the write watch, byte-exact. */
START_TEST(test_big_slow_reader)
{
    unsigned port = start_root(10000);
    char *big = big_data();
    for (int round = 0; round < 2; round++) {
        struct cl c;
        c.fd = -1;
        ck_assert(cl_connect_rcvbuf(&c, port, 5000, 8192));
        ck_assert(cl_sendstr(&c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n"
                                 "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"));
        if (round == 0)
            sleep_us(200000); /* let the server fill the socket and wait */
        struct resp r;
        ck_assert(cl_read(&c, &r, false));
        ck_assert_int_eq(r.status, 200);
        ck_assert_int_eq((int)r.body_len, (int)BIG);
        ck_assert(memcmp(r.body, big, BIG) == 0);
        resp_free(&r);
        ck_assert(cl_read(&c, &r, false)); /* the pipelined one after it */
        ck_assert_str_eq(r.body, a_txt);
        resp_free(&r);
        cl_close(&c);
    }
    free(big);
    finish();
}
END_TEST

/* ---- connections ------------------------------------------------------------------ */

/* Where connections run (--placement load, then fd). 60 connections come
 * and go, then 10 stay: with load, the pool counts exactly the 10 (every
 * Close gave its color back) spread over both workers; with fd, there is
 * no pool, and both serve alike. */
START_TEST(test_placement)
{
    bool by_fd = _i == 1;
    struct sws_config cfg;
    srv_config(&cfg);
    cfg.place_by_fd = by_fd;
    unsigned port = srv_start(&cfg); /* the sample site, 2 workers */
    struct sws *s = srv();
    ck_assert(by_fd ? s->pool == NULL : s->pool != NULL);
    struct cl c[10];
    struct resp r;
    for (int i = 0; i < 60; i++) {
        ck_assert(cl_connect(&c[0], port, 5000));
        req(&c[0], "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
        resp_free(&r);
        cl_close(&c[0]);
    }
    for (int i = 0; i < 10; i++)
        ck_assert(cl_connect(&c[i], port, 5000));
    for (int i = 0; i < 10; i++) {
        req(&c[i], "GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
        resp_free(&r);
    }
    /* The 60 leave through DecClientAccepted, after their Close. */
    uint64_t until = now_ns() + 5000000000ull;
    while (atomic_load(&s->clients) != 10 && now_ns() < until)
        sleep_us(1000);
    ck_assert_uint_eq(atomic_load(&s->clients), 10);
    if (!by_fd) {
        int n0 = mely_color_pool_placed(&s->rt, s->pool, 0);
        int n1 = mely_color_pool_placed(&s->rt, s->pool, 1);
        ck_assert_msg(n0 + n1 == 10, "%d + %d colors placed for 10 connections", n0, n1);
        ck_assert_msg(n0 >= 2 && n1 >= 2, "10 connections placed %d and %d", n0, n1);
        mely_stats_t w0, w1;
        ck_assert_int_eq(mely_worker_stats(&s->rt, 0, &w0), 0);
        ck_assert_int_eq(mely_worker_stats(&s->rt, 1, &w1), 0);
        ck_assert_uint_eq(w0.placed_now + w1.placed_now, 10);
        ck_assert_uint_ge(w0.places + w1.places, 70);
    }
    req(&c[0], "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    ck_assert(strstr(r.body, by_fd ? "\nplacement: fd\n" : "\nplacement: load\n") != NULL);
    resp_free(&r);
    for (int i = 0; i < 10; i++)
        cl_close(&c[i]);
    ck_assert(srv_stop(5000));
}
END_TEST

START_TEST(test_keepalive)
{
    unsigned port = start_root(10000);
    struct cl c;
    struct resp r;
    ck_assert(cl_connect(&c, port, 5000));
    for (int i = 0; i < 20; i++) { /* one connection, 20 requests */
        req(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
        ck_assert(resp_header(&r, "Connection") == NULL);
        resp_free(&r);
    }
    req(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 200, &r);
    ck_assert_str_eq(resp_header(&r, "Connection"), "close");
    resp_free(&r);
    ck_assert(cl_closed_within(&c, 2000, NULL));
    cl_close(&c);
    /* HTTP/1.0: closed unless asked */
    ck_assert(cl_connect(&c, port, 5000));
    req(&c, "GET /a.txt HTTP/1.0\r\n\r\n", 200, &r);
    ck_assert_str_eq(resp_header(&r, "Connection"), "close");
    resp_free(&r);
    ck_assert(cl_closed_within(&c, 2000, NULL));
    cl_close(&c);
    ck_assert(cl_connect(&c, port, 5000));
    for (int i = 0; i < 3; i++) {
        req(&c, "GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, &r);
        ck_assert_str_eq(resp_header(&r, "Connection"), "keep-alive");
        ck_assert_str_eq(r.body, a_txt);
        resp_free(&r);
    }
    cl_close(&c);
    finish();
}
END_TEST

/* A close the client asked for, its request read whole: the server closes
 * at once (its count of closed connections moves while the client still
 * holds its end). After an error it lingers instead, until the client's EOF. */
START_TEST(test_close_asked)
{
    unsigned port = start_root(10000);
    struct sws *s = srv();
    struct cl c;
    struct resp r;
    uint64_t closed = atomic_load(&s->closed);
    ck_assert(cl_connect(&c, port, 5000));
    req(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 200, &r);
    ck_assert_str_eq(resp_header(&r, "Connection"), "close");
    resp_free(&r);
    uint64_t until = now_ns() + 2000000000ull;
    while (atomic_load(&s->closed) == closed && now_ns() < until)
        sleep_us(1000);
    ck_assert_msg(atomic_load(&s->closed) > closed, "not closed while the client holds its end");
    ck_assert(cl_closed_within(&c, 1000, NULL));
    cl_close(&c);
    closed = atomic_load(&s->closed);
    ck_assert(cl_connect(&c, port, 5000));
    ck_assert(cl_sendstr(&c, "GARBAGE\r\n\r\n"));
    ck_assert(cl_read(&c, &r, false));
    ck_assert_int_eq(r.status, 400);
    resp_free(&r);
    sleep_us(300000);
    ck_assert_msg(atomic_load(&s->closed) == closed, "an error's close did not linger");
    cl_close(&c);
    until = now_ns() + 3000000000ull;
    while (atomic_load(&s->closed) == closed && now_ns() < until)
        sleep_us(1000);
    ck_assert(atomic_load(&s->closed) > closed);
    finish();
}
END_TEST

START_TEST(test_pipelining)
{
    unsigned port = start_root(10000);
    enum { N = 60 };
    const char *urls[] = { "/a.txt", "/sub/b.json", "/nope", "/", "/sub/" };
    const int statuses[] = { 200, 200, 404, 200, 200 };
    const char *bodies[] = { a_txt, b_json, NULL, index_html, sub_index };
    char *all = malloc(N * 128);
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(all + len, "%s %s HTTP/1.1\r\nHost: t\r\n\r\n", i % 7 == 3 ? "HEAD" : "GET",
                               urls[i % 5]);
    struct cl c;
    ck_assert(cl_connect(&c, port, 5000));
    /* in one write, and again in 3-byte pieces */
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 0) {
            ck_assert(cl_send(&c, all, len));
        } else {
            for (size_t o = 0; o < len; o += 3)
                ck_assert(cl_send(&c, all + o, len - o < 3 ? len - o : 3));
        }
        for (int i = 0; i < N; i++) {
            struct resp r;
            bool head = i % 7 == 3;
            ck_assert_msg(cl_read(&c, &r, head), "response %d", i);
            ck_assert_int_eq(r.status, statuses[i % 5]);
            if (bodies[i % 5] && !head)
                ck_assert_str_eq(r.body, bodies[i % 5]);
            resp_free(&r);
        }
    }
    cl_close(&c);
    free(all);
    finish();
}
END_TEST

START_TEST(test_conditional)
{
    unsigned port = start_root(10000);
    struct cl c;
    struct resp r;
    char etag[128], q[512];
    ck_assert(cl_connect(&c, port, 5000));
    req(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    snprintf(etag, sizeof(etag), "%s", resp_header(&r, "ETag"));
    resp_free(&r);
    snprintf(q, sizeof(q), "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: %s\r\n\r\n", etag);
    req(&c, q, 304, &r);
    ck_assert_str_eq(resp_header(&r, "ETag"), etag);
    ck_assert(resp_header(&r, "Content-Length") == NULL);
    resp_free(&r);
    snprintf(q, sizeof(q), "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\", W/%s\r\n\r\n", etag);
    req(&c, q, 304, &r);
    resp_free(&r);
    req(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\n\r\n", 304, &r);
    resp_free(&r);
    req(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"other\"\r\n\r\n", 200, &r);
    ck_assert_str_eq(r.body, a_txt);
    resp_free(&r);
    cl_close(&c);
    finish();
}
END_TEST

/* ---- errors ------------------------------------------------------------------------ */

/* A request that must get `status`; closed says whether the server must then
 * close the connection (else a following request must be answered). */
static void expect(unsigned port, const char *request, size_t len, int status, bool closed)
{
    struct cl c;
    struct resp r;
    ck_assert(cl_connect(&c, port, 5000));
    ck_assert(cl_send(&c, request, len));
    ck_assert_msg(cl_read(&c, &r, false), "no response to \"%.60s\"", request);
    ck_assert_msg(r.status == status, "\"%.60s\": %d, expected %d", request, r.status, status);
    if (status == 405)
        ck_assert_str_eq(resp_header(&r, "Allow"), "GET, HEAD");
    if (closed)
        ck_assert_str_eq(resp_header(&r, "Connection"), "close");
    resp_free(&r);
    if (closed) {
        ck_assert_msg(cl_closed_within(&c, 3000, NULL), "\"%.60s\": not closed", request);
    } else {
        req(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
        resp_free(&r);
    }
    cl_close(&c);
}

#define EXPECT(port, s, st, cl) expect(port, s, sizeof(s) - 1, st, cl)

START_TEST(test_errors)
{
    unsigned port = start_root(10000);
    EXPECT(port, "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", 404, false);
    EXPECT(port, "POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello", 405, false);
    EXPECT(port, "DELETE / HTTP/1.1\r\nHost: t\r\n\r\n", 405, false);
    EXPECT(port, "get / HTTP/1.1\r\nHost: t\r\n\r\n", 405, false);
    EXPECT(port, "GET / HTTP/1.1\r\n\r\n", 400, true);
    EXPECT(port, "GARBAGE\r\n\r\n", 400, true);
    EXPECT(port, "GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505, true);
    EXPECT(port, "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n", 413, true);
    EXPECT(port, "GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501, true);
    /* refused as soon as the request line shows it, without
     * waiting for the end of the head (the timeout is 10 s: the reads would fail) */
    EXPECT(port, "GET / HTTP/2.0\r\nHost: t\r\n", 505, true);
    EXPECT(port, "\x01\x02\x03", 400, true);
    char *q = malloc(32768);
    int n = sprintf(q, "GET /");
    memset(q + n, 'x', 3000);
    n += 3000;
    n += sprintf(q + n, " HTTP/1.1\r\nHost: t\r\n\r\n");
    expect(port, q, (size_t)n, 414, true);
    n = sprintf(q, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: ");
    memset(q + n, 'y', 10000);
    n += 10000;
    n += sprintf(q + n, "\r\n\r\n");
    expect(port, q, (size_t)n, 431, true);
    n = sprintf(q, "GET / HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 100; i++)
        n += sprintf(q + n, "X-%d: v\r\n", i);
    n += sprintf(q + n, "\r\n");
    expect(port, q, (size_t)n, 431, true);
    free(q);
    finish();
}
END_TEST

START_TEST(test_traversal)
{
    unsigned port = start_root(10000);
    const char *paths[] = { "/../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/sub/../a.txt",
                            "/%2E%2E%2Fetc%2Fpasswd", "/..%2f..%2fetc/passwd", "/./a.txt",
                            "/sub/%2e/b.json", "/.%2e/", "/%00", "/a.txt%00.html", "/..",
                            "http://x/../etc/passwd" };
    for (int i = 0; i < NELEM(paths); i++) {
        char q[256];
        int n = snprintf(q, sizeof(q), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", paths[i]);
        expect(port, q, (size_t)n, 400, true);
    }
    /* the escaped root never matches a file: 404 */
    EXPECT(port, "GET /link HTTP/1.1\r\nHost: t\r\n\r\n", 404, false);
    EXPECT(port, "GET /.secret HTTP/1.1\r\nHost: t\r\n\r\n", 404, false);
    finish();
}
END_TEST

/* Hostile inputs: no crash, a 4xx/5xx and a close, or a close; then the
 * server still serves. */
static const struct {
    const char *data;
    size_t len;
    int status; /* 0: any refusal */
} hostile[] = {
#define H(s, st) { s, sizeof(s) - 1, st }
    H("\x00\x01\x02\x03\r\n\r\n", 400),
    H("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400), /* a TLS hello */
    H("GET / HTTP/1.1\r\nHost: t\r\n folded: x\r\n\r\n", 400),
    H("GET / HTTP/1.1\r\nHost : t\r\n\r\n", 400),
    H("GET / HTTP/1.1\rHost: t\r\n\r\n", 400),
    H("GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400),
    H("GET / HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n", 400),
    H("GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
    H("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    H("GET /\x7f HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    H("GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n", 400),
    H("GET / HTTP/9.9\r\nHost: t\r\n\r\n", 505),
    H("GET /\r\n\r\n", 400), /* HTTP/0.9 */
    H(" / HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    H("GET / HTTP/1.1\r\n: empty-name\r\nHost: t\r\n\r\n", 400),
    H("GET / HTTP/1.1\r\nHost: t\r\nX: \x01\r\n\r\n", 400),
    H("GET %%% HTTP/1.1\r\nHost: t\r\n\r\n", 400),
#undef H
};

START_TEST(test_hostile)
{
    unsigned port = start_root(10000);
    for (int i = 0; i < NELEM(hostile); i++)
        expect(port, hostile[i].data, hostile[i].len, hostile[i].status, true);
    /* a request then garbage on the same connection: the first is answered */
    struct cl c;
    struct resp r;
    ck_assert(cl_connect(&c, port, 5000));
    ck_assert(cl_sendstr(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n\x01\x02garbage\r\n\r\n"));
    ck_assert(cl_read(&c, &r, false));
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    ck_assert(cl_read(&c, &r, false));
    ck_assert_int_eq(r.status, 400);
    resp_free(&r);
    ck_assert(cl_closed_within(&c, 3000, NULL));
    cl_close(&c);
    /* a client that sends a flood after a bad request: still a 400, then a close */
    ck_assert(cl_connect(&c, port, 5000));
    char *junk = malloc(256 * 1024);
    memset(junk, 'z', 256 * 1024);
    memcpy(junk, "BAD\r\n\r\n", 7);
    ck_assert(cl_send(&c, junk, 256 * 1024));
    ck_assert(cl_read(&c, &r, false));
    ck_assert_int_eq(r.status, 400);
    resp_free(&r);
    ck_assert(cl_closed_within(&c, 5000, NULL));
    cl_close(&c);
    free(junk);
    /* a client that connects and resets at once, many times */
    for (int i = 0; i < 50; i++) {
        ck_assert(cl_connect(&c, port, 5000));
        cl_sendstr(&c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
        struct linger lg = { 1, 0 };
        setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        cl_close(&c);
    }
    ck_assert_int_eq(get_status(port, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
    finish();
}
END_TEST

/* ---- timeouts, slow clients, the cap ---------------------------------------------- */

START_TEST(test_timeouts)
{
    unsigned port = start_root(300);
    struct cl a, b, k;
    struct resp r;
    ck_assert(cl_connect(&a, port, 5000)); /* sends nothing */
    ck_assert(cl_connect(&b, port, 5000)); /* sends half a request */
    ck_assert(cl_sendstr(&b, "GET /a.txt HTTP/1.1\r\nHo"));
    ck_assert(cl_connect(&k, port, 5000)); /* keep-alive, then idle */
    req(&k, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    resp_free(&r);
    uint64_t t0 = now_ns();
    ck_assert(cl_read(&a, &r, false));
    ck_assert_int_eq(r.status, 408);
    ck_assert_str_eq(resp_header(&r, "Connection"), "close");
    resp_free(&r);
    ck_assert(cl_read(&b, &r, false));
    ck_assert_int_eq(r.status, 408);
    resp_free(&r);
    size_t extra = 1;
    ck_assert(cl_closed_within(&k, 3000, &extra));
    ck_assert_int_eq((int)extra, 0); /* an idle keep-alive connection closes quietly */
    ck_assert(cl_closed_within(&a, 3000, NULL));
    ck_assert(cl_closed_within(&b, 3000, NULL));
    ck_assert_msg(now_ns() - t0 < 3000000000ull, "timeouts took too long");
    cl_close(&a);
    cl_close(&b);
    cl_close(&k);
    finish();
}
END_TEST

/* Slow clients trickle one byte at a time; another client is served
 * promptly meanwhile, and the slow ones get their responses in the end. */
START_TEST(test_slow_clients)
{
    unsigned want = scaled(1000, 100, 4000);
    /* each slow client costs two descriptors here (both ends) */
    unsigned limit = raise_fd_limit(2 * want + 200);
    unsigned nslow = limit >= 2 * want + 200 ? want : limit > 300 ? (limit - 200) / 2 : 50;
    unsigned port = start_root(10000);
    struct cl *slow = calloc(nslow, sizeof(*slow));
    for (unsigned i = 0; i < nslow; i++)
        ck_assert_msg(cl_connect(&slow[i], port, 5000), "slow client %u", i);
    const char *q = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    size_t ql = strlen(q);
    struct cl fast;
    ck_assert(cl_connect(&fast, port, 5000));
    uint64_t worst = 0;
    unsigned served = 0;
    for (size_t pos = 0; pos < ql - 1; pos++) { /* all but the last byte */
        for (unsigned i = 0; i < nslow; i++)
            ck_assert(cl_send(&slow[i], q + pos, 1));
        for (int k = 0; k < 3; k++) {
            struct resp r;
            uint64_t t = now_ns();
            req(&fast, "GET /sub/b.json HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
            resp_free(&r);
            t = now_ns() - t;
            worst = t > worst ? t : worst;
            served++;
        }
    }
    ck_assert_msg(worst < 500000000ull, "a fast request took %llu ms among %u slow clients",
                  (unsigned long long)(worst / 1000000), nslow);
    for (unsigned i = 0; i < nslow; i++)
        ck_assert(cl_send(&slow[i], q + ql - 1, 1));
    for (unsigned i = 0; i < nslow; i++) {
        struct resp r;
        ck_assert_msg(cl_read(&slow[i], &r, false), "slow client %u", i);
        ck_assert_int_eq(r.status, 200);
        resp_free(&r);
        cl_close(&slow[i]);
    }
    free(slow);
    cl_close(&fast);
    printf("slow clients: %u trickling, %u fast requests, worst %.2f ms\n", nslow, served,
           (double)worst / 1e6);
    finish();
}
END_TEST

/* At the cap accepting pauses (clients wait in the kernel's backlog, without
 * an answer) and resumes as clients leave, in arrival order; /server-status
 * tells. _i = 1: one listener per worker (--reuseport). */
START_TEST(test_cap)
{
    make_root();
    struct sws_config cfg;
    srv_config(&cfg);
    cfg.root = root;
    cfg.max_clients = 2;
    cfg.reuseport = _i == 1;
    unsigned port = srv_start(&cfg);
    struct cl a, b, c, d;
    struct resp r;
    ck_assert(cl_connect(&a, port, 5000));
    req(&a, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    resp_free(&r);
    ck_assert(cl_connect(&b, port, 5000));
    req(&b, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    ck_assert_msg(strstr(r.body, "accepting: no\ncap_pauses: 1\n") != NULL, "%s", r.body);
    resp_free(&r);
    ck_assert(cl_connect(&c, port, 5000)); /* in the backlog: no answer */
    ck_assert(cl_sendstr(&c, "GET /sub/b.json HTTP/1.1\r\nHost: t\r\n\r\n"));
    ck_assert(cl_connect(&d, port, 5000));
    ck_assert(cl_sendstr(&d, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"));
    ck_assert(cl_silent_for(&c, 300));
    ck_assert(cl_silent_for(&d, 1));
    cl_close(&a); /* a slot frees: one waiting client is served, the other waits */
    /* One listener: the kernel's backlog is FIFO, so c first. With one socket
     * per worker, c and d may sit in different backlogs: either may go first. */
    struct pollfd pf[2] = { { .fd = c.fd, .events = POLLIN }, { .fd = d.fd, .events = POLLIN } };
    ck_assert_msg(poll(pf, 2, 10000) > 0, "no waiting client served after a slot freed");
    bool c_first = !cfg.reuseport || (pf[0].revents & POLLIN);
    struct cl *first = c_first ? &c : &d, *second = c_first ? &d : &c;
    ck_assert(cl_read(first, &r, false));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, c_first ? b_json : a_txt);
    resp_free(&r);
    ck_assert(cl_silent_for(second, 300));
    req(&b, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r); /* still served */
    resp_free(&r);
    cl_close(&b); /* then the other */
    ck_assert(cl_read(second, &r, false));
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, c_first ? a_txt : b_json);
    resp_free(&r);
    cl_close(&c);
    cl_close(&d);
    /* once they leave, new clients are served again */
    ck_assert_int_eq(get_status(port, "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
    struct cl e;
    ck_assert(cl_connect(&e, port, 5000));
    req(&e, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    ck_assert_msg(strstr(r.body, "connections_refused: 0\n") != NULL, "%s", r.body);
    resp_free(&r);
    cl_close(&e);
    finish();
}
END_TEST

/* ---- shutdown ---------------------------------------------------------------------- */

struct loader {
    unsigned port;
    atomic_bool stop;
    atomic_uint ok, truncated, refused;
};

static void *load(void *arg)
{
    struct loader *l = arg;
    while (!atomic_load(&l->stop)) {
        struct cl c;
        if (!cl_connect(&c, l->port, 5000)) {
            atomic_fetch_add(&l->refused, 1);
            break;
        }
        for (int i = 0; i < 20 && !atomic_load(&l->stop); i++) {
            if (!cl_sendstr(&c, "GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n"))
                break;
            /* read by hand: a truncated body is the failure sought */
            struct resp r;
            if (!cl_read(&c, &r, false)) {
                /* closed between responses is fine, in the middle is not */
                if (c.len > 0)
                    atomic_fetch_add(&l->truncated, 1);
                break;
            }
            if (r.status == 200 && r.body_len == BIG)
                atomic_fetch_add(&l->ok, 1);
            else
                atomic_fetch_add(&l->truncated, 1);
            bool closing = resp_header(&r, "Connection") != NULL;
            resp_free(&r);
            if (closing)
                break;
        }
        cl_close(&c);
    }
    return NULL;
}

START_TEST(test_drain_under_load)
{
    unsigned port = start_root(10000);
    enum { T = 4 };
    struct loader l = { .port = port };
    pthread_t th[T];
    for (int i = 0; i < T; i++)
        pthread_create(&th[i], NULL, load, &l);
    uint64_t until = now_ns() + 300000000ull;
    while (atomic_load(&l.ok) < 8 && now_ns() < until + 5000000000ull)
        sleep_us(10000);
    while (now_ns() < until)
        sleep_us(10000);
    uint64_t t = now_ns();
    ck_assert_msg(srv_stop(5000), "drain did not finish");
    double ms = (double)(now_ns() - t) / 1e6;
    atomic_store(&l.stop, true);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    printf("drain under load: %u responses of 4 MB, %u truncated, drained in %.1f ms\n",
           atomic_load(&l.ok), atomic_load(&l.truncated), ms);
    ck_assert_uint_gt(atomic_load(&l.ok), 0);
    ck_assert_uint_eq(atomic_load(&l.truncated), 0);
    ck_assert_int_eq(get_status(port, "GET / HTTP/1.1\r\nHost: t\r\n\r\n"), -1); /* refused */
    remove_root();
}
END_TEST

/* The binary: starts on the sample site, serves, exits 0 on SIGTERM. */
START_TEST(test_binary_sigterm)
{
    if (access(SWS_BIN, X_OK) != 0) {
        printf("test_binary_sigterm: %s not built here, skipped\n", SWS_BIN);
        return;
    }
    char *argv[] = { SWS_BIN, "--port", "0", "--workers", "2", "--no-pin", NULL };
    struct bin b;
    bin_start(&b, argv);
    int st = get_status(b.port, "GET /files/1k.html HTTP/1.1\r\nHost: t\r\n\r\n");
    int rc = bin_stop(&b);
    ck_assert_int_eq(st, 200);
    ck_assert_msg(rc == 0, "exit status %d", rc);
}
END_TEST

/* The command line: --help on stdout and 0; errors on stderr and non-zero. */
START_TEST(test_binary_cli)
{
    char *bin = SWS_BIN;
    if (access(bin, X_OK) != 0) {
        printf("test_binary_cli: %s not built here, skipped\n", bin);
        return;
    }
    static char out[8192], err[8192];
    char *help[] = { bin, "--help", NULL };
    ck_assert_int_eq(run_bin(help, out, sizeof(out), err, sizeof(err)), 0);
    ck_assert(strstr(out, "--max-clients") && strstr(out, "--engine") && err[0] == '\0');
    ck_assert(strstr(out, "--cache-mb") && strstr(out, "--cache-valid-ms"));
    char *bad[][4] = {
        { bin, "--port", "http", NULL },      { bin, "--workers", "0", NULL },
        { bin, "--engine", "nginx", NULL },   { bin, "--bogus", NULL, NULL },
        { bin, "extra", NULL, NULL },         { bin, "--timeout-ms", "-5", NULL },
        { bin, "--cache-mb", "lots", NULL },  { bin, "--cache-fds", "0", NULL },
        { bin, "--cache-file-kb", "-1", NULL }, { bin, "--cache-valid-ms", "1e3", NULL },
    };
    for (int i = 0; i < NELEM(bad); i++) {
        int rc = run_bin(bad[i], out, sizeof(out), err, sizeof(err));
        ck_assert_msg(rc == 2 && err[0] && !out[0], "%s %s: exit %d, stderr \"%s\"", bad[i][1],
                      bad[i][2] ? bad[i][2] : "", rc, err);
    }
    char *fail[][6] = {
        { bin, "--root", "/nonexistent/sws", "--port", "0", NULL },
        { bin, "--steal", "nonsense", "--port", "0", NULL },
        { bin, "--host", "not-an-address", "--port", "0", NULL },
    };
    for (int i = 0; i < NELEM(fail); i++) {
        int rc = run_bin(fail[i], out, sizeof(out), err, sizeof(err));
        ck_assert_msg(rc == 1 && strstr(err, "sws: "), "%s %s: exit %d, stderr \"%s\"", fail[i][1],
                      fail[i][2], rc, err);
    }
}
END_TEST

/* ---- status, variants ---------------------------------------------------------------- */

START_TEST(test_status)
{
    struct sws_config cfg;
    srv_config(&cfg);
    unsigned port = srv_start(&cfg); /* the sample site */
    ck_assert_int_eq(get_status(port, "GET /files/1k.html HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
    ck_assert_int_eq(get_status(port, "GET /files/100k.bin HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
    struct cl c;
    struct resp r;
    ck_assert(cl_connect(&c, port, 5000));
    req(&c, "GET /files/1k.html HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    ck_assert_int_eq((int)r.body_len, 1024);
    resp_free(&r);
    req(&c, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    ck_assert(strstr(r.body, "requests: 3\n") != NULL);
    /* this one, and the two before if their Close has not run yet */
    const char *cur = strstr(r.body, "connections_current: ");
    ck_assert(cur != NULL);
    int ncur = atoi(cur + 21);
    ck_assert_msg(ncur >= 1 && ncur <= 3, "connections_current: %d", ncur);
    ck_assert(strstr(r.body, "\nstalls: ") != NULL);
    ck_assert(strstr(r.body, "worker  requests  events  steals") != NULL);
    ck_assert(strstr(r.body, "io_ready  stalls  placed\n") != NULL);
    ck_assert(strstr(r.body, "\nplacement: load\n") != NULL);
    ck_assert(strstr(r.body, "\n1 ") != NULL); /* worker 1's line */
    resp_free(&r);
    req(&c, "GET /server-status?format=json HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
    ck_assert_str_eq(resp_header(&r, "Content-Type"), "application/json");
    ck_assert(r.body[0] == '{' && strstr(r.body, "\"per_worker\":[{\"worker\":0,") != NULL);
    ck_assert(strstr(r.body, "\"steals\":") && strstr(r.body, "\"stolen_cycles\":"));
    ck_assert(strstr(r.body, "\"bytes_out\":") && strstr(r.body, ",\"stalls\":"));
    ck_assert(strstr(r.body, "\"io_ready\":") && strstr(strstr(r.body, "\"io_ready\":"), "\"stalls\":"));
    ck_assert(strstr(r.body, "\"placement\":\"load\"") && strstr(r.body, ",\"placed\":"));
    ck_assert(strcmp(r.body + r.body_len - 3, "]}\n") == 0);
    resp_free(&r);
    cl_close(&c);
    ck_assert(srv_stop(5000));
}
END_TEST

/* --trace FILE: the trace written at exit holds the requests' handlers, by
 * their descriptors' names, on the workers' tracks. */
START_TEST(test_trace)
{
    char path[] = "/tmp/sws-trace-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    struct sws_config cfg;
    srv_config(&cfg);
    cfg.trace = path;
    unsigned port = srv_start(&cfg);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(get_status(port, "GET /files/1k.html HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
    ck_assert(srv_stop(5000));

    FILE *f = fopen(path, "r");
    ck_assert(f != NULL);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    unlink(path);
    text[n] = '\0';
    ck_assert_msg(n > 0 && n < sizeof(text) - 1, "trace of %zu bytes", n);
    ck_assert(strncmp(text, "{\"traceEvents\":[", 16) == 0);
    ck_assert(strstr(text, "\"name\":\"worker 0\"") != NULL);
    const char *names[] = { "Accept", "ReadRequest", "ParseRequest", "WriteResponse" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char want[64];
        snprintf(want, sizeof(want), "\"name\":\"%s\"", names[i]);
        ck_assert_msg(strstr(text, want) != NULL, "no %s run in the trace", names[i]);
    }
}
END_TEST

/* A trace file that cannot be created fails the start with its reason. */
START_TEST(test_trace_unwritable)
{
    struct sws_config cfg;
    srv_config(&cfg);
    cfg.trace = "/nonexistent-dir/trace.json";
    struct sws s;
    char err[256] = "";
    ck_assert_int_ne(sws_start(&s, &cfg, err, sizeof(err)), 0);
    ck_assert_msg(strstr(err, "trace /nonexistent-dir/trace.json") != NULL, "%s", err);
    sws_free(&s);
}
END_TEST

/* Other arrangements serve the same: the legacy engine with stealing,
 * stealing with measured costs, one listener per worker, the paper's Epoll
 * handler (without and with stealing). */
START_TEST(test_variants)
{
    struct sws_config cfg;
    srv_config(&cfg);
    switch (_i) {
    case 0: cfg.engine = "legacy"; cfg.steal = "base"; break;
    case 1: cfg.steal = "all"; cfg.measured_costs = true; break;
    case 2: cfg.reuseport = true; cfg.steal = "base"; break;
    case 3: cfg.epoll_handler = true; break;
    /* 2 s: a loaded machine can hold the test between two requests of a
     * keep-alive connection for longer than 300 ms, which closed it (408). */
    case 4: cfg.epoll_handler = true; cfg.steal = "all"; cfg.timeout_ms = 2000; break;
    default: break;
    }
    unsigned port = srv_start(&cfg);
    for (int k = 0; k < 4; k++) {
        struct cl c;
        struct resp r;
        ck_assert(cl_connect(&c, port, 5000));
        for (int i = 0; i < 25; i++) {
            req(&c, "GET /files/1k.html HTTP/1.1\r\nHost: t\r\n\r\n", 200, &r);
            ck_assert_int_eq((int)r.body_len, 1024);
            resp_free(&r);
        }
        /* pipelined, with a larger body in between */
        ck_assert(cl_sendstr(&c, "GET /files/100k.bin HTTP/1.1\r\nHost: t\r\n\r\n"
                                 "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n"
                                 "HEAD /files/1k.html HTTP/1.1\r\nHost: t\r\n\r\n"));
        ck_assert(cl_read(&c, &r, false));
        ck_assert_int_eq((int)r.body_len, 102400);
        resp_free(&r);
        ck_assert(cl_read(&c, &r, false));
        ck_assert_int_eq(r.status, 404);
        resp_free(&r);
        ck_assert(cl_read(&c, &r, true));
        ck_assert_int_eq(r.status, 200);
        resp_free(&r);
        cl_close(&c);
    }
    if (cfg.timeout_ms == 2000) { /* the timer with the Epoll handler: 408 */
        struct cl c;
        struct resp r;
        ck_assert(cl_connect(&c, port, 5000));
        ck_assert(cl_sendstr(&c, "GET / HT"));
        ck_assert(cl_read(&c, &r, false)); /* within the 5 s receive timeout */
        ck_assert_int_eq(r.status, 408);
        resp_free(&r);
        ck_assert(cl_closed_within(&c, 3000, NULL));
        cl_close(&c);
    }
    ck_assert(srv_stop(5000));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sws");
    TCase *tc = new_tcase(s, "files", 60);
    tcase_add_test(tc, test_files);
    tcase_add_test(tc, test_big_slow_reader);
    tcase_add_test(tc, test_keepalive);
    tcase_add_loop_test(tc, test_placement, 0, 2);
    tcase_add_test(tc, test_close_asked);
    tcase_add_test(tc, test_pipelining);
    tcase_add_test(tc, test_conditional);
    tc = new_tcase(s, "errors", 60);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_traversal);
    tcase_add_test(tc, test_hostile);
    tc = new_tcase(s, "clients", 60);
    tcase_add_test(tc, test_timeouts);
    tcase_add_test(tc, test_slow_clients);
    tcase_add_loop_test(tc, test_cap, 0, 2);
    tc = new_tcase(s, "shutdown", 60);
    tcase_add_test(tc, test_drain_under_load);
    tcase_add_test(tc, test_binary_sigterm);
    tcase_add_test(tc, test_binary_cli);
    tc = new_tcase(s, "status", 60);
    tcase_add_test(tc, test_status);
    tcase_add_test(tc, test_trace);
    tcase_add_test(tc, test_trace_unwritable);
    tcase_add_loop_test(tc, test_variants, 0, 5);
    return mely_test_main(s);
}
