/* SPDX-License-Identifier: MIT */
/*
 * multio.c: the Mely paper's multio-style client for SFS (section 5.3.2):
 * N clients, each on its own connection to apps/sfs/sfsd, each reading one
 * whole file with K READs in flight; each reports its MB/s, the master the
 * aggregate, the read latency and the errors by kind.
 *
 * A client: connect, the hello (X25519), LOOKUP of the file, READs of
 * --count bytes at increasing offsets, K in flight (the next leaves when a
 * reply arrives; replies come back in order), then RELEASE and close. A
 * client ends at its first error, which is counted under one kind.
 *
 * --verify opens every reply and compares its bytes with the file, mapped
 * from --root. --no-verify opens the LOOKUP and RELEASE replies only: each
 * READ reply is checked by its frame's length (which tells a data reply of
 * the expected count from a status reply) and skipped unopened, its nonce
 * counted as used, so that the client spends no CPU on decryption that the
 * server would need.
 *
 * One thread runs every client in one epoll loop (level-triggered, one
 * read per readiness), rather than a thread per client: the client shares
 * the server's cores on this machine, and N threads would add N threads'
 * wake-ups and switches to what the server pays for. The price: --verify
 * opens at most one core's worth of replies, so performance runs use
 * --no-verify.
 *
 * MB is 2^20 bytes throughout. bench/README.md describes the output.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/sfs/proto.h"
#include "bench/harness.h"

#define MB (1024.0 * 1024.0)
#define MAX_CLIENTS 10000u
#define MAX_INFLIGHT 1024u
#define LAT_MAX 65536u /* latencies kept per client: more READs keep every k-th */
#define MAX_FRAME (SFS_LENGTH + SFS_MAX_REPLY_FRAME)
#define IN_BUF (4 * MAX_FRAME) /* a read() takes up to ~4 full replies */
#define PEEK 256 /* --no-verify: bytes per read(); the rest of a reply is discarded */

/* ---- Errors --------------------------------------------------------------------------------- */

enum err_kind {
    E_NONE, E_CONNECT, E_HANDSHAKE, E_AUTH, E_SHORT, E_MISMATCH, E_STATUS, E_PROTOCOL,
    E_TIMEOUT, E_CLOSED, E_KINDS
};
static const char *const err_name[E_KINDS] = {
    [E_NONE] = "ok", [E_CONNECT] = "connect", [E_HANDSHAKE] = "handshake",
    [E_AUTH] = "auth", [E_SHORT] = "short", [E_MISMATCH] = "mismatch",
    [E_STATUS] = "status", [E_PROTOCOL] = "protocol", [E_TIMEOUT] = "timeout",
    [E_CLOSED] = "closed",
};

/* ---- Options ------------------------------------------------------------------------------ */

static struct {
    const char *host;
    unsigned port;
    unsigned clients;
    unsigned inflight;
    const char *file;
    const char *root;
    unsigned file_mb;
    unsigned count;
    bool verify_flag, no_verify;
    bool verify; /* the outcome of the two flags */
    bool prepare_only;
    double timeout_s;
    const char *csv;
} opt;

