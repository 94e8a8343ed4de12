/* SPDX-License-Identifier: MIT */
/*
 * http.c: the request parser (http.h). Strict where the RFC says "MUST
 * reject" (whitespace before a header's colon, obs-fold, bare CR, a missing
 * or repeated Host in HTTP/1.1, conflicting Content-Length), lenient where it
 * allows (bare LF line ends, HTTP/1.x taken as 1.1).
 */
#include "apps/sws/http.h"

#include <string.h>
#include <strings.h>

/* tchar of RFC 9110 (token characters). */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A field value's characters: VCHAR, obs-text, SP, HTAB. */
static bool is_vchar(unsigned char c)
{
    return c == ' ' || c == '\t' || (c > 0x20 && c != 0x7f);
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long http_skip_empty_lines(const char *buf, size_t len, unsigned *lines)
{
    size_t i = 0;
    for (;;) { /* bounded: at most HTTP_MAX_EMPTY_LINES + 1 turns */
        size_t lf = i < len && buf[i] == '\r' ? i + 1 : i;
        if (lf >= len || buf[lf] != '\n')
            return (long)i;
        if (++*lines > HTTP_MAX_EMPTY_LINES)
            return -400;
        i = lf + 1;
    }
}

size_t http_head_end(const char *buf, size_t len, size_t *scan)
{
    size_t i = *scan;
    while (i < len) { /* bounded: i grows every turn */
        const char *nl = memchr(buf + i, '\n', len - i);
        if (!nl) {
            *scan = len;
            return 0;
        }
        i = (size_t)(nl - buf);
        if (i + 1 >= len) {
            *scan = i; /* look at this line end again with more bytes */
            return 0;
        }
        if (buf[i + 1] == '\n')
            return i + 2;
        if (buf[i + 1] == '\r') {
            if (i + 2 >= len) {
                *scan = i;
                return 0;
            }
            if (buf[i + 2] == '\n')
                return i + 3;
        }
        i++;
    }
    *scan = len;
    return 0;
}

/* The end of the line starting at p (before CRLF or LF) in [p, end), or NULL
 * if no line end; *next gets the start of the following line. A CR not
 * followed by LF ends nothing (the caller rejects it as a control). */
static const char *line_end(const char *p, const char *end, const char **next)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return NULL;
    *next = nl + 1;
    return nl > p && nl[-1] == '\r' ? nl - 1 : nl;
}

/* Case-insensitive comparison of [p, p+n) with the NUL-ended lower-case s. */
static bool ieq(const char *p, size_t n, const char *s)
{
    return strlen(s) == n && strncasecmp(p, s, n) == 0;
}


/* Decodes the path of target[0..n) (origin-form, already split from its
 * query) into req->path; returns 0 or -status. */
static long decode_path(const char *t, size_t n, struct http_req *req)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == '%') {
            if (i + 2 >= n) /* fewer than two characters follow */
                return -400;
            int hi = hexval((unsigned char)t[i + 1]);
            int lo = hexval((unsigned char)t[i + 2]);
            if (hi < 0 || lo < 0)
                return -400;
            c = (unsigned char)(hi * 16 + lo);
            if (c == 0 || c == '/' || c == '\\' || c < 0x20 || c == 0x7f)
                return -400; /* no encoded separators or controls */
            i += 2;
        } else if (c == '#') {
            return -400;
        }
        if (o >= HTTP_MAX_PATH)
            return -414;
        req->path[o++] = (char)c;
    }
    req->path[o] = '\0';
    req->path_len = o;
    /* No "." or ".." segment, raw or decoded. */
    const char *p = req->path;
    while (*p) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t sl = (size_t)(p - s);
        if ((sl == 1 && s[0] == '.') || (sl == 2 && s[0] == '.' && s[1] == '.'))
            return -400;
    }
    return 0;
}

/* Splits and decodes the request target. */
static long parse_target(struct http_req *req)
{
    const char *t = req->target, *end = t + req->target_len;
    if (*t != '/') {
        /* absolute-form: http://authority/path */
        size_t skip = 0;
        if (req->target_len >= 7 && strncasecmp(t, "http://", 7) == 0)
            skip = 7;
        else if (req->target_len >= 8 && strncasecmp(t, "https://", 8) == 0)
            skip = 8;
        else
            return -400; /* also "*" (OPTIONS only) and authority-form */
        t += skip;
        const char *slash = memchr(t, '/', (size_t)(end - t));
        const char *q = memchr(t, '?', (size_t)(end - t));
        if (q && (!slash || q < slash))
            slash = NULL; /* http://host?x: the path is "/" */
        if (t == (slash ? slash : (q ? q : end)))
            return -400; /* empty authority */
        if (!slash) {
            req->path[0] = '/';
            req->path[1] = '\0';
            req->path_len = 1;
            req->query = q ? q + 1 : NULL;
            req->query_len = q ? (size_t)(end - q - 1) : 0;
            return 0;
        }
        t = slash;
    }
    const char *q = memchr(t, '?', (size_t)(end - t));
    req->query = q ? q + 1 : NULL;
    req->query_len = q ? (size_t)(end - q - 1) : 0;
    return decode_path(t, (size_t)((q ? q : end) - t), req);
}

