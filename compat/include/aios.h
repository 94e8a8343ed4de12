/* SPDX-License-Identifier: MIT */
/*
 * aios.h (mely-compat): libasync's buffered asynchronous I/O on a descriptor,
 * line by line or as bytes come, and output through strbuf.
 *
 *   aios_t a = aios::alloc(fd);   takes fd over (makes it non-blocking; closes
 *                                 it when the last ref goes, after what was
 *                                 written has gone out); read buffer of
 *                                 aios::defrbufsize (8 KiB) unless a size is given
 *   a->readline(cb)               cb(line, 0) with the next line, without its
 *                                 "\n" (or "\r\n"); at the end of the input
 *                                 cb(NULL, 0) (bytes after the last "\n" are
 *                                 dropped, as in libasync); on an error
 *                                 cb(NULL, errno); a line that does not fit in
 *                                 the read buffer fails the aios with EFBIG
 *   a->readany(cb)                cb(bytes, 0) with whatever has come (at most
 *                                 the buffer's size), the same way at the end
 *   a->readcancel()               forgets the pending read's callback
 *   a->unread(n)                  gives the last n bytes read back (while no
 *                                 new input has replaced them)
 *   One read may be pending at a time (a second one panics). Once the input
 *   ended or failed, readline/readany call cb(NULL, err) at once.
 *   aout << "x = " << x << "\n"   appends the statement's text (a strbuf: str,
 *                                 C strings, numbers, your strbuf_cat types) to
 *                                 the output; it goes out when the descriptor
 *                                 takes it (at once past 8 KiB held)
 *   a->write(buf, n), a->writev(iov, cnt)   the same with raw bytes
 *   a->setwcb(cb)                 cb(err) once everything written so far has
 *                                 gone out (err 0), or with the error that
 *                                 discarded it
 *   a->flush()                    writes what is held now, blocking; returns
 *                                 the aios's error (0 if none)
 *   a->sendeof()                  shuts the write side down once what is held
 *                                 has gone (no writes after it)
 *   a->sendfd(fd)                 passes fd (SCM_RIGHTS, on a Unix socket) with
 *                                 the next bytes written, then closes it here
 *   a->settimeout(secs)           fails the aios with ETIMEDOUT when a read
 *                                 stays pending, or written bytes stay held,
 *                                 secs after the read was asked for or the
 *                                 last bytes went out (0: never, the default)
 *   a->abort()                    closes fd now: held output is discarded, a
 *                                 pending read's callback is dropped, later
 *                                 reads get (NULL, EBADF)
 *   a->setdebug(name)             traces lines read (name ==> line), written
 *                                 (name <== line) and the end on stderr
 *   a->fdno(), gettimeout(), setrbufsize(n), getrbufbytes()
 *   ain, aout                     aios on descriptors 0 and 1, made when the
 *                                 program starts (fds 0 and 1 become
 *                                 non-blocking then, as with libasync); aout's
 *                                 output is flushed when the program exits
 *   aios_t is ref<aios>.
 *
 * Colors (new here): an aios's own events (its descriptor's readiness, its
 * timeout) run on its color, the color of the callback that called
 * aios::alloc (0 outside callbacks, so 0 for ain and aout); getcolor() tells
 * it. The program's read and write callbacks run on their own colors, as
 * every compat callback does: called at once when the event that has the
 * result already runs on that color, posted to that color otherwise. Every
 * method may be called from any color (an aios locks itself), and a
 * statement `aout << ... ;` is appended whole, so lines printed by several
 * colors at once do not mix.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_AIOS_H
#define MELY_COMPAT_AIOS_H

#include <cstddef>
#include <ctime>

#include <sys/types.h>
#include <sys/uio.h>

/* What libasync's aios.h brought along: cbuf.h (and through it the system
 * headers of sysconf.h), init.h (INITFN and the like), strings, tagged
 * unions. */
#include "sysconf.h"
#include "cbuf.h"
#include "init.h"
#include "callback.h"
#include "refcnt.h"
#include "str.h"
#include "union.h"

class aios;
typedef ref<aios> aios_t;

namespace mely_compat_detail {
struct aios_core; /* the state, shared with the aios's own events (aios.cpp) */
} // namespace mely_compat_detail

class aios : virtual public refcount {
    friend class aiosout;
    mely_compat_detail::aios_core *core_;

    /* aiosout's text, at the end of its statement. */
    void commit(suio *text);

protected:
    aios(int fd, size_t rbsz);
    ~aios();
    void finalize() override;

public:
    typedef callback<void, str, int>::ptr rcb_t;
    typedef callback<void, int>::ptr wcb_t;
    enum { defrbufsize = 0x2000 };

    static aios_t alloc(int fd, size_t rbsz = defrbufsize);
    aios(const aios &) = delete;
    aios &operator=(const aios &) = delete;

    int fdno() const;
    int getcolor() const;
    void setdebug(str name);
    void settimeout(time_t secs);
    time_t gettimeout() const;
    void abort();

    void setrbufsize(size_t n);
    size_t getrbufbytes() const;
    void readline(rcb_t cb);
    void readany(rcb_t cb);
    void readcancel();
    void unread(size_t n);

    void writev(const iovec *iov, int iovcnt);
    void write(const void *buf, size_t len);
    void sendeof();
    void setwcb(wcb_t cb);
    int flush();
    void sendfd(int sfd);
};

/* `a << x`: a strbuf of its own, appended to a's output when the statement
 * ends. */
class aiosout : public strbuf {
    aios *s_;

public:
    aiosout(const aios_t &a) : s_(a) {}
    aiosout(const aios_t::ptr &a) : s_(a) {}
    aiosout(const aiosout &) = delete;
    aiosout &operator=(const aiosout &) = delete;
    ~aiosout() { s_->commit(tosuio()); }
};

template <class T> inline const strbuf &operator<<(const aiosout &o, const T &a)
{
    return strbuf_cat(o, a);
}
inline const strbuf &operator<<(const aiosout &o, const str &s)
{
    suio_print(o.tosuio(), s);
    return o;
}
inline const strbuf &operator<<(const aiosout &o, const char *a)
{
    return strbuf_cat(o, a);
}

/* ain and aout: made before the first static constructor of a file that
 * includes this header runs, flushed and dropped after the last static
 * destructor of such a file (the std::cout scheme). */
extern aios_t &ain;
extern aios_t &aout;
namespace mely_compat_detail {
struct aios_globals {
    aios_globals();
    ~aios_globals();
};
#ifndef MELY_COMPAT_AIOS_IMPL
[[maybe_unused]] static aios_globals aios_globals_here;
#endif
} // namespace mely_compat_detail

#endif /* MELY_COMPAT_AIOS_H */
