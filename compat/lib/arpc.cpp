/* SPDX-License-Identifier: MIT */
/*
 * arpc.cpp: libasync's RPC layer over the compat loop: record marking over
 * streams (axprt_pipe, axprt_stream), the per-transport dispatcher (xhinfo:
 * servers by program, calls by xid), aclnt, asrv, svccb.
 *
 * Concurrency: everything a transport receives runs as events of its color
 * (its fd watch is a cwrap of that color, and so are its timers). Output may
 * come from any color: the output buffer and the dispatcher's tables each
 * have a lock. Objects are freed on the transport's color: the transport
 * itself (finalize posts its destruction), so that no watch of it is running
 * when it goes. asrv and aclnt are the program's objects: the dispatcher
 * never takes a count on them from a raw pointer (counts are only taken by
 * holders), it keeps what it needs (the table, the callback) in its own
 * entries, which their destructors remove under the lock.
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <unordered_map>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "async.h"
#include "arpc.h"
#include "recmark.h"

/* ---- clnt_stat's messages --------------------------------------------------------- */

const char *clnt_sperrno(clnt_stat stat)
{
    switch (stat) {
    case RPC_SUCCESS: return "RPC: Success";
    case RPC_CANTENCODEARGS: return "RPC: Can't encode arguments";
    case RPC_CANTDECODERES: return "RPC: Can't decode result";
    case RPC_CANTSEND: return "RPC: Unable to send";
    case RPC_CANTRECV: return "RPC: Unable to receive";
    case RPC_TIMEDOUT: return "RPC: Timed out";
    case RPC_VERSMISMATCH: return "RPC: Incompatible versions of RPC";
    case RPC_AUTHERROR: return "RPC: Authentication error";
    case RPC_PROGUNAVAIL: return "RPC: Program unavailable";
    case RPC_PROGVERSMISMATCH: return "RPC: Program/version mismatch";
    case RPC_PROCUNAVAIL: return "RPC: Procedure unavailable";
    case RPC_CANTDECODEARGS: return "RPC: Server can't decode arguments";
    case RPC_SYSTEMERROR: return "RPC: Remote system error";
    case RPC_UNKNOWNHOST: return "RPC: Unknown host";
    case RPC_PMAPFAILURE: return "RPC: Port mapper failure";
    case RPC_PROGNOTREGISTERED: return "RPC: Program not registered";
    case RPC_FAILED: return "RPC: Failed (unspecified error)";
    case RPC_UNKNOWNPROTO: return "RPC: Unknown protocol";
    }
    return "RPC: (unknown error code)";
}

std::ostream &operator<<(std::ostream &os, clnt_stat stat)
{
    return os << clnt_sperrno(stat);
}

const strbuf &strbuf_cat(const strbuf &sb, clnt_stat stat)
{
    return sb << clnt_sperrno(stat);
}

/* ---- The dispatcher -------------------------------------------------------------------- */

class xhinfo {
public:
    struct srv_entry {
        /* Not counted: the asrv's destructor removes the entry under mu_;
         * under mu_, a count is taken on cnt (the asrv's count, found when
         * it was registered) with refcount_tryinc only, and the asrv's
         * virtual table is never read (its destructor may be running). */
        asrv *owner;
        const refcount *cnt;
        const rpc_program *rp;
        asrv::asrv_cb::ptr cb;
    };
    struct eof_entry {
        aclnt *owner;
        callback<void>::ptr cb;
    };

    explicit xhinfo(axprt *x) : x_(x) {}

    void attach();
    void add_srv(asrv *s, const refcount *cnt, const rpc_program *rp, asrv::asrv_cb::ptr cb);
    void del_srv(asrv *s);
    void set_srv_cb(asrv *s, asrv::asrv_cb::ptr cb);
    bool srv_has_cb(asrv *s);
    void set_eofcb(aclnt *c, callback<void>::ptr cb);
    void del_clnt(aclnt *c);
    /* false: the transport ended (the call was not registered). */
    /* arm(), if given, runs under the lock once cb is in: whatever it sets
     * in cb (its timers) is then seen by whoever takes cb out, on any
     * worker. */
    bool add_call(callbase *cb, const std::function<void()> &arm = nullptr);
    callbase *take_call(u_int32_t xid);
    /* The call, left registered (its retransmission timer, on the
     * transport's color, is the only other user then). */
    callbase *find_call(u_int32_t xid);
    /* The datagram reply cache (asrv.h): what to do with a call. */
    enum cache_verdict { CACHE_NEW, CACHE_DROP, CACHE_RESEND };
    cache_verdict cache_begin(svccb *sbp, std::string *resend);
    /* sbp answered (bytes) or dropped (NULL, or nocache). */
    void cache_end(svccb *sbp, const std::string *bytes);
    bool has_calls(aclnt *c);
    bool eof()
    {
        std::lock_guard<std::mutex> g(mu_);
        return eof_;
    }

    void recv(const char *pkt, ssize_t len, const sockaddr *sa);

private:
    axprt *x_;
    std::mutex mu_;
    bool attached_ = false;
    bool eof_ = false;
    std::vector<srv_entry> srvs_;
    std::vector<eof_entry> eofcbs_;
    std::unordered_map<u_int32_t, callbase *> calls_;
    struct cache_entry {
        const asrv *owner; /* compared, never followed */
        u_int32_t xid, prog, vers, proc;
        sockaddr_storage sa;
        bool has_sa;
        const svccb *pending; /* being served; NULL once answered */
        std::string reply;
        u_int64_t seq;
    };
    std::vector<cache_entry> cache_;
    u_int64_t cache_seq_ = 0;

    void on_eof();
    void on_call(const char *pkt, size_t len, u_int32_t xid, XDR *x, const sockaddr *sa);
    void on_reply(const char *pkt, size_t len, u_int32_t xid, XDR *x, const sockaddr *sa);
};

/* ---- addresses ------------------------------------------------------------------------ */

namespace {

/* The length of an address of sa's family (socksize when it is not one
 * this knows), at most a sockaddr_storage. */
socklen_t sa_len(const sockaddr *sa, size_t socksize)
{
    switch (sa->sa_family) {
    case AF_INET: return sizeof(sockaddr_in);
    case AF_INET6: return sizeof(sockaddr_in6);
    case AF_UNIX: return sizeof(sockaddr_un);
    }
    return (socklen_t)(socksize && socksize < sizeof(sockaddr_storage) ? socksize
                                                                        : sizeof(sockaddr_storage));
}

void sa_copy(sockaddr_storage *to, const sockaddr *sa, size_t socksize)
{
    memset(to, 0, sizeof *to);
    memcpy(to, sa, sa_len(sa, socksize));
}

/* The same endpoint: family, port and address (IP), or path (Unix). */
bool sa_same(const sockaddr *a, const sockaddr *b, size_t socksize)
{
    if (a->sa_family != b->sa_family)
        return false;
    switch (a->sa_family) {
    case AF_INET: {
        const sockaddr_in *x = reinterpret_cast<const sockaddr_in *>(a);
        const sockaddr_in *y = reinterpret_cast<const sockaddr_in *>(b);
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    case AF_INET6: {
        const sockaddr_in6 *x = reinterpret_cast<const sockaddr_in6 *>(a);
        const sockaddr_in6 *y = reinterpret_cast<const sockaddr_in6 *>(b);
        return x->sin6_port == y->sin6_port &&
               !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr);
    }
    case AF_UNIX: {
        const sockaddr_un *x = reinterpret_cast<const sockaddr_un *>(a);
        const sockaddr_un *y = reinterpret_cast<const sockaddr_un *>(b);
        return !strncmp(x->sun_path, y->sun_path, sizeof x->sun_path);
    }
    }
    return !memcmp(a, b, sa_len(a, socksize));
}

} // namespace

