/* SPDX-License-Identifier: MIT */
/*
 * http.h: SWS's HTTP/1.1 request parser (the ParseRequest handler's work).
 *
 * A pure function over a byte buffer: no allocation, no global state, so it
 * can be fuzzed on its own (apps/sws/fuzz/). It recognizes the subset SWS
 * serves: GET and HEAD of origin-form (or absolute-form) targets, HTTP/1.0 and
 * 1.x; every other well-formed method is reported so that the server answers
 * 405; every malformed or oversized request is reported with the status to
 * send (400, 413, 414, 417, 431, 501, 505).
 */
#ifndef SWS_HTTP_H
#define SWS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

/* Limits (the statuses they produce are in parentheses). */
#define HTTP_MAX_TARGET 2048 /* request target, in bytes (414) */
#define HTTP_MAX_HEAD 8192   /* request line + headers + blank line (431) */
#define HTTP_MAX_HEADERS 64  /* header lines (431) */
#define HTTP_MAX_BODY 4096   /* Content-Length accepted (and ignored) (413) */
#define HTTP_MAX_PATH HTTP_MAX_TARGET /* decoded path (414) */
#define HTTP_MAX_EMPTY_LINES 4 /* empty lines ignored before a request line (400) */

enum http_method { HTTP_GET, HTTP_HEAD, HTTP_OTHER };

struct http_req {
    enum http_method method;
    int minor;            /* 0: HTTP/1.0; 1: HTTP/1.1 (and 1.x, treated as 1.1) */
    bool keep_alive;      /* the connection stays open after the response */
    const char *target;   /* the raw request target (points into the buffer) */
    size_t target_len;
    size_t path_len;
    const char *query;    /* after '?', raw (not decoded); NULL without one */
    size_t query_len;
    const char *inm;      /* If-None-Match value, NULL without one */
    size_t inm_len;
    size_t head_len;      /* bytes of the request line and headers */
    size_t body_len;      /* Content-Length (skipped) */
    bool expect_continue; /* "Expect: 100-continue" in an HTTP/1.1 request (RFC 9110
                             10.1.1: an HTTP/1.0 one is ignored) */
    char path[HTTP_MAX_PATH + 1]; /* decoded absolute path, query removed, NUL-ended
                                     (last: http_parse clears the fields before it) */
};

/*
 * Finds the end of the request head (the empty line) in buf[0..len), starting
 * the search at *scan (where an earlier call stopped; 0 the first time), and
 * updates *scan. Accepts CRLF and bare LF line ends.
 * @return the head's length (through the empty line), or 0 if it is not
 *         complete yet.
 */
size_t http_head_end(const char *buf, size_t len, size_t *scan);

/*
 * Counts and measures the empty lines (CRLF or LF) at the start of buf[0..len),
 * which RFC 9112 (2.2) says a server SHOULD ignore before a request line.
 * *lines holds those already skipped before this request (0 at first: the
 * caller keeps it across reads and resets it once a request is answered); at
 * most HTTP_MAX_EMPTY_LINES are allowed, so that a client cannot keep a
 * server reading empty lines as fast as it can send them.
 * @return the bytes of the whole empty lines at the start (to drop; *lines
 *         grows by their number; a CR at the very end waits for its LF), or
 *         -400 once more than HTTP_MAX_EMPTY_LINES were seen.
 */
long http_skip_empty_lines(const char *buf, size_t len, unsigned *lines);

/*
 * Parses one request at the start of buf[0..len) (after the empty lines:
 * http_skip_empty_lines).
 * @return the request's total length (head and body: the bytes to consume) when
 *         complete and acceptable (req filled; req->method may be HTTP_OTHER:
 *         answer 405); 0 if more bytes are needed (if only body bytes are
 *         missing, req is filled and req->head_len is not 0, so that the
 *         caller can answer an Expect: 100-continue before the body comes);
 *         -status for a request to refuse (req->minor and req->method are
 *         filled when they could be read): -400, -413, -414, -417 (an
 *         expectation other than 100-continue), -431, -501, -505. After an
 *         error the connection must be closed.
 */
long http_parse(const char *buf, size_t len, struct http_req *req);

/* Whether the If-None-Match value v[0..n) matches the entity tag etag
 * (quoted, e.g. "\"5f-1a2b\""): "*", or one of a comma-separated list
 * (weak comparison: a W/ prefix is ignored). */
bool http_etag_match(const char *v, size_t n, const char *etag, size_t etag_len);

#endif /* SWS_HTTP_H */
