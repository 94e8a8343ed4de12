/* SPDX-License-Identifier: MIT */
/*
 * check_sws_proto.c: SWS's protocol details (doc/sws.md), the server
 * in-process on 2 workers (with and without the Epoll handler) and, under a
 * small descriptor limit, the binary:
 *  - empty lines before a request line: a few are ignored (also over several
 *    reads), one more is a 400 and a close; a client flooding CRLFs is closed
 *    after about a megabyte, quickly; a lingering close ends after 2 s
 *    whatever the client keeps sending;
 *  - Expect: 100-continue: 100 Continue for GET and HEAD, then the answer; the
 *    405 at once (and a close) for other methods; nothing for HTTP/1.0 or when
 *    the body came with the head; 417 for other expectations;
 *  - the status page: only for loopback peers by default, moved by
 *    status_path or turned off, the file of that name served where the page
 *    does not apply, a warning at start-up when the root has that file;
 *  - exhaustion_pauses on the status page, apart from cap_pauses;
 *  - the URL printed at start-up: an IPv6 host in brackets (sws_url, and the
 *    binary on ::1 when this machine has IPv6 loopback).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "apps/sws/http.h"
#include "apps/sws/tests/swsclient.h"
#include "tests/testutil.h"

/* ---- a document root with a file named server-status ------------------------------ */

static char root[64];
static const char a_txt[] = "plain text\n";
static const char status_file[] = "a file that happens to be named server-status\n";

static void put_file(const char *rel, const char *data)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    FILE *f = fopen(p, "wb");
    ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
    ck_assert_int_eq((int)fwrite(data, 1, strlen(data), f), (int)strlen(data));
    fclose(f);
}

/* shadow: with the file named server-status (sws warns at start-up). */
static void make_root(bool shadow)
{
    strcpy(root, "/tmp/sws-proto-XXXXXX");
    ck_assert(mkdtemp(root) != NULL);
    put_file("a.txt", a_txt);
    if (shadow)
        put_file("server-status", status_file);
}

static void remove_root(void)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/a.txt", root);
    unlink(p);
    snprintf(p, sizeof(p), "%s/server-status", root);
    unlink(p);
    rmdir(root);
    root[0] = '\0';
}

/* The server on the root; a status_path: the status tests, whose root has
 * a file named server-status. */
static unsigned start(unsigned timeout_ms, bool epoll_handler, const char *status_path)
{
    make_root(status_path != NULL);
    struct sws_config cfg;
    srv_config(&cfg);
    cfg.root = root;
    cfg.timeout_ms = timeout_ms;
    cfg.epoll_handler = cfg.epoll_handler || epoll_handler;
    cfg.status_path = status_path;
    return srv_start(&cfg);
}

static void finish(void)
{
    ck_assert_msg(srv_stop(5000), "the server did not drain in time");
    remove_root();
}

/* Sends request on c and reads one response of the given status. */
static void ask(struct cl *c, const char *request, int status, bool head_only, struct resp *r)
{
    ck_assert_msg(cl_sendstr(c, request), "send");
    ck_assert_msg(cl_read(c, r, head_only), "no response to \"%.60s\"", request);
    ck_assert_msg(r->status == status, "\"%.60s\": %d, expected %d", request, r->status, status);
}

/* A response that closes: "Connection: close", then EOF within 3 s. */
static void assert_closes(struct cl *c, struct resp *r)
{
    ck_assert_str_eq(resp_header(r, "Connection"), "close");
    resp_free(r);
    ck_assert_msg(cl_closed_within(c, 3000, NULL), "the connection stayed open");
    cl_close(c);
}

static const char get_a[] = "GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n";

/* ---- empty lines before a request ------------------------------------------------- */

