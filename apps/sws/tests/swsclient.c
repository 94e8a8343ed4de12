/* SPDX-License-Identifier: MIT */
/*
 * swsclient.c: the SWS tests' server thread and raw HTTP client.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "apps/sws/tests/swsclient.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/testutil.h"

extern char **environ;

static struct sws server;
static pthread_t runner;
static atomic_bool run_done;
static int run_rc;

static void *run_thread(void *arg)
{
    (void)arg;
    run_rc = sws_run(&server);
    atomic_store(&run_done, true);
    return NULL;
}

void srv_config(struct sws_config *cfg)
{
    sws_config_init(cfg);
    cfg->port = 0;
    cfg->workers = 2;
    cfg->pin = 0;
    cfg->timeout_ms = 10000;
    cfg->drain_ms = 3000;
    /* Files the tests write are served with their ETag, and cached, once a
     * tick of the coarse clock has passed (files_settle), not a second. */
    cfg->cache.settle_ms = 0;
    /* SWS_TEST_EPOLL_HANDLER=1 runs every test with the paper's Epoll handler. */
    const char *e = getenv("SWS_TEST_EPOLL_HANDLER");
    cfg->epoll_handler = e && strcmp(e, "1") == 0;
}

void files_settle(void)
{
    struct timespec tick = { 0, 10000000 }; /* if clock_getres fails: HZ=100's */
    clock_getres(CLOCK_REALTIME_COARSE, &tick);
    sleep_us((uint64_t)tick.tv_nsec / 1000 + 5000);
}

unsigned srv_start(const struct sws_config *cfg)
{
    char err[256] = "";
    int rc = sws_start(&server, cfg, err, sizeof(err));
    ck_assert_msg(rc == 0, "sws_start: %s", err);
    atomic_store(&run_done, false);
    ck_assert_int_eq(pthread_create(&runner, NULL, run_thread, NULL), 0);
    return sws_port(&server);
}

struct sws *srv(void)
{
    return &server;
}

bool srv_stop(unsigned ms)
{
    sws_drain(&server);
    bool in_time = wait_flag(&run_done, ms);
    if (!in_time)
        mely_stop(&server.rt);
    pthread_join(runner, NULL);
    sws_free(&server);
    return in_time && run_rc == 0;
}

bool cl_connect(struct cl *c, unsigned port, unsigned timeout_ms)
{
    return cl_connect_rcvbuf(c, port, timeout_ms, 0);
}

bool cl_connect_rcvbuf(struct cl *c, unsigned port, unsigned timeout_ms, int rcvbuf)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return false;
    if (rcvbuf)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(c->fd);
        c->fd = -1;
        return false;
    }
    return true;
}

