/* SPDX-License-Identifier: MIT */
/*
 * sfsclient.c: sfsd as a child process, and a blocking client of the SFS
 * protocol (sfsclient.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "apps/sfs/tests/sfsclient.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/measure.h"

extern char **environ;

/* Run from the build directory, as `make check` does. */
static const char SFSD[] = "apps/sfs/sfsd";

/* ---- the server ---- */

/* Appends what arrives on fd to buf (NUL-ended) until `stop` is in it, EOF,
 * or the deadline. @return the bytes held. */
static size_t read_until(int fd, char *buf, size_t cap, size_t have, const char *stop,
                         uint64_t deadline)
{
    while (have < cap - 1 && now_ns() < deadline) {
        buf[have] = '\0';
        if (stop && strstr(buf, stop))
            break;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, buf + have, cap - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    buf[have] = '\0';
    return have;
}

/* fork and exec rather than posix_spawn: the child asks to be killed when
 * the test process dies, so that a test that fails (Check ends its process
 * at once) or times out (SIGKILL) leaves no server behind. */
static pid_t spawn_sfsd(const char *root, const char *const *extra, int out)
{
    const char *argv[32] = { SFSD, "--root", root, "--port", "0" };
    int n = 5;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t parent = getpid(), pid = fork();
    if (pid != 0)
        return pid;
    if (dup2(out, 1) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);
    execve(SFSD, (char *const *)argv, environ);
    _exit(127);
}

static void reap(struct sfsd_proc *p, unsigned ms, int *status)
{
    *status = -1;
    for (unsigned i = 0; i < ms / 10 + 1; i++) {
        if (waitpid(p->pid, status, WNOHANG) == p->pid)
            return;
        sleep_us(10000);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, status, 0);
    *status = -1;
}

bool sfsd_start(struct sfsd_proc *p, const char *root, const char *const *extra, char *why,
                size_t whylen)
{
    int out[2];
    memset(p, 0, sizeof *p);
    if (access(SFSD, X_OK) != 0) {
        snprintf(why, whylen, "%s: %s (is it built?)", SFSD, strerror(errno));
        return false;
    }
    if (pipe2(out, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return false;
    }
    p->pid = spawn_sfsd(root, extra, out[1]);
    close(out[1]);
    p->out = out[0];
    if (p->pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        close(p->out);
        return false;
    }
    char banner[512];
    read_until(p->out, banner, sizeof banner, 0, "\n", now_ns() + 30000000000ull);
    const char *at = strstr(banner, " on 127.0.0.1:");
    p->port = at ? (unsigned)strtoul(at + 14, NULL, 10) : 0;
    if (p->port == 0) {
        int status;
        snprintf(why, whylen, "no port in sfsd's banner \"%s\"", banner);
        kill(p->pid, SIGTERM);
        reap(p, 5000, &status);
        close(p->out);
        return false;
    }
    return true;
}

static bool parse_report(struct sfsd_report *r)
{
    const char *c = strstr(r->line, "sfsd: connections "), *e = strstr(r->line, "errors: ");
    const char *pz = strstr(r->line, ", paused "), *ev = strstr(r->line, "; evicted ");
    return c && e && pz && ev && sscanf(pz, ", paused %lu;", &r->paused) == 1 &&
           sscanf(c, "sfsd: connections %lu (closed %lu, refused %lu), requests %lu", &r->conns,
                  &r->closed, &r->refused, &r->requests) == 4 &&
           sscanf(ev, "; evicted %lu, timeouts: handshake %lu, idle %lu;", &r->evicted,
                  &r->handshake_timeouts, &r->idle_timeouts) == 3 &&
           sscanf(e, "errors: hello %lu, frame %lu, request %lu, oversize %lu, io %lu", &r->hello,
                  &r->frame, &r->request, &r->oversize, &r->io) == 5;
}

bool sfsd_stop(struct sfsd_proc *p, unsigned ms, struct sfsd_report *r)
{
    int status;
    memset(r, 0, sizeof *r);
    kill(p->pid, SIGTERM);
    read_until(p->out, r->line, sizeof r->line, 0, "io ", now_ns() + (uint64_t)ms * 1000000u);
    reap(p, ms, &status);
    close(p->out);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && parse_report(r);
}

long proc_status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t flen = strlen(field);
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, flen) == 0 && line[flen] == ':')
            kb = strtol(line + flen + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

int proc_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* ---- raw sockets ---- */

int sfs_dial(unsigned port, unsigned timeout_ms)
{
    return sfs_dial_from(port, NULL, timeout_ms);
}

int sfs_dial_from(unsigned port, const char *from, unsigned timeout_ms)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    struct sockaddr_in local = { .sin_family = AF_INET };
    struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    if (from && (inet_pton(AF_INET, from, &local.sin_addr) != 1 ||
                 bind(fd, (struct sockaddr *)&local, sizeof local) != 0)) {
        close(fd);
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
        connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

size_t recv_all(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            break;
        }
        got += (size_t)r;
    }
    return got;
}

bool closed_within(int fd, unsigned ms, size_t *extra)
{
    static char scratch[65536];
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    size_t n = 0;
    bool closed = false;
    while (!closed && now_ns() < deadline) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t r = recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
        if (r > 0)
            n += (size_t)r;
        closed = r == 0 || (r < 0 && errno == ECONNRESET);
    }
    if (extra)
        *extra = n;
    return closed;
}

/* ---- the client ---- */

__attribute__((format(printf, 2, 3))) static bool fail(struct sfsc *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    return false;
}

