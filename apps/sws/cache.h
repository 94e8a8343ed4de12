/* SPDX-License-Identifier: MIT */
/*
 * cache.h: SWS's file cache (the map of the CheckInCache handler) and its
 * canned responses.
 *
 * The document root is served as it is now, through a bounded cache of
 * entries keyed by the decoded request path. Nothing is read at start-up: an
 * entry is made on the first request of its path (ReadFile, the disk path),
 * by opening the file beneath the root (no "..", no symbolic link, no dot
 * file, nothing that is not a regular file) and building its response head
 * once: status line, Server, Content-Type (from the extension),
 * Content-Length, Last-Modified, ETag, and the head of its 304.
 *
 *   - A file of at most `max_file` bytes (and at most a quarter of the budget)
 *     is read into the entry: its response is a pre-built head and body in
 *     memory, as the paper's SWS served every file.
 *   - A larger file keeps its descriptor open in the entry; its body is sent
 *     with sendfile from it, never read into memory.
 *   - Entries in memory count against `budget` bytes (head, path and body),
 *     entries with a descriptor against `max_fds`; over either, a CLOCK sweep
 *     evicts entries not used since the hand last passed (cache.c).
 *   - An entry is trusted for `valid_ns` after it was last checked; the first
 *     request after that checks it again (ReadFile opens the path and compares
 *     device, inode, size, mtime and ctime): unchanged, it is kept; changed, a
 *     new entry (new bytes, new ETag) replaces it; gone, it is dropped (404).
 *     Requests that arrive while one checks are served the entry as it was.
 *   - Only a settled file is kept in memory: one whose ctime is older than the
 *     read's start by `settle_ms` and a clock tick. A file changed more
 *     recently may be in the middle of a write, and a read that overlaps a
 *     write in place can take some pages of each version with no trace in
 *     fstat; it is read twice, served to its one request without validators
 *     (no ETag, no Last-Modified; Cache-Control: no-store) and not kept
 *     (files.c: "Snapshots of small files").
 *
 * Entries are reference-counted: the table holds one reference, and each
 * response in flight one more, so an entry replaced or evicted while a
 * connection still sends it lives (its memory, its descriptor) until that send
 * ends. A streamed file that shrinks under a send cannot honour the
 * Content-Length already sent: the connection is then closed (conn.c).
 *
 * Threads: cache_get, cache_put and cache_open may be called from any thread
 * at once (per-shard locks; a hit in the calling thread's stash of hot
 * entries takes no lock and writes nothing shared: cache.c).
 * cache_init*, cache_free and cache_errors_* are not thread-safe: call them
 * before serving and after.
 */
#ifndef SWS_CACHE_H
#define SWS_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A response's fixed parts. */
struct sws_file {
    const char *head;     /* "HTTP/1.1 200 OK\r\n...\r\n": headers, without the
                             Date, Connection and the blank line */
    size_t head_len;
    const char *head304;  /* the 304's head (NULL for the canned errors) */
    size_t head304_len;
    const char *body;     /* in memory; NULL for an empty or a streamed body */
    size_t body_len;      /* Content-Length, also of a streamed body */
    const char *etag;     /* "\"...\"" (quoted); NULL for the canned errors */
    size_t etag_len;
};

/* What tells a file's versions apart (from its fstat). */
struct cache_ident {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
};

/* One cached file. Everything but the atomics and the links is fixed once the
 * entry is in the table. */
struct sws_entry {
    struct sws_file f;
    int fd;                 /* a streamed file: its descriptor; else -1 */
    bool pinned;            /* the built-in sample site: never checked or evicted */
    struct cache_ident id;  /* the file when loaded */
    bool fresh;             /* a read of an unsettled file: served once, without
                               validators (f.etag NULL), never in the table */
    atomic_uint refs;       /* the table's + one per user */
    atomic_uint_fast64_t checked_ns; /* CLOCK_MONOTONIC_COARSE of the last check */
    atomic_bool used;       /* CLOCK's reference bit: set by hits */
    size_t cost;            /* bytes counted against the budget */
    uint64_t hash;
    const char *path;       /* the key: the decoded request path */
    size_t path_len;
    /* under the shard's lock: */
    struct sws_entry *next;              /* bucket chain */
    struct sws_entry *ring_prev, *ring_next; /* the shard's CLOCK ring */
};

#define CACHE_SHARDS 16

struct cache_shard {
    pthread_mutex_t mu;
    struct sws_entry **buckets;
    size_t nbuckets, n;
    struct sws_entry *hand; /* CLOCK's hand on the ring; NULL if empty */
    char pad[64];
};

#define CACHE_DEFAULT_MB 64
#define CACHE_DEFAULT_FILE_KB 16
#define CACHE_DEFAULT_VALID_MS 1000
#define CACHE_DEFAULT_SETTLE_MS 1000

/* The cache's limits (sws_config_init sets the defaults above). */
struct sws_cache_config {
    size_t budget;     /* bytes of entries held in memory (--cache-mb) */
    size_t max_file;   /* files up to this size are held in memory (--cache-file-kb) */
    unsigned max_fds;  /* descriptors held open by streamed entries (--cache-fds;
                          0: RLIMIT_NOFILE / 16, between 16 and 1024) */
    unsigned valid_ms; /* an entry is checked again after this (--cache-valid-ms;
                          0: on every request) */
    unsigned settle_ms; /* a small file changed less than this (and a clock tick)
                           before its read is served fresh, not kept
                           (--cache-settle-ms; files.c) */
};