static const struct bench_opt options[] = {
    {.name = "host", .kind = OPT_STR, .var = &opt.host, .sdflt = "127.0.0.1",
     .help = "sfsd's IPv4 address"},
    {.name = "port", .kind = OPT_UINT, .var = &opt.port, .lo = 1, .hi = 65535, .dflt = 7070,
     .help = "sfsd's port"},
    {.name = "clients", .kind = OPT_UINT, .var = &opt.clients, .lo = 1, .hi = MAX_CLIENTS,
     .dflt = 1, .param = true, .help = "clients, each on its own connection"},
    {.name = "inflight", .kind = OPT_UINT, .var = &opt.inflight, .lo = 1, .hi = MAX_INFLIGHT,
     .dflt = 4, .param = true, .help = "READs in flight per client"},
    {.name = "file", .kind = OPT_STR, .var = &opt.file,
     .help = "the file to read, relative to the served root (default multio-<file-mb>mb.bin)"},
    {.name = "root", .kind = OPT_STR, .var = &opt.root,
     .help = "the served root on this machine: creates the file if missing, and verifies"},
    {.name = "file-mb", .kind = OPT_UINT, .var = &opt.file_mb, .lo = 1, .hi = 65536, .dflt = 64,
     .param = true, .help = "size of the file created when missing, MB (2^20 bytes)"},
    {.name = "count", .kind = OPT_UINT, .var = &opt.count, .lo = 512, .hi = SFS_MAX_READ,
     .dflt = SFS_MAX_READ, .param = true, .help = "bytes per READ"},
    {.name = "verify", .kind = OPT_FLAG, .var = &opt.verify_flag,
     .help = "open every reply and compare every byte with the file (the default; needs --root)"},
    {.name = "no-verify", .kind = OPT_FLAG, .var = &opt.no_verify,
     .help = "leave READ replies unopened, checked by length (performance runs)"},
    {.name = "prepare-only", .kind = OPT_FLAG, .var = &opt.prepare_only,
     .help = "create the file under --root if missing, then exit (no connection)"},
    {.name = "timeout", .kind = OPT_DOUBLE, .var = &opt.timeout_s, .lo = 0.1, .hi = 3600,
     .dflt = 120, .help = "bound on the whole run, seconds"},
    {.name = "csv", .kind = OPT_STR, .var = &opt.csv, .help = "write the per-client table here"},
    {.name = NULL},
};

/* ---- A client ------------------------------------------------------------------------------- */

enum phase { P_CONNECT, P_HELLO, P_LOOKUP, P_READ, P_RELEASE, P_DONE };

struct client {
    unsigned id;
    int fd;
    enum phase phase;
    enum err_kind err;
    char why[160]; /* the error in words */
    struct sfs_kx kx;
    struct sfs_session s;
    uint8_t *in; /* replies read: [in_off, in_len) not yet handled */
    size_t in_off, in_len;
    size_t skip;       /* --no-verify: bytes of a READ reply still to discard */
    uint32_t skip_len; /* that reply's frame length */
    uint8_t *out; /* sealed requests: [out_sent, out_len) not yet written */
    size_t out_len, out_sent;
    bool write_watched;
    uint64_t handle, size, nreads;
    uint64_t sent, done; /* READs sent, READ replies received */
    uint64_t *sent_ns;   /* when each READ in flight left: slot (READ index % K) */
    uint64_t bytes;
    uint64_t t0, t_end; /* connect; the last READ byte (or the error) */
    float *lat_us;       /* sampled READ latencies */
    unsigned nlat;
};

static struct {
    struct bench b;
    struct client *c;
    unsigned left; /* clients not yet done or failed */
    int ep;
    struct sockaddr_in addr;
    const uint8_t *map; /* the file, --verify */
    uint64_t map_size;
    size_t read_head, status_head; /* a READ reply's head, a status reply's */
    size_t out_cap;
    uint64_t start_ns, deadline_ns;
} run = {.b = {.name = "multio"}};

/* Ends c with an error of `kind` (the first one counts). @return false. */
static __attribute__((format(printf, 3, 4))) bool fail(struct client *c, enum err_kind kind,
                                                       const char *fmt, ...)
{
    if (c->phase == P_DONE)
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    c->err = kind;
    c->phase = P_DONE;
    if (!c->t_end)
        c->t_end = now_ns();
    if (c->fd >= 0)
        close(c->fd); /* also leaves the epoll set: no other descriptor refers to it */
    c->fd = -1;
    run.left--;
    return false;
}

/* The client read the whole file and released it. @return false (it ended). */
static bool finish(struct client *c)
{
    close(c->fd);
    c->fd = -1;
    c->phase = P_DONE;
    run.left--;
    return false;
}

/* Handlers below return false once the client has ended (fail, finish). */