/* ---- axprt -------------------------------------------------------------------------- */

void axprt::note_bad(const char *what)
{
    u_int64_t n = nbad_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (!(n & (n - 1)))
        warn("arpc: %s dropped (%llu so far on this transport)\n", what, (unsigned long long)n);
}

void axprt::setwcb(callback<void> *cb)
{
    ::ref<callback<void>> hold(cb);
    (*cb)();
}

void axprt::setcolor(int c)
{
    if (c >= MAX_COLORS)
        mely_compat_bad_color(c);
    color_ = c;
}

xhinfo *axprt::xh()
{
    if (!xh_)
        xh_ = new xhinfo(this);
    return xh_;
}

void axprt::xh_destroy()
{
    delete xh_;
    xh_ = nullptr;
}

/* ---- axprt_pipe: record marking ------------------------------------------------------- */

namespace {
const u_int32_t LAST_FRAG = 0x80000000u;
}

axprt_pipe::axprt_pipe(int rfd, int wfd, size_t ps)
    : axprt(true, true), ps_(ps), fdread_(rfd), fdwrite_(wfd)
{
    color_ = get_current_color();
    make_async(rfd);
    if (wfd != rfd)
        make_async(wfd);
    close_on_exec(rfd);
    if (wfd != rfd)
        close_on_exec(wfd);
}

axprt_pipe::~axprt_pipe()
{
    drop_fdsendq_locked(); /* no other user: the object goes */
    free(ibuf_);
    free(rec_);
}

ssize_t axprt_pipe::doread(void *buf, size_t n)
{
    return ::read(fdread_, buf, n);
}

void axprt_pipe::drop_fdsendq_locked()
{
    for (const fdsend &f : fdsendq_)
        if (f.closeit)
            close(f.fd);
    fdsendq_.clear();
}

void axprt_pipe::clear_out_locked()
{
    out_.clear();
    drop_fdsendq_locked();
    qpos_ = wpos_;
}

void axprt_pipe::input_cb(axprt_pipe *x)
{
    x->input();
}

void axprt_pipe::output_cb(axprt_pipe *x)
{
    x->output();
}

void axprt_pipe::destroy(axprt_pipe *x)
{
    /* On the transport's color: none of its watches is running. */
    if (x->fdread_ >= 0) {
        fdcb(x->fdread_, selread, NULL);
        fdcb(x->fdwrite_, selwrite, NULL);
        close(x->fdread_);
        if (x->fdwrite_ != x->fdread_)
            close(x->fdwrite_);
        x->fdread_ = x->fdwrite_ = -1;
    }
    x->xh_destroy();
    delete x;
}

void axprt_pipe::finalize()
{
    cpucb(cwrap(&axprt_pipe::destroy, this, color_));
}

void axprt_pipe::setrcb(recvcb_t cb)
{
    rcb_ = cb;
    if (dead_.load(std::memory_order_acquire)) {
        if (cb) /* as libasync: a dead transport reports its end at once */
            cpucb(cwrap(+[](recvcb_t c) { (*c)(NULL, -1, NULL); }, cb, color_));
        return;
    }
    if (cb && !reading_) {
        reading_ = true;
        fdcb(fdread_, selread, cwrap(&axprt_pipe::input_cb, this, color_));
    } else if (!cb && reading_) {
        reading_ = false;
        fdcb(fdread_, selread, NULL);
    }
}

void axprt_pipe::setwcb(callback<void> *cb)
{
    ::ref<callback<void>> hold(cb);
    {
        std::lock_guard<std::mutex> g(mu_);
        if (out_.resid() && !dead_.load(std::memory_order_acquire)) {
            wcb_ = hold;
            return;
        }
    }
    (*cb)();
}

size_t axprt_pipe::outlen()
{
    std::lock_guard<std::mutex> g(mu_);
    return out_.resid();
}

void axprt_pipe::reclaim(int *rfd, int *wfd)
{
    std::lock_guard<std::mutex> g(mu_);
    if (dead_.exchange(true)) {
        *rfd = *wfd = -1;
        return;
    }
    fdcb(fdread_, selread, NULL);
    fdcb(fdwrite_, selwrite, NULL);
    reading_ = false;
    wwatch_ = false;
    *rfd = fdread_;
    *wfd = fdwrite_;
    fdread_ = fdwrite_ = -1;
}

/* Writes what the buffer holds (mu_ held); false on a write error. A
 * descriptor to send goes, alone, with the write that starts at its
 * position (writes before it stop short of it). */
