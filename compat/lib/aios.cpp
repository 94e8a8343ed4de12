/* SPDX-License-Identifier: MIT */
/*
 * aios.cpp: libasync's buffered asynchronous I/O (aios.h) over compat's fdcb
 * and delaycb.
 *
 * An aios is the program's handle; its state lives in an aios_core, which
 * the aios's own events (descriptor readiness, the timeout) hold through
 * their counted callbacks. The core is locked by every method and event; it
 * calls the program's callbacks with the lock released. When the program
 * drops its last ref, the core drains what is held (if no error stopped the
 * output), then closes the descriptor and removes its events, and goes when
 * the last of them has let go of it.
 * Written for mely; no line comes from libasync.
 */
#define MELY_COMPAT_AIOS_IMPL 1

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "aios.h"
#include "amisc.h"
#include "err.h"
#include "melycompat_loop.h"

namespace mely_compat_detail {

namespace {

/* The input: a ring of bytes. Bytes taken out stay behind the start until
 * new input overwrites them, so that unread() can give them back. */
class ring {
    char *buf_;
    size_t cap_;
    size_t start_ = 0;
    size_t len_ = 0;

public:
    explicit ring(size_t cap) : buf_(nullptr), cap_(cap ? cap : 1)
    {
        buf_ = static_cast<char *>(malloc(cap_));
        if (!buf_)
            throw std::bad_alloc();
    }
    ~ring() { free(buf_); }
    ring(const ring &) = delete;
    ring &operator=(const ring &) = delete;

    size_t size() const { return len_; }
    size_t space() const { return cap_ - len_; }

    /* The free space as up to two iovecs; their number. */
    int free_iov(iovec v[2]) const
    {
        size_t end = (start_ + len_) % cap_;
        size_t free = space();
        if (!free)
            return 0;
        size_t first = std::min(free, cap_ - end);
        v[0].iov_base = buf_ + end;
        v[0].iov_len = first;
        if (first == free)
            return 1;
        v[1].iov_base = buf_;
        v[1].iov_len = free - first;
        return 2;
    }
    void added(size_t n) { len_ += n; }

    /* Offset of the first c, or -1. */
    ssize_t find(char c) const
    {
        size_t first = std::min(len_, cap_ - start_);
        const void *p = memchr(buf_ + start_, c, first);
        if (p)
            return static_cast<const char *>(p) - (buf_ + start_);
        if (first < len_ && (p = memchr(buf_, c, len_ - first)))
            return (ssize_t)first + (static_cast<const char *>(p) - buf_);
        return -1;
    }
    /* Moves the first n bytes (n <= size()) to dst. */
    void take(char *dst, size_t n)
    {
        size_t first = std::min(n, cap_ - start_);
        memcpy(dst, buf_ + start_, first);
        memcpy(dst + first, buf_, n - first);
        start_ = (start_ + n) % cap_;
        len_ -= n;
    }
    /* Gives back the last n bytes taken (n <= space()). */
    void untake(size_t n)
    {
        start_ = (start_ + cap_ - n % cap_) % cap_;
        len_ += n;
    }
    /* A buffer of n bytes (at least what is held) with the same bytes. */
    void resize(size_t n)
    {
        n = std::max(std::max(n, len_), (size_t)1);
        char *nb = static_cast<char *>(malloc(n));
        if (!nb)
            throw std::bad_alloc();
        size_t held = len_;
        take(nb, held);
        free(buf_);
        buf_ = nb;
        cap_ = n;
        start_ = 0;
        len_ = held;
    }
};

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool transient(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

/* Calls cb with a..., or posts it to its color when the running event is of
 * another color (compat's rule for every callback). */
template <class CB, class... A> void call_on_color(const CB &cb, A... a)
{
    if (cb->getcolor() == get_current_color()) {
        (*cb)(a...);
        return;
    }
    callback<void> *run = wrap(cb, a...);
    run->setcolor(cb->getcolor());
    run->setprio(cb->getprio());
    run->set_annotations((uint32_t)cb->get_timeleft(), (uint32_t)cb->get_penalty());
    cpucb_tail(run);
}

} // namespace

struct aios_core : public refcount {
    enum rmode { RNONE, RLINE, RANY };

