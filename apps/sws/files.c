/* SPDX-License-Identifier: MIT */
/*
 * files.c: the file cache's disk side (cache.h): opening a request's file
 * beneath the document root, building entries (response heads, ETag), the
 * built-in sample site, redirects and the canned error responses. cache.c
 * keeps the entries.
 *
 * Only regular files beneath the root are served: the path is opened with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so neither a ".." nor a
 * symbolic link anywhere in it can lead out (the parser refuses dot segments
 * already); a segment that starts with a dot (a dot file or directory) and an
 * empty segment ("//") are refused before that. Files are opened O_NONBLOCK,
 * so a FIFO under the root cannot block a worker, and fstat then refuses
 * anything but a regular file.
 *
 * A small file is read into its entry and served from memory under a strong
 * ETag for as long as the entry lives; "Snapshots of small files", below,
 * says when such a read can be trusted to be one version of the file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "apps/sws/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "apps/sws/http.h"

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

static void http_date(char *out, size_t n, int64_t mtime_ns)
{
    time_t t = (time_t)(mtime_ns / 1000000000);
    if (mtime_ns < 0 && mtime_ns % 1000000000)
        t--; /* before 1970: round down */
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* ---- entries ------------------------------------------------------------------ */

/* An entry is one malloc'ed block: the struct, then its path, ETag, heads
 * and (held in memory) body; cache_put frees it in one go. */
struct sws_entry *cache_entry_new(const char *path, size_t len, const char *type,
                                  const struct cache_ident *id, int fd, bool fresh)
{
    char date[64], etag[80], head[512], h304[256];
    http_date(date, sizeof(date), id->mtime_ns);
    /* Strong: mtime in ns, size and inode change with any rewrite we can see. */
    int el = snprintf(etag, sizeof(etag), "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "\"",
                      (uint64_t)id->mtime_ns, id->size, id->ino);
    int hl = snprintf(head, sizeof(head),
                      "HTTP/1.1 200 OK\r\nServer: sws\r\nContent-Type: %s\r\nContent-Length: %" PRIu64
                      "\r\nLast-Modified: %s\r\nETag: %s\r\n",
                      type, id->size, date, etag);
    int h3 = snprintf(h304, sizeof(h304),
                      "HTTP/1.1 304 Not Modified\r\nServer: sws\r\nLast-Modified: %s\r\nETag: %s\r\n",
                      date, etag);
    if (fresh) {
        /* No validator a client or proxy could revalidate (304) these bytes
         * with later, and nothing for them to keep (the essay, below). */
        hl = snprintf(head, sizeof(head),
                      "HTTP/1.1 200 OK\r\nServer: sws\r\nContent-Type: %s\r\nContent-Length: %" PRIu64
                      "\r\nCache-Control: no-store\r\n",
                      type, id->size);
        el = h3 = 0;
    }
    if (el < 0 || hl < 0 || h3 < 0 || (size_t)hl >= sizeof(head))
        return NULL;
    size_t body = fd < 0 ? (size_t)id->size : 0;
    size_t total = sizeof(struct sws_entry) + len + 1 + (size_t)el + 1 + (size_t)hl + 1 + (size_t)h3 + 1 + body;
    char *m = malloc(total);
    if (!m)
        return NULL;
    struct sws_entry *e = (struct sws_entry *)(void *)m;
    memset(e, 0, sizeof(*e));
    char *p = m + sizeof(*e);
#define PUT(dst, src, n)                                                                          \
    do {                                                                                          \
        memcpy(p, src, n);                                                                        \
        p[n] = '\0';                                                                              \
        dst = p;                                                                                  \
        p += (n) + 1;                                                                             \
    } while (0)
    PUT(e->path, path, len);
    PUT(e->f.etag, etag, (size_t)el);
    PUT(e->f.head, head, (size_t)hl);
    PUT(e->f.head304, h304, (size_t)h3);
#undef PUT
    if (fresh) { /* nothing to match, nothing to answer a match with */
        e->f.etag = NULL;
        e->f.head304 = NULL;
    }
    e->fresh = fresh;
    e->path_len = len;
    e->f.etag_len = (size_t)el;
    e->f.head_len = (size_t)hl;
    e->f.head304_len = (size_t)h3;
    e->f.body = body ? p : NULL;
    e->f.body_len = (size_t)id->size;
    e->fd = fd;
    e->id = *id;
    e->cost = total;
    atomic_init(&e->refs, 1);
    atomic_init(&e->checked_ns, 0);
    atomic_init(&e->used, false);
    return e;
}