static bool watch_write(struct client *c, bool on)
{
    if (on == c->write_watched)
        return true;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.u32 = c->id};
    if (epoll_ctl(run.ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        return fail(c, E_CLOSED, "epoll_ctl: %s", strerror(errno));
    c->write_watched = on;
    return true;
}

/* Writes what is queued; watches for writability while something is left. */
static bool flush(struct client *c)
{
    while (c->out_sent < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return watch_write(c, true);
        if (w < 0)
            return fail(c, E_CLOSED, "send: %s", strerror(errno));
        c->out_sent += (size_t)w;
    }
    c->out_len = c->out_sent = 0;
    return watch_write(c, false);
}

/* Seals a request, queues it and writes at once: a READ's latency starts
 * when it leaves, not when a batch of them would. */
static bool send_request(struct client *c, const struct sfs_request *r)
{
    uint8_t plain[SFS_MAX_REQUEST];
    size_t n = sfs_request_encode(r, plain);
    if (c->out_sent > 0) {
        memmove(c->out, c->out + c->out_sent, c->out_len - c->out_sent);
        c->out_len -= c->out_sent;
        c->out_sent = 0;
    }
    if (n == 0 || c->out_len + SFS_LENGTH + n + SFS_TAG > run.out_cap)
        return fail(c, E_PROTOCOL, "request %u cannot be queued", r->id);
    size_t frame = sfs_seal(&c->s, plain, n, c->out + c->out_len);
    if (frame == 0)
        return fail(c, E_PROTOCOL, "sealing failed (libcrypto)");
    c->out_len += frame;
    return flush(c);
}

static uint64_t read_offset(uint64_t i)
{
    return i * opt.count;
}

/* The bytes READ i returns: count, less at the end of the file. */
static uint32_t read_bytes(const struct client *c, uint64_t i)
{
    uint64_t left = c->size - read_offset(i);
    return left < opt.count ? (uint32_t)left : opt.count;
}

/* Request ids: LOOKUP 0, READ i is 1 + i, RELEASE 1 + nreads. */
static bool send_read(struct client *c)
{
    struct sfs_request r = {.id = (uint32_t)(1 + c->sent), .op = SFS_READ, .handle = c->handle,
                            .offset = read_offset(c->sent), .count = opt.count};
    c->sent_ns[c->sent % opt.inflight] = now_ns();
    c->sent++;
    return send_request(c, &r);
}

static bool send_release(struct client *c)
{
    struct sfs_request r = {.id = (uint32_t)(1 + c->nreads), .op = SFS_RELEASE,
                            .handle = c->handle};
    c->phase = P_RELEASE;
    return send_request(c, &r);
}

/* Every READ's latency while there are at most LAT_MAX, else every k-th. */
static void note_latency(struct client *c, uint64_t ns)
{
    uint64_t stride = (c->nreads + LAT_MAX - 1) / LAT_MAX;
    if (c->done % stride == 0 && c->nlat < LAT_MAX)
        c->lat_us[c->nlat++] = (float)((double)ns / 1e3);
}

/* READ `done` came back whole with `bytes` of data. */
static bool read_done(struct client *c, uint32_t bytes)
{
    uint64_t t = now_ns();
    note_latency(c, t - c->sent_ns[c->done % opt.inflight]);
    c->bytes += bytes;
    c->done++;
    if (c->sent < c->nreads)
        return send_read(c);
    if (c->done < c->nreads)
        return true;
    c->t_end = t;
    return send_release(c);
}

static bool on_lookup(struct client *c, const struct sfs_reply *r)
{
    if (!S_ISREG(r->attr.mode))
        return fail(c, E_STATUS, "%s is not a regular file", opt.file);
    if (opt.root && r->attr.size != run.map_size)
        return fail(c, E_MISMATCH, "LOOKUP says %llu bytes, the file has %llu",
                    (unsigned long long)r->attr.size, (unsigned long long)run.map_size);
    c->handle = r->handle;
    c->size = r->attr.size;
    c->nreads = (c->size + opt.count - 1) / opt.count;
    c->lat_us = malloc((c->nreads < LAT_MAX ? c->nreads : LAT_MAX) * sizeof(float) + 1);
    if (!c->lat_us)
        return fail(c, E_PROTOCOL, "out of memory");
    c->phase = P_READ;
    while (c->sent < c->nreads && c->sent < opt.inflight)
        if (!send_read(c))
            return false;
    if (c->nreads > 0)
        return true;
    c->t_end = now_ns();
    return send_release(c);
}

static bool on_read(struct client *c, const struct sfs_reply *r)
{
    uint64_t off = read_offset(c->done);
    uint32_t want = read_bytes(c, c->done);
    if (r->count != want)
        return fail(c, E_SHORT, "READ at %llu: %u bytes, expected %u", (unsigned long long)off,
                    r->count, want);
    if (memcmp(r->data, run.map + off, want) != 0) {
        uint32_t i = 0;
        while (r->data[i] == run.map[off + i])
            i++;
        return fail(c, E_MISMATCH, "READ at %llu: byte %llu differs from the file",
                    (unsigned long long)off, (unsigned long long)(off + i));
    }
    return read_done(c, want);
}

/* --no-verify: a READ reply left sealed. Its length says what it is: data
 * of the expected count, or a status (an error). Its nonce is used up as an
 * open would, so that the RELEASE reply still opens. */
static bool on_read_unopened(struct client *c, uint32_t len)
{
    if (c->done >= c->sent)
        return fail(c, E_PROTOCOL, "a reply to no request");
    uint32_t want = read_bytes(c, c->done);
    sfs_skip(&c->s);
    if (len == SFS_TAG + run.read_head + want)
        return read_done(c, want);
    if (len == SFS_TAG + run.status_head)
        return fail(c, E_STATUS, "READ at %llu: a status reply (unopened: --no-verify)",
                    (unsigned long long)read_offset(c->done));
    return fail(c, E_SHORT, "READ at %llu: a frame of %u bytes, expected %zu",
         (unsigned long long)read_offset(c->done), len, SFS_TAG + run.read_head + want);
}

/* The id and op each phase expects of the next reply. */
static void expected(const struct client *c, uint32_t *id, uint8_t *op)
{
    *id = c->phase == P_LOOKUP ? 0 : (uint32_t)(1 + (c->phase == P_READ ? c->done : c->nreads));
    *op = c->phase == P_LOOKUP ? SFS_LOOKUP : c->phase == P_READ ? SFS_READ : SFS_RELEASE;
}

static bool on_frame(struct client *c, uint32_t len, uint8_t *body)
{
    if (c->phase == P_READ && !opt.verify)
        return on_read_unopened(c, len);
    long n = sfs_open(&c->s, len, body, body);
    struct sfs_reply r;
    uint32_t id;
    uint8_t op;
    if (n < 0)
        return fail(c, E_AUTH, "a reply does not authenticate");
    if (!sfs_reply_decode(body, (size_t)n, &r))
        return fail(c, E_PROTOCOL, "a malformed reply");
    expected(c, &id, &op);
    if (c->phase == P_READ && c->done >= c->sent)
        return fail(c, E_PROTOCOL, "a reply to no request");
    if (r.id != id || r.op != op)
        return fail(c, E_PROTOCOL, "reply id %u op %u, expected id %u op %u", r.id, r.op, id, op);
    if (r.status != 0)
        return fail(c, E_STATUS, "reply id %u op %u: status %u (%s)", r.id, r.op, r.status,
                    strerror(r.status));
    if (c->phase == P_LOOKUP)
        return on_lookup(c, &r);
    if (c->phase == P_READ)
        return on_read(c, &r);
    return finish(c); /* RELEASE */
}

/* Handles the whole frames read so far. */
static bool on_frames(struct client *c)
{
    while (c->phase > P_HELLO && c->phase < P_DONE && c->in_len - c->in_off >= SFS_LENGTH) {
        uint32_t len = sfs_frame_length(c->in + c->in_off, SFS_MAX_REPLY_FRAME);
        if (len == 0)
            return fail(c, E_PROTOCOL, "a frame length out of range");
        size_t have = c->in_len - c->in_off;
        if (have < SFS_LENGTH + len && c->phase == P_READ && !opt.verify) {
            c->skip = SFS_LENGTH + len - have; /* the rest is dropped unread: skip_rest() */
            c->skip_len = len;
            c->in_off = c->in_len;
            break;
        }
        if (have < SFS_LENGTH + len)
            break;
        uint8_t *body = c->in + c->in_off + SFS_LENGTH;
        c->in_off += SFS_LENGTH + len;
        on_frame(c, len, body);
    }
    if (c->in_off == c->in_len)
        c->in_off = c->in_len = 0;
    else if (IN_BUF - c->in_len < MAX_FRAME) { /* no room for a whole frame after */
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    return c->phase != P_DONE;
}

/* The server's hello: the session's keys, then the LOOKUP. */
static bool on_hello(struct client *c)
{
    if (c->in_len < SFS_HELLO)
        return true;
    int err = sfs_session_init(&c->s, &c->kx, c->in, true);
    sfs_kx_free(&c->kx);
    if (err)
        return fail(c, E_HANDSHAKE, "the server's hello does not make a session");
    c->in_off = SFS_HELLO;
    c->phase = P_LOOKUP;
    struct sfs_request r = {.id = 0, .op = SFS_LOOKUP, .pathlen = (uint16_t)strlen(opt.file),
                            .path = opt.file};
    return send_request(c, &r);
}

/* --no-verify: the rest of an unopened READ reply, discarded by the kernel
 * (TCP's MSG_TRUNC: no copy to us). */
static bool skip_rest(struct client *c)
{
    ssize_t n = recv(c->fd, c->in, c->skip, MSG_TRUNC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n <= 0)
        return fail(c, E_CLOSED, "%s", n == 0 ? "the server closed the connection" : strerror(errno));
    c->skip -= (size_t)n;
    return c->skip > 0 || on_read_unopened(c, c->skip_len);
}

/* One read per readiness. --no-verify reads PEEK bytes at most: the frames'
 * lengths and what is small; skip_rest() drops the rest of each READ reply. */
static bool on_readable(struct client *c)
{
    if (c->skip > 0)
        return skip_rest(c);
    size_t room = IN_BUF - c->in_len;
    ssize_t n = read(c->fd, c->in + c->in_len, opt.verify || room < PEEK ? room : PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n <= 0) {
        const char *why = n == 0 ? "the server closed the connection" : strerror(errno);
        return fail(c, c->phase == P_HELLO ? E_HANDSHAKE : E_CLOSED, "%s", why);
    }
    c->in_len += (size_t)n;
    if (c->phase == P_HELLO && !on_hello(c))
        return false;
    return on_frames(c);
}

/* The connect has an outcome: send our hello. */
static bool on_connected(struct client *c)
{
    int err = 0, one = 1;
    socklen_t len = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err)
        return fail(c, E_CONNECT, "connect: %s", strerror(err));
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (sfs_kx_new(&c->kx) != 0)
        return fail(c, E_HANDSHAKE, "key generation failed (libcrypto)");
    c->phase = P_HELLO;
    c->write_watched = true; /* the connect's watch: flush() drops it */
    memcpy(c->out, c->kx.hello, SFS_HELLO);
    c->out_len = SFS_HELLO;
    return flush(c);
}

static void on_event(struct client *c, uint32_t events)
{
    if (c->phase == P_CONNECT)
        on_connected(c);
    else if ((!(events & EPOLLOUT) || flush(c)) && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        on_readable(c);
}

static bool client_start(struct client *c)
{
    c->t0 = now_ns();
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return fail(c, E_CONNECT, "socket: %s", strerror(errno));
    if (connect(c->fd, (const struct sockaddr *)&run.addr, sizeof(run.addr)) != 0 &&
        errno != EINPROGRESS)
        return fail(c, E_CONNECT, "connect: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = c->id};
    if (epoll_ctl(run.ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
        return fail(c, E_CONNECT, "epoll_ctl: %s", strerror(errno));
    return true;
}

static bool client_alloc(struct client *c, unsigned id)
{
    *c = (struct client){.id = id, .fd = -1, .phase = P_CONNECT};
    c->in = malloc(IN_BUF);
    c->out = malloc(run.out_cap);
    c->sent_ns = calloc(opt.inflight, sizeof(uint64_t));
    return c->in && c->out && c->sent_ns;
}

static void client_free(struct client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    sfs_kx_free(&c->kx);
    sfs_session_free(&c->s);
    free(c->in);
    free(c->out);
    free(c->sent_ns);
    free(c->lat_us);
}

/* ---- The run ----------------------------------------------------------------------------- */

static void run_loop(void)
{
    struct epoll_event ev[64];
    while (run.left > 0) {
        uint64_t t = now_ns();
        if (t >= run.deadline_ns)
            break;
        int ms = (int)((run.deadline_ns - t + 999999) / 1000000);
        int n = epoll_wait(run.ep, ev, 64, ms);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "multio: epoll_wait: %s\n", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++)
            if (run.c[ev[i].data.u32].phase != P_DONE)
                on_event(&run.c[ev[i].data.u32], ev[i].events);
    }
    for (unsigned i = 0; i < opt.clients; i++)
        fail(&run.c[i], E_TIMEOUT, "unfinished after %g s (--timeout)", opt.timeout_s);
}

/* ---- The file ------------------------------------------------------------------------------ */

/* Writes `bytes` of deterministic content (xorshift64 from a fixed seed) to
 * path, under a temporary name renamed at the end, so that concurrent runs
 * never see a partial file. */
static int create_file(const char *path, uint64_t bytes)
{
    char tmp[4200];
    uint64_t buf[8192], state = 0x9e3779b97f4a7c15ull;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    for (uint64_t done = 0; done < bytes;) {
        size_t n = bytes - done < sizeof(buf) ? (size_t)(bytes - done) : sizeof(buf);
        for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]); i++)
            buf[i] = xorshift64(&state);
        if (write(fd, buf, n) != (ssize_t)n) {
            int err = errno ? -errno : -EIO;
            close(fd);
            unlink(tmp);
            return err;
        }
        done += n;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int err = -errno;
        unlink(tmp);
        return err;
    }
    printf("created %s: %.1f MB\n", path, (double)bytes / MB);
    return 0;
}

/* The file under --root: created if missing, mapped for --verify. */
static bool prepare_file(void)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", opt.root, opt.file);
    int err = 0;
    if (stat(path, &st) != 0 && errno == ENOENT)
        err = create_file(path, (uint64_t)opt.file_mb << 20);
    int fd = err ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "multio: %s: %s\n", path, strerror(err ? -err : errno));
        return false;
    }
    run.map_size = (uint64_t)st.st_size;
    if (opt.verify && st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "multio: mmap %s: %s\n", path, strerror(errno));
            close(fd);
            return false;
        }
        run.map = p;
    }
    close(fd);
    return true;
}

