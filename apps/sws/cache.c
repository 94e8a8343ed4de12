/*
 * cache.c: pre-built responses (cache.h).
 */
#include "apps/sws/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 32

static const struct {
    const char *ext, *type;
} mimes[] = {
    { "html", "text/html; charset=utf-8" },  { "htm", "text/html; charset=utf-8" },
    { "css", "text/css; charset=utf-8" },    { "js", "text/javascript; charset=utf-8" },
    { "mjs", "text/javascript; charset=utf-8" }, { "json", "application/json" },
    { "txt", "text/plain; charset=utf-8" },  { "md", "text/markdown; charset=utf-8" },
    { "xml", "application/xml" },            { "svg", "image/svg+xml" },
    { "png", "image/png" },                  { "jpg", "image/jpeg" },
    { "jpeg", "image/jpeg" },                { "gif", "image/gif" },
    { "webp", "image/webp" },                { "ico", "image/x-icon" },
    { "pdf", "application/pdf" },            { "wasm", "application/wasm" },
    { "woff", "font/woff" },                 { "woff2", "font/woff2" },
    { "mp4", "video/mp4" },                  { "webm", "video/webm" },
    { "mp3", "audio/mpeg" },                 { "zip", "application/zip" },
    { "gz", "application/gzip" },            { "tar", "application/x-tar" },
};

const char *cache_mime(const char *name)
{
    const char *slash = strrchr(name, '/');
    const char *dot = strrchr(slash ? slash : name, '.');
    if (dot && dot[1])
        for (size_t i = 0; i < sizeof(mimes) / sizeof(mimes[0]); i++)
            if (strcasecmp(dot + 1, mimes[i].ext) == 0)
                return mimes[i].type;
    return "application/octet-stream";
}

static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* A malloc'ed printf. */
static char *aprintf(size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    *len = (size_t)n;
    return s;
}

static uint64_t hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static void http_date(char *out, size_t n, time_t t)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static struct sws_file *add(struct sws_cache *c)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        struct sws_file *f = realloc(c->files, cap * sizeof(*f));
        if (!f)
            return NULL;
        c->files = f;
        c->cap = cap;
    }
    struct sws_file *f = &c->files[c->n++];
    memset(f, 0, sizeof(*f));
    return f;
}

/* Adds a file: takes body (malloc'ed, or NULL when len is 0). */
static int add_file(struct sws_cache *c, const char *path, char *body, size_t len, time_t mtime,
                    uint64_t ino)
{
    struct sws_file *f = add(c);
    if (!f) {
        free(body);
        return -1;
    }
    char date[64], etag[64];
    http_date(date, sizeof(date), mtime);
    int el = snprintf(etag, sizeof(etag), "\"%" PRIx64 "-%zx-%" PRIx64 "\"", (uint64_t)mtime, len,
                      ino & 0xffffff);
    size_t hl, h3l, pl;
    f->owns = true;
    f->body = body;
    f->body_len = len;
    f->path = aprintf(&pl, "%s", path);
    f->path_len = pl;
    f->etag = aprintf(&f->etag_len, "%.*s", el, etag);
    f->head = aprintf(&hl,
                      "HTTP/1.1 200 OK\r\nServer: sws\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Last-Modified: %s\r\nETag: %s\r\n",
                      cache_mime(path), len, date, etag);
    f->head_len = hl;
    f->head304 = aprintf(&h3l, "HTTP/1.1 304 Not Modified\r\nServer: sws\r\nLast-Modified: %s\r\nETag: %s\r\n",
                         date, etag);
    f->head304_len = h3l;
    c->bytes += len;
    return f->path && f->etag && f->head && f->head304 ? 0 : -1;
}

/* Adds an alias (a directory's "/dir/" for its index) or a redirect ("/dir"
 * to "/dir/", target NULL). */
