/* SPDX-License-Identifier: MIT */
/*
 * check_sws_http.c: SWS's request parser (apps/sws/http.c) on its own:
 * well-formed requests and their fields, every proper prefix of a request
 * being incomplete (never an error, never a parse), the limits and their
 * statuses, the hostile forms the RFC says to reject, path decoding and the
 * refusal of dot segments, entity-tag matching, the empty lines allowed before
 * a request line, and Expect (100-continue, 417).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/sws/http.h"
#include "tests/testutil.h"

static long parse(const char *s, struct http_req *r)
{
    return http_parse(s, strlen(s), r);
}

START_TEST(test_valid)
{
    struct http_req r;
    const char *q = "GET /a/b.html?x=1 HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"e1\"\r\n\r\n";
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert_int_eq(r.method, HTTP_GET);
    ck_assert_int_eq(r.minor, 1);
    ck_assert(r.keep_alive);
    ck_assert_str_eq(r.path, "/a/b.html");
    ck_assert_int_eq((int)r.query_len, 3);
    ck_assert_int_eq((int)r.inm_len, 4);

    q = "HEAD / HTTP/1.0\r\n\r\n";
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert_int_eq(r.method, HTTP_HEAD);
    ck_assert_int_eq(r.minor, 0);
    ck_assert(!r.keep_alive);
    q = "GET / HTTP/1.0\nConnection: Keep-Alive\n\n"; /* bare LF */
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert(r.keep_alive);
    q = "GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n";
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert(!r.keep_alive);
    q = "GET / HTTP/1.0\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n"; /* close wins */
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert(!r.keep_alive);
    q = "GET http://example.com/x%20y HTTP/1.1\r\nHost: h\r\n\r\n";
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert_str_eq(r.path, "/x y");
    q = "GET http://example.com HTTP/1.1\r\nHost: h\r\n\r\n";
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert_str_eq(r.path, "/");
    q = "DELETE /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert_int_eq(r.method, HTTP_OTHER);
    q = "PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc";
    ck_assert_int_eq(parse(q, &r), (long)strlen(q)); /* a repeated length that agrees */
    ck_assert_int_eq((int)r.body_len, 3);
    q = "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEF / HTTP/1.1\r\nHost: h\r\n\r\n"; /* 32 */
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    ck_assert_int_eq(r.method, HTTP_OTHER);
    q = "GET / HTTP/1.2\r\nHost: h\r\n\r\n"; /* 1.x is 1.1 */
    ck_assert_int_eq(parse(q, &r), (long)strlen(q));
    /* two requests: the first is parsed alone */
    q = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
    ck_assert_int_eq(parse(q, &r), (long)(strlen(q) / 2));
    ck_assert_str_eq(r.path, "/1");
}
END_TEST

START_TEST(test_prefixes)
{
    const char *q = "GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n"
                    "Connection: keep-alive\r\n\r\nhello";
    size_t n = strlen(q);
    struct http_req r;
    for (size_t i = 0; i < n; i++) {
        size_t scan = 0;
        ck_assert_msg(http_parse(q, i, &r) == 0, "prefix of %zu bytes", i);
        if (i < n - 5)
            ck_assert_msg(http_head_end(q, i, &scan) == 0, "head end in %zu bytes", i);
    }
    ck_assert_int_eq(http_parse(q, n, &r), (long)n);
    /* the incremental head search finds the end fed byte by byte */
    size_t scan = 0, end = 0;
    for (size_t i = 1; i <= n && !end; i++)
        end = http_head_end(q, i, &scan);
    ck_assert_int_eq((int)end, (int)(n - 5));
}
END_TEST