/* ---- The report -------------------------------------------------------------------------- */

enum { COL_CLIENT, COL_MB, COL_MBPS, COL_READS, COL_P50, COL_P99, COL_RESULT, COL_WHY, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [COL_CLIENT] = {.title = "client", .key = "client", .right = true},
    [COL_MB] = {.title = "MB", .key = "mb", .right = true, .gap = 2},
    [COL_MBPS] = {.title = "MB/s", .key = "mbps", .right = true, .gap = 2},
    [COL_READS] = {.title = "READs", .key = "reads", .right = true, .gap = 2},
    [COL_P50] = {.title = "p50 us", .key = "p50_us", .right = true, .gap = 2},
    [COL_P99] = {.title = "p99 us", .key = "p99_us", .right = true, .gap = 2},
    [COL_RESULT] = {.title = "result", .key = "result", .gap = 2},
    [COL_WHY] = {.title = "", .key = "why"},
};

struct totals {
    uint64_t bytes, reads, last_ns;
    unsigned complete, errors[E_KINDS];
    double *lat;
    size_t nlat;
    double *mbps; /* per client, for min/median/max */
};

static double client_mbps(const struct client *c)
{
    return c->t_end > c->t0 ? (double)c->bytes / MB / ((double)(c->t_end - c->t0) / 1e9) : 0.0;
}