bool axprt_pipe::flush_locked()
{
    while (out_.resid()) {
        const iovec *v = out_.iov();
        size_t len = v->iov_len;
        int sfd = -1;
        if (!fdsendq_.empty()) {
            u_int64_t at = fdsendq_.front().pos;
            if (at <= wpos_)
                sfd = fdsendq_.front().fd;
            else if (at - wpos_ < len)
                len = (size_t)(at - wpos_);
        }
        ssize_t n;
        if (sfd >= 0) {
            iovec one = {v->iov_base, len};
            n = writevfd(fdwrite_, &one, 1, sfd);
        } else {
            n = ::send(fdwrite_, v->iov_base, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno == ENOTSOCK)
                n = ::write(fdwrite_, v->iov_base, len);
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        if (sfd >= 0) {
            if (fdsendq_.front().closeit)
                close(sfd);
            fdsendq_.erase(fdsendq_.begin());
        }
        wpos_ += (u_int64_t)n;
        out_.rembytes((size_t)n);
    }
    return true;
}

void axprt_pipe::queue_fd(int fd, bool closeit)
{
    callback<void>::ptr wcb;
    {
        std::lock_guard<std::mutex> g(mu_);
        if (dead_.load(std::memory_order_acquire) || fdwrite_ < 0) {
            if (closeit)
                close(fd);
            return;
        }
        fdsendq_.push_back(fdsend{qpos_, fd, closeit});
        /* libasync's break: an empty fragment, not the last of a record. */
        u_int32_t zero = 0;
        out_.copy(&zero, 4);
        qpos_ += 4;
        if (!wwatch_) {
            if (!flush_locked()) {
                clear_out_locked();
                return;
            }
            if (out_.resid()) {
                wwatch_ = true;
                fdcb(fdwrite_, selwrite, cwrap(&axprt_pipe::output_cb, this, color_));
            } else if (wcb_) {
                wcb = wcb_;
                wcb_ = nullptr;
            }
        }
    }
    if (wcb)
        (*wcb)();
}

bool axprt_pipe::sendv(const iovec *iov, int cnt, const sockaddr *)
{
    size_t len = 0;
    for (int i = 0; i < cnt; i++)
        len += iov[i].iov_len;
    if (len > ps_ || len > 0x7fffffffu)
        return false;
    callback<void>::ptr wcb;
    {
        std::lock_guard<std::mutex> g(mu_);
        if (dead_.load(std::memory_order_acquire) || fdwrite_ < 0)
            return false;
        u_int32_t h = htonl((u_int32_t)len | LAST_FRAG);
        out_.copy(&h, 4);
        for (int i = 0; i < cnt; i++)
            out_.copy(iov[i].iov_base, iov[i].iov_len);
        qpos_ += 4 + len;
        if (!wwatch_) {
            if (!flush_locked()) {
                /* The peer is gone: the read side sees it and ends the
                 * transport; drop what cannot be written. */
                clear_out_locked();
                return true;
            }
            if (out_.resid()) {
                wwatch_ = true;
                fdcb(fdwrite_, selwrite, cwrap(&axprt_pipe::output_cb, this, color_));
            } else if (wcb_) {
                wcb = wcb_;
                wcb_ = nullptr;
            }
        }
    }
    if (wcb)
        (*wcb)();
    return true;
}

void axprt_pipe::output()
{
    callback<void>::ptr wcb;
    {
        std::lock_guard<std::mutex> g(mu_);
        if (!wwatch_)
            return;
        bool ok = flush_locked();
        if (!ok)
            clear_out_locked();
        if (!out_.resid()) {
            wwatch_ = false;
            fdcb(fdwrite_, selwrite, NULL);
            wcb = wcb_;
            wcb_ = nullptr;
        }
    }
    if (wcb)
        (*wcb)();
}

void axprt_pipe::fail(ssize_t how)
{
    {
        std::lock_guard<std::mutex> g(mu_);
        if (dead_.exchange(true))
            return;
        if (fdread_ >= 0) {
            fdcb(fdread_, selread, NULL);
            fdcb(fdwrite_, selwrite, NULL);
            close(fdread_);
            if (fdwrite_ != fdread_)
                close(fdwrite_);
            fdread_ = fdwrite_ = -1;
        }
        reading_ = false;
        wwatch_ = false;
        clear_out_locked();
    }
    ended();
    recvcb_t cb = rcb_;
    if (cb)
        (*cb)(NULL, how, NULL);
}

/* Delivers the complete records held; false if the transport ended. */
bool axprt_pipe::deliver_records()
{
    while (!dead_.load(std::memory_order_acquire) && rcb_) {
        size_t used = 0, len = 0, over = 0;
        const char *rec = nullptr;
        rm_result r = rm_next(rec_, reclen_, ps_, ibuf_ + ihead_, itail_ - ihead_, &used, &rec,
                              &len, &over);
        ihead_ += used;
        if (r == RM_OVER) {
            warn("axprt: record of %zu bytes or more, over %zu: closing\n", over, ps_);
            fail(-1);
            return false;
        }
        if (r == RM_MORE)
            break;
        recvcb_t cb = rcb_;
        (*cb)(rec, (ssize_t)len, NULL);
    }
    return !dead_.load(std::memory_order_acquire);
}

void axprt_pipe::input()
{
    /* The receiver may drop the last reference to this transport: its
     * destruction is an event of this color, so it waits until this one
     * ends (no count is taken here: one taken from the watch's raw pointer
     * could race with the last holder's release). */
    if (dead_.load(std::memory_order_acquire) || !reading_)
        return;
    /* Room for one more read of up to 64 KB beyond what is held. */
    if (ihead_ == itail_)
        ihead_ = itail_ = 0;
    size_t want = 0x10000;
    if (icap_ - itail_ < want) {
        if (ihead_) {
            memmove(ibuf_, ibuf_ + ihead_, itail_ - ihead_);
            itail_ -= ihead_;
            ihead_ = 0;
        }
        if (icap_ - itail_ < want) {
            size_t ncap = itail_ + want;
            char *nb = static_cast<char *>(realloc(ibuf_, ncap));
            if (!nb)
                fatal("out of memory\n");
            ibuf_ = nb;
            icap_ = ncap;
        }
    }
    ssize_t n = doread(ibuf_ + itail_, icap_ - itail_);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        fail(-1);
        return;
    }
    if (n == 0) {
        fail(0);
        return;
    }
    itail_ += (size_t)n;
    if (!deliver_records())
        return;
    /* Keep the buffer small while idle. */
    if (ihead_ == itail_ && icap_ > 0x20000) {
        free(ibuf_);
        ibuf_ = nullptr;
        icap_ = ihead_ = itail_ = 0;
    }
}

/* ---- axprt_dgram ------------------------------------------------------------------------- */

bool axprt_dgram::isconnected(int fd)
{
    sockaddr_storage ss;
    socklen_t len = sizeof ss;
    return getpeername(fd, reinterpret_cast<sockaddr *>(&ss), &len) == 0;
}

axprt_dgram::axprt_dgram(int fd, bool c, size_t ss, size_t ps)
    : axprt(false, c, c ? 0 : ss), ps_(ps), fd_(fd)
{
    color_ = get_current_color();
    make_async(fd);
    close_on_exec(fd);
    /* Room in the kernel for at least one message of the largest size. */
    int n = 0;
    socklen_t sn = sizeof n;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, &sn) == 0 && n >= 0 && (size_t)n < ps &&
        ps <= 0x7fffffff) {
        n = (int)ps;
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof n) < 0)
            warn("axprt_dgram: SO_RCVBUF -> %d bytes: %m\n", n);
    }
    pkt_ = static_cast<char *>(malloc(ps_ ? ps_ : 1));
    if (!pkt_)
        fatal("out of memory\n");
}

axprt_dgram::~axprt_dgram()
{
    free(pkt_);
}

void axprt_dgram::input_cb(axprt_dgram *x)
{
    x->input();
}

void axprt_dgram::destroy(axprt_dgram *x)
{
    /* On the transport's color: its read watch is not running. */
    if (x->reading_)
        fdcb(x->fd_, selread, NULL);
    close(x->fd_);
    x->xh_destroy();
    delete x;
}

void axprt_dgram::finalize()
{
    cpucb(cwrap(&axprt_dgram::destroy, this, color_));
}

void axprt_dgram::setrcb(recvcb_t cb)
{
    rcb_ = cb;
    if (dead_.load(std::memory_order_acquire)) {
        if (cb)
            cpucb(cwrap(+[](recvcb_t c) { (*c)(NULL, -1, NULL); }, cb, color_));
        return;
    }
    if (cb && !reading_) {
        reading_ = true;
        fdcb(fd_, selread, cwrap(&axprt_dgram::input_cb, this, color_));
    } else if (!cb && reading_) {
        reading_ = false;
        fdcb(fd_, selread, NULL);
    }
}

bool axprt_dgram::sendv(const iovec *iov, int cnt, const sockaddr *dest)
{
    size_t len = 0;
    for (int i = 0; i < cnt; i++)
        len += iov[i].iov_len;
    if (len > ps_ || dead_.load(std::memory_order_acquire))
        return false;
    msghdr mh;
    memset(&mh, 0, sizeof mh);
    if (!connected) {
        if (!dest) {
            warn("axprt_dgram: a send with no address on an unconnected socket\n");
            return false;
        }
        mh.msg_name = const_cast<sockaddr *>(dest);
        mh.msg_namelen = sa_len(dest, socksize);
    }
    mh.msg_iov = const_cast<iovec *>(iov);
    mh.msg_iovlen = (size_t)cnt;
    for (;;) {
        if (sendmsg(fd_, &mh, MSG_NOSIGNAL) >= 0)
            return true;
        if (errno == EINTR)
            continue;
        /* Too big for the socket: the message can never go. Anything else
         * (a full buffer, an ICMP error kept from an earlier datagram) is
         * a datagram lost, which the client's retransmission covers. */
        return errno != EMSGSIZE;
    }
}

