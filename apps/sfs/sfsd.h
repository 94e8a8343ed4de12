/* SPDX-License-Identifier: MIT */
/*
 * sfsd.h: SFS, the paper's secure file server (§5.3.2), written against
 * compat's libasync-smp API as SFS's own code is: callbacks from wrap/cwrap,
 * fdcb for sockets, time-left and penalty annotations on the crypto handlers.
 *
 * The colouring is libasync-smp's SFS (doc/sfs.md): only the CPU-heavy
 * handlers run in parallel.
 *
 *   color 0           accept; request dispatch: LOOKUP, GETATTR, READDIR,
 *                     RELEASE, and READ's pread from the page cache (fs.C)
 *   a connection's    the key exchange, reading and opening its requests,
 *   own color         sealing and writing its replies (conn.C)
 *
 * A request goes: socket -> open (connection's color) -> dispatch (color 0)
 * -> seal and write (connection's color). Per-connection order holds, since
 * each stage runs on one color and colors run their events in post order.
 *
 * Ownership: a connection is reference-counted (ref<sfsconn>); every callback
 * that names it holds a count, so it lives until its last event has run. Its
 * fields are split by color: the handle table and the connection table's
 * links are touched only on color 0, everything else only on the
 * connection's color; `phase` (atomic) is the one field both change.
 *
 * Hostile clients (doc/sfs.md, "Faults and hostile clients"): the
 * connection table (table.C) admits connections on color 0, evicts the
 * oldest one still in its handshake when the table or the peer's address is
 * full, and refuses the newcomer only when every connection in the way is
 * keyed; each connection closes itself when its handshake or idle timeout
 * expires (conn.C).
 */
#ifndef SFS_SFSD_H
#define SFS_SFSD_H

#include "async.h"

#include <atomic>
#include <list>
#include <string>
#include <vector>

#include "apps/sfs/proto.h"

/* What the command line sets. */
struct sfsd_options {
    std::string root;           /* served directory */
    std::string addr = "127.0.0.1";
    unsigned port = 7070;       /* 0: the system picks one (printed) */
    bool annotate = true;       /* time-left and penalty on the crypto handlers */
    unsigned max_conns = 1024;
    unsigned max_per_addr = 256; /* connections from one IPv4 address */
    unsigned handshake_timeout = 10; /* s from accept to the keys; 0: none */
    unsigned idle_timeout = 300;     /* s without a request or a reply written; 0: none */
    unsigned max_backlog = 16;  /* replies queued or in flight per connection */
    unsigned max_handles = 256; /* open handles per connection */
};

/* Counters, bumped from any color (relaxed atomics), printed at exit. */
struct sfsd_stats {
    std::atomic<unsigned long> conns{0}, closed{0}, requests{0}, bytes_read{0};
    std::atomic<unsigned long> bad_hello{0}, bad_frame{0}, bad_request{0}, oversize{0};
    std::atomic<unsigned long> io_errors{0}, refused{0}, paused{0};
    /* the limits: evicted in the handshake to make room, closed by a timeout */
    std::atomic<unsigned long> evicted{0}, handshake_timeouts{0}, idle_timeouts{0};
};

extern sfsd_options g_opt;
extern sfsd_stats g_stats;
extern int g_rootfd; /* O_PATH descriptor of the served root */

/* A reply on its way: the frame's buffer, sealed in place. */
struct sfs_out {
    uint8_t *buf;  /* SFS_LENGTH + plaintext + SFS_TAG */
    size_t plain;  /* plaintext bytes at buf + SFS_LENGTH */
    size_t frame;  /* once sealed: the frame's bytes */
    size_t sent;   /* bytes of the frame written */
};

/* An open handle (color 0 only). */
struct sfs_handle {
    int fd = -1;     /* O_RDONLY file, or directory; -1: a free slot */
    bool dir = false;
    uint32_t gen = 0; /* bumped at release: a stale handle names no file */
};

class sfsconn;
/* The connection table's lists (table.C): each holds a count. */
typedef std::list<ref<sfsconn>> sfsconn_list;

/* Where a connection is in its life. HELLO -> KEYED on its own color (the
 * key exchange is done); HELLO -> GONE on color 0 (evicted) or on its own
 * color (closed); KEYED -> GONE on its own color (closed). Whoever moves it
 * to GONE tells the table, once: an eviction has already, a close posts it. */