static int64_t ts_ns(struct timespec ts)
{
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct cache_ident ident_of(const struct stat *st)
{
    return (struct cache_ident){ .dev = (uint64_t)st->st_dev, .ino = (uint64_t)st->st_ino,
                                 .size = (uint64_t)st->st_size, .mtime_ns = ts_ns(st->st_mtim),
                                 .ctime_ns = ts_ns(st->st_ctim) };
}

static bool same_ident(const struct cache_ident *a, const struct cache_ident *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/*
 * Snapshots of small files
 * ========================
 *
 * A small file's entry holds its bytes, read once, under a strong ETag made
 * of its mtime, size and inode; hits serve them from memory for as long as
 * the entry lives, and a client or proxy that stored them revalidates them
 * with that ETag (304) without ever seeing them again. So the read must be
 * one version of the file, whole. Terms: the read starts at T0 and ends at
 * T1; a write's timestamp update is the moment t_u it sets ctime and mtime,
 * and its copy the moment its bytes go into the page cache.
 *
 * Why fstat before and after the read is not enough. Linux does not make a
 * buffered read atomic against a write (ext4 and tmpfs take no lock to read;
 * XFS does): a read that overlaps one pwrite of 8 KB in place can take the
 * new first page and the old second one, or tear anywhere (a body was seen
 * new up to its byte 28). The write sets ctime and mtime once, at
 * t_u, before its copy (file_update_time), so fstat before and after the
 * read may both show the new timestamps, with the same size and inode, while
 * the read saw old bytes (issue 26: 1 in 150 rounds; 85 torn responses in
 * 50,897 with a write every 30 ms); a read between the stamp and the copy
 * even gets the whole old version under the new ETag. Timestamps come from
 * a coarse clock (one tick, 4 ms at HZ=250; Linux 6.13's fine-grained stamps
 * only after a stat), so two writes within one tick may even share them.
 *
 * What the timestamps still tell (git's "racily clean" index entries). A
 * write whose copy overlaps the read updated the timestamps at some t_u <= T1
 * and ends its copy after T0. ctime is stamped from the coarse clock, so
 * ctime >= t_u - tick; and the fstat after the read, which must match the one
 * before, sees it. If the writer spent at most S between its timestamp update
 * and the end of its copy, t_u >= T0 - S, so ctime >= T0 - S - tick. Turned
 * round: a read whose file's ctime is older than T0 - S - tick overlapped no
 * write (but one stalled for more than S), and any later write stamps a later
 * tick, so the entry's identity changes and its next check sees it. Such a
 * file has *settled*: its read is kept, with its ETag. S is --cache-settle-ms
 * (1 s by default): it covers the tick, a writer preempted mid-copy, and the
 * kernel throttling a writer between two pages for dirty-page writeback
 * (balance_dirty_pages pauses up to 200 ms at a time). The tick alone is
 * not enough: with S = 0 on a loaded 2-vCPU guest, reads whose file's ctime
 * was already 6 ms old still tore (the writer preempted mid-copy, or the
 * guest's coarse clock behind by more than a tick). cache_settled() is the
 * test; it costs one clock_gettime (vDSO) per load, nothing per hit.
 *
 * ctime, not mtime: anyone may set mtime to anything (touch -d, cp -p, tar,
 * a writer that restores it after each write), and a file unpacked with an
 * mtime in the future would never settle; ctime is always the kernel's
 * clock at the last change (writes, utimensat, chmod, rename). A ctime in
 * whole seconds means a file system that keeps seconds (ext4's small
 * inodes, some FUSE) or two (FAT): the change may be up to 2 s later than
 * it says (a nanosecond stamp that happens to end in .000000000 only makes
 * its file wait 2 s more).
 *
 * An unsettled file (changed less than S + tick before T0) may be in the
 * middle of a write: its read is not kept. It is read twice and the reads
 * compared (the fstat after both must still match), which catches a write
 * that overlaps either read unless the writer is stopped between its pages
 * for the whole time of both; then it is served to its one request *fresh*:
 * without ETag or Last-Modified, with Cache-Control: no-store, so that no
 * client or proxy keeps or revalidates it, and it goes in no table (a
 * cached entry it replaces is dropped). The next request reads the file
 * again; the first one after it settled makes the entry. A file rewritten
 * more often than every S is so never cached: each request pays an open,
 * two fstat, two reads and a close (for 8 KB from the page cache, 7-10 us
 * more server CPU than a cached hit: doc/sws.md). A small file that changes under each of 3 attempts gets 503
 * (it used to be streamed from its descriptor under the last identity's
 * ETag, as it happened to be on disk when sendfile read it).
 *
 * Rejected. Reading twice and comparing alone: a writer stopped between its
 * pages (preempted, throttled) gives two equal torn reads, which would then
 * be kept for --cache-valid-ms under a strong ETag. A hash of the bytes as
 * the ETag: the same tear hashes as well as any version, and each load would
 * hash. Keeping an unsettled read and reading the file again later: every
 * request meanwhile gets the bytes that may be torn. Locks: flock is
 * advisory, and writers do not take it.
 *
 * What is not caught. A writer stopped inside one write for longer than S
 * (its buffer faulting in from a slow disk): by then the torn state is what
 * the file holds, and nothing a reader sees tells it from content. Writes
 * through a shared mmap to pages already dirty change no timestamp at all.
 * File systems whose timestamps come from another machine's clock (NFS)
 * shift S by the skew. Writers that need readers to see whole versions
 * write a new file and rename it over (atomic: the entry keeps the old
 * inode, see doc/sws.md). Streamed files are sent as they are on disk when
 * sendfile reads them (doc/sws.md): none of this applies to them.
 */

bool cache_settled(const struct cache_ident *id, int64_t start_ns, int64_t settle_ns)
{
    int64_t grain = id->ctime_ns % 1000000000 == 0 ? 2000000000 : 0;
    return id->ctime_ns < start_ns - settle_ns - grain;
}

/* Reads exactly n bytes from offset 0 and checks that the file ends there. */
static bool read_body(int fd, char *b, size_t n)
{
    size_t have = 0;
    while (have < n) {
        ssize_t r = pread(fd, b + have, n - have, (off_t)have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false; /* an error, or the file shrank */
        have += (size_t)r;
    }
    char more;
    ssize_t r;
    while ((r = pread(fd, &more, 1, (off_t)n)) < 0 && errno == EINTR)
        ;
    return r == 0;
}

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts_ns(ts);
}

#define LOAD_TRIES 3

/* Whether a file of id's size is held in memory (else streamed). */
static bool in_memory(const struct sws_cache *c, const struct cache_ident *id)
{
    return id->size <= c->max_file && id->size <= c->budget / 4;
}

/* The entry of the open regular file fd, whose fstat gave id (fd is taken
 * over: kept in a streamed entry, else closed). A small file is read into
 * memory, once if it had settled, else twice (the essay above); if it
 * changes under the read (another fstat after it, or the two reads differ),
 * it is read again, LOAD_TRIES times in all. Returns 200 with *out (fresh if
 * unsettled), 503 if it changed under every read, 500 (out of memory, or
 * fstat failed). */
static int load(struct sws_cache *c, const char *path, size_t len, const char *type, int fd,
                struct cache_ident *id, struct sws_entry **out)
{
    char *again = NULL; /* the second read of an unsettled file */
    size_t again_cap = 0;
    for (int tries = 0; tries < LOAD_TRIES && in_memory(c, id); tries++) {
        size_t n = (size_t)id->size;
        bool settled = cache_settled(id, realtime_ns(), c->settle_ns);
        if (!settled && n > again_cap) {
            free(again);
            again_cap = 0;
            if (!(again = malloc(n)))
                goto fail;
            again_cap = n;
        }
        struct sws_entry *e = cache_entry_new(path, len, type, id, -1, !settled);
        if (!e)
            goto fail;
        char *body = (char *)e->f.body; /* NULL if n == 0 */
        bool ok = read_body(fd, body, n);
        if (ok && !settled)
            ok = read_body(fd, again, n) && (n == 0 || memcmp(body, again, n) == 0);
        struct stat st;
        struct cache_ident now = *id;
        ok = ok && fstat(fd, &st) == 0;
        if (ok)
            now = ident_of(&st);
        if (ok && same_ident(id, &now)) {
            free(again);
            close(fd);
            *out = e;
            return 200;
        }
        cache_put(e);
        atomic_fetch_add_explicit(&c->rereads, 1, memory_order_relaxed);
        if (fstat(fd, &st) != 0)
            goto fail;
        *id = ident_of(&st);
    }
    free(again);
    if (in_memory(c, id)) { /* it changed under every read */
        close(fd);
        return 503;
    }
    /* a large file (or one that grew past the line meanwhile) */
    if (!(*out = cache_entry_new(path, len, type, id, fd, false))) {
        close(fd);
        return 500;
    }
    return 200;
fail:
    free(again);
    close(fd);
    return 500;
}

/* ---- opening beneath the root ---------------------------------------------------- */

static int open_beneath(int rootfd, const char *rel)
{
    struct open_how how = {
        .flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    /* EAGAIN: a rename raced the lookup (openat2(2)); try again, a few times. */
    for (int i = 0; i < 4; i++) {
        long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != EINTR && errno != EAGAIN)
            break;
    }
    return -errno;
}

/* Whether the decoded path may name a file: no segment that starts with a dot
 * (dot files, and "." or ".." however the parser let them by), no empty
 * segment but the last (a directory's trailing slash), no NUL. */
static bool servable(const char *path, size_t len)
{
    if (len == 0 || path[0] != '/' || memchr(path, '\0', len))
        return false;
    for (size_t i = 1; i < len; i++) {
        bool seg_start = path[i - 1] == '/';
        if (seg_start && (path[i] == '/' || path[i] == '.'))
            return false;
    }
    return true;
}

static int open_status(int err)
{
    switch (err) {
    case EMFILE:
    case ENFILE:
        return 503;
    case ENOMEM:
    case EIO:
        return 500;
    default: /* ENOENT, ENOTDIR, ELOOP (a symlink), EXDEV (out of the root), EACCES... */
        return 404;
    }
}

static bool has_index(int dirfd)
{
    struct stat st;
    return fstatat(dirfd, "index.html", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* cache_open without the stale entry's fate. */
static int open_file(struct sws_cache *c, const char *path, size_t len, struct sws_entry *stale,
                     struct sws_entry **out)
{
    static const char index[] = "index.html";
    if (c->rootfd < 0 || len > HTTP_MAX_PATH || !servable(path, len))
        return 404;
    char rel[HTTP_MAX_PATH + sizeof(index)];
    bool dir = path[len - 1] == '/';
    size_t rl = len - 1;
    memcpy(rel, path + 1, rl);
    if (dir) {
        memcpy(rel + rl, index, sizeof(index) - 1);
        rl += sizeof(index) - 1;
    }
    rel[rl] = '\0';
    int fd = open_beneath(c->rootfd, rel);
    if (fd < 0)
        return open_status(-fd);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return 500;
    }
    if (!S_ISREG(st.st_mode)) {
        int r = S_ISDIR(st.st_mode) && !dir && has_index(fd) ? 301 : 404;
        close(fd);
        return r;
    }
    struct cache_ident id = ident_of(&st);
    if (stale) {
        atomic_fetch_add_explicit(&c->checks, 1, memory_order_relaxed);
        if (same_ident(&stale->id, &id)) {
            close(fd);
            *out = stale;
            return 200;
        }
        atomic_fetch_add_explicit(&c->changes, 1, memory_order_relaxed);
    }
    struct sws_entry *e = NULL;
    int status = load(c, path, len, cache_mime(rel), fd, &id, &e);
    if (status != 200 || e->fresh) {
        /* A changed file whose new version is not (yet) to be kept: the stale
         * entry is no version to serve any longer. (Not after a 500: a passing
         * failure leaves the entry as it is.) */
        if (stale && status != 500)
            cache_remove(c, stale);
        if (status == 200)
            atomic_fetch_add_explicit(&c->fresh, 1, memory_order_relaxed);
        *out = e;
        return status;
    }
    atomic_fetch_add_explicit(&c->loads, 1, memory_order_relaxed);
    cache_insert(c, e); /* in place of stale, if the table still holds it */
    *out = e;
    return 200;
}

int cache_open(struct sws_cache *c, const char *path, size_t len, struct sws_entry *stale,
               struct sws_entry **out)
{
    *out = NULL;
    int status = open_file(c, path, len, stale, out);
    if (stale && *out != stale) {
        if (status == 301 || status == 404)
            cache_remove(c, stale); /* gone (not for a passing 500 or 503) */
        cache_put(stale);
    }
    return status;
}

/* ---- redirects ------------------------------------------------------------------------ */

/* A decoded path as a URI path (RFC 3986): every byte but the unreserved
 * ones, "/", sub-delims, ":" and "@" percent-encoded ("?", "#", "%", spaces,
 * controls, non-ASCII). out has room for 3 * n + 1 bytes. */
static void uri_path_encode(const char *in, size_t n, char *out)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)in; p < (const unsigned char *)in + n; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            (*p && strchr("-._~/!$&'()*+,;=:@", *p))) {
            *out++ = (char)*p;
        } else {
            *out++ = '%';
            *out++ = hex[*p >> 4];
            *out++ = hex[*p & 15];
        }
    }
    *out = '\0';
}