/* A buffer without a line end yet: 0 (more bytes needed) unless it can
 * already never become a request line, so that a client cannot hold a
 * connection by trickling one: -414 for a target past the limit, -400 for a
 * control character. */
static long partial_request_line(const char *buf, size_t len)
{
    const char *end = buf + len;
    const char *sp = memchr(buf, ' ', len);

    if (sp && (size_t)(end - sp - 1) > HTTP_MAX_TARGET && !memchr(sp + 1, ' ', HTTP_MAX_TARGET + 1))
        return -414; /* the target alone is already too long */
    if (len > HTTP_MAX_TARGET + 64)
        return -414;
    for (const char *c = buf; c < end; c++)
        if (*c == '\r' ? c + 1 < end : (unsigned char)*c < 0x20)
            return -400;
    return 0;
}

/* Reads the method token and the space after it at *p, before le; sets
 * req->method and advances *p past the space. Returns 0 or -400. */
static long parse_method(const char **p, const char *le, struct http_req *req)
{
    const char *m = *p, *e = m;

    while (e < le && is_tchar((unsigned char)*e))
        e++;
    if (e == m || e - m > 32 || e >= le || *e != ' ')
        return -400;
    size_t mlen = (size_t)(e - m);
    req->method = mlen == 3 && memcmp(m, "GET", 3) == 0    ? HTTP_GET
                  : mlen == 4 && memcmp(m, "HEAD", 4) == 0 ? HTTP_HEAD
                                                           : HTTP_OTHER;
    *p = e + 1;
    return 0;
}

/* The version, [p, le) exactly "HTTP/d.d": any 1.x is taken as 1.1. Sets
 * req->minor; returns 0, -400 or -505. */
static long parse_version(const char *p, const char *le, struct http_req *req)
{
    if (le - p != 8 || memcmp(p, "HTTP/", 5) != 0 || p[5] < '0' || p[5] > '9' || p[6] != '.' ||
        p[7] < '0' || p[7] > '9')
        return -400;
    if (p[5] != '1')
        return -505;
    req->minor = p[7] == '0' ? 0 : 1;
    return 0;
}

/* The request line [p, le): method SP target SP HTTP/d.d. Returns 0 or
 * -status. */
static long parse_request_line(const char *p, const char *le, struct http_req *req)
{
    long r = parse_method(&p, le, req);
    if (r < 0)
        return r;
    req->target = p;
    while (p < le && (unsigned char)*p > 0x20 && *p != 0x7f)
        p++;
    req->target_len = (size_t)(p - req->target);
    if (req->target_len > HTTP_MAX_TARGET)
        return -414;
    if (req->target_len == 0 || p >= le || *p != ' ')
        return -400;
    return parse_version(p + 1, le, req);
}

/* What the header fields say, checked once the head is complete. */
struct fields {
    unsigned hosts;
    bool close, keep; /* Connection tokens seen */
    bool have_cl;
    size_t cl; /* Content-Length, when have_cl */
    bool cont, other_expect; /* Expect: 100-continue, or anything else */
};

/* Which words of words[0..nwords) the comma-separated list v[0..n) holds,
 * compared case-insensitively: bit i for words[i], bit nwords for any other
 * member. Empty members and the whitespace around members are skipped (RFC
 * 9110 5.6.1). */
static unsigned list_members(const char *v, size_t n, const char *const words[], unsigned nwords)
{
    unsigned bits = 0;
    size_t i = 0;
    for (;;) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        if (i >= n)
            return bits;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        unsigned w = 0;
        while (w < nwords && !ieq(v + s, e - s, words[w]))
            w++;
        bits |= 1u << w;
    }
}

/* A Content-Length value, all digits; a repeated one must agree (RFC 9112
 * 6.3: conflicting lengths leave the framing unknown). Past HTTP_MAX_BODY
 * the rest is not read: the request gets -413 once its head is complete. */
static long content_length(const char *v, size_t vlen, struct fields *f)
{
    size_t n = 0;

    if (vlen == 0)
        return -400;
    for (size_t i = 0; i < vlen; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -400;
        if (n > HTTP_MAX_BODY)
            break; /* too large anyway; keep checking nothing more */
        n = n * 10 + (size_t)(v[i] - '0');
    }
    if (f->have_cl && n != f->cl)
        return -400;
    f->have_cl = true;
    f->cl = n;
    return 0;
}

/* Takes in the fields SWS acts on; the others are ignored. Returns 0 or
 * -status. */
