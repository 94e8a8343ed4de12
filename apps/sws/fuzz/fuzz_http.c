/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http.c: a libFuzzer target for SWS's request parser (apps/sws/http.c).
 * Built and run by run.sh (clang -fsanitize=fuzzer,address,undefined).
 *
 * Beyond "no crash", it checks what the server relies on: a parsed length
 * never exceeds the input, an error is one of the statuses SWS sends, a
 * parsed path is absolute and holds no dot segment and no NUL, the incremental
 * head search agrees with a search from the start, a complete request
 * stays complete (with the same length) when more bytes follow it, a head
 * without its body says so, and the empty lines skipped before a request
 * are whole lines and at most HTTP_MAX_EMPTY_LINES.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apps/sws/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    static struct http_req r;
    long n = http_parse(buf, size, &r);
    if (n > (long)size)
        abort();
    if (n < 0 && n != -400 && n != -413 && n != -414 && n != -417 && n != -431 && n != -501 &&
        n != -505)
        abort();
    if (n == 0 && r.head_len && (r.head_len > size || r.head_len + r.body_len <= size))
        abort(); /* a head without its body: the body is what is missing */
    /* the empty lines before a request: whole lines, a bounded number */
    unsigned lines = 0;
    long skip = http_skip_empty_lines(buf, size, &lines);
    if (skip > (long)size || (skip < 0 && skip != -400) ||
        (skip >= 0 ? lines > HTTP_MAX_EMPTY_LINES || (size_t)skip > 2 * lines
                   : lines != HTTP_MAX_EMPTY_LINES + 1))
        abort();
    if (n > 0) {
        if (r.path[0] != '/' || strlen(r.path) != r.path_len)
            abort();
        for (const char *p = r.path; *p; p++)
            if (*p == '/' && p[1] == '.' && (p[2] == '/' || p[2] == '\0' ||
                                            (p[2] == '.' && (p[3] == '/' || p[3] == '\0'))))
                abort();
        if (r.head_len + r.body_len != (size_t)n)
            abort();
        /* the same request followed by more bytes parses the same */
        char *more = malloc(size + 16);
        memcpy(more, buf, size);
        memcpy(more + size, "GET / HTTP/1.1\r\n", 16);
        static struct http_req r2;
        long n2 = http_parse(more, size + 16, &r2);
        free(more);
        if (n2 != n || strcmp(r2.path, r.path) != 0)
            abort();
    }
    /* the head search, at once and byte by byte, agree */
    size_t scan = 0, whole = http_head_end(buf, size, &scan), inc = 0;
    scan = 0;
    for (size_t i = 1; i <= size && !inc; i++)
        inc = http_head_end(buf, i, &scan);
    if (whole != inc)
        abort();
    if (r.inm)
        (void)http_etag_match(r.inm, r.inm_len, "\"a-b\"", 5);
    else
        (void)http_etag_match(buf, size, "\"a-b\"", 5);
    return 0;
}
