/* err.cpp: setprogname, warn, warnx, fatal, panic. */
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

#include "err.h"

namespace {
char g_progname[256];
}

void setprogname(const char *argv0)
{
    if (!argv0)
        return;
    const char *slash = strrchr(argv0, '/');
    snprintf(g_progname, sizeof g_progname, "%s", slash ? slash + 1 : argv0);
}

const char *getprogname_compat()
{
    return g_progname;
}

namespace mely_compat_detail {

void err_emit(err_kind kind, const std::string &msg)
{
    std::string line;
    if (kind != ERR_WARNX && g_progname[0]) {
        line = g_progname;
        line += ": ";
    }
    if (kind == ERR_PANIC)
        line += "PANIC: ";
    line += msg;
    if (kind != ERR_WARN && kind != ERR_WARNX && (line.empty() || line.back() != '\n'))
        line += '\n';
    /* One write, so that lines of concurrent handlers do not interleave. */
    std::size_t off = 0;
    while (off < line.size()) {
        ssize_t n = write(2, line.data() + off, line.size() - off);
        if (n <= 0)
            break;
        off += (std::size_t)n;
    }
    if (kind == ERR_FATAL)
        exit(1);
    if (kind == ERR_PANIC)
        abort();
}

void err_stream::operator()(const char *fmt, ...) const
{
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    std::string s;
    if (n >= (int)sizeof small) {
        s.resize((std::size_t)n + 1);
        vsnprintf(&s[0], s.size(), fmt, ap2);
        s.resize((std::size_t)n);
    } else if (n > 0) {
        s.assign(small, (std::size_t)n);
    }
    va_end(ap2);
    err_emit(kind_, s);
}

} // namespace mely_compat_detail

const mely_compat_detail::err_stream warn(mely_compat_detail::ERR_WARN);
const mely_compat_detail::err_stream warnx(mely_compat_detail::ERR_WARNX);
const mely_compat_detail::err_stream fatal(mely_compat_detail::ERR_FATAL);
const mely_compat_detail::err_stream panic(mely_compat_detail::ERR_PANIC);
