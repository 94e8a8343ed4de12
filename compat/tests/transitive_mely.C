/* SPDX-License-Identifier: MIT */
// transitive_mely.C: an original-Mely-style program that includes nothing
// but "mely.h", and uses what the original mely.h gave its programs through
// the headers it included (<stdlib.h>, <string.h>, <stdio.h>, <errno.h>,
// <pthread.h>, <netinet/in.h>, <assert.h>) and its own macros (CBV_PTR_TYPE,
// DEBUG_TMP, PRINT_ALERT, DEBUG, rdtscll, MAX_THREADS). It fails to compile
// if compat's mely.h gives less; it exits non-zero if a name does not work.
#include "mely.h"

#include "check.h" // CHECK(cond): includes nothing itself

static const char MSG[] = "hello, mely";

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_thread_posts; // under g_mu
static int g_sv[2];
static char g_got[64];
static size_t g_len;
static CBV_PTR_TYPE g_again; // NULL until main sets it, as Mely programs write
static int g_again_runs;
static unsigned long long g_t0;

static int by_value(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

// <stdlib.h>, <string.h>, <stdio.h>, <errno.h>, <netinet/in.h>, <assert.h>
static void check_libc()
{
    char *p = (char *)malloc(32);
    CHECK(p != NULL);
    memset(p, 0, 32);
    memcpy(p, MSG, strlen(MSG) + 1);
    CHECK(strcmp(p, MSG) == 0 && strncmp(p, "hello", 5) == 0);
    CHECK(strstr(p, "mely") == p + 7 && strchr(p, ',') == p + 5);
    free(p);

    char buf[32];
    CHECK(snprintf(buf, sizeof buf, "%d-%s", atoi("41") + 1, "x") == 4);
    CHECK(strcmp(buf, "42-x") == 0);
    CHECK(strtol("ff", NULL, 16) == 255);
    int v[4] = {3, 1, 4, 2};
    qsort(v, 4, sizeof v[0], by_value);
    CHECK(v[0] == 1 && v[3] == 4);

    errno = 0;
    CHECK(strlen(strerror(EAGAIN)) > 0 && errno == 0);
    CHECK(EAGAIN != ECONNRESET);

    // network byte order: the most significant byte first
    uint16_t port = htons(0x1234);
    CHECK(((unsigned char *)&port)[0] == 0x12 && ntohs(port) == 0x1234);
    CHECK(ntohl(htonl(0x01020304u)) == 0x01020304u);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(((unsigned char *)&sin.sin_addr.s_addr)[0] == 127 && INADDR_ANY == 0);
    CHECK(IPPROTO_TCP == 6);
    assert(sin.sin_family == AF_INET);
}

// <pthread.h>: a foreign thread posts to the runtime
static void from_thread(int n)
{
    CHECK(n == 42 && get_current_color() == 2);
    pthread_mutex_lock(&g_mu);
    CHECK(g_thread_posts == 1);
    pthread_mutex_unlock(&g_mu);
    unsigned long long t1;
    rdtscll(t1);
    CHECK(t1 >= g_t0);
    printf("transitive mely.h: ok\n");
    fflush(stdout);
    exit(0);
}

static void *poster(void *arg)
{
    pthread_mutex_lock(&g_mu);
    g_thread_posts++;
    pthread_mutex_unlock(&g_mu);
    cpucb_tail(cwrap(from_thread, *(int *)arg, 2));
    return NULL;
}

static void start_thread()
{
    static int arg = 42;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, poster, &arg) == 0);
    CHECK(pthread_join(t, NULL) == 0);
}

// a raw cbv re-posted from its own handler, then freed
static void again()
{
    if (++g_again_runs < 3) {
        cpucb_tail(g_again);
        return;
    }
    g_again->setFlagAutoFree(true);
    g_again = NULL;
    DEBUG("never compiled %d\n", no_such_name);
    start_thread();
}

// <sys/socket.h> comes with <netinet/in.h>: a socket pair read through fdcb
static void readable(int fd)
{
    char buf[8];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN)
        return;
    CHECK(n > 0 && g_len + (size_t)n < sizeof g_got);
    memcpy(g_got + g_len, buf, (size_t)n);
    g_len += (size_t)n;
    if (g_len < strlen(MSG))
        return;
    CHECK(memcmp(g_got, MSG, strlen(MSG)) == 0);
    fdcb_finished(true);
    g_again = cwrap(again, 1);
    g_again->setFlagAutoFree(false);
    cpucb_tail(g_again);
}

static void register_reader()
{
    // fdcb from a callback, as the original required
    CBV_PTR_TYPE cb = cwrap(readable, g_sv[0], 1);
    fdcb(g_sv[0], selread, cb);
    CHECK(send(g_sv[1], MSG, strlen(MSG), 0) == (ssize_t)strlen(MSG));
}

int main()
{
    check_libc();
    CHECK(MAX_THREADS >= 8 && task_get_nthreads() <= MAX_THREADS);
    rdtscll(g_t0);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, g_sv) == 0);
    DEBUG_TMP("starting with %d workers\n", task_get_nthreads());
    cpucb(cwrap(register_reader, 1));
    amain();
}