struct sws_cache {
    struct cache_shard shards[CACHE_SHARDS];
    int rootfd;        /* the document root; -1 for the sample site */
    size_t budget, max_file;
    unsigned max_fds;
    uint64_t valid_ns;
    int64_t settle_ns;    /* settle_ms plus the tick of the clock that stamps ctimes */
    atomic_size_t n;      /* entries in the table */
    atomic_size_t bytes;  /* their cost */
    atomic_uint fds;      /* their descriptors */
    atomic_uint trim_from; /* where the next eviction sweep starts */
    _Alignas(64) atomic_uint_fast64_t gen; /* bumped by every removal (cache.c, stashes) */
    char gen_pad[56];
    /* counters (relaxed; for /server-status and the tests) */
    atomic_uint_fast64_t loads, checks, changes, evictions;
    /* reads of unsettled files served fresh (not kept); reads thrown away because
       the file changed under them (another fstat, or the second read, differed) */
    atomic_uint_fast64_t fresh, rereads;
};

/* Opens root for serving (nothing is read). Returns 0, or -1 with a message
 * in err (root is not a readable directory). */
int cache_init(struct sws_cache *c, const char *root, const struct sws_cache_config *cfg,
               char *err, size_t errlen);

/* The built-in sample site, held in memory for good (index.html, about.html,
 * style.css, hello.txt, files/1k.html of 1,024 bytes, files/100k.bin of
 * 102,400 bytes). */
int cache_init_sample(struct sws_cache *c, const struct sws_cache_config *cfg, char *err,
                      size_t errlen);

/* Drops every entry (those still referenced live until cache_put) and closes
 * the root. */
void cache_free(struct sws_cache *c);

/*
 * CheckInCache's lookup: the entry of the decoded path path[0..len), with a
 * reference for the caller (cache_put), or NULL (a miss: cache_open). Costs a
 * hash, one shard lock and an atomic increment; no system call.
 * *check is set when the entry's validity period is over and this caller is
 * the one to check it (cache_open with it as `stale`); others meanwhile get
 * the entry without *check.
 */
struct sws_entry *cache_get(struct sws_cache *c, const char *path, size_t len, bool *check);

/* Takes a reference (for a second user of an entry one holds). */
void cache_hold(struct sws_entry *e);

/* Drops a reference (to this thread's stash if it holds e); the last one
 * frees the entry (and closes its file). */
void cache_put(struct sws_entry *e);

/*
 * ReadFile's work (the disk path), for a miss or a check: opens path beneath
 * the root and makes, checks or replaces its entry. stale: the entry to check
 * (its reference is taken over), or NULL.
 * @return 200 with *out set (a reference for the caller; (*out)->fresh: a
 *         read of an unsettled file, which is in no table); 301: path names a
 *         directory that has an index.html (answer cache_redirect); 404: no such
 *         file, or one that may not be served; 503: out of descriptors, or a
 *         small file that changed under each of 3 reads; 500: out of memory or
 *         an I/O error.
 * Blocks on the file system (an open, an fstat, and for a small file its read;
 * two reads if the file changed within the settle period).
 */
int cache_open(struct sws_cache *c, const char *path, size_t len, struct sws_entry *stale,
               struct sws_entry **out);

/* The 301 head to path[0..len) + "/" (percent-encoded), malloc'ed, NUL-ended;
 * NULL if out of memory. */
char *cache_redirect(const char *path, size_t len, size_t *head_len);

/* A canned response for an error (or 503) status: head as for files, with
 * the Allow header for 405; body a small HTML page. Never NULL: unknown
 * statuses give the 500 page. */
const struct sws_file *cache_error(int status);

/* Builds the canned error responses (once; not thread-safe: call before
 * serving). Returns 0 or -1 (out of memory). */
int cache_errors_init(void);
void cache_errors_free(void);

/* The Content-Type for a file name (by extension). */
const char *cache_mime(const char *name);

/* ---- internal: files.c builds entries, cache.c keeps them ------------------- */

/* A new entry (one reference, not in the table) for the file id, served
 * with Content-Type type under path[0..len): with fd >= 0, streamed from fd
 * (taken over); else held in memory, with room for id->size bytes of body
 * for the caller to fill (e->f.body). fresh: a head without validators, with
 * Cache-Control: no-store (an unsettled file's read). NULL if out of memory
 * (fd is then not closed). */
struct sws_entry *cache_entry_new(const char *path, size_t len, const char *type,
                                  const struct cache_ident *id, int fd, bool fresh);

/* Whether a file of identity id, read from start_ns on (CLOCK_REALTIME),
 * had settled: its ctime, counted at the latest its granularity allows,
 * is more than settle_ns before start_ns (files.c's essay). */
bool cache_settled(const struct cache_ident *id, int64_t start_ns, int64_t settle_ns);

/* Sets up the shards and limits (cache_init* call it first). Returns 0 or -1
 * (out of memory; cache_free frees what was made). */
int cache_table_init(struct sws_cache *c, const struct sws_cache_config *cfg);

/* Puts e in the table (the table takes a reference of its own), in place of
 * the entry of the same path if any; evicts if over the limits. */
void cache_insert(struct sws_cache *c, struct sws_entry *e);

/* Removes e from the table if it is still there. */
void cache_remove(struct sws_cache *c, struct sws_entry *e);

/* CLOCK_MONOTONIC_COARSE in ns. */
uint64_t cache_now_ns(void);

#endif /* SWS_CACHE_H */