static int add_alias(struct sws_cache *c, const char *path, size_t target, const char *location)
{
    struct sws_file *f = add(c);
    if (!f)
        return -1;
    size_t pl;
    f->path = aprintf(&pl, "%s", path);
    f->path_len = pl;
    if (location) {
        size_t hl;
        f->owns = true;
        f->head = aprintf(&hl,
                          "HTTP/1.1 301 Moved Permanently\r\nServer: sws\r\nLocation: %s\r\n"
                          "Content-Length: 0\r\n",
                          location);
        f->head_len = hl;
        return f->path && f->head ? 0 : -1;
    }
    const struct sws_file *t = &c->files[target];
    f->owns = false;
    f->head = t->head;
    f->head_len = t->head_len;
    f->head304 = t->head304;
    f->head304_len = t->head304_len;
    f->body = t->body;
    f->body_len = t->body_len;
    f->etag = t->etag;
    f->etag_len = t->etag_len;
    return f->path ? 0 : -1;
}

static int index_table(struct sws_cache *c, char *err, size_t errlen)
{
    size_t cap = 16;
    while (cap < c->n * 2)
        cap *= 2;
    c->slots = calloc(cap, sizeof(size_t));
    if (!c->slots) {
        errf(err, errlen, "out of memory");
        return -1;
    }
    c->mask = cap - 1;
    for (size_t i = 0; i < c->n; i++) {
        size_t s = (size_t)hash(c->files[i].path, c->files[i].path_len) & c->mask;
        while (c->slots[s]) /* bounded: the table is at most half full */
            s = (s + 1) & c->mask;
        c->slots[s] = i + 1;
    }
    return 0;
}

const struct sws_file *cache_find(const struct sws_cache *c, const char *path, size_t len)
{
    if (!c->slots)
        return NULL;
    size_t s = (size_t)hash(path, len) & c->mask;
    while (c->slots[s]) {
        const struct sws_file *f = &c->files[c->slots[s] - 1];
        if (f->path_len == len && memcmp(f->path, path, len) == 0)
            return f;
        s = (s + 1) & c->mask;
    }
    return NULL;
}

static int read_all(int fd, size_t size, char **out)
{
    char *b = size ? malloc(size) : NULL;
    if (size && !b)
        return -ENOMEM;
    size_t have = 0;
    while (have < size) {
        ssize_t n = read(fd, b + have, size - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(b);
            return n < 0 ? -errno : -EIO; /* the file shrank meanwhile */
        }
        have += (size_t)n;
    }
    *out = b;
    return 0;
}

/* Walks directory dirfd (URL path `url`, without a trailing slash; "" for the
 * root). */
static int walk(struct sws_cache *c, int dirfd, const char *url, int depth, char *err, size_t errlen)
{
    if (depth > MAX_DEPTH) {
        errf(err, errlen, "%s: directories nested too deep", url);
        return -1;
    }
    DIR *d = fdopendir(dirfd);
    if (!d) {
        errf(err, errlen, "%s/: %s", url, strerror(errno));
        close(dirfd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue; /* ".", "..", dot files */
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        char *sub;
        size_t sl;
        if (!(sub = aprintf(&sl, "%s/%s", url, e->d_name))) {
            rc = -1;
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            int fd = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0)
                rc = walk(c, fd, sub, depth + 1, err, errlen);
        } else if (S_ISREG(st.st_mode)) {
            int fd = openat(dirfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            char *body = NULL;
            if (fd < 0) {
                fprintf(stderr, "sws: skipping %s: %s\n", sub, strerror(errno));
            } else {
                int r = read_all(fd, (size_t)st.st_size, &body);
                close(fd);
                if (r != 0)
                    fprintf(stderr, "sws: skipping %s: %s\n", sub, strerror(-r));
                else if (add_file(c, sub, body, (size_t)st.st_size, st.st_mtime, (uint64_t)st.st_ino) != 0)
                    rc = -1;
            }
        }
        free(sub);
    }
    closedir(d);
    if (rc != 0 && err && !err[0])
        errf(err, errlen, "out of memory");
    return rc;
}

/* A decoded path as a URI path (RFC 3986): every byte but the unreserved
 * ones, "/", sub-delims, ":" and "@" percent-encoded ("?", "#", "%", spaces,
 * controls, non-ASCII). out has room for 3 * strlen(in) + 1 bytes. */
static void uri_path_encode(const char *in, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~/!$&'()*+,;=:@", *p)) {
            *out++ = (char)*p;
        } else {
            *out++ = '%';
            *out++ = hex[*p >> 4];
            *out++ = hex[*p & 15];
        }
    }
    *out = '\0';
}

