/* SPDX-License-Identifier: MIT */
/*
 * conn.C: one SFS connection on its own color: the key exchange, reading and
 * opening request frames, sealing and writing replies, backpressure, close.
 *
 * Every function here runs on the connection's color, except the constructor
 * and start() (color 0, at accept) and the destructor (wherever the last
 * count drops, once nothing else can touch the connection).
 *
 * Timeouts: one timer per connection at a time. Until the key exchange it
 * is the handshake timeout; then the idle timeout, measured from the last
 * activity: a request opened or reply bytes written (active_ns_). Bytes
 * that make no whole request are no activity, so a client trickling a frame
 * byte by byte is idle; a client that reads no replies makes no activity
 * either, and is closed too (it would hold max_backlog replies for ever).
 * Activity does not move the timer: when it fires early it is armed again
 * for the rest (one clock read per request, one timer per idle period).
 * A connection whose replies are still being made (backlog_) is not idle:
 * the wait is the server's.
 *
 * Half-close: a peer's EOF stops reading, but whatever it is owed (replies
 * being made or queued) is still sent; the connection closes once nothing
 * is owed (finish_if_done).
 *
 * Backpressure: owed() counts the replies not yet written: requests handed to
 * color 0 (`backlog_`, until their reply is sealed) and sealed replies still
 * queued (`outq_`). At max_backlog the connection stops reading its socket (the
 * client's TCP window fills, so a slow reader costs the server at most
 * max_backlog replies of 64 KB plus the input buffer), and reads again once
 * half of them are written.
 */
#include "apps/sfs/sfsd.h"

#include <sys/socket.h>
#include <sys/uio.h>

/* Room for a few request frames: requests are small, and at most
 * SFS_MAX_REQUEST_FRAME each. */
static const size_t INBUF = 4 * (SFS_LENGTH + SFS_MAX_REQUEST_FRAME);

/* A connection's cost annotations, in cycles (main.C measures them at
 * start-up): sealing SFS_MAX_READ bytes, and opening or sealing a small message. */
extern int g_seal_cycles, g_open_cycles;

/* The penalty of a connection's socket handler: its events do a small open,
 * and taking them moves the socket's watch to the thief's poller. */
static const int READ_PENALTY = 4;

sfsconn::sfsconn(int fd_, int color_, uint32_t addr_)
    : fd(fd_), color(color_), addr(addr_), in_(INBUF)
{
}

uint64_t sfs_mono_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

sfsconn::~sfsconn()
{
    for (sfs_handle &h : handles_)
        if (h.fd >= 0)
            ::close(h.fd);
    for (size_t i = outq_head_; i < outq_.size(); i++)
        sfs_out_free(outq_[i]);
    sfs_session_free(&session_);
    g_stats.closed.fetch_add(1, std::memory_order_relaxed);
}

/* The socket's read callback: the connection's color, annotated as a crypto
 * handler (it opens the frames it reads). */
static callback<void> *read_cb(sfsconn *c)
{
    ref<sfsconn> self = mkref(c);
    if (!g_opt.annotate)
        return cwrap(self, &sfsconn::readable, c->color);
    return cwrap_penalty(self, &sfsconn::readable, c->color, g_open_cycles, READ_PENALTY);
}

/* The timer is armed from the connection's own color only (begin() and
 * after), so that timer_ and timer_gen_ are that color's alone. */
void sfsconn::start()
{
    cpucb_tail(cwrap(mkref(this), &sfsconn::begin, color));
}

void sfsconn::begin()
{
    if (closed_)
        return;
    if (g_opt.handshake_timeout)
        arm((uint64_t)g_opt.handshake_timeout * 1000000000u);
    fdcb(fd, selread, read_cb(this));
}

/* Cancels the armed timer, if any. Its event may have started already
 * (timecb_remove cannot stop it then): it carries the old generation, and
 * does nothing (timed_out). */
void sfsconn::disarm()
{
    if (timer_)
        timecb_remove(timer_);
    timer_ = nullptr;
    timer_gen_++;
}

/* Arms the timer ns from now, replacing any armed one. */
void sfsconn::arm(uint64_t ns)
{
    disarm();
    ref<sfsconn> self = mkref(this);
    timer_ = delaycb((time_t)(ns / 1000000000u), (u_int32_t)(ns % 1000000000u),
                     cwrap(self, &sfsconn::timed_out, timer_gen_, color));
}