char *cache_redirect(const char *path, size_t len, size_t *head_len)
{
    char *loc = malloc(3 * len + 1);
    if (!loc)
        return NULL;
    uri_path_encode(path, len, loc);
    char *head = aprintf(head_len,
                         "HTTP/1.1 301 Moved Permanently\r\nServer: sws\r\nLocation: %s/\r\n"
                         "Content-Length: 0\r\n",
                         loc);
    free(loc);
    return head;
}

/* ---- set-up ---------------------------------------------------------------------------- */

static unsigned default_fds(void)
{
    struct rlimit rl;
    rlim_t n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        n = rl.rlim_cur;
    n /= 16;
    return n < 16 ? 16 : n > 1024 ? 1024 : (unsigned)n;
}

int cache_init(struct sws_cache *c, const char *root, const struct sws_cache_config *cfg,
               char *err, size_t errlen)
{
    if (cache_table_init(c, cfg) != 0) {
        errf(err, errlen, "out of memory");
        cache_free(c);
        return -1;
    }
    if (!c->max_fds)
        c->max_fds = default_fds();
    /* ctimes are stamped from the coarse clock: a change may be up to one of
     * its ticks later than its ctime says (the essay above). */
    struct timespec tick = { 0, 10000000 };
    clock_getres(CLOCK_REALTIME_COARSE, &tick);
    c->settle_ns = (int64_t)cfg->settle_ms * 1000000 + ts_ns(tick);
    c->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->rootfd < 0) {
        errf(err, errlen, "%s: %s", root, strerror(errno));
        cache_free(c);
        return -1;
    }
    int fd = open_beneath(c->rootfd, ".");
    if (fd < 0) {
        errf(err, errlen, "%s: %s%s", root, strerror(-fd),
             fd == -ENOSYS ? " (openat2 needs Linux 5.6 or later)" : "");
        cache_free(c);
        return -1;
    }
    close(fd);
    return 0;
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

