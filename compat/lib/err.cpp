/* SPDX-License-Identifier: MIT */
/* err.cpp: libasync's diagnostics (warnobj, progname, _err_output...) and the
 * Mely header's warn/warnx/fatal/panic objects, which print the same way. */
#define MELY_COMPAT_ERR_IMPL 1

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "err.h"

bssstr progname;
str progdir;
void (*fatalhook)();
int errfd = 2;
bool fatal_no_destruct;
void (*_err_output)(suio *, int) = _err_output_sync;
void (*_err_reset_hook)();

namespace {

bssstr g_progpid;

/* Writes all of uio to fd and empties it: a single write() unless the
 * descriptor takes less (so that lines from several cores do not mix). */
void write_all(suio *uio, int fd)
{
    while (uio->resid()) {
        const iovec *v = uio->iov();
        ssize_t n = write(fd, v->iov_base, v->iov_len);
        if (n > 0) {
            uio->rembytes((size_t)n);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, -1);
        } else {
            uio->clear();
            return;
        }
    }
}

/* "sec.usec": the time of day, as warnt prints it. */
void cat_time(const strbuf &sb)
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sb.fmt("%d.%06d", (int)ts.tv_sec, (int)(ts.tv_nsec / 1000));
}

} // namespace

void _err_output_sync(suio *uio, int flags)
{
    int saved = errno;
    write_all(uio, errfd);
    if (flags & warnobj::panicflag)
        abort();
    if (flags & warnobj::fatalflag) {
        if (fatalhook)
            fatalhook();
        if (fatal_no_destruct)
            _exit(1);
        exit(1);
    }
    errno = saved;
}

void err_reset()
{
    if (_err_reset_hook)
        _err_reset_hook();
    _err_reset_hook = nullptr;
    _err_output = _err_output_sync;
}

void setprogname(const char *argv0)
{
    if (!argv0)
        return;
    const char *slash = strrchr(argv0, '/');
    const char *base = slash ? slash + 1 : argv0;
    /* libtool's wrapper scripts run the real program as lt-NAME */
    progname = strncmp(base, "lt-", 3) ? base : base + 3;
    if (base > argv0)
        progdir = str(argv0, (size_t)(base - argv0));
    else
        progdir = str();
}

void setprogname(char *argv0)
{
    setprogname(static_cast<const char *>(argv0));
}

void setprogpid(int p)
{
    g_progpid = strbuf("%d", p);
}

/* ---- warnobj ----------------------------------------------------------------------- */

warnobj::warnobj(int f) : flags(f)
{
    if (flags & timeflag) {
        cat_time(*this);
        cat(" ");
    }
    if (!(flags & xflag) && progname) {
        *this << progname;
        if (g_progpid)
            *this << "[" << g_progpid << "]";
        cat(": ");
    }
    if (flags & panicflag)
        cat("PANIC: ");
    else if (flags & fatalflag)
        cat("fatal: ");
}

warnobj::~warnobj()
{
    _err_output(tosuio(), flags);
}

const warnobj &warnobj::operator()(const char *fmt, ...) const
{
    va_list ap;
    va_start(ap, fmt);
    vfmt(fmt, ap);
    va_end(ap);
    return *this;
}

fatalobj::~fatalobj()
{
    /* _err_output_sync exits or aborts; a program's own _err_output may
     * return, and then this ends the program as libasync did. */
    _err_output(tosuio(), flags);
    abort();
}

/* ---- traceobj ---------------------------------------------------------------------- */

void traceobj::init()
{
    if (progname)
        *this << progname << ": ";
    cat(prefix);
    if (dotime) {
        cat_time(*this);
        cat(" ");
    }
    if (fd >= 0) {
        sockaddr_in sin;
        socklen_t len = sizeof sin;
        if (getpeername(fd, reinterpret_cast<sockaddr *>(&sin), &len) == 0 &&
            sin.sin_family == AF_INET) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof ip);
            fmt("%s:%d ", ip, (int)ntohs(sin.sin_port));
        }
    }
}

traceobj::~traceobj()
{
    if (doprint)
        _err_output(tosuio(), 0);
}

const traceobj &traceobj::operator()(int threshold)
{
    doprint = current_level >= threshold;
    if (doprint)
        init();
    return *this;
}

const traceobj &traceobj::operator()(int threshold, const char *fmt, ...)
{
    doprint = current_level >= threshold;
    if (doprint) {
        init();
        va_list ap;
        va_start(ap, fmt);
        vfmt(fmt, ap);
        va_end(ap);
    }
    return *this;
}

/* ---- the C functions ----------------------------------------------------------------- */

void sfs_vwarn(const char *fmt, va_list ap)
{
    suio u;
    if (progname)
        u.copy(progname.cstr(), progname.len()); /* no ": ", as libasync */
    suio_vuprintf(&u, fmt, ap);
    _err_output(&u, 0);
}

void sfs_vwarnx(const char *fmt, va_list ap)
{
    suio u;
    suio_vuprintf(&u, fmt, ap);
    _err_output(&u, warnobj::xflag);
}

void sfs_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sfs_vwarn(fmt, ap);
    va_end(ap);
}

void sfs_warnx(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sfs_vwarnx(fmt, ap);
    va_end(ap);
}

/* ---- the Mely header's objects --------------------------------------------------------- */

namespace mely_compat_detail {

void err_emit(int flags, const std::string &msg)
{
    if (flags & (warnobj::fatalflag | warnobj::panicflag)) {
        fatalobj w(flags);
        w.buf(msg.data(), msg.size());
    } else {
        warnobj w(flags);
        w.buf(msg.data(), msg.size());
    }
}

void err_stream::operator()(const char *fmt, ...) const
{
    va_list ap;
    va_start(ap, fmt);
    strbuf b;
    b.vfmt(fmt, ap);
    va_end(ap);
    err_emit(flags_, std::string(str(b).cstr(), b.len()));
}

} // namespace mely_compat_detail

/* extern: a const object would otherwise be local to this file (mely.h
 * declares them; this file does not see that declaration). */
extern const mely_compat_detail::err_stream warn(0);
extern const mely_compat_detail::err_stream warnx(warnobj::xflag);
extern const mely_compat_detail::err_stream fatal(warnobj::fatalflag);
extern const mely_compat_detail::err_stream panic(warnobj::panicflag);
