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
 * Colors (new here): a transport's callbacks (its reads, and everything
 * they run: aclnt's call callbacks, asrv's dispatch) run as events of the
 * transport's color: the color current when it was allocated, or the one
 * given to x->setcolor(c) before the first setrcb (aclnt/asrv alloc). One
 * connection per color lets a server serve connections on every core.
 * send/sendv may be called from any color (the output buffer has a lock).
 * The last reference may also go on any color: the descriptor is closed and
 * the object freed by an event of the transport's color.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_AXPRT_H
#define MELY_COMPAT_AXPRT_H

#include <atomic>
#include <mutex>

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

protected:
    int color_ = 0;
    xhinfo *xh_ = nullptr; /* owned */
    void xh_destroy();
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
    void fail(ssize_t how);
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

#endif /* MELY_COMPAT_AXPRT_H */