/* A client's row; its latencies join the totals. */
static void client_row(struct bench_table *t, unsigned row, const struct client *c,
                       struct totals *tot)
{
    double *lat = tot->lat + tot->nlat;
    for (unsigned i = 0; i < c->nlat; i++)
        lat[i] = c->lat_us[i];
    tot->mbps[row] = client_mbps(c);
    bench_cell(t, row, COL_CLIENT, "%u", c->id);
    bench_cell(t, row, COL_MB, "%.1f", (double)c->bytes / MB);
    bench_cell(t, row, COL_MBPS, "%.1f", tot->mbps[row]);
    bench_cell(t, row, COL_READS, "%llu", (unsigned long long)c->done);
    if (c->nlat) {
        bench_cell(t, row, COL_P99, "%.0f", quantile(lat, c->nlat, 0.99));
        bench_cell(t, row, COL_P50, "%.0f", quantile(lat, c->nlat, 0.50));
    }
    bench_cell(t, row, COL_RESULT, "%s", err_name[c->err]);
    bench_cell(t, row, COL_WHY, "%s", c->why);
    tot->nlat += c->nlat;
    tot->bytes += c->bytes;
    tot->reads += c->done;
    tot->errors[c->err]++;
    tot->complete += c->err == E_NONE;
    if (c->t_end > tot->last_ns)
        tot->last_ns = c->t_end;
}