static const struct {
    const char *req;
    long status;
} bad[] = {
    { "GET / HTTP/1.1\r\n\r\n", -400 },                         /* no Host */
    { "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", -400 },     /* two */
    { "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", -400 },     /* two in 1.0 too */
    { "GET / HTTP/2.0\r\nHost: a\r\n\r\n", -505 },
    { "GET / HTTP/0.9\r\nHost: a\r\n\r\n", -505 },
    { "GET / HTTP/1\r\nHost: a\r\n\r\n", -400 },
    { "GET / http/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /  HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET\r\n\r\n", -400 },
    { " GET / HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG / HTTP/1.1\r\nHost: a\r\n\r\n", -400 }, /* 33 */
    { "GET / HTTP/1.1\r\nHost : a\r\n\r\n", -400 },              /* space before colon */
    { "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", -400 },     /* obs-fold */
    { "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", -400 },             /* bare CR */
    { "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", -400 },
    { "GET / HTTP/1.1\r\nNoColon\r\n\r\n", -400 },
    { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", -400 },
    { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n", -400 },
    { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", -400 },
    { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", -413 },
    { "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n", -413 },
    { "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", -501 },
    { "GET /../etc/passwd HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /a/.. HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /./x HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /%2E%2e HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /.%2e/x HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /a%2f..%2fb HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /a%5c..%5cb HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /%00 HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /% HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /%4 HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET * HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET example.com:80 HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "GET http://h/../x HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
    { "\x01\x02\x03\r\n\r\n", -400 },
};

START_TEST(test_bad)
{
    for (int i = 0; i < NELEM(bad); i++) {
        struct http_req r;
        long got = http_parse(bad[i].req, strlen(bad[i].req), &r);
        ck_assert_msg(got == bad[i].status, "request %d (%s): %ld, expected %ld", i, bad[i].req,
                      got, bad[i].status);
    }
}
END_TEST

START_TEST(test_limits)
{
    struct http_req r;
    char *q = malloc(3 * HTTP_MAX_HEAD);
    /* 414: a target over the limit, complete or not */
    int n = sprintf(q, "GET /");
    memset(q + n, 'a', HTTP_MAX_TARGET);
    n += HTTP_MAX_TARGET;
    ck_assert_int_eq(http_parse(q, (size_t)n, &r), -414);
    n += sprintf(q + n, " HTTP/1.1\r\nHost: a\r\n\r\n");
    ck_assert_int_eq(http_parse(q, (size_t)n, &r), -414);
    /* just under: fine (404 later) */
    n = sprintf(q, "GET /");
    memset(q + n, 'a', HTTP_MAX_TARGET - 2);
    n += HTTP_MAX_TARGET - 2;
    n += sprintf(q + n, " HTTP/1.1\r\nHost: a\r\n\r\n");
    ck_assert_int_eq(http_parse(q, (size_t)n, &r), n);
    /* 431: one huge header, or too many */
    n = sprintf(q, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
    memset(q + n, 'b', HTTP_MAX_HEAD);
    n += HTTP_MAX_HEAD;
    n += sprintf(q + n, "\r\n\r\n");
    ck_assert_int_eq(http_parse(q, (size_t)n, &r), -431);
    n = sprintf(q, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 0; i < HTTP_MAX_HEADERS + 1; i++)
        n += sprintf(q + n, "X%d: y\r\n", i);
    n += sprintf(q + n, "\r\n");
    ck_assert_int_eq(http_parse(q, (size_t)n, &r), -431);
    /* the empty line counts: a head of exactly HTTP_MAX_HEAD bytes is fine, one
     * more is not */
    for (int over = 0; over <= 1; over++) {
        n = sprintf(q, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
        int pad = HTTP_MAX_HEAD - n - 4 + over;
        memset(q + n, 'b', (size_t)pad);
        n += pad;
        n += sprintf(q + n, "\r\n\r\n");
        ck_assert_int_eq(n, HTTP_MAX_HEAD + over);
        ck_assert_int_eq(http_parse(q, (size_t)n, &r), over ? -431 : n);
    }
    /* 414 before any line end: a first line longer than any request line
     * can be, even without a space in it */
    memset(q, 'A', HTTP_MAX_TARGET + 65);
    ck_assert_int_eq(http_parse(q, HTTP_MAX_TARGET + 64, &r), 0);
    ck_assert_int_eq(http_parse(q, HTTP_MAX_TARGET + 65, &r), -414);
    /* ... but a short target followed by a long run is not a long target */
    n = sprintf(q, "GET /a ");
    memset(q + n, 'x', HTTP_MAX_TARGET + 10);
    ck_assert_int_eq(http_parse(q, (size_t)n + HTTP_MAX_TARGET + 10, &r), 0);
    /* an unfinished head at the limit */
    n = sprintf(q, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
    memset(q + n, 'b', HTTP_MAX_HEAD);
    n += HTTP_MAX_HEAD;
    ck_assert_int_eq(http_parse(q, (size_t)n, &r), -431);
    free(q);
}
END_TEST

/* At most HTTP_MAX_EMPTY_LINES empty lines (CRLF or LF), counted across calls. */
START_TEST(test_empty_lines)
{
    unsigned lines = 0;
    ck_assert_int_eq(http_skip_empty_lines("GET", 3, &lines), 0);
    ck_assert_int_eq((int)lines, 0);
    ck_assert_int_eq(http_skip_empty_lines("\r\n\nGET", 6, &lines), 3);
    ck_assert_int_eq((int)lines, 2);
    /* a CR at the end waits for its LF; a CR before anything else is not
     * an empty line (the parser refuses it) */
    ck_assert_int_eq(http_skip_empty_lines("\r", 1, &lines), 0);
    ck_assert_int_eq(http_skip_empty_lines("\rX", 2, &lines), 0);
    ck_assert_int_eq(http_skip_empty_lines("", 0, &lines), 0);
    ck_assert_int_eq((int)lines, 2);
    /* two more are allowed (4 in all), the fifth is not, in one buffer or
     * over several reads */
    ck_assert_int_eq(http_skip_empty_lines("\r\n\r\nG", 5, &lines), 4);
    ck_assert_int_eq((int)lines, HTTP_MAX_EMPTY_LINES);
    ck_assert_int_eq(http_skip_empty_lines("\n", 1, &lines), -400);
    lines = 0;
    ck_assert_int_eq(http_skip_empty_lines("\r\n\r\n\r\n\r\n\r\nGET", 13, &lines), -400);
    /* a flood: refused after the limit, without reading the rest */
    size_t n = 1u << 20;
    char *flood = malloc(n);
    for (size_t i = 0; i < n; i += 2)
        memcpy(flood + i, "\r\n", 2);
    lines = 0;
    ck_assert_int_eq(http_skip_empty_lines(flood, n, &lines), -400);
    ck_assert_int_eq((int)lines, HTTP_MAX_EMPTY_LINES + 1);
    free(flood);
}
END_TEST

/* Expect: 100-continue is noted (HTTP/1.1 only: RFC 9110 10.1.1 says a
 * 1.0 one is ignored); any other expectation gets 417; a head complete
 * without its body is 0 with the head parsed. */
START_TEST(test_expect)
{
    struct http_req r;
    const char *q = "PUT /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    size_t hl = strlen(q);
    ck_assert_int_eq(parse(q, &r), 0);
    ck_assert(r.expect_continue);
    ck_assert_int_eq((int)r.head_len, (int)hl);
    ck_assert_int_eq((int)r.body_len, 5);
    ck_assert_int_eq(r.method, HTTP_OTHER);
    char full[256];
    snprintf(full, sizeof(full), "%shello", q);
    ck_assert_int_eq(parse(full, &r), (long)strlen(full));
    ck_assert(r.expect_continue);
    /* an incomplete head: head_len stays 0 */
    ck_assert_int_eq(http_parse(q, hl - 2, &r), 0);
    ck_assert_int_eq((int)r.head_len, 0);
    const struct {
        const char *req;
        long ret;
        bool cont;
    } cases[] = {
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n\r\n", 0, true },
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect:  100-continue , \r\n\r\n", 0, true },
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect:\r\n\r\n", 0, false }, /* an empty list */
        { "GET / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", 0, false },
        { "GET / HTTP/1.1\r\nHost: h\r\n\r\n", 0, false },
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n", -417, false },
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue, x\r\n\r\n", -417, false },
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue=1\r\n\r\n", -417, false },
        { "GET / HTTP/1.0\r\nExpect: foo\r\n\r\n", -417, false },
        { "GET / HTTP/1.1\r\nHost: h\r\nExpect: x\r\nContent-Length: 9999\r\n\r\n", -413, false },
    };
    for (int i = 0; i < NELEM(cases); i++) {
        long got = parse(cases[i].req, &r);
        long want = cases[i].ret ? cases[i].ret : (long)strlen(cases[i].req);
        ck_assert_msg(got == want, "case %d: %ld, expected %ld", i, got, want);
        if (got > 0)
            ck_assert_msg(r.expect_continue == cases[i].cont, "case %d", i);
    }
}
END_TEST

START_TEST(test_etag)
{
    const char *e = "\"abc-1\"";
    size_t el = strlen(e);
#define M(v) http_etag_match(v, strlen(v), e, el)
    ck_assert(M("\"abc-1\""));
    ck_assert(M("*"));
    ck_assert(M("\"x\", \"abc-1\""));
    ck_assert(M("W/\"abc-1\""));
    ck_assert(!M("\"abc-2\""));
    ck_assert(!M("abc-1"));
    ck_assert(!M(""));
    ck_assert(!M("\"abc-1"));
#undef M
}
END_TEST

/* Random bytes and mutations of a valid request: never a crash, never a
 * length beyond the input (a quick stand-in for the fuzzer in CI). */
START_TEST(test_random)
{
    const char *base = "GET /files/1k.html?x HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"x\"\r\n"
                       "Content-Length: 3\r\nConnection: keep-alive\r\n\r\nabc";
    size_t bl = strlen(base);
    unsigned seed = 12345;
    char buf[512];
    unsigned rounds = scaled(200000, 10000, SCALED_MAX);
    for (unsigned i = 0; i < rounds; i++) {
        size_t n;
        if (i % 4 == 0) {
            n = (size_t)(rand_r(&seed) % sizeof(buf));
            for (size_t k = 0; k < n; k++)
                buf[k] = (char)rand_r(&seed);
        } else {
            memcpy(buf, base, bl);
            n = bl;
            for (unsigned k = 0; k < 1 + i % 4; k++)
                buf[rand_r(&seed) % n] = (char)(i % 3 ? rand_r(&seed) : "\r\n :/%.\0"[rand_r(&seed) % 8]);
            n = (size_t)(rand_r(&seed) % (n + 1));
        }
        struct http_req r;
        long got = http_parse(buf, n, &r);
        ck_assert(got <= (long)n);
        ck_assert(got >= 0 || got == -400 || got == -413 || got == -414 || got == -417 ||
                  got == -431 || got == -501 || got == -505);
        if (got > 0)
            ck_assert(r.path[0] == '/' && strstr(r.path, "/..") == NULL);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sws_http");
    TCase *tc = new_tcase(s, "parser", 30);
    tcase_add_test(tc, test_valid);
    tcase_add_test(tc, test_prefixes);
    tcase_add_test(tc, test_bad);
    tcase_add_test(tc, test_limits);
    tcase_add_test(tc, test_empty_lines);
    tcase_add_test(tc, test_expect);
    tcase_add_test(tc, test_etag);
    tcase_add_test(tc, test_random);
    return mely_test_main(s);
}