    /* A program callback to run once the lock is let go, or only to drop
     * (call false): what a callback holds may hold the aios, whose end takes
     * the lock. */
    struct pending {
        aios::rcb_t rcb;
        aios::wcb_t wcb;
        str s;
        int err;
        bool call;
    };
    struct wwait {
        uint64_t pos; /* runs once `written` reaches it */
        aios::wcb_t cb;
    };

    std::mutex mu;
    int fd;
    const int color;
    ring in;
    suio out;
    int err = 0;
    bool eof = false;  /* no more reads: the input ended or the aios failed */
    bool weof = false; /* sendeof() */
    bool shut = false; /* the write side is shut down */

    aios::rcb_t rcb;
    rmode mode = RNONE;
    bool processing = false; /* a thread runs the read loop */
    bool rwatch = false, wwatch = false;
    bool wblock = false; /* the last output attempt wrote nothing */

    time_t timeoutval = 0;
    uint64_t deadline = 0;
    timecb_t *timer = nullptr;

    str debugname;
    vec<int> sendq;
    std::vector<wwait> wcbs;
    uint64_t queued = 0, written = 0;
    bool owner_gone = false;
    std::vector<pending> todo;

    aios_core(int f, size_t rbsz, int c) : fd(f), color(c), in(rbsz) {}
    ~aios_core()
    {
        for (int s : sendq)
            ::close(s);
    }

    bool hard_error() const { return err && err != ETIMEDOUT; }

    void debug(const char *sep, const str &what)
    {
        if (debugname)
            warnx << debugname << sep << what << "\n";
    }

    /* ---- Running the program's callbacks ---- */

    void deliver_pending(std::unique_lock<std::mutex> &lk)
    {
        while (!todo.empty()) {
            std::vector<pending> batch;
            batch.swap(todo);
            lk.unlock();
            for (pending &p : batch) {
                if (!p.call)
                    continue;
                if (p.rcb)
                    call_on_color(p.rcb, p.s, p.err);
                else
                    call_on_color(p.wcb, p.err);
            }
            batch.clear(); /* the callbacks go with the lock let go */
            lk.lock();
        }
    }
    void take_read(const str &s)
    {
        todo.push_back(pending{rcb, nullptr, s, err, true});
        rcb = nullptr;
        mode = RNONE;
    }
    /* Forgets the pending read without calling it. */
    void drop_read()
    {
        if (rcb)
            todo.push_back(pending{rcb, nullptr, str(), 0, false});
        rcb = nullptr;
        mode = RNONE;
    }
    /* The write callbacks whose bytes have all gone out. */
    void complete_wcbs()
    {
        size_t n = 0;
        while (n < wcbs.size() && wcbs[n].pos <= written)
            n++;
        for (size_t i = 0; i < n; i++)
            todo.push_back(pending{nullptr, wcbs[i].cb, str(), err, true});
        wcbs.erase(wcbs.begin(), wcbs.begin() + (ptrdiff_t)n);
    }

    /* ---- Events ---- */

