/* SPDX-License-Identifier: MIT */
/*
 * axprt.h (mely-compat): libasync's RPC transports.
 *
 *   ref<axprt_stream> x = axprt_stream::alloc(fd, ps = axprt::defps)
 *       RPC record marking (RFC 5531, section 11) over a connected stream
 *       socket or pipe. A received record longer than ps bytes (fragments
 *       summed) ends the transport, as a read error does.
 *   ref<axprt_pipe> axprt_pipe::alloc(rfd, wfd, ps)   the same over two fds
 *   x->setrcb(cb)        cb(pkt, len, NULL) for each record; at end of file
 *                        or on an error, once, cb(NULL, 0 or -1, NULL);
 *                        setrcb(NULL) stops reading
 *   x->send(p, n, NULL), x->sendv(iov, cnt, NULL)   one record; false when
 *                        the transport is dead or the record is over ps
 *   x->ateof(), x->getfd(), x->reclaim() (stop, and hand the fd back)
 *
 *   ref<axprt_dgram> axprt_dgram::alloc(fd, ss = sizeof(sockaddr), ps = defps)
 *       one RPC message per datagram (UDP, or any SOCK_DGRAM socket). The
 *       transport is connected when the socket is (getpeername): then sends
 *       take no address (dest NULL) and replies come from the peer only;
 *       else every send needs one (sendv false without) and ss is the size
 *       of the addresses (sizeof(sockaddr_in6) for IPv6). reliable is false:
 *       aclnt retransmits and asrv keeps a reply cache (aclnt.h, asrv.h).
 *       cb(pkt, len, sender) for each datagram; a datagram over ps bytes is
 *       dropped (a warning, x->bad_msgs() counts it). A receive error on a
 *       connected socket (ECONNREFUSED: an ICMP port unreachable) ends the
 *       transport, cb(NULL, -1, NULL), as in libasync; on an unconnected
 *       one errors are ignored. sendv is false when the message is over ps
 *       or the kernel refuses its size (EMSGSIZE); other send errors are
 *       a lost datagram (true), as in libasync.
 *
 *   ref<axprt_unix> axprt_unix::alloc(fd, ps = defps)
 *       axprt_stream over a Unix-domain stream socket, with descriptor
 *       passing (SCM_RIGHTS). fd not a Unix socket: a warning and a
 *       transport at its end (ateof()).
 *   x->sendfd(fd, closeit = true)   fd goes to the peer with the bytes
 *       queued now (an empty fragment, libasync's "break", carries it);
 *       closed here once sent when closeit (also when it can never be
 *       sent: the transport ended). sendfd(ref<axprt_unix> y) sends y's fd.
 *   int fd = x->recvfd()   the oldest descriptor received and not taken
 *       yet, -1 if none; the caller owns it. A descriptor comes with the
 *       bytes it was sent with, so one sent before a call is there by the
 *       time the call is dispatched. At most 4 wait (more are closed, with
 *       a warning, as libasync); those not taken are closed when the
 *       transport ends (end of file, error, or its last reference).
 *   x->allow_recvfd = false   descriptors are not accepted (the kernel
 *       drops them)
 *   axprt_unix_connect(path, ps)   connects to a listening Unix socket
 *       (unixsocket_connect); NULL with errno on failure
 *   axprt_unix_stdin(ps)           fd 0 as an axprt_unix; NULL (and a
 *       warning) if it is not a Unix socket
 *   axprt_unix_accept(path, ps)    (libasync's, a maintainer-mode helper
 *       there) blocks until one peer connects to a new socket at path,
 *       then removes path; NULL with a warning on failure
 *
 *   x->bad_msgs() (new)   messages dropped as malformed or oversized: RPC
 *       messages too short for a header, calls with a broken header,
 *       datagrams over ps. The first and every power of two are also told
 *       on stderr ("arpc: ... dropped"), so a flood does not fill the log.
 *
 * Colors (new here): a transport's callbacks (its reads, and everything
 * they run: aclnt's call callbacks, asrv's dispatch) run as events of the
 * transport's color: the color current when it was allocated, or the one
 * given to x->setcolor(c) before the first setrcb (aclnt/asrv alloc). One
 * connection per color lets a server serve connections on every core.
 * send/sendv may be called from any color (the output buffer has a lock).
 * The last reference may also go on any color: the descriptor is closed and
 * the object freed by an event of the transport's color.
 * The same rules hold for axprt_dgram and axprt_unix: reads, records and
 * datagrams delivered, aclnt's retransmissions and timeouts run on the
 * transport's color; sends (datagrams: one sendmsg each, no lock needed),
 * sendfd and recvfd may be called from any color.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_AXPRT_H
#define MELY_COMPAT_AXPRT_H

#include <atomic>
#include <mutex>
#include <vector>

#include <sys/socket.h>
#include <sys/uio.h>

#include "callback.h"
#include "refcnt.h"
#include "suio++.h"

class xhinfo;

class axprt : public virtual refcount {
    friend class xhinfo;

protected:
    axprt(bool r, bool c, size_t ss = 0) : reliable(r), connected(c), socksize(ss) {}

public:
    enum { defps = 0x10400 };
    typedef callback<void, const char *, ssize_t, const sockaddr *>::ptr recvcb_t;

    const bool reliable;
    const bool connected;
    const size_t socksize;

    axprt(const axprt &) = delete;
    axprt &operator=(const axprt &) = delete;
    virtual ~axprt() {}

    virtual bool sendv(const iovec *iov, int cnt, const sockaddr *dest = NULL) = 0;
    bool send(const void *data, size_t len, const sockaddr *dest = NULL)
    {
        iovec iov = {const_cast<void *>(data), len};
        return sendv(&iov, 1, dest);
    }
    virtual void setrcb(recvcb_t cb) = 0;
    virtual void setwcb(callback<void> *cb);
    virtual bool ateof() { return false; }
    virtual void poll() {}
    virtual int getreadfd() = 0;
    virtual int getwritefd() = 0;

    /* The color of the transport's events (see above). */
    int getcolor() const { return color_; }
    void setcolor(int c);

    /* The RPC layer's dispatcher (asrv, aclnt); created on first use. */
    xhinfo *xh();

    /* Messages dropped as malformed or oversized (see above; new). */
    u_int64_t bad_msgs() const { return nbad_.load(std::memory_order_relaxed); }
    /* Counts one, and tells of it on stderr the first time and at every
     * power of two (what says what was dropped, and why). */
    void note_bad(const char *what);