void axprt_dgram::input()
{
    /* As axprt_pipe::input: no count is taken, the destruction waits for
     * this event. A few datagrams per wakeup, so other events get their turn. */
    for (int k = 0; k < 64 && reading_ && rcb_ && !dead_.load(std::memory_order_acquire); k++) {
        sockaddr_storage sa;
        memset(&sa, 0, sizeof sa);
        iovec iov = {pkt_, ps_};
        msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_name = &sa;
        mh.msg_namelen = sizeof sa;
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        ssize_t n = recvmsg(fd_, &mh, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || !connected)
                return;
            /* A connected socket's peer is not there (ECONNREFUSED...):
             * the transport ends, as libasync's. */
            dead_.store(true, std::memory_order_release);
            reading_ = false;
            fdcb(fd_, selread, NULL);
            recvcb_t cb = rcb_;
            (*cb)(NULL, -1, NULL);
            return;
        }
        if (mh.msg_flags & MSG_TRUNC) {
            note_bad("datagram over the transport's size");
            continue;
        }
        recvcb_t cb = rcb_;
        (*cb)(pkt_, n, connected ? NULL : reinterpret_cast<const sockaddr *>(&sa));
    }
}

/* ---- axprt_unix -------------------------------------------------------------------------- */

ref<axprt_unix> axprt_unix::alloc(int fd, size_t ps)
{
    ref<axprt_unix> x = New refcounted<axprt_unix>(fd, ps);
    sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, reinterpret_cast<sockaddr *>(&ss), &len) < 0 || ss.ss_family != AF_UNIX) {
        warn("axprt_unix::alloc(%d): not a Unix-domain socket\n", fd);
        x->fail(-1);
    }
    return x;
}

axprt_unix::~axprt_unix()
{
    close_received();
}

void axprt_unix::close_received()
{
    std::vector<int> fds;
    {
        std::lock_guard<std::mutex> g(rmu_);
        fds.swap(fdrecvq_);
    }
    for (int fd : fds)
        close(fd);
}

void axprt_unix::ended()
{
    close_received();
}

void axprt_unix::sendfd(int fd, bool closeit)
{
    queue_fd(fd, closeit);
}

int axprt_unix::recvfd()
{
    std::lock_guard<std::mutex> g(rmu_);
    if (fdrecvq_.empty())
        return -1;
    int fd = fdrecvq_.front();
    fdrecvq_.erase(fdrecvq_.begin());
    return fd;
}

ssize_t axprt_unix::doread(void *buf, size_t n)
{
    if (!allow_recvfd)
        return axprt_pipe::doread(buf, n); /* the kernel drops descriptors */
    iovec iov = {buf, n};
    union {
        cmsghdr align;
        char space[CMSG_SPACE(8 * sizeof(int))];
    } cbuf;
    msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf.space;
    mh.msg_controllen = sizeof cbuf.space;
    ssize_t r = recvmsg(fdread_, &mh, MSG_CMSG_CLOEXEC);
    if (r < 0)
        return r;
    for (cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t k = 0; k < nfd; k++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
            bool kept = false;
            {
                std::lock_guard<std::mutex> g(rmu_);
                if (fdrecvq_.size() < 4) {
                    fdrecvq_.push_back(fd);
                    kept = true;
                }
            }
            if (!kept) {
                close(fd);
                warn("axprt_unix: too many unclaimed file descriptors\n");
            }
        }
    }
    if (mh.msg_flags & MSG_CTRUNC)
        warn("axprt_unix: more than 8 descriptors in one message: the rest were dropped\n");
    return r;
}

ptr<axprt_unix> axprt_unix_connect(const char *path, size_t ps)
{
    int fd = unixsocket_connect(path);
    if (fd < 0)
        return nullptr;
    return axprt_unix::alloc(fd, ps);
}

ptr<axprt_unix> axprt_unix_stdin(size_t ps)
{
    ptr<axprt_unix> x = axprt_unix::alloc(0, ps);
    if (x->ateof()) {
        warn("axprt_unix_stdin: standard input is not a Unix-domain socket\n");
        return nullptr;
    }
    return x;
}

ptr<axprt_unix> axprt_unix_accept(const char *path, size_t ps)
{
    mode_t m = umask(0);
    int fd = unixsocket(path);
    umask(m);
    if (fd < 0) {
        warn("unixsocket: %s: %m\n", path);
        return nullptr;
    }
    int afd = -1;
    if (listen(fd, 1) == 0) {
        do
            afd = accept(fd, NULL, NULL);
        while (afd < 0 && errno == EINTR);
    }
    int e = errno;
    unlink(path);
    close(fd);
    if (afd < 0) {
        errno = e;
        warn("%s: %m\n", path);
        return nullptr;
    }
    return axprt_unix::alloc(afd, ps);
}

/* ---- xhinfo ------------------------------------------------------------------------------- */

void xhinfo::attach()
{
    bool first;
    {
        std::lock_guard<std::mutex> g(mu_);
        first = !attached_;
        attached_ = true;
    }
    if (first)
        x_->setrcb(wrap(this, &xhinfo::recv));
}

void xhinfo::add_srv(asrv *s, const refcount *cnt, const rpc_program *rp, asrv::asrv_cb::ptr cb)
{
    std::lock_guard<std::mutex> g(mu_);
    srvs_.push_back(srv_entry{s, cnt, rp, cb});
}

void xhinfo::del_srv(asrv *s)
{
    asrv::asrv_cb::ptr drop; /* released outside the lock */
    std::lock_guard<std::mutex> g(mu_);
    for (size_t i = 0; i < cache_.size();) {
        if (cache_[i].owner == s)
            cache_.erase(cache_.begin() + (ptrdiff_t)i);
        else
            i++;
    }
    for (size_t i = 0; i < srvs_.size(); i++) {
        if (srvs_[i].owner == s) {
            drop = srvs_[i].cb;
            srvs_.erase(srvs_.begin() + (ptrdiff_t)i);
            return;
        }
    }
}

void xhinfo::set_srv_cb(asrv *s, asrv::asrv_cb::ptr cb)
{
    std::lock_guard<std::mutex> g(mu_);
    for (auto &e : srvs_)
        if (e.owner == s)
            e.cb = cb;
}

bool xhinfo::srv_has_cb(asrv *s)
{
    std::lock_guard<std::mutex> g(mu_);
    for (auto &e : srvs_)
        if (e.owner == s)
            return e.cb != nullptr;
    return false;
}

void xhinfo::set_eofcb(aclnt *c, callback<void>::ptr cb)
{
    std::lock_guard<std::mutex> g(mu_);
    for (auto &e : eofcbs_) {
        if (e.owner == c) {
            e.cb = cb;
            return;
        }
    }
    eofcbs_.push_back(eof_entry{c, cb});
}

void xhinfo::del_clnt(aclnt *c)
{
    std::lock_guard<std::mutex> g(mu_);
    for (size_t i = 0; i < eofcbs_.size(); i++) {
        if (eofcbs_[i].owner == c) {
            eofcbs_.erase(eofcbs_.begin() + (ptrdiff_t)i);
            return;
        }
    }
}

bool xhinfo::add_call(callbase *cb, const std::function<void()> &arm)
{
    std::lock_guard<std::mutex> g(mu_);
    if (eof_)
        return false;
    calls_[cb->xid_] = cb;
    if (arm)
        arm();
    return true;
}

callbase *xhinfo::find_call(u_int32_t xid)
{
    std::lock_guard<std::mutex> g(mu_);
    auto it = calls_.find(xid);
    return it == calls_.end() ? nullptr : it->second;
}