    callback<void> *own_event(void (aios_core::*m)())
    {
        callback<void> *cb = wrap(mkref(this), m);
        cb->setcolor(color);
        return cb;
    }
    void set_rwatch(bool on)
    {
        if (fd < 0 || on == rwatch)
            return;
        rwatch = on;
        fdcb(fd, selread, on ? own_event(&aios_core::on_readable) : nullptr);
    }
    void set_wwatch(bool on)
    {
        if (fd < 0 || on == wwatch)
            return;
        wwatch = on;
        fdcb(fd, selwrite, on ? own_event(&aios_core::on_writable) : nullptr);
    }
    void arm_timer()
    {
        uint64_t now = now_ns();
        uint64_t d = deadline > now ? deadline - now : 0;
        timer = delaycb((time_t)(d / 1000000000u), (u_int32_t)(d % 1000000000u),
                        own_event(&aios_core::on_timer));
    }
    /* Progress: the timeout counts from now. */
    void bump_timeout()
    {
        if (!timeoutval || eof)
            return;
        deadline = now_ns() + (uint64_t)timeoutval * 1000000000u;
        if (!timer && (rcb || out.resid()))
            arm_timer();
    }

    void on_readable()
    {
        std::unique_lock<std::mutex> lk(mu);
        if (fd >= 0)
            run_input(lk);
    }
    void on_writable()
    {
        std::unique_lock<std::mutex> lk(mu);
        if (fd >= 0)
            output();
        deliver_pending(lk);
    }
    void on_timer()
    {
        std::unique_lock<std::mutex> lk(mu);
        timer = nullptr;
        if (fd < 0)
            return;
        if (now_ns() < deadline) {
            arm_timer();
            return;
        }
        if (timeoutval && (rcb || out.resid())) {
            debug(" === ", "Timeout");
            fail(ETIMEDOUT);
        }
        deliver_pending(lk);
    }

    /* ---- Failing and closing ---- */

    void discard_output()
    {
        set_wwatch(false);
        written += out.resid();
        out.clear();
        complete_wcbs();
    }
    void fail(int e)
    {
        eof = true;
        if (e)
            err = e;
        if (fd < 0)
            return;
        set_rwatch(false);
        if (rcb)
            take_read(str());
        if (hard_error())
            discard_output();
        if (owner_gone)
            close_now();
    }
    /* Closes the descriptor and ends the events (one last non-blocking try
     * at what is held, unless an error discarded it). */
    void close_now()
    {
        if (fd < 0)
            return;
        if (out.resid() && !hard_error())
            dooutput();
        debug(" === ", "EOF");
        set_rwatch(false);
        set_wwatch(false);
        if (timer) {
            timecb_remove(timer);
            timer = nullptr;
        }
        ::close(fd);
        fd = -1;
        drop_read();
        for (wwait &w : wcbs)
            todo.push_back(pending{nullptr, w.cb, str(), 0, false});
        wcbs.clear();
    }

    /* ---- Input ---- */

    bool try_line()
    {
        ssize_t lf = in.find('\n');
        if (lf < 0) {
            if (!in.space()) {
                debug(" === ", "Line too long");
                fail(EFBIG);
            }
            return false;
        }
        mstr m((size_t)lf + 1);
        in.take(m.cstr(), (size_t)lf + 1);
        /* "\r\n" ends a line too, but a line that is just "\r" keeps it
         * (libasync's rule). */
        m.setlen(lf > 1 && m.cstr()[lf - 1] == '\r' ? (size_t)lf - 1 : (size_t)lf);
        str s(m);
        debug(" ==> ", s);
        take_read(s);
        return true;
    }
    bool try_any()
    {
        size_t n = in.size();
        if (!n)
            return false;
        mstr m(n);
        in.take(m.cstr(), n);
        take_read(str(m));
        return true;
    }

    /* Reads once, then hands out what the pending reads can take; a read
     * that a callback asks for from here is served by this loop. */
    void run_input(std::unique_lock<std::mutex> &lk)
    {
        if (processing)
            return;
        processing = true;
        bool ended = false;
        if (fd >= 0 && rcb && !eof) {
            iovec v[2];
            int cnt = in.free_iov(v);
            if (cnt) {
                ssize_t n = ::readv(fd, v, cnt);
                if (n > 0)
                    in.added((size_t)n);
                else if (n == 0)
                    ended = true;
                else if (!transient(errno))
                    fail(errno);
            }
        }
        while (rcb && !eof && (mode == RLINE ? try_line() : try_any()))
            deliver_pending(lk);
        if (ended && rcb)
            fail(0);
        processing = false;
        set_rwatch(rcb && !eof);
        deliver_pending(lk);
    }

