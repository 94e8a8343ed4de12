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
#include <random>
#include <unordered_map>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
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
    bool add_call(callbase *cb);
    callbase *take_call(u_int32_t xid);
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

    void on_eof();
    void on_call(const char *pkt, size_t len, u_int32_t xid, XDR *x);
    void on_reply(const char *pkt, size_t len, u_int32_t xid, XDR *x);
};

/* ---- axprt -------------------------------------------------------------------------- */

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
    free(ibuf_);
    free(rec_);
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

/* Writes what the buffer holds (mu_ held); false on a write error. */
bool axprt_pipe::flush_locked()
{
    while (out_.resid()) {
        const iovec *v = out_.iov();
        ssize_t n = ::send(fdwrite_, v->iov_base, v->iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == ENOTSOCK)
            n = ::write(fdwrite_, v->iov_base, v->iov_len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        out_.rembytes((size_t)n);
    }
    return true;
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
        if (!wwatch_) {
            if (!flush_locked()) {
                /* The peer is gone: the read side sees it and ends the
                 * transport; drop what cannot be written. */
                out_.clear();
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
            out_.clear();
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
        out_.clear();
    }
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
    ssize_t n = ::read(fdread_, ibuf_ + itail_, icap_ - itail_);
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

bool xhinfo::add_call(callbase *cb)
{
    std::lock_guard<std::mutex> g(mu_);
    if (eof_)
        return false;
    calls_[cb->xid_] = cb;
    return true;
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

/* Ends a call: its callback with stat, and the call freed. */
void finish_call(callbase *cb, clnt_stat stat)
{
    if (cb->tmo_)
        timecb_remove(cb->tmo_);
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

void send_uio(axprt *x, xdrsuio &xs)
{
    suio *u = xs.uio();
    x->sendv(u->iov(), (int)u->iovcnt(), NULL);
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

void xhinfo::recv(const char *pkt, ssize_t len, const sockaddr *)
{
    if (!pkt) {
        on_eof();
        return;
    }
    xdrmem x(pkt, (size_t)len);
    u_int32_t xid, type;
    if (!xdr_getint(x.xdrp(), xid) || !xdr_getint(x.xdrp(), type))
        return; /* not an RPC message: dropped */
    if (type == CALL)
        on_call(pkt, (size_t)len, xid, x.xdrp());
    else if (type == REPLY)
        on_reply(pkt, (size_t)len, xid, x.xdrp());
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

void xhinfo::on_call(const char *, size_t, u_int32_t xid, XDR *x)
{
    u_int32_t rpcvers, prog, vers, proc;
    svccb *sbp = new svccb;
    if (!xdr_getint(x, rpcvers) || !xdr_getint(x, prog) || !xdr_getint(x, vers) ||
        !xdr_getint(x, proc) || !get_auth(x, &sbp->cred_, sbp->authbuf_) ||
        !get_auth(x, &sbp->verf_, sbp->authbuf_ + MAX_AUTH_BYTES)) {
        delete sbp;
        return; /* a broken call header: no answer can be trusted to reach */
    }
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
        send_uio(x_, out);
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
        send_uio(x_, out);
        return;
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

void xhinfo::on_reply(const char *, size_t, u_int32_t xid, XDR *x)
{
    callbase *cb = take_call(xid);
    if (!cb)
        return; /* no such call (answered, timed out, cancelled, or not ours) */
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

} // namespace

aclnt::aclnt(const ::ref<axprt> &x, const rpc_program &p) : rp(p), x_(x) {}

aclnt::~aclnt()
{
    x_->xh()->del_clnt(this);
}

ptr<aclnt> aclnt::alloc(::ref<axprt> x, const rpc_program &p)
{
    if (x->ateof())
        return nullptr;
    ptr<aclnt> c = New refcounted<aclnt>(x, p);
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
                           u_int32_t progno, u_int32_t versno, sockaddr *)
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
    xhinfo *xh = x_->xh();
    if (!xh->add_call(c)) {
        delete c;
        return fail_later(RPC_CANTSEND);
    }
    if (sec || nsec) {
        /* Set before sending: the reply may come at once on another worker. */
        c->tmo_ = delaycb(sec, (u_int32_t)nsec, cwrap(&call_timeout, x_, xid, color));
    }
    suio *u = xs.uio();
    if (!x_->sendv(u->iov(), (int)u->iovcnt(), NULL)) {
        callbase *mine = xh->take_call(xid);
        if (mine) {
            if (mine->tmo_)
                timecb_remove(mine->tmo_);
            mine->tmo_ = nullptr;
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
    if (mine) {
        if (mine->tmo_)
            timecb_remove(mine->tmo_);
        delete mine;
    }
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

void svccb::reply(const void *res, xdrproc_t xdr, bool)
{
    if (!xdr)
        xdr = tbl_ ? tbl_->xdr_res : xdr_void;
    static char dummy;
    xdrsuio out;
    put_accepted(out, xid_, SUCCESS);
    bool ok = xdr(out.xdrp(), const_cast<void *>(res ? res : static_cast<const void *>(&dummy)));
    if (ok && srv_x_) {
        suio *u = out.uio();
        ok = srv_x_->sendv(u->iov(), (int)u->iovcnt(), NULL) || srv_x_->ateof();
    }
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
    if (srv_x_) {
        xdrsuio out;
        put_accepted(out, xid_, stat);
        send_uio(srv_x_, out);
    }
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
        send_uio(srv_x_, out);
    }
    delete this;
}

void svccb::ignore()
{
    delete this;
}