static void print_errors(const struct totals *tot, unsigned nerr)
{
    printf("errors: %u (", nerr);
    for (int k = E_NONE + 1; k < E_KINDS; k++)
        printf("%s%s %u", k > E_NONE + 1 ? ", " : "", err_name[k], tot->errors[k]);
    printf(")\n");
}

static int report(const struct bench_machine *mc, double cpu)
{
    struct bench_table t;
    size_t nlat = 1;
    for (unsigned i = 0; i < opt.clients; i++)
        nlat += run.c[i].nlat;
    struct totals tot = {.lat = calloc(nlat, sizeof(double)),
                         .mbps = calloc(opt.clients, sizeof(double))};
    if (!tot.lat || !tot.mbps) {
        fprintf(stderr, "multio: out of memory\n");
        return 1;
    }
    bench_table_init(&t, columns, NCOLS, opt.clients);
    for (unsigned i = 0; i < opt.clients; i++)
        client_row(&t, i, &run.c[i], &tot);
    bench_table_print(stdout, &t);

    double wall = tot.last_ns > run.start_ns ? (double)(tot.last_ns - run.start_ns) / 1e9 : 0;
    double agg = wall > 0 ? (double)tot.bytes / MB / wall : 0;
    double p50 = quantile(tot.lat, tot.nlat, 0.50), p99 = quantile(tot.lat, tot.nlat, 0.99);
    unsigned nerr = opt.clients - tot.complete;
    printf("aggregate: %.1f MB/s (%.1f MB in %.3f s, from the first connect to the last "
           "client's last byte)\n",
           agg, (double)tot.bytes / MB, wall);
    printf("per client: MB/s min %.1f, median %.1f, max %.1f\n",
           quantile(tot.mbps, opt.clients, 0), median(tot.mbps, opt.clients),
           quantile(tot.mbps, opt.clients, 1));
    printf("READ latency (request sent -> reply received; %zu sampled of %llu READs): p50 %.0f "
           "us, p99 %.0f us\n",
           tot.nlat, (unsigned long long)tot.reads, p50, p99);
    printf("client CPU: %.2f s (%.0f%% of one core over the run)%s\n", cpu,
           wall > 0 ? 100 * cpu / wall : 0,
           opt.verify ? "" : "; no READ reply was opened (--no-verify)");
    print_errors(&tot, nerr);
    if (opt.csv) {
        struct bench_param params[8];
        unsigned np = bench_opt_params(options, params, 7);
        snprintf(params[np].name, sizeof(params[np].name), "verify");
        snprintf(params[np++].value, sizeof(params[0].value), "%d", opt.verify);
        bench_table_csv(&run.b, opt.csv, mc, params, np, &t);
    }
    printf("multio: total_mb=%.1f aggregate_mbps=%.1f p50_us=%.0f p99_us=%.0f errors=%u "
           "clients=%u complete=%u verify=%d\n",
           (double)tot.bytes / MB, agg, p50, p99, nerr, opt.clients, tot.complete, opt.verify);
    bench_table_free(&t);
    free(tot.lat);
    free(tot.mbps);
    return nerr == 0 ? 0 : 1;
}