    void setreadcb(rmode m, const aios::rcb_t &cb, std::unique_lock<std::mutex> &lk)
    {
        if (rcb) {
            lk.unlock();
            panic("aios::setreadcb: read call made with read already pending\n");
        }
        if (eof || err) {
            todo.push_back(pending{cb, nullptr, str(), err, true});
            deliver_pending(lk);
            return;
        }
        rcb = cb;
        mode = m;
        bump_timeout();
        run_input(lk);
    }

    /* ---- Output ---- */

    /* Writes what the descriptor takes: bytes written, 0 for none, -1 on an
     * error (errno). */
    ssize_t dooutput()
    {
        ssize_t r = 0;
        if (out.resid()) {
            if (sendq.empty()) {
                r = ::writev(fd, out.iov(), (int)std::min(out.iovcnt(), (size_t)IOV_MAX));
            } else {
                msghdr mh;
                memset(&mh, 0, sizeof mh);
                mh.msg_iov = const_cast<iovec *>(out.iov());
                mh.msg_iovlen = std::min(out.iovcnt(), (size_t)IOV_MAX);
                union {
                    cmsghdr h;
                    char b[CMSG_SPACE(sizeof(int))];
                } ctl;
                memset(&ctl, 0, sizeof ctl);
                mh.msg_control = ctl.b;
                mh.msg_controllen = sizeof ctl.b;
                cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &sendq.front(), sizeof(int));
                r = ::sendmsg(fd, &mh, MSG_NOSIGNAL);
                if (r > 0)
                    ::close(sendq.pop_front());
            }
            if (r < 0) {
                if (!transient(errno))
                    return -1;
                r = 0;
            }
            out.rembytes((size_t)r);
            written += (uint64_t)r;
        }
        if (weof && !shut && !out.resid()) {
            shutdown(fd, SHUT_WR);
            shut = true;
        }
        complete_wcbs();
        return r;
    }
    void setoutcb()
    {
        if (fd < 0)
            return;
        if (hard_error()) {
            discard_output();
        } else if (out.resid()) {
            if (!timer)
                bump_timeout();
            set_wwatch(true);
            return;
        } else {
            set_wwatch(false);
            complete_wcbs();
        }
        if (owner_gone)
            close_now();
    }
    void output()
    {
        ssize_t r = dooutput();
        if (r < 0) {
            fail(errno);
            return;
        }
        if (r > 0)
            bump_timeout();
        wblock = r == 0;
        setoutcb();
    }
    /* After bytes were added: small amounts wait for the write event (and
     * for more to come), larger ones are tried at once. */
    void schedwrite()
    {
        if (out.resid() < aios::defrbufsize || wblock || err)
            setoutcb();
        else
            output();
    }
    /* Whether new output is taken: not once the descriptor is closed or an
     * error discarded the output; never after sendeof(). */
    bool accepts_output(std::unique_lock<std::mutex> &lk)
    {
        if (fd < 0 || hard_error())
            return false;
        if (weof) {
            lk.unlock();
            panic("aios: write after sendeof\n");
        }
        return true;
    }

    /* Traces a statement's lines: name <== line. */
    void debug_written(const suio *text)
    {
        if (!debugname || !text->resid())
            return;
        std::string all;
        for (const iovec *v = text->iov(); v < text->iovlim(); v++)
            all.append(static_cast<const char *>(v->iov_base), v->iov_len);
        strbuf t;
        size_t pos = 0;
        while (pos < all.size()) {
            size_t nl = all.find('\n', pos);
            size_t end = nl == std::string::npos ? all.size() : nl;
            size_t n = end - pos;
            if (n && all[end - 1] == '\r')
                n--;
            t << debugname << " <== ";
            t.buf(all.data() + pos, n);
            t << "\n";
            pos = end + 1;
        }
        warnx << t;
    }

