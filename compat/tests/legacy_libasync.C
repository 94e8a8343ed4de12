/* SPDX-License-Identifier: MIT */
// legacy_libasync.C: a program in classic libasync style (one color, callbacks
// everywhere). An echo server and a client on loopback, a refcounted object
// whose member functions are wrapped with bound and call-time arguments,
// timers (one removed), a signal and a child process. Prints a transcript and
// exits 0; any surprise ends it with fatal (exit 1).
#include "async.h"

#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <arpa/inet.h>

static const int nmsgs = 5;

class echoserv {
    int lfd;

public:
    int nconns;
    echoserv() : lfd(-1), nconns(0) {}
    ~echoserv() { if (lfd >= 0) { fdcb(lfd, selread, NULL); close(lfd); } }

    u_int16_t start()
    {
        lfd = inetsocket(SOCK_STREAM, 0, INADDR_LOOPBACK);
        if (lfd < 0)
            fatal << "inetsocket: " << strerror(errno) << "\n";
        if (listen(lfd, 5) < 0)
            fatal("listen: %s\n", strerror(errno));
        make_async(lfd);
        close_on_exec(lfd);
        sockaddr_in sin;
        socklen_t len = sizeof(sin);
        getsockname(lfd, (sockaddr *)&sin, &len);
        fdcb(lfd, selread, wrap(this, &echoserv::accepted));
        return ntohs(sin.sin_port);
    }

    void accepted()
    {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return;
        make_async(fd);
        tcp_nodelay(fd);
        nconns++;
        fdcb(fd, selread, wrap(this, &echoserv::readable, fd, nconns));
    }

    void readable(int fd, int conn)
    {
        char buf[256];
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            if (write(fd, buf, n) != n)
                fatal << "short echo write\n";
            return;
        }
        if (n < 0 && errno == EAGAIN)
            return;
        warnx << "server: connection " << conn << " closed\n";
        fdcb(fd, selread, NULL);
        close(fd);
    }
};

class client : public virtual refcount {
    int fd;
    int sent;

public:
    int got;
    cbv done;
    client(cbv d) : fd(-1), sent(0), got(0), done(d) {}

    void connected(int attempt, int f)
    {
        if (f < 0)
            fatal << "connect attempt " << attempt << " failed\n";
        fd = f;
        printf("client: connected (attempt %d)\n", attempt);
        fdcb(fd, selread, wrap(mkref(this), &client::readable));
        send_next();
    }

    void send_next()
    {
        char msg[32];
        int len = snprintf(msg, sizeof(msg), "msg%d", sent++);
        if (write(fd, msg, len) != len)
            fatal << "client write\n";
    }

    void readable()
    {
        char buf[64];
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
            return;
        buf[n] = 0;
        char expect[32];
        snprintf(expect, sizeof(expect), "msg%d", got);
        if (strcmp(buf, expect))
            fatal << "client: got '" << buf << "', expected '" << expect << "'\n";
        printf("client: echo %s\n", buf);
        if (++got < nmsgs) {
            send_next();
            return;
        }
        fdcb(fd, selread, NULL);
        close(fd);
        cbv d = done;
        done = cbv_null; // done holds a ref to this client: break the cycle
        (*d)();
    }
};

static echoserv *server;
static timecb_t *never_tmo;
static int sigs_seen;

static void never() { fatal << "a removed timer fired\n"; }

static void child_done(int expect, int status)
{
    if (!WIFEXITED(status) || WEXITSTATUS(status) != expect)
        fatal << "child status " << status << "\n";
    printf("child exited with %d\n", expect);
    delete server;
    printf("done\n");
    exit(0);
}

static void got_signal(int sig)
{
    sigs_seen++;
    printf("signal %d seen\n", sig);
    sigcb(sig, NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(3);
    chldcb(pid, wrap(child_done, 3));
}

static void echo_done(ref<client> c)
{
    printf("echo done: %d messages\n", c->got);
    timecb_remove(never_tmo);
    sigcb(SIGHUP, wrap(got_signal, SIGHUP));
    kill(getpid(), SIGHUP);
}

static void start_client(u_int16_t port);

static void tick(int n, u_int16_t port)
{
    printf("tick %d\n", n);
    if (n < 3)
        delaycb(0, 5000000, wrap(tick, n + 1, port));
    else
        delaycb(0, 10000000, wrap(start_client, port));
}

static void start_client(u_int16_t port)
{
    ref<client> c = New refcounted<client>(cbv_null);
    c->done = wrap(echo_done, c);
    in_addr lo;
    lo.s_addr = htonl(INADDR_LOOPBACK);
    tcpconnect(lo, port, wrap(mkref(c.get()), &client::connected, 1));
}

int main(int argc, char **argv)
{
    (void)argc;
    setprogname(argv[0]);
    server = new echoserv;
    u_int16_t port = server->start();
    never_tmo = delaycb(60, wrap(never));
    timespec t = tsnow;
    t.tv_nsec += 1000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    timecb(t, wrap(tick, 1, port));
    amain();
}