/* Adds "/dir/" for every "/dir/index.html" and "/dir" -> 301 "/dir/" ("/" for
 * the root's index); the Location is percent-encoded. */
static int add_indexes(struct sws_cache *c)
{
    size_t n = c->n;
    for (size_t i = 0; i < n; i++) {
        const char *p = c->files[i].path;
        size_t l = c->files[i].path_len;
        if (!c->files[i].owns || l < 11 || strcmp(p + l - 11, "/index.html") != 0)
            continue;
        char dir[l];
        memcpy(dir, p, l - 10);
        dir[l - 10] = '\0'; /* "/dir/" or "/" */
        if (add_alias(c, dir, i, NULL) != 0)
            return -1;
        if (l > 11) {
            dir[l - 11] = '\0'; /* "/dir" */
            char loc[3 * l + 2];
            uri_path_encode(dir, loc);
            strcat(loc, "/");
            if (add_alias(c, dir, 0, loc) != 0)
                return -1;
        }
    }
    return 0;
}

int cache_load_dir(struct sws_cache *c, const char *root, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    if (err && errlen)
        err[0] = '\0';
    int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        errf(err, errlen, "%s: %s", root, strerror(errno));
        return -1;
    }
    if (walk(c, fd, "", 0, err, errlen) != 0 || add_indexes(c) != 0 || index_table(c, err, errlen) != 0) {
        if (err && !err[0])
            errf(err, errlen, "out of memory");
        cache_free(c);
        return -1;
    }
    return 0;
}

static char *dupmem(const char *s, size_t n)
{
    char *b = malloc(n ? n : 1);
    if (b)
        memcpy(b, s, n);
    return b;
}

static const char sample_css[] =
    "body { font-family: sans-serif; max-width: 40em; margin: 2em auto; color: #222; }\n"
    "code { background: #eee; padding: 0 .2em; }\n";
static const char sample_index[] =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>SWS</title>\n"
    "<link rel=\"stylesheet\" href=\"/style.css\"></head><body>\n"
    "<h1>It works: SWS on mely</h1>\n"
    "<p>This is SWS's built-in sample site. Run <code>sws --root DIR</code> to serve your own.</p>\n"
    "<ul><li><a href=\"/about.html\">about</a></li><li><a href=\"/hello.txt\">hello.txt</a></li>\n"
    "<li><a href=\"/files/1k.html\">a 1 KB page</a></li><li><a href=\"/files/100k.bin\">100 KB</a></li>\n"
    "<li><a href=\"/server-status\">/server-status</a> (<a href=\"/server-status?format=json\">json</a>)</li></ul>\n"
    "</body></html>\n";
static const char sample_about[] =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>About SWS</title>\n"
    "<link rel=\"stylesheet\" href=\"/style.css\"></head><body>\n"
    "<h1>About</h1><p>SWS is the static web server of the Mely paper, rebuilt on the mely runtime: "
    "every connection's handlers are colored with its descriptor, so distinct clients are served "
    "in parallel and idle workers steal them.</p><p><a href=\"/\">back</a></p></body></html>\n";
static const char sample_hello[] = "Hello from SWS.\n";