    void owner_released()
    {
        std::unique_lock<std::mutex> lk(mu);
        owner_gone = true;
        drop_read();
        if (fd >= 0) {
            set_rwatch(false);
            if (out.resid() && !err)
                output(); /* drains from its write event if not all went */
            else
                close_now();
        }
        deliver_pending(lk);
    }
};

} // namespace mely_compat_detail

using mely_compat_detail::aios_core;
using mely_compat_detail::transient;

/* ---- aios ------------------------------------------------------------------------ */

aios::aios(int fd, size_t rbsz) : core_(new aios_core(fd, rbsz, get_current_color()))
{
    core_->refcount_inc();
    if (fd >= 0)
        make_async(fd);
}

aios::~aios() {}

void aios::finalize()
{
    aios_core *c = core_;
    c->owner_released();
    c->refcount_dec();
    delete this;
}

aios_t aios::alloc(int fd, size_t rbsz)
{
    return aios_t(new aios(fd, rbsz));
}

int aios::fdno() const
{
    std::lock_guard<std::mutex> g(core_->mu);
    return core_->fd;
}

int aios::getcolor() const
{
    return core_->color;
}

void aios::setdebug(str name)
{
    std::lock_guard<std::mutex> g(core_->mu);
    core_->debugname = name;
}

void aios::settimeout(time_t secs)
{
    std::lock_guard<std::mutex> g(core_->mu);
    core_->timeoutval = secs < 0 ? 0 : secs;
    core_->bump_timeout();
}

time_t aios::gettimeout() const
{
    std::lock_guard<std::mutex> g(core_->mu);
    return core_->timeoutval;
}

void aios::abort()
{
    ref<aios_core> hold = mkref(core_);
    aios_core *c = hold;
    std::unique_lock<std::mutex> lk(c->mu);
    if (c->fd < 0)
        return;
    c->out.clear(); /* nothing goes out, not even from close_now */
    c->close_now();
    c->eof = c->weof = true;
    c->err = EBADF;
    c->deliver_pending(lk); /* drops the callbacks (none is called) */
}

void aios::setrbufsize(size_t n)
{
    std::lock_guard<std::mutex> g(core_->mu);
    core_->in.resize(n);
}

size_t aios::getrbufbytes() const
{
    std::lock_guard<std::mutex> g(core_->mu);
    return core_->in.size();
}

/* A method that runs program callbacks holds the core (hold, before the
 * lock): a callback may drop the last ref to the aios, and the method still
 * takes the lock again after it. */
void aios::readline(rcb_t cb)
{
    ref<aios_core> hold = mkref(core_);
    std::unique_lock<std::mutex> lk(hold->mu);
    hold->setreadcb(aios_core::RLINE, cb, lk);
}

void aios::readany(rcb_t cb)
{
    ref<aios_core> hold = mkref(core_);
    std::unique_lock<std::mutex> lk(hold->mu);
    hold->setreadcb(aios_core::RANY, cb, lk);
}

void aios::readcancel()
{
    ref<aios_core> hold = mkref(core_);
    aios_core *c = hold;
    std::unique_lock<std::mutex> lk(c->mu);
    c->drop_read();
    if (!c->processing)
        c->set_rwatch(false);
    c->deliver_pending(lk);
}

void aios::unread(size_t n)
{
    std::unique_lock<std::mutex> lk(core_->mu);
    if (n > core_->in.space()) {
        lk.unlock();
        panic("aios::unread: %zu bytes do not fit back\n", n);
    }
    core_->in.untake(n);
}