protected:
    int color_ = 0;
    std::atomic<u_int64_t> nbad_{0};
    xhinfo *xh_ = nullptr; /* owned */
    void xh_destroy();
};

class axprt_dgram : public axprt {
public:
    axprt_dgram(int fd, bool connected, size_t ss, size_t ps);
    ~axprt_dgram();

    static ref<axprt_dgram> alloc(int fd, size_t ss = sizeof(sockaddr), size_t ps = defps)
    {
        return New refcounted<axprt_dgram>(fd, isconnected(fd), ss, ps);
    }

    bool sendv(const iovec *iov, int cnt, const sockaddr *dest = NULL) override;
    void setrcb(recvcb_t cb) override;
    bool ateof() override { return dead_.load(std::memory_order_acquire); }
    int getreadfd() override { return fd_; }
    int getwritefd() override { return fd_; }
    size_t maxpktsize() const { return ps_; }

    void finalize() override;

private:
    const size_t ps_;
    /* Closed only when the object goes (no send can be running then), so
     * sendv needs no lock. */
    const int fd_;
    std::atomic<bool> dead_{false};
    /* Only the transport's color touches these. */
    recvcb_t rcb_;
    bool reading_ = false;
    char *pkt_ = nullptr;

    static bool isconnected(int fd);
    void input();
    static void input_cb(axprt_dgram *x);
    static void destroy(axprt_dgram *x);
};

class axprt_pipe : public axprt {
public:
    axprt_pipe(int rfd, int wfd, size_t ps);
    ~axprt_pipe();

    static ref<axprt_pipe> alloc(int rfd, int wfd, size_t ps = defps)
    {
        return New refcounted<axprt_pipe>(rfd, wfd, ps);
    }