static long use_field(const char *name, size_t nlen, const char *v, size_t vlen,
                      struct http_req *req, struct fields *f)
{
    static const char *const conn_words[] = { "close", "keep-alive" };
    static const char *const expect_words[] = { "100-continue" };
    if (ieq(name, nlen, "host")) {
        f->hosts++;
    } else if (ieq(name, nlen, "connection")) {
        unsigned bits = list_members(v, vlen, conn_words, 2);
        f->close |= (bits & 1) != 0;
        f->keep |= (bits & 2) != 0;
    } else if (ieq(name, nlen, "content-length")) {
        return content_length(v, vlen, f);
    } else if (ieq(name, nlen, "transfer-encoding")) {
        return -501;
    } else if (ieq(name, nlen, "expect")) {
        /* 100-continue is the only expectation HTTP defines (RFC 9110
         * 10.1.1); any other gets 417 once the head is complete. */
        unsigned bits = list_members(v, vlen, expect_words, 1);
        f->cont |= (bits & 1) != 0;
        f->other_expect |= (bits & 2) != 0;
    } else if (ieq(name, nlen, "if-none-match")) {
        req->inm = v;
        req->inm_len = vlen;
    }
    return 0;
}

/* One header field line [p, le): name ":" OWS value OWS. Returns 0 or
 * -status. */
static long parse_field(const char *p, const char *le, struct http_req *req, struct fields *f)
{
    const char *name = p;

    while (p < le && is_tchar((unsigned char)*p))
        p++;
    if (p == name || p >= le || *p != ':')
        return -400; /* also obs-fold and whitespace before the colon */
    size_t nlen = (size_t)(p - name);
    p++;
    while (p < le && (*p == ' ' || *p == '\t'))
        p++;
    const char *v = p;
    for (const char *c = v; c < le; c++)
        if (!is_vchar((unsigned char)*c))
            return -400;
    const char *ve = le;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    return use_field(name, nlen, v, (size_t)(ve - v), req, f);
}

/* The header fields from p up to the empty line. Returns the head's length
 * (through the empty line), 0 if more bytes are needed, or -status. */
static long parse_fields(const char *buf, size_t len, const char *p, struct http_req *req,
                         struct fields *f)
{
    const char *end = buf + len, *le, *next;
    unsigned nheaders = 0;

    for (;;) {
        if (p >= end || !(le = line_end(p, end, &next)))
            return len >= HTTP_MAX_HEAD ? -431 : 0;
        if (le == p)
            return (long)(next - buf); /* the empty line */
        if ((size_t)(next - buf) > HTTP_MAX_HEAD || ++nheaders > HTTP_MAX_HEADERS)
            return -431;
        long r = parse_field(p, le, req, f);
        if (r < 0)
            return r;
        p = next;
    }
}

/* Checks the complete head as a whole (RFC 9112 3.2: HTTP/1.1 needs exactly
 * one Host) and fills req->body_len, req->keep_alive and req->expect_continue. Returns 0 or
 * -status. */
static long check_head(struct http_req *req, const struct fields *f)
{
    if (req->head_len > HTTP_MAX_HEAD)
        return -431;
    if (req->minor == 1 && f->hosts != 1)
        return -400;
    if (f->hosts > 1)
        return -400;
    if (f->cl > HTTP_MAX_BODY)
        return -413;
    if (f->other_expect)
        return -417;
    req->body_len = f->cl;
    req->expect_continue = f->cont && req->minor == 1;
    req->keep_alive = req->minor == 1 ? !f->close : (f->keep && !f->close);
    return 0;
}

long http_parse(const char *buf, size_t len, struct http_req *req)
{
    const char *end = buf + len, *next;
    struct fields f = { 0 };

    memset(req, 0, offsetof(struct http_req, path));
    req->path[0] = '\0';
    req->path_len = 0;
    req->minor = 1;
    const char *le = line_end(buf, end, &next);
    if (!le)
        return partial_request_line(buf, len);
    long r = parse_request_line(buf, le, req);
    if (r < 0)
        return r;
    r = parse_fields(buf, len, next, req, &f);
    if (r <= 0)
        return r;
    req->head_len = (size_t)r;
    if ((r = check_head(req, &f)) < 0 || (r = parse_target(req)) < 0)
        return r;
    if (len - req->head_len < f.cl)
        return 0;
    return (long)(req->head_len + f.cl);
}

bool http_etag_match(const char *v, size_t n, const char *etag, size_t etag_len)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        if (i >= n)
            break;
        if (v[i] == '*')
            return true;
        if (n - i >= 2 && v[i] == 'W' && v[i + 1] == '/')
            i += 2;
        size_t s = i;
        if (i < n && v[i] == '"') {
            i++;
            while (i < n && v[i] != '"')
                i++;
            if (i < n)
                i++;
        } else {
            while (i < n && v[i] != ',')
                i++;
        }
        if (i - s == etag_len && memcmp(v + s, etag, etag_len) == 0)
            return true;
    }
    return false;
}