void cl_close(struct cl *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

bool cl_send(struct cl *c, const void *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t k = send(c->fd, (const char *)p + off, n - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        off += (size_t)k;
    }
    return true;
}

bool cl_sendstr(struct cl *c, const char *s)
{
    return cl_send(c, s, strlen(s));
}

/* Reads more bytes into c->buf; false on EOF, error or timeout. */
static bool fill(struct cl *c)
{
    if (c->cap - c->len < 65536) {
        size_t cap = c->cap ? c->cap * 2 : 131072;
        while (cap - c->len < 65536)
            cap *= 2;
        char *b = realloc(c->buf, cap);
        if (!b)
            return false;
        c->buf = b;
        c->cap = cap;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        c->len += (size_t)n;
        return true;
    }
}

static void consume(struct cl *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

bool cl_read(struct cl *c, struct resp *r, bool head_only)
{
    memset(r, 0, sizeof(*r));
    const char *end;
    while (!(end = c->len ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL))
        if (c->len > 65536 || !fill(c))
            return false;
    size_t hl = (size_t)(end - c->buf) + 4;
    r->head = malloc(hl + 1);
    memcpy(r->head, c->buf, hl);
    r->head[hl] = '\0';
    r->head_len = hl;
    consume(c, hl);
    if (sscanf(r->head, "HTTP/1.1 %d ", &r->status) != 1) {
        resp_free(r);
        return false;
    }
    const char *cl = resp_header(r, "Content-Length");
    size_t n = cl ? strtoul(cl, NULL, 10) : 0;
    if (head_only || r->status == 304)
        n = 0;
    while (c->len < n)
        if (!fill(c)) {
            resp_free(r);
            return false;
        }
    r->body = malloc(n + 1);
    memcpy(r->body, c->buf, n);
    r->body[n] = '\0';
    r->body_len = n;
    consume(c, n);
    return true;
}

void resp_free(struct resp *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof(*r));
}

const char *resp_header(const struct resp *r, const char *name)
{
    static _Thread_local char v[512]; /* per thread: the loaders call it at once */
    size_t nl = strlen(name);
    const char *p = strstr(r->head, "\r\n");
    while (p && p[2] != '\r') {
        p += 2;
        const char *e = strstr(p, "\r\n");
        if (!e)
            return NULL;
        if ((size_t)(e - p) > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            const char *s = p + nl + 1;
            while (*s == ' ')
                s++;
            size_t l = (size_t)(e - s) < sizeof(v) - 1 ? (size_t)(e - s) : sizeof(v) - 1;
            memcpy(v, s, l);
            v[l] = '\0';
            return v;
        }
        p = e;
    }
    return NULL;
}

bool cl_closed_within(struct cl *c, unsigned ms, size_t *extra)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    size_t got = c->len;
    c->len = 0;
    char b[4096];
    while (now_ns() < deadline) {
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        int left = (int)((deadline - now_ns()) / 1000000u) + 1;
        if (poll(&p, 1, left) <= 0)
            continue;
        ssize_t n = recv(c->fd, b, sizeof(b), MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (extra)
            *extra = got;
        return true; /* EOF or reset */
    }
    if (extra)
        *extra = got;
    return false;
}

bool cl_response_began(struct cl *c, unsigned ms)
{
    if (c->len)
        return true;
    struct pollfd p = { .fd = c->fd, .events = POLLIN };
    int n;
    while ((n = poll(&p, 1, (int)ms)) < 0 && errno == EINTR) { /* bounded: signals */
    }
    return n == 1 && (p.revents & POLLIN);
}

bool cl_silent_for(struct cl *c, unsigned ms)
{
    if (c->len)
        return false;
    struct pollfd p = { .fd = c->fd, .events = POLLIN };
    return poll(&p, 1, (int)ms) == 0;
}

int get_status(unsigned port, const char *request)
{
    struct cl c;
    if (!cl_connect(&c, port, 5000))
        return -1;
    struct resp r;
    int st = -1;
    if (cl_sendstr(&c, request) && cl_read(&c, &r, strncmp(request, "HEAD", 4) == 0)) {
        st = r.status;
        resp_free(&r);
    }
    cl_close(&c);
    return st;
}

/* ---- the binary ------------------------------------------------------------------ */

/* The binary's tests fail without it (run from the build directory). */
static void need_bin(const char *path)
{
    ck_assert_msg(access(path, X_OK) == 0, "%s: %s (run the test from the build directory)", path,
                  strerror(errno));
}

void bin_start(struct bin *b, char *const argv[])
{
    need_bin(argv[0]);
    int out[2];
    ck_assert_int_eq(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    pid_t pid;
    int e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    ck_assert_msg(e == 0, "spawning %s: %s", argv[0], strerror(e));
    char *line = b->line;
    size_t have = 0;
    uint64_t deadline = now_ns() + 20000000000ull;
    while (have < sizeof(b->line) - 1 && !memchr(line, '\n', have) && now_ns() < deadline) {
        struct pollfd p = { .fd = out[0], .events = POLLIN };
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(out[0], line + have, sizeof(b->line) - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    line[have] = '\0';
    /* the port follows the host's last colon: after "]" for IPv6 */
    const char *at = strstr(line, " on http://");
    const char *end = at ? strchr(at + 11, '/') : NULL;
    const char *colon = NULL;
    for (const char *p = at ? at + 11 : NULL; p && p < end; p++)
        if (*p == ':')
            colon = p;
    b->pid = pid;
    b->out = out[0];
    b->port = colon ? (unsigned)atoi(colon + 1) : 0;
    if (!b->port) {
        bin_stop(b);
        ck_abort_msg("%s printed no port in 20 s: \"%s\"", argv[0], line);
    }
}

int bin_stop(struct bin *b)
{
    kill(b->pid, SIGTERM);
    int status = -1;
    for (int i = 0; i < 1000; i++) { /* at most 10 s */
        if (waitpid(b->pid, &status, WNOHANG) == b->pid)
            break;
        sleep_us(10000);
        status = -1;
    }
    if (status == -1) {
        kill(b->pid, SIGKILL);
        waitpid(b->pid, &status, 0);
        status = -1;
    }
    close(b->out);
    b->out = -1;
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int run_bin(char *const argv[], char *out, size_t outlen, char *err, size_t errlen)
{
    need_bin(argv[0]);
    int po[2], pe[2];
    ck_assert_int_eq(pipe(po), 0);
    ck_assert_int_eq(pipe(pe), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, po[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
    posix_spawn_file_actions_addclose(&fa, po[0]);
    posix_spawn_file_actions_addclose(&fa, pe[0]);
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(po[1]);
    close(pe[1]);
    int status = -1;
    size_t no = 0, ne = 0;
    uint64_t deadline = now_ns() + 20000000000ull;
    for (;;) {
        struct pollfd p[2] = { { .fd = po[0], .events = POLLIN }, { .fd = pe[0], .events = POLLIN } };
        if (now_ns() > deadline) {
            kill(pid, SIGKILL);
            break;
        }
        if (poll(p, 2, 100) <= 0)
            continue;
        ssize_t n = 0;
        if (p[0].revents && (n = read(po[0], out + no, outlen - 1 - no)) > 0)
            no += (size_t)n;
        else if (p[1].revents && (n = read(pe[0], err + ne, errlen - 1 - ne)) > 0)
            ne += (size_t)n;
        else
            break; /* EOF on one of them: the program is ending */
    }
    for (ssize_t n; (n = read(po[0], out + no, outlen - 1 - no)) > 0;)
        no += (size_t)n;
    for (ssize_t n; (n = read(pe[0], err + ne, errlen - 1 - ne)) > 0;)
        ne += (size_t)n;
    out[no] = err[ne] = '\0';
    waitpid(pid, &status, 0);
    close(po[0]);
    close(pe[0]);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- document roots ---------------------------------------------------------------------------- */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

void rm_tree(const char *dir)
{
    if (dir[0])
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
