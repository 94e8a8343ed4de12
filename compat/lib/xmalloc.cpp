/* SPDX-License-Identifier: MIT */
/* xmalloc.cpp: libasync's allocation helpers (sysconf.h), which never return
 * NULL. */
#include "sysconf.h"

namespace {

[[noreturn]] void out_of_memory(size_t size)
{
    char msg[96];
    int n = snprintf(msg, sizeof msg, "mely-compat: out of memory (%zu bytes)\n", size);
    /* No stdio buffer: there may be no memory for one. */
    ssize_t w = n > 0 ? write(2, msg, (size_t)n) : 0;
    (void)w;
    abort();
}

} // namespace

void *xmalloc(size_t size)
{
    void *p = malloc(size);
    if (!p && size)
        out_of_memory(size);
    return p;
}

void *xrealloc(void *old, size_t size)
{
    void *p = realloc(old, size);
    if (!p && size)
        out_of_memory(size);
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = static_cast<char *>(xmalloc(n));
    memcpy(d, s, n);
    return d;
}