enum sfs_phase : uint8_t { PHASE_HELLO, PHASE_KEYED, PHASE_GONE };

class sfsconn : public virtual refcount {
public:
    /* addr: the peer's IPv4 address (network order), for the table. */
    sfsconn(int fd, int color, uint32_t addr);
    ~sfsconn();

    /* Starts the connection on its own color: the handshake timeout, then
     * reading (the hello first). Color 0 (accept). */
    void start();

    /* --- the connection's color --- */
    void readable();
    void writable();
    /* A reply from color 0; NULL: none could be made (a malformed request,
     * or no memory): the connection closes. */
    void seal_reply(sfs_out *out);

    /* Closes it, if still open: the table evicted it (table.C). */
    void evicted();

    /* --- color 0 --- */
    void dispatch(uint8_t *req, size_t n);

    const int fd;
    const int color;
    const uint32_t addr;
    std::atomic<uint8_t> phase{PHASE_HELLO}; /* enum sfs_phase; see there */

    /* color 0: the table's links (table.C). listed: in the unkeyed lists. */
    bool listed = false;
    sfsconn_list::iterator in_all, in_addr;

private:
    /* connection's color */
    void begin();
    bool do_hello();
    bool read_frames();
    bool open_frame(uint32_t len, uint8_t *body);
    bool flush();
    void pause_reading(bool pause);
    void finish_if_done();
    void close(const char *why, std::atomic<unsigned long> *counter, bool log = true);
    void arm(uint64_t ns);
    void disarm();
    void timed_out(unsigned gen);

    sfs_session session_{};
    bool keyed_ = false;
    bool closed_ = false;
    bool reading_paused_ = false;
    bool write_watched_ = false;
    bool peer_done_ = false;   /* the peer half-closed: reply, then close */
    timecb_t *timer_ = nullptr; /* the handshake or idle timeout, if armed */
    unsigned timer_gen_ = 0;    /* the armed timer's; older timers' events do nothing */
    uint64_t active_ns_ = 0;    /* the last request or reply bytes written (mono_ns) */
    std::vector<uint8_t> in_; /* bytes read, not yet a whole frame */
    size_t in_len_ = 0;
    std::vector<sfs_out *> outq_; /* sealed, not yet written (front first) */
    size_t outq_head_ = 0;
    unsigned backlog_ = 0;        /* requests dispatched, replies not yet sealed */
    unsigned owed() const;        /* backlog_ + replies queued: not yet written */

    /* color 0 */
    std::vector<sfs_handle> handles_;
    uint64_t handle_gen_ = 0;
    void reply_status(const sfs_request &r, int err);
    void send(sfs_out *out);
    void do_lookup(const sfs_request &r);
    void do_getattr(const sfs_request &r);
    void do_read(const sfs_request &r);
    void do_readdir(const sfs_request &r);
    void do_release(const sfs_request &r);
    sfs_handle *handle_of(uint64_t h);
    void release_all();
};

/* server.C: a reply buffer for `plain` plaintext bytes (NULL: out of memory). */
sfs_out *sfs_out_new(size_t plain);
void sfs_out_free(sfs_out *out);

/* Listens and accepts (server.C). Returns the bound port, or exits with a
 * message. Call before amain(). */
unsigned sfsd_listen();

/* --- table.C: the connection table, color 0 only --- */

/* Admits a new connection from addr (network order), making room by
 * evicting if it must. @return false: refused (the caller closes fd). */
bool sfs_table_admit(uint32_t addr);
/* Adds the admitted connection to the table (as in its handshake). */
void sfs_table_add(const ref<sfsconn> &c);
/* Evicts the oldest connection still in its handshake, if any: what
 * accept does when the process is out of descriptors. */
bool sfs_table_evict_oldest();
/* Posted by a connection on its own color: its key exchange is done. */
void sfs_table_keyed(ref<sfsconn> c);
/* Posted by a connection on its own color: it closed (not evicted). */
void sfs_table_gone(ref<sfsconn> c);

/* CLOCK_MONOTONIC_COARSE in ns: the timeouts' clock (conn.C), cheap to
 * read per request; its tick (1-4 ms) is far below a timeout's second. */
uint64_t sfs_mono_ns();

/* The one-line summary of g_stats and the runtime's steals (server.C). */
void sfsd_print_stats();

#endif
