/* SPDX-License-Identifier: MIT */
/*
 * rwfd.cpp: what amisc.h adds to the descriptor helpers: passing a
 * descriptor over a Unix socket (writefd, readfd, writevfd, readvfd, also
 * through rwfd.h), fdwait (select's answers on any descriptor number, the
 * time left in *tvp, a wait woken by another thread), sigio_set and
 * sigio_clear, and convertint. No event loop: these are blocking helpers.
 */
#include "async.h"
#include "rwfd.h" /* its declarations agree with amisc.h's */

#include <dirent.h>
#include <pthread.h>
#include <thread>

#include "ctest.h"

static int open_fds()
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- writefd, readfd, writevfd, readvfd ---- */

static void passing()
{
    /* SIGPIPE's default action: writefd must not raise it. */
    signal(SIGPIPE, SIG_DFL);
    int sv[2], p[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && pipe(p) == 0);

    /* a pipe's read end goes over, with two bytes */
    CHECK(writefd(sv[0], "ab", 2, p[0]) == 2);
    close(p[0]); /* the sender's copy: the receiver's stays open */
    char buf[16];
    int rfd = -2;
    CHECK(readfd(sv[1], buf, sizeof buf, &rfd) == 2 && memcmp(buf, "ab", 2) == 0 && rfd >= 0);
    CHECK(write(p[1], "xyz", 3) == 3 && read(rfd, buf, sizeof buf) == 3 &&
          memcmp(buf, "xyz", 3) == 0);
    close(rfd);

    /* bytes alone: *rfdp is -1 */
    CHECK(write(sv[0], "c", 1) == 1);
    rfd = 77;
    CHECK(readfd(sv[1], buf, sizeof buf, &rfd) == 1 && buf[0] == 'c' && rfd == -1);

    /* the v forms, two buffers each way; a write end this time */
    int q[2];
    CHECK(pipe(q) == 0);
    char a[] = "12", b[] = "345";
    struct iovec out[2] = {{a, 2}, {b, 3}};
    CHECK(writevfd(sv[0], out, 2, q[1]) == 5);
    close(q[1]);
    char c1[1], c2[8];
    struct iovec in[2] = {{c1, 1}, {c2, sizeof c2}};
    rfd = -2;
    CHECK(readvfd(sv[1], in, 2, &rfd) == 5 && c1[0] == '1' && memcmp(c2, "2345", 4) == 0);
    CHECK(rfd >= 0 && write(rfd, "w", 1) == 1 && read(q[0], buf, 1) == 1 && buf[0] == 'w');
    close(rfd);
    close(q[0]);

    /* errors: what sendmsg/recvmsg say, *rfdp untouched */
    rfd = 55;
    CHECK(readfd(p[1], buf, 1, &rfd) == -1 && errno == ENOTSOCK && rfd == 55);
    CHECK(writefd(p[1], "x", 1, 0) == -1 && errno == ENOTSOCK);
    close(p[1]);
    CHECK(writefd(sv[0], "x", 1, 12345) == -1 && errno == EBADF); /* not a descriptor */

    /* a descriptor with no byte (a datagram socket can send one): -1 with
     * EAGAIN, the descriptor in *rfdp */
    int dg[2];
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg) == 0);
    CHECK(writefd(dg[0], "", 0, 0) == 0);
    rfd = -2;
    errno = 0;
    CHECK(readfd(dg[1], buf, sizeof buf, &rfd) == -1 && errno == EAGAIN && rfd >= 0);
    close(rfd);

    /* two descriptors in one message: one is taken, the other closed */
    int before = open_fds();
    union {
        char b[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    struct iovec one = {a, 1};
    mh.msg_iov = &one;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.b;
    mh.msg_controllen = sizeof ctl.b;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int two[2] = {0, 1};
    memcpy(CMSG_DATA(cm), two, sizeof two);
    CHECK(sendmsg(sv[0], &mh, 0) == 1);
    CHECK(readfd(sv[1], buf, sizeof buf, &rfd) == 1 && rfd >= 0);
    CHECK(open_fds() == before + 1);
    close(rfd);

    /* the peer gone: EPIPE, and no SIGPIPE (the process is still here) */
    close(sv[1]);
    CHECK(writefd(sv[0], "x", 1, 0) == -1 && errno == EPIPE);
    close(sv[0]);
    close(dg[0]);
    close(dg[1]);
    printf("ok: writefd, readfd, writevfd, readvfd\n");
}

/* ---- fdwait ---- */

static double now_ms()
{
    return ct_now_ms();
}

static void waiting()
{
    int p[2], sv[2];
    CHECK(pipe(p) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);

    /* nothing to read: 0 at the timeout, no time left */
    struct timeval tv = {0, 30000};
    double t0 = now_ms();
    CHECK(fdwait(p[0], selread, &tv) == 0);
    CHECK(now_ms() - t0 >= 25 && tv.tv_sec == 0 && tv.tv_usec == 0);
    /* microseconds past a second carry over, as in glibc's select; a
     * negative part is EINVAL */
    tv.tv_sec = 0;
    tv.tv_usec = 1020000;
    t0 = now_ms();
    CHECK(fdwait(p[0], true, false, &tv) == 0 && now_ms() - t0 >= 1015);
    tv.tv_sec = -1;
    tv.tv_usec = 1020000;
    CHECK(fdwait(p[0], selread, &tv) == -1 && errno == EINVAL);
    tv.tv_sec = 1;
    tv.tv_usec = -1;
    CHECK(fdwait(p[0], selread, &tv) == -1 && errno == EINVAL);

    /* ready ones: the count, as select counts (read set + write set) */
    CHECK(fdwait(p[1], selwrite) == 1);
    CHECK(write(p[1], "x", 1) == 1);
    CHECK(fdwait(p[0], selread) == 1);
    tv.tv_sec = 5;
    tv.tv_usec = 0;
    CHECK(fdwait(p[0], p[1], true, true, &tv) == 2);
    CHECK(tv.tv_sec == 4 && tv.tv_usec > 900000); /* the time left */
    CHECK(fdwait(p[0], p[1], false, true, nullptr) == 1);
    CHECK(write(sv[0], "y", 1) == 1);
    CHECK(fdwait(sv[1], true, true, nullptr) == 2); /* one fd, both ways */
    CHECK(fdwait(sv[1], false, true, nullptr) == 1);
    /* a closed peer reads as ready (EOF), as in select */
    int e[2];
    CHECK(pipe(e) == 0);
    close(e[1]);
    CHECK(fdwait(e[0], selread) == 1);
    close(e[0]);

    /* a descriptor not open: EBADF; with neither r nor w it is not looked at */
    tv.tv_sec = 0;
    tv.tv_usec = 10000;
    CHECK(fcntl(1000, F_GETFD) < 0);
    CHECK(fdwait(1000, selread, &tv) == -1 && errno == EBADF);
    tv.tv_usec = 10000;
    CHECK(fdwait(1000, false, false, &tv) == 0);

    /* a number past FD_SETSIZE (select's limit) */
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_max >= 2000) {
        if (rl.rlim_cur < 2000) {
            rl.rlim_cur = 2000;
            CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
        }
        CHECK(dup2(p[0], 1500) == 1500);
        CHECK(fdwait(1500, selread) == 1);
        char c;
        CHECK(read(1500, &c, 1) == 1 && c == 'x');
        tv.tv_sec = 0;
        tv.tv_usec = 10000;
        CHECK(fdwait(1500, selread, &tv) == 0);
        close(1500);
    } else {
        char c;
        CHECK(read(p[0], &c, 1) == 1);
        printf("(no fd past FD_SETSIZE: RLIMIT_NOFILE's hard limit is %llu)\n",
               (unsigned long long)rl.rlim_max);
    }

    /* a wait for ever, woken when another thread writes */
    t0 = now_ms();
    std::thread w([&] {
        usleep(50000);
        CHECK(write(p[1], "z", 1) == 1);
    });
    CHECK(fdwait(p[0], selread, nullptr) == 1);
    CHECK(now_ms() - t0 >= 40);
    w.join();
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);

    /* what libasync asserted against: a message and exit */
    std::string err;
    int st = ct_fork([] { fdwait(-1, selread); }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) &&
          err == "mely-compat: fdwait: negative descriptor (-1, -1)\n");
    st = ct_fork([] { fdwait(0, (selop)5); }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) &&
          err == "mely-compat: fdwait: bad operation (selread or selwrite) (0, 5)\n");
    printf("ok: fdwait\n");
}