xhinfo::cache_verdict xhinfo::cache_begin(svccb *sbp, std::string *resend)
{
    std::lock_guard<std::mutex> g(mu_);
    const asrv *owner = sbp->srv_.get();
    const sockaddr *sa = sbp->getsa();
    for (cache_entry &e : cache_) {
        if (e.owner != owner || e.xid != sbp->xid_ || e.prog != sbp->prog_ ||
            e.vers != sbp->vers_ || e.proc != sbp->proc_ || e.has_sa != (sa != nullptr))
            continue;
        if (sa && !sa_same(reinterpret_cast<const sockaddr *>(&e.sa), sa, x_->socksize))
            continue;
        if (e.pending)
            return CACHE_DROP;
        *resend = e.reply;
        return CACHE_RESEND;
    }
    cache_entry e;
    e.owner = owner;
    e.xid = sbp->xid_;
    e.prog = sbp->prog_;
    e.vers = sbp->vers_;
    e.proc = sbp->proc_;
    e.has_sa = sa != nullptr;
    if (sa)
        memcpy(&e.sa, sa, sizeof e.sa);
    else
        memset(&e.sa, 0, sizeof e.sa);
    e.pending = sbp;
    e.seq = 0;
    cache_.push_back(std::move(e));
    sbp->cached_ = true;
    return CACHE_NEW;
}

void xhinfo::cache_end(svccb *sbp, const std::string *bytes)
{
    std::lock_guard<std::mutex> g(mu_);
    sbp->cached_ = false;
    size_t i = 0;
    while (i < cache_.size() && cache_[i].pending != sbp)
        i++;
    if (i == cache_.size())
        return; /* its asrv went meanwhile */
    if (!bytes) {
        cache_.erase(cache_.begin() + (ptrdiff_t)i);
        return;
    }
    cache_[i].pending = nullptr;
    cache_[i].reply = *bytes;
    cache_[i].seq = ++cache_seq_;
    /* libasync's asrv_unreliable keeps 16 answers per server: the oldest
     * answered one of this asrv goes. */
    const asrv *owner = cache_[i].owner;
    size_t answered = 0, oldest = cache_.size();
    for (size_t k = 0; k < cache_.size(); k++) {
        if (cache_[k].owner != owner || cache_[k].pending)
            continue;
        answered++;
        if (oldest == cache_.size() || cache_[k].seq < cache_[oldest].seq)
            oldest = k;
    }
    if (answered > 16)
        cache_.erase(cache_.begin() + (ptrdiff_t)oldest);
}

callbase *xhinfo::take_call(u_int32_t xid)
{
    std::lock_guard<std::mutex> g(mu_);
    auto it = calls_.find(xid);
    if (it == calls_.end())
        return nullptr;
    callbase *cb = it->second;
    calls_.erase(it);
    return cb;
}

bool xhinfo::has_calls(aclnt *c)
{
    std::lock_guard<std::mutex> g(mu_);
    for (auto &kv : calls_)
        if (kv.second->c_.get() == c)
            return true;
    return false;
}

namespace {

/* Ends a call: its callback with stat, and the call freed (its timers
 * with it). */
void finish_call(callbase *cb, clnt_stat stat)
{
    aclnt_cb::ptr f = cb->cb_;
    delete cb;
    if (f)
        (*f)(stat);
}

/* A reply header: xid, REPLY, MSG_ACCEPTED, AUTH_NONE verifier, stat. */
void put_accepted(xdrsuio &x, u_int32_t xid, accept_stat stat)
{
    XDR *xp = x.xdrp();
    xdr_putint(xp, xid);
    xdr_putint(xp, REPLY);
    xdr_putint(xp, MSG_ACCEPTED);
    xdr_putint(xp, AUTH_NONE);
    xdr_putint(xp, 0);
    xdr_putint(xp, (u_int32_t)stat);
}

void send_uio(axprt *x, xdrsuio &xs, const sockaddr *to)
{
    suio *u = xs.uio();
    x->sendv(u->iov(), (int)u->iovcnt(), to);
}

std::string uio_bytes(suio *u)
{
    std::string b;
    b.reserve(u->resid());
    const iovec *v = u->iov();
    for (size_t i = 0; i < u->iovcnt(); i++)
        b.append(static_cast<const char *>(v[i].iov_base), v[i].iov_len);
    return b;
}

/* An opaque_auth from the stream, copied into buf (MAX_AUTH_BYTES). */
bool get_auth(XDR *x, opaque_auth *oa, char *buf)
{
    u_int32_t flavor, len;
    if (!xdr_getint(x, flavor) || !xdr_getint(x, len) || len > MAX_AUTH_BYTES)
        return false;
    if (!xdr_getpadbytes(x, buf, len))
        return false;
    oa->oa_flavor = (int32_t)flavor;
    oa->oa_base = buf;
    oa->oa_length = len;
    return true;
}

} // namespace

void xhinfo::recv(const char *pkt, ssize_t len, const sockaddr *sa)
{
    if (!pkt) {
        on_eof();
        return;
    }
    xdrmem x(pkt, (size_t)len);
    u_int32_t xid, type;
    if (!xdr_getint(x.xdrp(), xid) || !xdr_getint(x.xdrp(), type)) {
        x_->note_bad("message too short for an RPC header");
        return;
    }
    if (type == CALL)
        on_call(pkt, (size_t)len, xid, x.xdrp(), sa);
    else if (type == REPLY)
        on_reply(pkt, (size_t)len, xid, x.xdrp(), sa);
    else
        x_->note_bad("message neither a call nor a reply");
}

void xhinfo::on_eof()
{
    std::vector<asrv::asrv_cb::ptr> scbs;
    std::vector<callback<void>::ptr> ecbs;
    std::vector<callbase *> pending;
    {
        std::lock_guard<std::mutex> g(mu_);
        if (eof_)
            return;
        eof_ = true;
        for (auto &e : srvs_)
            if (e.cb)
                scbs.push_back(e.cb);
        for (auto &e : eofcbs_)
            if (e.cb)
                ecbs.push_back(e.cb);
        for (auto &kv : calls_)
            pending.push_back(kv.second);
        calls_.clear();
    }
    for (callbase *cb : pending)
        finish_call(cb, RPC_CANTRECV);
    for (auto &cb : ecbs)
        (*cb)();
    for (auto &cb : scbs)
        (*cb)(NULL);
}