/* A pinned entry of the sample site. */
static int add_sample(struct sws_cache *c, const char *path, const char *file, const char *data,
                      size_t len, uint64_t ino, int64_t now_ns)
{
    struct cache_ident id = { .ino = ino, .size = len, .mtime_ns = now_ns, .ctime_ns = now_ns };
    struct sws_entry *e = cache_entry_new(path, strlen(path), cache_mime(file), &id, -1, false);
    if (!e)
        return -1;
    if (len)
        memcpy((char *)e->f.body, data, len);
    e->pinned = true;
    cache_insert(c, e);
    cache_put(e);
    return 0;
}

int cache_init_sample(struct sws_cache *c, const struct sws_cache_config *cfg, char *err,
                      size_t errlen)
{
    if (cache_table_init(c, cfg) != 0)
        goto fail;
    if (!c->max_fds)
        c->max_fds = default_fds();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000; /* whole seconds, as Last-Modified */
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
        const char *path, *file, *data;
        size_t len;
    } pages[] = {
        { "/index.html", "index.html", sample_index, sizeof(sample_index) - 1 },
        { "/", "index.html", sample_index, sizeof(sample_index) - 1 },
        { "/about.html", "about.html", sample_about, sizeof(sample_about) - 1 },
        { "/style.css", "style.css", sample_css, sizeof(sample_css) - 1 },
        { "/hello.txt", "hello.txt", sample_hello, sizeof(sample_hello) - 1 },
        { "/files/1k.html", "1k.html", k1, sizeof(k1) },
        { "/files/100k.bin", "100k.bin", k100, sizeof(k100) },
    };
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++)
        if (add_sample(c, pages[i].path, pages[i].file, pages[i].data, pages[i].len, i + 1, now) != 0)
            goto fail;
    return 0;
fail:
    errf(err, errlen, "out of memory");
    cache_free(c);
    return -1;
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
    { 417, "Expectation Failed" },
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
        errors[i] = (struct sws_file){ .head = head, .head_len = hl, .body = body, .body_len = bl };
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