void sfsconn::timed_out(unsigned gen)
{
    if (gen != timer_gen_ || closed_)
        return;
    timer_ = nullptr;
    if (!keyed_)
        return close("handshake timeout", &g_stats.handshake_timeouts, false);
    if (!g_opt.idle_timeout)
        return;
    uint64_t limit = (uint64_t)g_opt.idle_timeout * 1000000000u, now = sfs_mono_ns();
    if (backlog_ > 0)
        return arm(limit);
    if (now - active_ns_ >= limit)
        return close("idle timeout", &g_stats.idle_timeouts, false);
    arm(active_ns_ + limit - now);
}

/* The table evicted us (table.C): it has counted us out already. */
void sfsconn::evicted()
{
    close("evicted", nullptr);
}

void sfsconn::pause_reading(bool pause)
{
    /* After the peer's EOF there is nothing more to read. */
    if (pause == reading_paused_ || closed_ || peer_done_)
        return;
    reading_paused_ = pause;
    if (pause)
        g_stats.paused.fetch_add(1, std::memory_order_relaxed);
    fdcb(fd, selread, pause ? nullptr : read_cb(this));
}

/* Closes the connection; counter (may be NULL) counts why, and log says
 * whether that is worth a line on stderr: errors are, the limits' closes
 * are not (a hostile client would have sfsd write a line per connection). */
void sfsconn::close(const char *why, std::atomic<unsigned long> *counter, bool log)
{
    if (closed_)
        return;
    closed_ = true;
    disarm();
    /* Not evicted: the table still counts us, until this notice. */
    if (phase.exchange(PHASE_GONE, std::memory_order_acq_rel) != PHASE_GONE)
        cpucb_tail(wrap(sfs_table_gone, mkref(this)));
    if (counter) {
        counter->fetch_add(1, std::memory_order_relaxed);
        if (log)
            warn << "connection " << fd << " closed: " << why << "\n";
    }
    /* From our own color the removals are synchronous: the fd may go now. */
    fdcb(fd, selread, nullptr);
    fdcb(fd, selwrite, nullptr);
    ::close(fd);
}

void sfsconn::readable()
{
    if (closed_)
        return;
    /* read_frames() leaves less than a frame whenever reading is on, so there
     * is room; a read of 0 bytes must mean the peer's end, never a full buffer. */
    if (in_len_ == in_.size())
        return close("input buffer full", &g_stats.io_errors);
    ssize_t n = ::read(fd, in_.data() + in_len_, in_.size() - in_len_);
    if (n == 0) {
        /* The peer half-closed, or closed: what it asked for is still owed.
         * read_frames() has left no whole frame (reading was on), so the
         * rest of in_, if any, is a frame cut short: dropped. */
        peer_done_ = true;
        fdcb(fd, selread, nullptr);
        return finish_if_done();
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR)
            close(strerror(errno), errno == ECONNRESET ? nullptr : &g_stats.io_errors);
        return;
    }
    in_len_ += (size_t)n;
    if (!keyed_ && !do_hello())
        return;
    read_frames();
}

/* The client's hello, then ours. @return true once keyed. */
bool sfsconn::do_hello()
{
    if (in_len_ < SFS_HELLO)
        return false;
    sfs_kx kx;
    if (sfs_kx_new(&kx) != 0) {
        close("key generation failed", &g_stats.io_errors);
        return false;
    }
    int err = sfs_session_init(&session_, &kx, in_.data(), false);
    /* The hello is sent as is, unframed: its buffer needs SFS_HELLO bytes. */
    sfs_out *hello = err ? nullptr : sfs_out_new(SFS_HELLO);
    if (hello) {
        memcpy(hello->buf, kx.hello, SFS_HELLO);
        hello->frame = SFS_HELLO;
    }
    sfs_kx_free(&kx);
    if (!hello) {
        close(err ? "bad hello" : "out of memory", &g_stats.bad_hello);
        return false;
    }
    /* Settles the race with an eviction (table.C): if it came first, the
     * table has counted us out, and its evicted() is on its way. */
    uint8_t expect = PHASE_HELLO;
    if (!phase.compare_exchange_strong(expect, PHASE_KEYED, std::memory_order_acq_rel)) {
        sfs_out_free(hello);
        close("evicted", nullptr);
        return false;
    }
    cpucb_tail(wrap(sfs_table_keyed, mkref(this)));
    keyed_ = true;
    active_ns_ = sfs_mono_ns();
    if (g_opt.idle_timeout)
        arm((uint64_t)g_opt.idle_timeout * 1000000000u);
    else
        disarm();
    in_len_ -= SFS_HELLO;
    memmove(in_.data(), in_.data() + SFS_HELLO, in_len_);
    outq_.push_back(hello);
    return flush();
}

/* Opens and dispatches the whole frames read so far, while the backlog has
 * room. @return false if the connection closed. */