void xhinfo::on_call(const char *, size_t, u_int32_t xid, XDR *x, const sockaddr *sa)
{
    u_int32_t rpcvers, prog, vers, proc;
    svccb *sbp = new svccb;
    if (!xdr_getint(x, rpcvers) || !xdr_getint(x, prog) || !xdr_getint(x, vers) ||
        !xdr_getint(x, proc) || !get_auth(x, &sbp->cred_, sbp->authbuf_) ||
        !get_auth(x, &sbp->verf_, sbp->authbuf_ + MAX_AUTH_BYTES)) {
        delete sbp;
        /* A broken call header: no answer can be trusted to reach. */
        x_->note_bad("call with a broken header");
        return;
    }
    if (sa && !x_->connected) {
        sa_copy(&sbp->sa_, sa, x_->socksize);
        sbp->has_sa_ = true;
    }
    if (sbp->cred_.oa_flavor == AUTH_UNIX)
        sbp->has_aup_ = authunix_parse(sbp->cred_.oa_base, sbp->cred_.oa_length, &sbp->aup_,
                                       sbp->aupname_, sbp->aupgids_);
    sbp->xid_ = xid;
    sbp->prog_ = prog;
    sbp->vers_ = vers;
    sbp->proc_ = proc;
    if (rpcvers != RPC_MSG_VERSION) {
        delete sbp;
        xdrsuio out;
        XDR *xp = out.xdrp();
        xdr_putint(xp, xid);
        xdr_putint(xp, REPLY);
        xdr_putint(xp, MSG_DENIED);
        xdr_putint(xp, RPC_MISMATCH);
        xdr_putint(xp, RPC_MSG_VERSION);
        xdr_putint(xp, RPC_MSG_VERSION);
        send_uio(x_, out, sa);
        return;
    }
    const rpc_program *rp = nullptr;
    asrv::asrv_cb::ptr cb;
    bool prog_known = false;
    u_int32_t low = 0xffffffffu, high = 0;
    bool have_srvs;
    {
        std::lock_guard<std::mutex> g(mu_);
        have_srvs = !srvs_.empty();
        for (auto &e : srvs_) {
            if (e.rp->progno != prog)
                continue;
            /* A count on the asrv, taken under the lock (its destructor
             * removes the entry under it, so the memory is there) and only
             * while the count is not 0: an asrv being finalized is skipped,
             * as if already gone. */
            if (e.rp->versno == vers && !rp) {
                if (!e.cnt->refcount_tryinc())
                    continue;
                rp = e.rp;
                cb = e.cb;
                sbp->srv_ = ptr<asrv>::adopt_count(e.owner, e.cnt);
                sbp->srv_x_ = mkref(x_); /* the asrv holds the transport */
            } else if (e.cnt->refcount_getcnt() == 0) {
                continue;
            }
            prog_known = true;
            if (e.rp->versno < low)
                low = e.rp->versno;
            if (e.rp->versno > high)
                high = e.rp->versno;
        }
    }
    if (!have_srvs) {
        delete sbp; /* a client-only transport: calls are not ours to answer */
        return;
    }
    if (!rp) {
        delete sbp;
        xdrsuio out;
        put_accepted(out, xid, prog_known ? PROG_MISMATCH : PROG_UNAVAIL);
        if (prog_known) {
            xdr_putint(out.xdrp(), low);
            xdr_putint(out.xdrp(), high);
        }
        send_uio(x_, out, sa);
        return;
    }
    if (!x_->reliable) {
        std::string again;
        switch (cache_begin(sbp, &again)) {
        case CACHE_NEW: break;
        case CACHE_DROP: /* a retransmission of a call being served */
            delete sbp;
            return;
        case CACHE_RESEND: { /* ... of one answered: the same answer */
            delete sbp;
            iovec iov = {&again[0], again.size()};
            x_->sendv(&iov, 1, sa);
            return;
        }
        }
    }
    if (proc >= rp->nproc || !rp->tbl[proc].name) {
        sbp->reject(PROC_UNAVAIL);
        return;
    }
    sbp->tbl_ = &rp->tbl[proc];
    sbp->arg_ = sbp->tbl_->alloc_arg();
    if (!sbp->tbl_->xdr_arg(x, sbp->arg_)) {
        sbp->reject(GARBAGE_ARGS);
        return;
    }
    if (!cb) {
        delete sbp; /* setcb(NULL): dropped */
        return;
    }
    (*cb)(sbp);
}

void xhinfo::on_reply(const char *, size_t, u_int32_t xid, XDR *x, const sockaddr *sa)
{
    callbase *cb;
    {
        std::lock_guard<std::mutex> g(mu_);
        auto it = calls_.find(xid);
        if (it == calls_.end())
            return; /* no such call (answered, timed out, cancelled, or not
                       ours; on datagrams, a duplicate answer) */
        cb = it->second;
        /* An unconnected datagram socket: the answer must come from where
         * the call went, else it is a stray (dropped). */
        if (!x_->connected && cb->has_dest_ &&
            (!sa || !sa_same(sa, reinterpret_cast<const sockaddr *>(&cb->dest_), x_->socksize)))
            return;
        calls_.erase(it);
    }
    u_int32_t rstat, v;
    clnt_stat stat = RPC_CANTDECODERES;
    if (!xdr_getint(x, rstat)) {
        finish_call(cb, stat);
        return;
    }
    if (rstat == MSG_ACCEPTED) {
        opaque_auth verf;
        char buf[MAX_AUTH_BYTES];
        if (get_auth(x, &verf, buf) && xdr_getint(x, v)) {
            switch (v) {
            case SUCCESS:
                if (!cb->outproc_ || cb->outproc_(x, cb->out_))
                    stat = RPC_SUCCESS;
                break;
            case PROG_UNAVAIL: stat = RPC_PROGUNAVAIL; break;
            case PROG_MISMATCH: stat = RPC_PROGVERSMISMATCH; break;
            case PROC_UNAVAIL: stat = RPC_PROCUNAVAIL; break;
            case GARBAGE_ARGS: stat = RPC_CANTDECODEARGS; break;
            case SYSTEM_ERR: stat = RPC_SYSTEMERROR; break;
            default: stat = RPC_FAILED; break;
            }
        }
    } else if (rstat == MSG_DENIED) {
        if (xdr_getint(x, v))
            stat = v == RPC_MISMATCH ? RPC_VERSMISMATCH : v == AUTH_ERROR ? RPC_AUTHERROR
                                                                         : RPC_FAILED;
    }
    finish_call(cb, stat);
}

/* ---- AUTH_UNIX ---------------------------------------------------------------------------------- */

bool authunix_parse(const char *p, size_t n, authunix_parms *aup, char *name, gid_t *gids)
{
    xdrmem x(p, n);
    XDR *xp = x.xdrp();
    u_int32_t stamp, len, uid, gid, ngids;
    if (!xdr_getint(xp, stamp) || !xdr_getint(xp, len) || len > MAX_MACHINE_NAME ||
        !xdr_getpadbytes(xp, name, len))
        return false;
    name[len] = '\0';
    if (!xdr_getint(xp, uid) || !xdr_getint(xp, gid) || !xdr_getint(xp, ngids) || ngids > NGRPS)
        return false;
    for (u_int32_t i = 0; i < ngids; i++) {
        u_int32_t g;
        if (!xdr_getint(xp, g))
            return false;
        gids[i] = (gid_t)g;
    }
    if (XDR_GETPOS(xp) != n)
        return false; /* bytes left over: not one credential */
    aup->aup_time = stamp;
    aup->aup_machname = name;
    aup->aup_uid = (uid_t)uid;
    aup->aup_gid = (gid_t)gid;
    aup->aup_len = ngids;
    aup->aup_gids = gids;
    return true;
}

