/*
 * cache.h: SWS's pre-built responses (the CheckInCache handler's map).
 *
 * At start-up every regular file under the document root (or of the built-in
 * sample site) is read into memory and its response head is built once: the
 * status line, Server, Content-Type (from the extension), Content-Length,
 * Last-Modified and ETag, and the head of its 304. A request only looks its
 * decoded path up in a read-only hash table: nothing is ever opened while
 * serving, so nothing outside the root can be served. Directories answer
 * with their index.html ("/dir/" and "/"); "/dir" without the slash answers
 * 301 to "/dir/". Dot files and symbolic links are skipped.
 *
 * Canned error responses are built once too (cache_error()).
 * Threads: built by one thread before the runtime runs; read-only afterwards.
 */
#ifndef SWS_CACHE_H
#define SWS_CACHE_H

#include <stdbool.h>
#include <stddef.h>

struct sws_file {
    char *path;           /* "/dir/name" (decoded form), the key */
    size_t path_len;
    const char *head;     /* "HTTP/1.1 200 OK\r\n...\r\n": headers, without the
                             Date, Connection and the blank line */
    size_t head_len;
    const char *head304;  /* the 304's head (NULL for a redirect) */
    size_t head304_len;
    const char *body;     /* shared by aliases; NULL for an empty body */
    size_t body_len;
    const char *etag;     /* "\"...\"" (quoted), NULL for a redirect */
    size_t etag_len;
    bool owns;            /* this entry frees head, head304, body, etag */
};

struct sws_cache {
    struct sws_file *files;
    size_t n, cap;
    size_t *slots; /* open addressing: index + 1, 0 = empty */
    size_t mask;
    size_t bytes;  /* body bytes held */
};

/* Loads every file under root. Returns 0, or -1 with a message in err. */
int cache_load_dir(struct sws_cache *c, const char *root, char *err, size_t errlen);

/* Loads the built-in sample site (index.html, about.html, style.css, hello.txt,
 * files/1k.html of 1,024 bytes, files/100k.bin of 102,400 bytes). */
int cache_load_sample(struct sws_cache *c, char *err, size_t errlen);

/* The entry of a decoded path, or NULL. */
const struct sws_file *cache_find(const struct sws_cache *c, const char *path, size_t len);

void cache_free(struct sws_cache *c);

/* A canned response for an error (or 503) status: head as for files, with
 * the Allow header for 405; body a small HTML page. Never NULL: unknown
 * statuses give the 500 page. Built on first use of cache_errors_init(). */
const struct sws_file *cache_error(int status);

/* Builds the canned error responses (once; not thread-safe: call before
 * serving). Returns 0 or -1 (out of memory). */
int cache_errors_init(void);
void cache_errors_free(void);

/* The Content-Type for a file name (by extension). */
const char *cache_mime(const char *name);

#endif /* SWS_CACHE_H */