/* ---- Main ---------------------------------------------------------------------------------- */

/* The options that depend on each other; false: a usage error (printed). */
static bool settle_options(char *default_file, size_t size)
{
    if (opt.verify_flag && opt.no_verify) {
        fprintf(stderr, "multio: --verify and --no-verify exclude each other\n");
        return false;
    }
    opt.verify = !opt.no_verify && !opt.prepare_only;
    if (opt.prepare_only && !opt.root) {
        fprintf(stderr, "multio: --prepare-only needs --root, the served directory\n");
        return false;
    }
    if (opt.verify && !opt.root) {
        fprintf(stderr, "multio: --verify (the default) needs --root, the served directory\n");
        return false;
    }
    if (!opt.file) {
        snprintf(default_file, size, "multio-%umb.bin", opt.file_mb);
        opt.file = default_file;
    }
    if (strlen(opt.file) > SFS_MAX_PATH) {
        fprintf(stderr, "multio: --file: longer than %u bytes\n", SFS_MAX_PATH);
        return false;
    }
    run.addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    if (inet_pton(AF_INET, opt.host, &run.addr.sin_addr) != 1) {
        fprintf(stderr, "multio: --host: '%s' is not an IPv4 address\n", opt.host);
        return false;
    }
    return true;
}

/* The sizes of the frames this run exchanges. */
static void frame_sizes(void)
{
    struct sfs_reply rd = {.op = SFS_READ}, st = {.op = SFS_READ, .status = 1};
    run.read_head = sfs_reply_head_size(&rd);
    run.status_head = sfs_reply_head_size(&st);
    size_t lookup = SFS_LENGTH + SFS_MAX_REQUEST_FRAME, read = SFS_LENGTH + 64 + SFS_TAG;
    run.out_cap = opt.inflight * read > lookup ? opt.inflight * read : lookup;
}