    bool sendv(const iovec *iov, int cnt, const sockaddr *dest = NULL) override;
    void setrcb(recvcb_t cb) override;
    void setwcb(callback<void> *cb) override;
    bool ateof() override { return dead_.load(std::memory_order_acquire); }
    int getreadfd() override { return fdread_; }
    int getwritefd() override { return fdwrite_; }
    /* Bytes waiting to be written. */
    size_t outlen();
    /* Records over this size are refused, in and out. */
    size_t maxpktsize() const { return ps_; }
    /* Stops the transport without closing its fds; returns them (-1 if
     * it failed already). */
    void reclaim(int *rfd, int *wfd);

    /* The last reference is gone: free on the transport's color. */
    void finalize() override;

protected:
    const size_t ps_;
    int fdread_, fdwrite_;
    std::atomic<bool> dead_{false};

    /* Reads into buf (axprt_unix: with the descriptors that come). */
    virtual ssize_t doread(void *buf, size_t n);
    /* The transport ended or goes (transport's color, or the destructor). */
    virtual void ended() {}
    void fail(ssize_t how);
    /* Descriptors to send (axprt_unix), under mu_: each goes with the
     * byte at stream position pos (wpos_ counts bytes written, qpos_ bytes
     * queued). */
    struct fdsend {
        u_int64_t pos;
        int fd;
        bool closeit;
    };
    std::vector<fdsend> fdsendq_;
    u_int64_t wpos_ = 0, qpos_ = 0;
    /* Queues an empty fragment carrying fd (axprt_unix::sendfd). */
    void queue_fd(int fd, bool closeit);
    void drop_fdsendq_locked();

private:
    /* Input: a buffer of bytes read and not yet delivered; the record being
     * put together from fragments. Only the transport's color touches them. */
    char *ibuf_ = nullptr;
    size_t ihead_ = 0, itail_ = 0, icap_ = 0;
    char *rec_ = nullptr;
    size_t reclen_ = 0;
    recvcb_t rcb_;
    bool reading_ = false;

    /* Output, under mu_ (any color sends). */
    std::mutex mu_;
    suio out_;
    bool wwatch_ = false;
    callback<void>::ptr wcb_;

    void input();
    void output();
    bool flush_locked(); /* false on a write error */
    void clear_out_locked();
    bool deliver_records();
    static void destroy(axprt_pipe *x);
    static void input_cb(axprt_pipe *x);
    static void output_cb(axprt_pipe *x);
};

class axprt_stream : public axprt_pipe {
public:
    axprt_stream(int fd, size_t ps) : axprt_pipe(fd, fd, ps) {}
    static ref<axprt_stream> alloc(int fd, size_t ps = defps)
    {
        return New refcounted<axprt_stream>(fd, ps);
    }
    int getfd() { return fdread_; }
    /* Stops the transport and hands back the fd (-1 if it failed). */
    int reclaim()
    {
        int r, w;
        axprt_pipe::reclaim(&r, &w);
        return r;
    }
};

class axprt_unix : public axprt_stream {
public:
    axprt_unix(int fd, size_t ps) : axprt_stream(fd, ps) {}
    ~axprt_unix();

    static ref<axprt_unix> alloc(int fd, size_t ps = defps);

    /* libasync's: descriptors are accepted while true. */
    bool allow_recvfd = true;

    void sendfd(int fd, bool closeit = true);
    void sendfd(ref<axprt_unix> x) { sendfd(x->getwritefd(), false); }
    int recvfd();

protected:
    ssize_t doread(void *buf, size_t n) override;
    void ended() override;

private:
    std::mutex rmu_;
    std::vector<int> fdrecvq_; /* under rmu_ */
    void close_received();
};

ptr<axprt_unix> axprt_unix_connect(const char *path, size_t ps = axprt_stream::defps);
ptr<axprt_unix> axprt_unix_stdin(size_t ps = axprt_stream::defps);
ptr<axprt_unix> axprt_unix_accept(const char *path, size_t ps = axprt_stream::defps);

#endif /* MELY_COMPAT_AXPRT_H */