AUTH *authunixint_create(const char *host, u_int32_t uid, u_int32_t gid, u_int32_t ngroups,
                         const u_int32_t *groups)
{
    size_t hl = host ? strlen(host) : 0;
    if (hl > MAX_MACHINE_NAME || ngroups > NGRPS) {
        errno = EINVAL;
        return nullptr;
    }
    /* One block: the AUTH, then its credential's bytes. */
    AUTH *a = static_cast<AUTH *>(malloc(sizeof(AUTH) + MAX_AUTH_BYTES));
    if (!a)
        return nullptr;
    char *body = reinterpret_cast<char *>(a + 1);
    xdrmem x(body, MAX_AUTH_BYTES, XDR_ENCODE);
    XDR *xp = x.xdrp();
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    bool ok = xdr_putint(xp, (u_int32_t)ts.tv_sec) && xdr_putint(xp, (u_int32_t)hl) &&
              xdr_putpadbytes(xp, host ? host : "", hl) && xdr_putint(xp, uid) &&
              xdr_putint(xp, gid) && xdr_putint(xp, ngroups);
    for (u_int32_t i = 0; ok && i < ngroups; i++)
        ok = xdr_putint(xp, groups[i]);
    if (!ok) { /* cannot happen: at most 340 of the 400 bytes */
        free(a);
        errno = EINVAL;
        return nullptr;
    }
    a->ah_cred.oa_flavor = AUTH_UNIX;
    a->ah_cred.oa_base = body;
    a->ah_cred.oa_length = XDR_GETPOS(xp);
    a->ah_verf.oa_flavor = AUTH_NONE;
    a->ah_verf.oa_base = nullptr;
    a->ah_verf.oa_length = 0;
    return a;
}

AUTH *authunix_create(const char *machname, uid_t uid, gid_t gid, int len, const gid_t *gids)
{
    if (len < 0 || len > NGRPS) {
        errno = EINVAL;
        return nullptr;
    }
    u_int32_t g[NGRPS];
    for (int i = 0; i < len; i++)
        g[i] = (u_int32_t)gids[i];
    return authunixint_create(machname, (u_int32_t)uid, (u_int32_t)gid, (u_int32_t)len, g);
}

namespace {
AUTH *authunix_ids(uid_t uid, gid_t gid)
{
    char host[MAX_MACHINE_NAME + 1];
    if (gethostname(host, sizeof host) < 0)
        host[0] = '\0';
    host[MAX_MACHINE_NAME] = '\0';
    int n = getgroups(0, nullptr);
    std::vector<gid_t> all(n > 0 ? (size_t)n : 1);
    n = getgroups((int)all.size(), all.data());
    if (n < 0)
        n = 0;
    return authunix_create(host, uid, gid, n < NGRPS ? n : NGRPS, all.data());
}
} // namespace

AUTH *authunix_create_default()
{
    return authunix_ids(geteuid(), getegid());
}

AUTH *authunix_create_realids()
{
    return authunix_ids(getuid(), getgid());
}

void auth_destroy(AUTH *auth)
{
    free(auth);
}

/* ---- aclnt ----------------------------------------------------------------------------------- */

namespace {

std::atomic<u_int32_t> g_xid{0};

u_int32_t new_xid()
{
    u_int32_t x = g_xid.load(std::memory_order_relaxed);
    if (!x) {
        std::random_device rd;
        u_int32_t seed = rd() | 1;
        g_xid.compare_exchange_strong(x, seed);
    }
    u_int32_t id;
    do
        id = g_xid.fetch_add(1, std::memory_order_relaxed);
    while (!id);
    return id;
}

void put_auth(XDR *xp, const opaque_auth *oa)
{
    if (!oa || oa->oa_length > MAX_AUTH_BYTES) {
        xdr_putint(xp, AUTH_NONE);
        xdr_putint(xp, 0);
        return;
    }
    xdr_putint(xp, (u_int32_t)oa->oa_flavor);
    xdr_putint(xp, oa->oa_length);
    xdr_putpadbytes(xp, oa->oa_base, oa->oa_length);
}

void call_failed(aclnt_cb cb, clnt_stat stat)
{
    (*cb)(stat);
}

void call_timeout(::ref<axprt> x, u_int32_t xid)
{
    callbase *cb = x->xh()->take_call(xid);
    if (cb) {
        cb->tmo_ = nullptr; /* this timer: fired */
        finish_call(cb, RPC_TIMEDOUT);
    }
}

/* The datagram schedule: libasync's tmoq<..., 2, 5> unless changed. */
std::atomic<u_int> g_minto_ms{2000}, g_maxsend{5};

timecb_t *arm_retransmit(const ::ref<axprt> &x, callbase *c, int color);

/* On the transport's color: the call is sent again, or ends with
 * RPC_TIMEDOUT once the wait after its last send ran out. */
void call_retransmit(::ref<axprt> x, u_int32_t xid)
{
    xhinfo *xh = x->xh();
    callbase *c = xh->find_call(xid);
    if (!c)
        return;
    c->rtmo_ = nullptr; /* this timer: fired */
    if (c->nsent_ >= c->maxsend_) {
        c = xh->take_call(xid);
        if (c)
            finish_call(c, RPC_TIMEDOUT);
        return;
    }
    c->nsent_++;
    c->rtmo_ = arm_retransmit(x, c, x->getcolor());
    x->send(c->msg_, c->msglen_,
            c->has_dest_ ? reinterpret_cast<const sockaddr *>(&c->dest_) : nullptr);
}

/* The timer for after send c->nsent_: minto << (nsent_ - 1) ms. */
timecb_t *arm_retransmit(const ::ref<axprt> &x, callbase *c, int color)
{
    u_int shift = c->nsent_ ? c->nsent_ - 1 : 0;
    u_int64_t ms = (u_int64_t)c->minto_ms_ << (shift < 32 ? shift : 32);
    if (ms > 86400000ull * 365)
        ms = 86400000ull * 365;
    return delaycb((time_t)(ms / 1000), (u_int32_t)(ms % 1000) * 1000000u,
                   cwrap(&call_retransmit, x, c->xid_, color));
}

} // namespace

void mely_aclnt_backoff(u_int minto_ms, u_int maxsend)
{
    if (!minto_ms && !maxsend) {
        minto_ms = 2000;
        maxsend = 5;
    }
    g_minto_ms.store(minto_ms ? minto_ms : 1, std::memory_order_relaxed);
    g_maxsend.store(maxsend ? maxsend : 1, std::memory_order_relaxed);
}

callbase::~callbase()
{
    if (tmo_)
        timecb_remove(tmo_);
    if (rtmo_)
        timecb_remove(rtmo_);
    free(msg_);
}

aclnt::aclnt(const ::ref<axprt> &x, const rpc_program &p) : rp(p), x_(x) {}

aclnt::~aclnt()
{
    x_->xh()->del_clnt(this);
}

ptr<aclnt> aclnt::alloc(::ref<axprt> x, const rpc_program &p, const sockaddr *d)
{
    if (x->ateof())
        return nullptr;
    ptr<aclnt> c = New refcounted<aclnt>(x, p);
    if (d) {
        sa_copy(&c->dest_, d, x->socksize);
        c->has_dest_ = true;
    }
    x->xh()->attach();
    return c;
}

void aclnt::seteofcb(callback<void>::ptr cb)
{
    x_->xh()->set_eofcb(this, cb);
}

bool aclnt::calls_outstanding()
{
    return x_->xh()->has_calls(this);
}

callbase *aclnt::call(u_int32_t procno, const void *in, void *out, aclnt_cb cb, AUTH *auth,
                      xdrproc_t inproc, xdrproc_t outproc, u_int32_t progno,
                      u_int32_t versno, sockaddr *dest)
{
    return timedcall(0, 0, procno, in, out, cb, auth, inproc, outproc, progno, versno, dest);
}