START_TEST(test_empty_lines)
{
    unsigned port = start(10000, _i, NULL);
    struct cl c;
    struct resp r;
    ck_assert(cl_connect(&c, port, 5000));
    ask(&c, "\r\n\n\r\n\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, false, &r);
    ck_assert_str_eq(r.body, a_txt);
    resp_free(&r);
    /* the count starts again with each request, and spans reads */
    const char *parts[] = { "\r\n", "\r", "\n\n", "\r\n" };
    for (int i = 0; i < NELEM(parts); i++) {
        ck_assert(cl_sendstr(&c, parts[i]));
        sleep_us(20000);
    }
    ask(&c, get_a, 200, false, &r);
    resp_free(&r);
    cl_close(&c);
    /* one more than HTTP_MAX_EMPTY_LINES: 400, closed (also over reads) */
    ck_assert(cl_connect(&c, port, 5000));
    ck_assert(cl_sendstr(&c, "\r\n\r\n\r\n"));
    sleep_us(20000);
    ask(&c, "\r\n\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 400, false, &r);
    assert_closes(&c, &r);
    ck_assert_int_eq(get_status(port, get_a), 200);
    finish();
}
END_TEST

/* Adds the n bytes a non-blocking recv or send moved to *count; true if it
 * failed for a connection the server closed (reset, EPIPE). */
static bool gone(ssize_t n, size_t *count)
{
    if (n > 0)
        *count += (size_t)n;
    return n < 0 && errno != EAGAIN && errno != EINTR;
}

/* A client that sends CRLFs as fast as it can, reading what comes: it gets
 * its 400, and the server closes the connection after reading about a
 * megabyte more (not after the 10 s timeout, nor after gigabytes). Then the
 * lingering close's time limit. */
START_TEST(test_crlf_flood)
{
    unsigned port = start(10000, _i, NULL);
    struct cl c;
    ck_assert(cl_connect(&c, port, 5000));
    size_t chunk = 65536;
    char *crlf = malloc(chunk), got[256];
    for (size_t i = 0; i < chunk; i += 2)
        memcpy(crlf + i, "\r\n", 2);
    size_t sent = 0, ngot = 0;
    bool closed = false;
    uint64_t t0 = now_ns(), deadline = t0 + 10000000000ull;
    while (!closed && now_ns() < deadline) {
        struct pollfd p = { .fd = c.fd, .events = POLLIN | POLLOUT };
        if (poll(&p, 1, 100) <= 0)
            continue;
        if (p.revents & (POLLIN | POLLERR | POLLHUP))
            closed = gone(recv(c.fd, got + ngot, sizeof(got) - 1 - ngot, MSG_DONTWAIT), &ngot);
        if (!closed && (p.revents & POLLOUT))
            closed = gone(send(c.fd, crlf, chunk, MSG_DONTWAIT | MSG_NOSIGNAL), &sent);
    }
    double s = (double)(now_ns() - t0) / 1e9;
    got[ngot] = '\0';
    printf("CRLF flood: %zu bytes sent, closed after %.3f s\n", sent, s);
    free(crlf);
    cl_close(&c);
    ck_assert_msg(strncmp(got, "HTTP/1.1 400 ", 13) == 0, "got \"%.40s\"", got);
    ck_assert_msg(closed, "still open after 10 s and %zu bytes", sent);
    /* 1 MB read while lingering, plus what the socket buffers hold */
    ck_assert_msg(sent < (64u << 20), "%zu bytes sent before the close", sent);
    ck_assert_msg(s < 5.0, "closed after %.3f s", s);

    /* A client that keeps sending a little after its 400 is closed when the
     * linger time (2 s) ends, not at the timeout (10 s). */
    struct resp r;
    ck_assert(cl_connect(&c, port, 5000));
    ask(&c, "BAD\r\n\r\n", 400, false, &r);
    resp_free(&r);
    t0 = now_ns();
    while (now_ns() - t0 < 8000000000ull && cl_send(&c, "x", 1))
        sleep_us(50000);
    s = (double)(now_ns() - t0) / 1e9;
    cl_close(&c);
    ck_assert_msg(s > 1.5 && s < 4.0, "the lingering close took %.3f s (2 s expected)", s);
    ck_assert_int_eq(get_status(port, get_a), 200);
    finish();
}
END_TEST

/* ---- Expect: 100-continue ------------------------------------------------------- */

/* Reads the interim 100 Continue within 500 ms (curl waits 1 s for it). */
static void read_continue(struct cl *c)
{
    struct resp r;
    uint64_t t0 = now_ns();
    ck_assert_msg(cl_read(c, &r, false), "no 100 Continue");
    double ms = (double)(now_ns() - t0) / 1e6;
    ck_assert_int_eq(r.status, 100);
    ck_assert_int_eq((int)r.body_len, 0);
    ck_assert_msg(ms < 500, "100 Continue after %.1f ms", ms);
    resp_free(&r);
}

START_TEST(test_expect)
{
    unsigned port = start(1000, _i, NULL);
    struct cl c;
    struct resp r;
    /* GET with a body: 100 Continue, the body, the file; the connection stays */
    ck_assert(cl_connect(&c, port, 5000));
    ck_assert(cl_sendstr(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                             "Content-Length: 5\r\n\r\n"));
    read_continue(&c);
    ask(&c, "hello", 200, false, &r);
    ck_assert_str_eq(r.body, a_txt);
    resp_free(&r);
    /* HEAD, with the body in two pieces */
    ck_assert(cl_sendstr(&c, "HEAD /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-Continue\r\n"
                             "Content-Length: 3\r\n\r\na"));
    read_continue(&c);
    ask(&c, "bc", 200, true, &r);
    resp_free(&r);
    /* the body with the head: no 100 (pipelined with a second request) */
    ck_assert(cl_sendstr(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                             "Content-Length: 2\r\n\r\nhi"));
    ask(&c, get_a, 200, false, &r);
    resp_free(&r);
    ck_assert(cl_read(&c, &r, false));
    ck_assert_int_eq(r.status, 200);
    resp_free(&r);
    cl_close(&c);

    /* POST: its 405 at once, without the body, and a close */
    ck_assert(cl_connect(&c, port, 5000));
    uint64_t t0 = now_ns();
    ask(&c, "POST /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n",
        405, false, &r);
    ck_assert_msg(now_ns() - t0 < 500000000ull, "405 after %llu ms",
                  (unsigned long long)((now_ns() - t0) / 1000000));
    ck_assert_str_eq(resp_header(&r, "Allow"), "GET, HEAD");
    assert_closes(&c, &r);

    /* HTTP/1.0: the expectation is ignored, the body awaited */
    ck_assert(cl_connect(&c, port, 5000));
    ck_assert(cl_sendstr(&c, "GET /a.txt HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"));
    ck_assert_msg(cl_silent_for(&c, 300), "an answer before the body of an HTTP/1.0 request");
    ask(&c, "hello", 200, false, &r);
    resp_free(&r);
    cl_close(&c);

    /* any other expectation: 417, closed; a body too large: 413 at once */
    ck_assert(cl_connect(&c, port, 5000));
    ask(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue, fly\r\n\r\n", 417, false, &r);
    assert_closes(&c, &r);
    ck_assert(cl_connect(&c, port, 5000));
    ask(&c, "PUT /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 100000\r\n\r\n",
        413, false, &r);
    assert_closes(&c, &r);

    /* a client that never sends the body after its 100: 408 at the timeout */
    ck_assert(cl_connect(&c, port, 5000));
    ck_assert(cl_sendstr(&c, "GET /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                             "Content-Length: 5\r\n\r\n"));
    read_continue(&c);
    ck_assert(cl_read(&c, &r, false));
    ck_assert_int_eq(r.status, 408);
    assert_closes(&c, &r);
    finish();
}
END_TEST

/* ---- the status page ------------------------------------------------------------------ */

static bool loopback4(const char *addr)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    ck_assert_int_eq(inet_pton(AF_INET, addr, &a.sin_addr), 1);
    return sws_peer_loopback((struct sockaddr *)&a, sizeof(a));
}

static bool loopback6(const char *addr)
{
    struct sockaddr_in6 a = { .sin6_family = AF_INET6 };
    ck_assert_int_eq(inet_pton(AF_INET6, addr, &a.sin6_addr), 1);
    return sws_peer_loopback((struct sockaddr *)&a, sizeof(a));
}

/* Who may see the page (the network tests run on 127.0.0.1 only, so the
 * other peers are tested through the predicate the Accept handler uses). */
START_TEST(test_status_peers)
{
    ck_assert(loopback4("127.0.0.1") && loopback4("127.1.2.3") && loopback4("127.255.255.254"));
    ck_assert(!loopback4("10.0.0.1") && !loopback4("128.0.0.1") && !loopback4("0.0.0.0") &&
              !loopback4("192.168.1.127"));
    ck_assert(loopback6("::1") && loopback6("::ffff:127.0.0.1"));
    ck_assert(!loopback6("::ffff:10.0.0.1") && !loopback6("2001:db8::1") && !loopback6("::") &&
              !loopback6("fe80::1"));
    struct sockaddr_in a = { .sin_family = AF_INET };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert(!sws_peer_loopback((struct sockaddr *)&a, sizeof(a) - 4)); /* short */
    ck_assert(!sws_peer_loopback(NULL, 0));
    struct sockaddr_in far = { .sin_family = AF_INET };
    inet_pton(AF_INET, "192.0.2.7", &far.sin_addr);
    static struct sws s; /* only its configuration is read */
    s.status_path = "/server-status";
    ck_assert(sws_status_allowed(&s, (struct sockaddr *)&a, sizeof(a)));
    ck_assert(!sws_status_allowed(&s, (struct sockaddr *)&far, sizeof(far)));
    s.cfg.status_public = true;
    ck_assert(sws_status_allowed(&s, (struct sockaddr *)&far, sizeof(far)));
    s.status_path = NULL; /* off */
    ck_assert(!sws_status_allowed(&s, (struct sockaddr *)&a, sizeof(a)));
}
END_TEST

/* GET path: the status page (true) or the file named server-status (false). */
static bool is_status_page(unsigned port, const char *path)
{
    char q[256];
    snprintf(q, sizeof(q), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    struct cl c;
    struct resp r;
    ck_assert(cl_connect(&c, port, 5000));
    ask(&c, q, 200, false, &r);
    bool page = strncmp(r.body, "SWS server status\n", 18) == 0;
    ck_assert_msg(page || strcmp(r.body, status_file) == 0, "%s: \"%.40s\"", path, r.body);
    resp_free(&r);
    cl_close(&c);
    return page;
}

/* The page where status_path says (loopback peers), the file elsewhere. */
START_TEST(test_status_path)
{
    unsigned port = start(10000, false, "/server-status"); /* the default path */
    ck_assert(is_status_page(port, "/server-status"));
    ck_assert(is_status_page(port, "/server-%73tatus?format=text"));
    finish();
    port = start(10000, false, "/stats/now");
    ck_assert(is_status_page(port, "/stats/now"));
    ck_assert(!is_status_page(port, "/server-status"));
    ck_assert_int_eq(get_status(port, "GET /stats/now?format=json HTTP/1.1\r\nHost: t\r\n\r\n"), 200);
    ck_assert_int_eq(get_status(port, "GET /stats HTTP/1.1\r\nHost: t\r\n\r\n"), 404);
    finish();
    port = start(10000, false, "off");
    ck_assert(!is_status_page(port, "/server-status"));
    finish();
    /* paths no request can have */
    const char *bad[] = { "stats", "/a/../stats", "/./stats", "/s?x", "/s#x", "" };
    for (int i = 0; i < NELEM(bad); i++) {
        struct sws_config cfg;
        srv_config(&cfg);
        cfg.status_path = bad[i];
        static struct sws s;
        char err[256] = "";
        ck_assert_msg(sws_start(&s, &cfg, err, sizeof(err)) != 0, "\"%s\" accepted", bad[i]);
        ck_assert_msg(strstr(err, "status path"), "\"%s\": %s", bad[i], err);
        sws_free(&s);
    }
}
END_TEST

/* The binary: its --help, the start-up warning when the root has a file at
 * the status path (the start then fails on a bad --host: no server to stop). */
START_TEST(test_status_cli)
{
    static char out[8192], err[8192];
    char *help[] = { SWS_BIN, "--help", NULL };
    ck_assert_int_eq(run_bin(help, out, sizeof(out), err, sizeof(err)), 0);
    ck_assert(strstr(out, "--status-path") && strstr(out, "--status-public"));
    make_root(true);
    char *shadow[] = { SWS_BIN, "--root", root, "--host", "bad", "--port", "0", NULL };
    ck_assert_int_eq(run_bin(shadow, out, sizeof(out), err, sizeof(err)), 1);
    ck_assert_msg(strstr(err, "warning: ") && strstr(err, "/server-status exists"), "%s", err);
    char *off[] = { SWS_BIN, "--root", root, "--status-path", "off", "--host", "bad", "--port", "0", NULL };
    ck_assert_int_eq(run_bin(off, out, sizeof(out), err, sizeof(err)), 1);
    ck_assert_msg(!strstr(err, "warning"), "%s", err);
    char *rel[] = { SWS_BIN, "--status-path", "stats", "--port", "0", NULL };
    ck_assert_int_eq(run_bin(rel, out, sizeof(out), err, sizeof(err)), 1);
    ck_assert_msg(strstr(err, "sws: status path"), "%s", err);
    remove_root();
}
END_TEST

/* ---- the URL printed at start-up ------------------------------------------------------ */

/* Whether a socket can be bound to [::1] (IPv6 loopback). */
static bool have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* sws --host ::1 printed "http://:::PORT/" (the host's colons and the port's
 * run together); an IPv6 address goes in brackets. */
START_TEST(test_url)
{
    char u[64];
    ck_assert_int_eq(sws_url(u, sizeof(u), "127.0.0.1", 8080), 22);
    ck_assert_str_eq(u, "http://127.0.0.1:8080/");
    sws_url(u, sizeof(u), "0.0.0.0", 80);
    ck_assert_str_eq(u, "http://0.0.0.0:80/");
    sws_url(u, sizeof(u), "::", 8080);
    ck_assert_str_eq(u, "http://[::]:8080/");
    sws_url(u, sizeof(u), "::1", 0);
    ck_assert_str_eq(u, "http://[::1]:0/");
    sws_url(u, sizeof(u), "2001:db8::7", 65535);
    ck_assert_str_eq(u, "http://[2001:db8::7]:65535/");
    sws_url(u, sizeof(u), "::ffff:127.0.0.1", 1);
    ck_assert_str_eq(u, "http://[::ffff:127.0.0.1]:1/");
    ck_assert_int_eq(sws_url(u, 8, "::1", 8080), 18); /* cut, NUL-ended */
    ck_assert_str_eq(u, "http://");
    if (!have_ipv6_loopback()) {
        printf("test_url: no IPv6 loopback here, the binary on ::1 not tried\n");
        return;
    }
    char *argv[] = { SWS_BIN, "--host", "::1", "--port", "0", "--workers", "1", "--no-pin", NULL };
    struct bin b;
    bin_start(&b, argv);
    char want[64];
    snprintf(want, sizeof(want), " on http://[::1]:%u/ ", b.port);
    ck_assert_msg(strstr(b.line, want) != NULL, "start-up line \"%s\" without \"%s\"", b.line, want);
    /* and it serves there */
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)b.port),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT };
    struct timeval tv = { .tv_sec = 5 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    static const char q[] = "GET /hello.txt HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n";
    ck_assert_int_eq((int)write(fd, q, sizeof(q) - 1), (int)sizeof(q) - 1);
    char r[1024];
    size_t have = 0;
    for (ssize_t n; have < sizeof(r) - 1 && (n = read(fd, r + have, sizeof(r) - 1 - have)) > 0;)
        have += (size_t)n;
    r[have] = '\0';
    close(fd);
    ck_assert_msg(strncmp(r, "HTTP/1.1 200 ", 13) == 0 && strstr(r, "\r\n\r\nHello from SWS.\n"),
                  "GET /hello.txt over [::1]: \"%s\"", r);
    ck_assert_int_eq(bin_stop(&b), 0);
}
END_TEST

/* ---- descriptor exhaustion on the status page ------------------------------------- */

static unsigned fds_of(int pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/fd", pid);
    DIR *d = opendir(p);
    ck_assert_msg(d != NULL, "%s: %s", p, strerror(errno));
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The status page's "name: N" line, or -1. */
static long status_field(unsigned port, const char *name)
{
    struct cl c;
    struct resp r;
    long v = -1;
    if (!cl_connect(&c, port, 2000))
        return -1;
    if (cl_sendstr(&c, "GET /server-status HTTP/1.1\r\nHost: t\r\n\r\n") && cl_read(&c, &r, false)) {
        const char *at = r.status == 200 ? strstr(r.body, name) : NULL;
        if (at && at[strlen(name)] == ':')
            v = atol(at + strlen(name) + 1);
        resp_free(&r);
    }
    cl_close(&c);
    return v;
}

/* The binary with a descriptor limit a few above what it uses idle: more
 * clients than that make accept() fail with EMFILE, the listener pauses, and
 * exhaustion_pauses (not cap_pauses) counts it. */
START_TEST(test_exhaustion_pauses)
{
    char *argv[] = { SWS_BIN, "--port", "0", "--workers", "1", "--no-pin", NULL };
    struct bin b;
    bin_start(&b, argv);
    ck_assert_int_eq((int)status_field(b.port, "exhaustion_pauses"), 0);
    sleep_us(100000); /* that connection's Close */
    struct rlimit rl;
    ck_assert_int_eq(prlimit(b.pid, RLIMIT_NOFILE, NULL, &rl), 0);
    rl.rlim_cur = fds_of(b.pid) + 3;
    ck_assert_int_eq(prlimit(b.pid, RLIMIT_NOFILE, &rl, NULL), 0);
    enum { CLIENTS = 24 };
    struct cl c[CLIENTS];
    int n = 0;
    for (; n < CLIENTS; n++)
        if (!cl_connect(&c[n], b.port, 2000))
            break;
    sleep_us(300000); /* accept fails, pauses 100 ms, fails again */
    for (int i = 0; i < n; i++)
        cl_close(&c[i]);
    long pauses = -1, cap = -1;
    for (int i = 0; i < 100 && pauses < 0; i++) { /* at most ~10 s: the backlog drains */
        pauses = status_field(b.port, "exhaustion_pauses");
        if (pauses < 0)
            sleep_us(100000);
    }
    if (pauses >= 0)
        cap = status_field(b.port, "cap_pauses");
    int rc = bin_stop(&b);
    printf("descriptor limit: %d clients, exhaustion_pauses %ld, cap_pauses %ld\n", n, pauses, cap);
    ck_assert_int_eq(n, CLIENTS);
    ck_assert_msg(pauses >= 1, "exhaustion_pauses: %ld", pauses);
    ck_assert_int_eq((int)cap, 0);
    ck_assert_int_eq(rc, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sws_proto");
    TCase *tc = new_tcase(s, "lines", 60);
    tcase_add_loop_test(tc, test_empty_lines, 0, 2);
    tcase_add_loop_test(tc, test_crlf_flood, 0, 2);
    tc = new_tcase(s, "expect", 60);
    tcase_add_loop_test(tc, test_expect, 0, 2);
    tc = new_tcase(s, "status", 60);
    tcase_add_test(tc, test_status_peers);
    tcase_add_test(tc, test_status_path);
    tcase_add_test(tc, test_status_cli);
    tcase_add_test(tc, test_exhaustion_pauses);
    tcase_add_test(tc, test_url);
    return mely_test_main(s);
}