/* Reads can wait this long: sanitizer builds and a loaded 2-core machine are
 * slow, and Check's timeout bounds the test anyway. */
static const unsigned IO_TIMEOUT_MS = 15000;

bool sfsc_handshake(struct sfsc *c, int fd, struct sfs_kx *kx, const uint8_t hello[SFS_HELLO])
{
    uint8_t peer[SFS_HELLO];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->next_id = 1;
    c->buf = malloc(SFS_LENGTH + SFS_MAX_REPLY_FRAME);
    if (!c->buf)
        return fail(c, "out of memory");
    if (!send_all(fd, hello, SFS_HELLO))
        return fail(c, "sending the hello: %s", strerror(errno));
    if (recv_all(fd, peer, SFS_HELLO) != SFS_HELLO)
        return fail(c, "no server hello: %s", errno ? strerror(errno) : "EOF");
    memcpy(c->server_hello, peer, SFS_HELLO);
    if (sfs_session_init(&c->s, kx, peer, true) != 0)
        return fail(c, "the server's hello does not key a session");
    return true;
}

bool sfsc_connect(struct sfsc *c, unsigned port)
{
    return sfsc_connect_from(c, port, NULL);
}

bool sfsc_connect_from(struct sfsc *c, unsigned port, const char *from)
{
    struct sfs_kx kx;
    int fd = sfs_dial_from(port, from, IO_TIMEOUT_MS);
    if (fd < 0) {
        memset(c, 0, sizeof *c);
        c->fd = -1;
        return fail(c, "connect to port %u: %s", port, strerror(errno));
    }
    if (sfs_kx_new(&kx) != 0) {
        close(fd);
        memset(c, 0, sizeof *c);
        c->fd = -1;
        return fail(c, "sfs_kx_new failed");
    }
    bool ok = sfsc_handshake(c, fd, &kx, kx.hello);
    sfs_kx_free(&kx);
    if (!ok) {
        char why[sizeof c->why];
        memcpy(why, c->why, sizeof why);
        sfsc_close(c);
        memcpy(c->why, why, sizeof why);
    }
    return ok;
}

void sfsc_close(struct sfsc *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    sfs_session_free(&c->s);
    free(c->buf);
    c->buf = NULL;
}

size_t sfsc_seal(struct sfsc *c, const void *plain, size_t n, uint8_t *frame)
{
    return sfs_seal(&c->s, plain, n, frame);
}

bool sfsc_send(struct sfsc *c, struct sfs_request *r)
{
    uint8_t plain[SFS_MAX_REQUEST], frame[SFS_LENGTH + SFS_MAX_REQUEST + SFS_TAG];
    r->id = c->next_id++;
    size_t n = sfs_request_encode(r, plain);
    if (n == 0)
        return fail(c, "request (op %u) cannot be encoded", r->op);
    size_t f = sfsc_seal(c, plain, n, frame);
    if (f == 0)
        return fail(c, "sealing failed");
    if (!send_all(c->fd, frame, f))
        return fail(c, "send: %s", strerror(errno));
    return true;
}

bool sfsc_recv(struct sfsc *c, struct sfs_reply *rep)
{
    uint8_t *b = c->buf;
    if (recv_all(c->fd, b, SFS_LENGTH) != SFS_LENGTH)
        return fail(c, "reading a reply: %s", errno ? strerror(errno) : "EOF");
    uint32_t len = sfs_frame_length(b, SFS_MAX_REPLY_FRAME);
    if (len == 0)
        return fail(c, "reply frame length out of range");
    if (recv_all(c->fd, b + SFS_LENGTH, len) != len)
        return fail(c, "reading a reply's body: %s", errno ? strerror(errno) : "EOF");
    long n = sfs_open(&c->s, len, b + SFS_LENGTH, b + SFS_LENGTH);
    if (n < 0)
        return fail(c, "a reply does not authenticate");
    if (!sfs_reply_decode(b + SFS_LENGTH, (size_t)n, rep))
        return fail(c, "a malformed reply (%ld bytes)", n);
    return true;
}

bool sfsc_call(struct sfsc *c, struct sfs_request *r, struct sfs_reply *rep)
{
    if (!sfsc_send(c, r) || !sfsc_recv(c, rep))
        return false;
    if (rep->id != r->id || rep->op != r->op)
        return fail(c, "reply id %u op %u to request id %u op %u", rep->id, rep->op, r->id, r->op);
    return true;
}

int sfsc_lookup(struct sfsc *c, const char *path, size_t n, uint64_t *h, struct sfs_attr *a)
{
    struct sfs_request r = { .op = SFS_LOOKUP, .pathlen = (uint16_t)n, .path = path };
    struct sfs_reply rep;
    if (!sfsc_call(c, &r, &rep))
        return -1;
    if (rep.status == 0 && h)
        *h = rep.handle;
    if (rep.status == 0 && a)
        *a = rep.attr;
    return rep.status;
}

int sfsc_read(struct sfsc *c, uint64_t h, uint64_t offset, uint32_t count, struct sfs_reply *rep)
{
    struct sfs_request r = { .op = SFS_READ, .handle = h, .offset = offset, .count = count };
    return sfsc_call(c, &r, rep) ? rep->status : -1;
}

int sfsc_simple(struct sfsc *c, uint8_t op, uint64_t h, uint32_t cookie, struct sfs_reply *rep)
{
    struct sfs_request r = { .op = op, .handle = h, .count = cookie };
    return sfsc_call(c, &r, rep) ? rep->status : -1;
}