void aios::writev(const iovec *iov, int iovcnt)
{
    ref<aios_core> hold = mkref(core_);
    aios_core *c = hold;
    std::unique_lock<std::mutex> lk(c->mu);
    if (!c->accepts_output(lk))
        return;
    size_t done = 0;
    if (!c->out.resid() && c->sendq.empty() && iovcnt > 0) {
        ssize_t n = ::writev(c->fd, iov, std::min(iovcnt, IOV_MAX));
        if (n < 0) {
            if (!transient(errno)) {
                c->fail(errno);
                c->deliver_pending(lk);
                return;
            }
            n = 0;
        }
        done = (size_t)n;
        c->queued += done;
        c->written += done;
        if (n > 0)
            c->bump_timeout();
    }
    for (int i = 0; i < iovcnt; i++) {
        size_t len = iov[i].iov_len;
        if (done >= len) {
            done -= len;
            continue;
        }
        c->out.copy(static_cast<const char *>(iov[i].iov_base) + done, len - done);
        c->queued += len - done;
        done = 0;
    }
    c->setoutcb();
    c->deliver_pending(lk);
}

void aios::write(const void *buf, size_t len)
{
    iovec v;
    v.iov_base = const_cast<void *>(buf);
    v.iov_len = len;
    writev(&v, 1);
}

void aios::commit(suio *text)
{
    ref<aios_core> hold = mkref(core_);
    aios_core *c = hold;
    std::unique_lock<std::mutex> lk(c->mu);
    if (!c->accepts_output(lk))
        return;
    c->debug_written(text);
    c->queued += text->resid();
    c->out.take(text);
    c->schedwrite();
    c->deliver_pending(lk);
}

void aios::sendeof()
{
    ref<aios_core> hold = mkref(core_);
    aios_core *c = hold;
    std::unique_lock<std::mutex> lk(c->mu);
    if (!c->accepts_output(lk))
        return;
    c->weof = true;
    if (!c->out.resid())
        c->output();
    c->deliver_pending(lk);
}

void aios::setwcb(wcb_t cb)
{
    ref<aios_core> hold = mkref(core_);
    aios_core *c = hold;
    std::unique_lock<std::mutex> lk(c->mu);
    if (c->fd < 0 || !cb)
        return;
    c->wcbs.push_back(aios_core::wwait{c->queued, cb});
    c->complete_wcbs();
    c->deliver_pending(lk);
}

int aios::flush()
{
    ref<aios_core> hold = mkref(core_);
    aios_core *c = hold;
    std::unique_lock<std::mutex> lk(c->mu);
    if (c->fd >= 0 && c->out.resid()) {
        make_sync(c->fd);
        while (c->fd >= 0 && c->out.resid()) {
            if (c->dooutput() < 0) {
                int e = errno;
                make_async(c->fd);
                c->fail(e);
                break;
            }
        }
        if (c->fd >= 0) {
            make_async(c->fd);
            c->setoutcb();
        }
    }
    int e = c->err;
    c->deliver_pending(lk);
    return e;
}

void aios::sendfd(int sfd)
{
    std::lock_guard<std::mutex> g(core_->mu);
    core_->sendq.push_back(sfd);
}

/* ---- ain, aout ------------------------------------------------------------------------ */

namespace {

/* Storage for a ref that exists only between the first aios_globals
 * constructor and the last destructor; constant-initialized, so that the
 * references below are bound before any constructor runs. */
union global_slot {
    constexpr global_slot() : none() {}
    ~global_slot() {}
    char none;
    aios_t a;
};
global_slot ain_slot, aout_slot;
int globals_users;

} // namespace

aios_t &ain = ain_slot.a;
aios_t &aout = aout_slot.a;

mely_compat_detail::aios_globals::aios_globals()
{
    if (globals_users++ == 0) {
        new (&ain_slot.a) aios_t(aios::alloc(0));
        new (&aout_slot.a) aios_t(aios::alloc(1));
    }
}

mely_compat_detail::aios_globals::~aios_globals()
{
    if (--globals_users == 0) {
        aout_slot.a->flush();
        aout_slot.a.~aios_t();
        ain_slot.a.~aios_t();
    }
}