callbase *aclnt::timedcall(time_t sec, long nsec, u_int32_t procno, const void *in, void *out,
                           aclnt_cb cb, AUTH *auth, xdrproc_t inproc, xdrproc_t outproc,
                           u_int32_t progno, u_int32_t versno, sockaddr *dest)
{
    int color = x_->getcolor();
    auto fail_later = [&](clnt_stat st) -> callbase * {
        cpucb(cwrap(&call_failed, cb, st, color));
        return nullptr;
    };
    if (!inproc || !outproc) {
        if (procno >= rp.nproc || !rp.tbl[procno].name)
            panic("aclnt::call: %s has no procedure %u\n", rp.name, procno);
        if (!inproc)
            inproc = rp.tbl[procno].xdr_arg;
        if (!outproc)
            outproc = rp.tbl[procno].xdr_res;
    }
    u_int32_t xid = new_xid();
    xdrsuio xs;
    XDR *xp = xs.xdrp();
    xdr_putint(xp, xid);
    xdr_putint(xp, CALL);
    xdr_putint(xp, RPC_MSG_VERSION);
    xdr_putint(xp, progno ? progno : rp.progno);
    xdr_putint(xp, versno ? versno : rp.versno);
    xdr_putint(xp, procno);
    put_auth(xp, auth ? &auth->ah_cred : nullptr);
    put_auth(xp, auth ? &auth->ah_verf : nullptr);
    static char dummy;
    if (!inproc(xp, const_cast<void *>(in ? in : static_cast<const void *>(&dummy))))
        return fail_later(RPC_CANTENCODEARGS);

    callbase *c = new callbase;
    c->c_ = mkref(this);
    c->xid_ = xid;
    c->cb_ = cb;
    c->out_ = out ? out : static_cast<void *>(&dummy);
    c->outproc_ = outproc;
    const sockaddr *to = dest ? dest : has_dest_ ? reinterpret_cast<const sockaddr *>(&dest_)
                                                 : nullptr;
    if (to && !x_->connected) {
        sa_copy(&c->dest_, to, x_->socksize);
        c->has_dest_ = true;
    }
    suio *u = xs.uio();
    bool dgram = !x_->reliable;
    if (dgram) {
        /* Kept, to be sent again. */
        c->msglen_ = u->resid();
        c->msg_ = static_cast<char *>(malloc(c->msglen_ ? c->msglen_ : 1));
        if (!c->msg_)
            fatal("out of memory\n");
        size_t off = 0;
        for (size_t i = 0; i < u->iovcnt(); i++) {
            memcpy(c->msg_ + off, u->iov()[i].iov_base, u->iov()[i].iov_len);
            off += u->iov()[i].iov_len;
        }
        c->minto_ms_ = g_minto_ms.load(std::memory_order_relaxed);
        c->maxsend_ = g_maxsend.load(std::memory_order_relaxed);
        c->nsent_ = 1;
    }
    xhinfo *xh = x_->xh();
    /* Timers are set before sending (the reply may come at once on another
     * worker and free c), under the dispatcher's lock (so that worker sees
     * them); one that fires first finds the call registered. */
    auto arm = [&] {
        if (sec || nsec)
            c->tmo_ = delaycb(sec, (u_int32_t)nsec, cwrap(&call_timeout, x_, xid, color));
        if (dgram)
            c->rtmo_ = arm_retransmit(x_, c, color);
    };
    if (!xh->add_call(c, arm)) {
        delete c;
        return fail_later(RPC_CANTSEND);
    }
    bool sent = dgram ? x_->send(c->msg_, c->msglen_, c->has_dest_ ? to : nullptr)
                      : x_->sendv(u->iov(), (int)u->iovcnt(), NULL);
    if (!sent) {
        callbase *mine = xh->take_call(xid);
        if (mine) {
            aclnt_cb f = mine->cb_;
            delete mine;
            cpucb(cwrap(&call_failed, f, RPC_CANTSEND, color));
        }
        return nullptr;
    }
    return c;
}

void callbase::cancel()
{
    callbase *mine = c_->x_->xh()->take_call(xid_);
    delete mine;
}

/* ---- asrv, svccb ------------------------------------------------------------------------------- */

asrv::asrv(const ::ref<axprt> &x, const rpc_program &p, asrv_cb::ptr cb) : rp(p), x_(x)
{
    (void)cb; /* registered with cb by alloc, once constructed and counted */
    refcount_open_tryinc(); /* xhinfo::on_call counts it from its table */
}

asrv::~asrv()
{
    x_->xh()->del_srv(this);
}

ptr<asrv> asrv::alloc(::ref<axprt> x, const rpc_program &p, asrv_cb::ptr cb)
{
    if (x->ateof())
        return nullptr;
    ptr<asrv> s = New refcounted<asrv>(x, p, cb);
    /* Published only now: whole (its virtual table written) and counted. */
    x->xh()->add_srv(s.get(), s.get(), &s->rp, cb);
    x->xh()->attach();
    return s;
}

ptr<asrv> asrv_alloc(::ref<axprt> x, const rpc_program &p, asrv::asrv_cb::ptr cb)
{
    return asrv::alloc(x, p, cb);
}

void asrv::setcb(asrv_cb::ptr cb)
{
    x_->xh()->set_srv_cb(this, cb);
}

bool asrv::hascb()
{
    return x_->xh()->srv_has_cb(this);
}

svccb::~svccb()
{
    if (cached_ && srv_x_)
        srv_x_->xh()->cache_end(this, nullptr); /* never answered */
    if (tbl_) {
        if (arg_)
            xdr_delete(tbl_->xdr_arg, arg_);
        if (res_)
            xdr_delete(tbl_->xdr_res, res_);
    }
}

void *svccb::getvoidres()
{
    if (!res_ && tbl_)
        res_ = tbl_->alloc_res();
    return res_;
}

/* Sends an answer (to the caller's address on a datagram socket) and keeps
 * it in the datagram reply cache; false if it is over the transport's size. */
bool svccb::answer(xdrsuio &out, bool nocache)
{
    if (!srv_x_)
        return true;
    suio *u = out.uio();
    bool ok = srv_x_->sendv(u->iov(), (int)u->iovcnt(), getsa()) || srv_x_->ateof();
    if (ok && cached_) {
        if (nocache) {
            srv_x_->xh()->cache_end(this, nullptr);
        } else {
            std::string b = uio_bytes(u);
            srv_x_->xh()->cache_end(this, &b);
        }
    }
    return ok;
}

void svccb::reply(const void *res, xdrproc_t xdr, bool nocache)
{
    if (!xdr)
        xdr = tbl_ ? tbl_->xdr_res : xdr_void;
    static char dummy;
    xdrsuio out;
    put_accepted(out, xid_, SUCCESS);
    bool ok = xdr(out.xdrp(), const_cast<void *>(res ? res : static_cast<const void *>(&dummy)));
    if (ok)
        ok = answer(out, nocache);
    if (!ok) {
        /* The result does not encode or is over the record size. */
        warn("asrv: %s: reply to procedure %u does not %s\n", tbl_ ? tbl_->name : "?", proc_,
             srv_x_ && !srv_x_->ateof() ? "encode or fit" : "encode");
        reject(SYSTEM_ERR);
        return;
    }
    delete this;
}

void svccb::reject(accept_stat stat)
{
    xdrsuio out;
    put_accepted(out, xid_, stat);
    answer(out, false);
    delete this;
}

void svccb::reject(auth_stat stat)
{
    if (srv_x_) {
        xdrsuio out;
        XDR *xp = out.xdrp();
        xdr_putint(xp, xid_);
        xdr_putint(xp, REPLY);
        xdr_putint(xp, MSG_DENIED);
        xdr_putint(xp, AUTH_ERROR);
        xdr_putint(xp, (u_int32_t)stat);
        answer(out, false);
    }
    delete this;
}

void svccb::ignore()
{
    delete this;
}