int main(int argc, char **argv)
{
    char default_file[64];
    struct bench_machine mc;
    int rc = bench_options("multio [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    if (!settle_options(default_file, sizeof(default_file)))
        return 2;
    if (opt.root && !prepare_file())
        return 1;
    if (opt.prepare_only)
        return 0;
    frame_sizes();
    raise_fd_limit(opt.clients + 64);
    run.c = calloc(opt.clients, sizeof(*run.c));
    run.ep = epoll_create1(EPOLL_CLOEXEC);
    for (unsigned i = 0; run.c && i < opt.clients; i++)
        if (!client_alloc(&run.c[i], i)) {
            fprintf(stderr, "multio: out of memory for %u clients\n", opt.clients);
            return 1;
        }
    if (!run.c || run.ep < 0) {
        fprintf(stderr, "multio: %s\n", run.c ? strerror(errno) : "out of memory");
        return 1;
    }
    bench_machine_get(&mc, stdout);
    printf("multio: %u clients on %s:%u, %u READs of %u bytes in flight each, file %s; %s\n",
           opt.clients, opt.host, opt.port, opt.inflight, opt.count, opt.file,
           opt.verify ? "--verify: every reply opened and every byte compared with the file"
                      : "--no-verify: READ replies are not opened (no client decryption), "
                        "only their lengths checked");
    fflush(stdout);
    double cpu0 = cpu_s(RUSAGE_SELF);
    run.start_ns = now_ns();
    run.deadline_ns = run.start_ns + (uint64_t)(opt.timeout_s * 1e9);
    run.left = opt.clients;
    for (unsigned i = 0; i < opt.clients; i++)
        client_start(&run.c[i]);
    run_loop();
    rc = report(&mc, cpu_s(RUSAGE_SELF) - cpu0);
    for (unsigned i = 0; i < opt.clients; i++)
        client_free(&run.c[i]);
    free(run.c);
    close(run.ep);
    if (run.map)
        munmap((void *)run.map, run.map_size);
    return rc;
}