bool sfsconn::read_frames()
{
    size_t at = 0;
    while (!closed_ && in_len_ - at >= SFS_LENGTH && owed() < g_opt.max_backlog) {
        uint32_t len = sfs_frame_length(in_.data() + at, SFS_MAX_REQUEST_FRAME);
        if (len == 0) {
            close("frame length out of range", &g_stats.oversize);
            return false;
        }
        if (in_len_ - at < SFS_LENGTH + len)
            break;
        if (!open_frame(len, in_.data() + at + SFS_LENGTH))
            return false;
        at += SFS_LENGTH + len;
    }
    in_len_ -= at;
    memmove(in_.data(), in_.data() + at, in_len_);
    pause_reading(owed() >= g_opt.max_backlog);
    return !closed_;
}

bool sfsconn::open_frame(uint32_t len, uint8_t *body)
{
    uint8_t *req = static_cast<uint8_t *>(malloc(len));
    long n = req ? sfs_open(&session_, len, body, req) : -1;
    if (n < 0) {
        free(req);
        close(req ? "frame does not authenticate" : "out of memory", &g_stats.bad_frame);
        return false;
    }
    backlog_++;
    active_ns_ = sfs_mono_ns();
    g_stats.requests.fetch_add(1, std::memory_order_relaxed);
    /* Request dispatch and file lookup stay on one color (0): wrap's. */
    cpucb_tail(wrap(mkref(this), &sfsconn::dispatch, req, (size_t)n));
    return true;
}

/* Seals a reply from color 0 and writes it. */
void sfsconn::seal_reply(sfs_out *out)
{
    backlog_--;
    if (closed_ || !out) {
        if (out)
            sfs_out_free(out);
        else
            close("malformed request (or no memory for its reply)", &g_stats.bad_request);
        return;
    }
    out->frame = sfs_seal(&session_, out->buf + SFS_LENGTH, out->plain, out->buf);
    if (out->frame == 0) {
        sfs_out_free(out);
        return close("sealing failed", &g_stats.io_errors);
    }
    outq_.push_back(out);
    if (flush() && reading_paused_ && owed() <= g_opt.max_backlog / 2)
        read_frames();
    finish_if_done();
}

/* After the peer's EOF: closes once nothing more is owed. */
void sfsconn::finish_if_done()
{
    if (peer_done_ && !closed_ && owed() == 0)
        close("peer closed", nullptr);
}

unsigned sfsconn::owed() const
{
    return backlog_ + (unsigned)(outq_.size() - outq_head_);
}

void sfsconn::writable()
{
    if (!closed_ && flush() && reading_paused_ && owed() <= g_opt.max_backlog / 2)
        read_frames();
    finish_if_done();
}

/* Writes what is queued, several frames per call. Watches for writability
 * while something is left. @return false if the connection closed. */
bool sfsconn::flush()
{
    while (!closed_ && outq_head_ < outq_.size()) {
        iovec iov[16];
        int n = 0;
        for (size_t i = outq_head_; i < outq_.size() && n < 16; i++, n++) {
            sfs_out *o = outq_[i];
            iov[n].iov_base = o->buf + o->sent;
            iov[n].iov_len = o->frame - o->sent;
        }
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = (size_t)n;
        ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (w < 0) {
            close(strerror(errno), errno == EPIPE || errno == ECONNRESET ? nullptr : &g_stats.io_errors);
            return false;
        }
        if (w > 0)
            active_ns_ = sfs_mono_ns();
        for (size_t left = (size_t)w; left > 0 && outq_head_ < outq_.size();) {
            sfs_out *o = outq_[outq_head_];
            size_t take = std::min(left, o->frame - o->sent);
            o->sent += take;
            left -= take;
            if (o->sent == o->frame) {
                sfs_out_free(o);
                outq_head_++;
            }
        }
    }
    if (outq_head_ == outq_.size()) {
        outq_.clear();
        outq_head_ = 0;
    }
    bool pending = !outq_.empty();
    if (pending != write_watched_ && !closed_) {
        write_watched_ = pending;
        fdcb(fd, selwrite, pending ? cwrap(mkref(this), &sfsconn::writable, color) : nullptr);
    }
    return !closed_;
}

/* color 0: hands a reply to the connection's color for sealing: the heavy
 * crypto handler, annotated with its measured cost. */
void sfsconn::send(sfs_out *out)
{
    ref<sfsconn> self = mkref(this);
    int cost = out ? g_open_cycles + (int)((uint64_t)g_seal_cycles * out->plain / SFS_MAX_READ) : 0;
    if (g_opt.annotate)
        cpucb_tail(cwrap_timeleft(self, &sfsconn::seal_reply, out, color, cost));
    else
        cpucb_tail(cwrap(self, &sfsconn::seal_reply, out, color));
}