/* ---- sigio_set, sigio_clear ---- */

static void sigio()
{
    signal(SIGIO, SIG_IGN); /* the owner gets SIGIO once data arrives */
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(sigio_set(sv[0]) == 0);
    CHECK(fcntl(sv[0], F_GETOWN) == getpid() && (fcntl(sv[0], F_GETFL) & O_ASYNC));
    CHECK(sigio_clear(sv[0]) == 0);
    CHECK(!(fcntl(sv[0], F_GETFL) & O_ASYNC));
    close(sv[0]);
    close(sv[1]);
    std::string err;
    int st = ct_fork([] {
        setprogname("rwfd");
        CHECK(sigio_set(1000) == -1 && sigio_clear(1000) == -1);
    }, &err);
    CHECK(ct_exited(st, 0) && err == "rwfd: sigio_set: F_SETOWN: Bad file descriptor\n"
                                     "rwfd: sigio_clear: F_GETFL: Bad file descriptor\n");
    printf("ok: sigio_set, sigio_clear\n");
}

/* ---- convertint ---- */

static void convert()
{
    int i = -1;
    CHECK(convertint("42", &i) && i == 42);
    CHECK(convertint("0x1f", &i) && i == 31);
    CHECK(convertint("010", &i) && i == 8);      /* base 0: octal */
    CHECK(convertint("010", &i, 10) && i == 10); /* a base given */
    CHECK(convertint("ff", &i, 16) && i == 255);
    CHECK(convertint("  -7", &i) && i == -7); /* leading blanks, a sign */
    CHECK(convertint("+9", &i) && i == 9);
    i = 5;
    CHECK(!convertint("", &i) && i == 5);
    CHECK(!convertint("12a", &i) && i == 5);
    CHECK(!convertint("12 ", &i) && i == 5);
    CHECK(!convertint("-", &i) && i == 5);
    CHECK(!convertint("0x", &i) && i == 5);
    CHECK(!convertint("9", &i, 8) && i == 5);
    /* 64-bit: saturated at its limits, then cast to T */
    int64_t big = 0;
    CHECK(convertint("99999999999999999999", &big) && big == INT64_MAX);
    CHECK(convertint("-99999999999999999999", &big) && big == INT64_MIN);
    u_int8_t small = 0;
    CHECK(convertint("300", &small) && small == 44);
    u_int32_t u = 0;
    CHECK(convertint("4294967295", &u) && u == 4294967295u);
    /* a str, a char array, argv-style char * */
    str s("123");
    CHECK(convertint(s, &i) && i == 123);
    CHECK(!convertint(str("x1"), &i) && i == 123);
    char arr[] = "77";
    char *argvish = arr;
    CHECK(convertint(arr, &i) && i == 77);
    CHECK(convertint(argvish, &i, 8) && i == 63);
    printf("ok: convertint\n");
}

int main()
{
    ct_watchdog(30);
    passing();
    waiting();
    sigio();
    convert();
    printf("compat rwfd: ok\n");
    return 0;
}