int cache_load_sample(struct sws_cache *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    time_t now = time(NULL);
    char k1[1024], k100[102400];
    static const char lead[] = "<!DOCTYPE html>\n<html><body><p>";
    static const char tail[] = "</p></body></html>\n";
    memcpy(k1, lead, sizeof(lead) - 1);
    for (size_t i = sizeof(lead) - 1; i < sizeof(k1) - (sizeof(tail) - 1); i++)
        k1[i] = (char)('a' + i % 26);
    memcpy(k1 + sizeof(k1) - (sizeof(tail) - 1), tail, sizeof(tail) - 1);
    for (size_t i = 0; i < sizeof(k100); i++)
        k100[i] = (char)(i * 131u >> 3);
    const struct {
        const char *path, *data;
        size_t len;
    } pages[] = {
        { "/index.html", sample_index, sizeof(sample_index) - 1 },
        { "/about.html", sample_about, sizeof(sample_about) - 1 },
        { "/style.css", sample_css, sizeof(sample_css) - 1 },
        { "/hello.txt", sample_hello, sizeof(sample_hello) - 1 },
        { "/files/1k.html", k1, sizeof(k1) },
        { "/files/100k.bin", k100, sizeof(k100) },
    };
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        char *b = dupmem(pages[i].data, pages[i].len);
        if (!b || add_file(c, pages[i].path, b, pages[i].len, now, i + 1) != 0)
            goto fail;
    }
    if (add_indexes(c) != 0 || index_table(c, err, errlen) != 0)
        goto fail;
    return 0;
fail:
    errf(err, errlen, "out of memory");
    cache_free(c);
    return -1;
}

void cache_free(struct sws_cache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        struct sws_file *f = &c->files[i];
        free(f->path);
        if (f->owns) {
            free((void *)f->head);
            free((void *)f->head304);
            free((void *)f->body);
            free((void *)f->etag);
        }
    }
    free(c->files);
    free(c->slots);
    memset(c, 0, sizeof(*c));
}

/* ---- canned errors ---------------------------------------------------------- */

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    { 400, "Bad Request" },
    { 404, "Not Found" },
    { 405, "Method Not Allowed" },
    { 408, "Request Timeout" },
    { 413, "Content Too Large" },
    { 414, "URI Too Long" },
    { 431, "Request Header Fields Too Large" },
    { 500, "Internal Server Error" },
    { 501, "Not Implemented" },
    { 503, "Service Unavailable" },
    { 505, "HTTP Version Not Supported" },
};
#define NREASONS (sizeof(reasons) / sizeof(reasons[0]))
static struct sws_file errors[NREASONS];

int cache_errors_init(void)
{
    if (errors[0].head)
        return 0;
    for (size_t i = 0; i < NREASONS; i++) {
        size_t bl, hl;
        char *body = aprintf(&bl, "<!DOCTYPE html>\n<html><body><h1>%d %s</h1></body></html>\n",
                             reasons[i].status, reasons[i].reason);
        if (!body)
            return -1;
        char *head = aprintf(&hl,
                             "HTTP/1.1 %d %s\r\nServer: sws\r\n%sContent-Type: text/html; "
                             "charset=utf-8\r\nContent-Length: %zu\r\n",
                             reasons[i].status, reasons[i].reason,
                             reasons[i].status == 405 ? "Allow: GET, HEAD\r\n" : "", bl);
        if (!head) {
            free(body);
            return -1;
        }
        errors[i] = (struct sws_file){ .head = head, .head_len = hl, .body = body, .body_len = bl, .owns = true };
    }
    return 0;
}

void cache_errors_free(void)
{
    for (size_t i = 0; i < NREASONS; i++) {
        free((void *)errors[i].head);
        free((void *)errors[i].body);
    }
    memset(errors, 0, sizeof(errors));
}

const struct sws_file *cache_error(int status)
{
    size_t fallback = 0;
    for (size_t i = 0; i < NREASONS; i++) {
        if (reasons[i].status == status)
            return &errors[i];
        if (reasons[i].status == 500)
            fallback = i;
    }
    return &errors[fallback];
}
