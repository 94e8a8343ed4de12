/* SPDX-License-Identifier: MIT */
/*
 * serial.h (mely-compat): libasync's byte-order helpers, whole-file strings
 * and text armor.
 *   putshort/putint/puthyper(p, v), getshort/getint/gethyper(p): 16, 32 and
 *       64-bit integers at p, big-endian, any alignment
 *   str2file(file, s, perm, excl, &sb, binary, do_fsync): writes s to
 *       file~ and renames it to file (excl: creates file~ exclusively and
 *       links it to file, failing if file exists); a newline is added unless
 *       s ends with one or binary; do_fsync syncs before the rename; sb gets
 *       the file's stat. false with errno on failure (file~ then removed)
 *   file2str(file): a regular file's contents, or NULL (errno set)
 *   armor64(p, n) / armor64(str): RFC 1521 base-64, padded with '=';
 *       armor64len(s): the length of the base-64 text at s (with its
 *       padding); dearmor64(s, len = -1) / dearmor64(str): the bytes, or NULL
 *       if the text is not whole base 64
 *   armor64A, armor64Alen, dearmor64A: the same with '-' for '/' and no
 *       padding (file names)
 *   hexconv(out, c): a hex digit's value; hex2bytes(s): hex text to bytes,
 *       NULL if not whole hex
 * Not here: libasync's base-32 (armor32, armor32_rfc and their dearmor and
 * len functions) and its PHP-style base-64 (armor64X...).
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_SERIAL_H
#define MELY_COMPAT_SERIAL_H

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amisc.h"
#include "err.h"
#include "str.h"

/* ---- Big-endian integers ------------------------------------------------------------ */

static inline void putshort(void *dp, u_int16_t v)
{
    u_char *d = static_cast<u_char *>(dp);
    d[0] = (u_char)(v >> 8);
    d[1] = (u_char)v;
}
static inline u_int16_t getshort(const void *dp)
{
    const u_char *d = static_cast<const u_char *>(dp);
    return (u_int16_t)(d[0] << 8 | d[1]);
}
static inline void putint(void *dp, u_int32_t v)
{
    u_char *d = static_cast<u_char *>(dp);
    for (int i = 0; i < 4; i++)
        d[i] = (u_char)(v >> (24 - 8 * i));
}
static inline u_int32_t getint(const void *dp)
{
    const u_char *d = static_cast<const u_char *>(dp);
    return (u_int32_t)d[0] << 24 | (u_int32_t)d[1] << 16 | (u_int32_t)d[2] << 8 | d[3];
}
static inline void puthyper(void *dp, u_int64_t v)
{
    putint(dp, (u_int32_t)(v >> 32));
    putint(static_cast<u_char *>(dp) + 4, (u_int32_t)v);
}
static inline u_int64_t gethyper(const void *dp)
{
    return (u_int64_t)getint(dp) << 32 | getint(static_cast<const u_char *>(dp) + 4);
}

/* ---- Files as strings ------------------------------------------------------------------ */

inline bool str2file(str file, str s, int perm = 0666, bool excl = false,
                     struct stat *sbp = NULL, bool binary = false, bool do_fsync = false)
{
    if (!file.len() || file.len() != strlen(file.cstr())) {
        errno = EINVAL;
        return false;
    }
    if (file.cstr()[file.len() - 1] == '/') {
        errno = EISDIR;
        return false;
    }
    str tmp = strbuf() << file << "~";
    unlink(tmp.cstr());
    int fd = open(tmp.cstr(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, perm);
    if (fd < 0)
        return false;
    bool ok = write(fd, s.cstr(), s.len()) == (ssize_t)s.len();
    if (ok && s.len() && s.cstr()[s.len() - 1] != '\n' && !binary)
        ok = write(fd, "\n", 1) == 1;
    if (ok && do_fsync)
        ok = fsync(fd) == 0;
    if (ok && sbp)
        ok = fstat(fd, sbp) == 0;
    int saved = errno;
    if (close(fd) < 0 && ok)
        ok = false, saved = errno;
    if (ok && (excl ? link(tmp.cstr(), file.cstr()) : rename(tmp.cstr(), file.cstr())) < 0)
        ok = false, saved = errno;
    if (!ok || excl)
        unlink(tmp.cstr());
    errno = saved;
    return ok;
}

inline str file2str(str file)
{
    int fd = open(file.cstr(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return str();
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return str();
    }
    if (!S_ISREG(sb.st_mode)) {
        warn << file << ": not a regular file\n";
        close(fd);
        errno = EINVAL;
        return str();
    }
    mstr m(sb.st_size);
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t n = read(fd, m.cstr() + got, sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return str();
        }
        if (n == 0)
            break;
        got += n;
    }
    close(fd);
    m.setlen(got);
    return str(m);
}

/* ---- Base 64 ------------------------------------------------------------------------------ */

namespace mely_compat_detail {

/* The value of c in base 64 (c62 and c63: the alphabet's last two), or -1. */
inline int b64val(u_char c, char c62, char c63)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (u_char)c62)
        return 62;
    if (c == (u_char)c63)
        return 63;
    return -1;
}

inline str b64enc(const void *dp, size_t len, char c62, char c63, bool pad)
{
    static const char az[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    auto ch = [&](unsigned v) { return v < 62 ? az[v] : v == 62 ? c62 : c63; };
    const u_char *p = static_cast<const u_char *>(dp);
    mstr m((len + 2) / 3 * 4);
    char *d = m.cstr();
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        for (int k = 0; k < 4; k++)
            *d++ = ch(v >> (18 - 6 * k) & 0x3f);
    }
    if (size_t rem = len - i) {
        unsigned v = (unsigned)p[i] << 16 | (rem == 2 ? (unsigned)p[i + 1] << 8 : 0);
        *d++ = ch(v >> 18 & 0x3f);
        *d++ = ch(v >> 12 & 0x3f);
        if (rem == 2)
            *d++ = ch(v >> 6 & 0x3f);
        else if (pad)
            *d++ = '=';
        if (pad)
            *d++ = '=';
    }
    m.setlen(d - m.cstr());
    return str(m);
}

inline size_t b64len(const u_char *s, char c62, char c63, bool pad)
{
    const u_char *p = s;
    while (b64val(*p, c62, c63) >= 0)
        p++;
    for (int k = 0; pad && k < 2 && *p == '='; k++)
        p++;
    return p - s;
}

/* NULL unless s[0..len) is whole base 64 (padded: a multiple of 4 long). */
inline str b64dec(const char *cs, ssize_t len, char c62, char c63, bool pad)
{
    const u_char *s = reinterpret_cast<const u_char *>(cs);
    if (len < 0)
        len = b64len(s, c62, c63, pad);
    if (pad && (len & 3))
        return str();
    ssize_t n = len;
    if (pad)
        for (int k = 0; k < 2 && n > 0 && s[n - 1] == '='; k++)
            n--;
    if (n % 4 == 1)
        return str();
    mstr m(n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0));
    char *d = m.cstr();
    unsigned acc = 0;
    int bits = 0;
    for (ssize_t i = 0; i < n; i++) {
        int v = b64val(s[i], c62, c63);
        if (v < 0)
            return str();
        acc = (acc << 6 | (unsigned)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *d++ = (char)(acc >> bits);
        }
    }
    m.setlen(d - m.cstr());
    return str(m);
}

} // namespace mely_compat_detail

inline str armor64(const void *p, size_t n)
{
    return mely_compat_detail::b64enc(p, n, '+', '/', true);
}
inline size_t armor64len(const u_char *s)
{
    return mely_compat_detail::b64len(s, '+', '/', true);
}
inline str dearmor64(const char *s, ssize_t len = -1)
{
    return mely_compat_detail::b64dec(s, len, '+', '/', true);
}
inline str armor64(str bin)
{
    return armor64(bin.cstr(), bin.len());
}
inline str dearmor64(str asc)
{
    if (!asc || armor64len(reinterpret_cast<const u_char *>(asc.cstr())) != asc.len())
        return str();
    return dearmor64(asc.cstr(), asc.len());
}

inline str armor64A(const void *p, size_t n)
{
    return mely_compat_detail::b64enc(p, n, '+', '-', false);
}
inline size_t armor64Alen(const u_char *s)
{
    return mely_compat_detail::b64len(s, '+', '-', false);
}
inline str dearmor64A(const char *s, ssize_t len)
{
    return mely_compat_detail::b64dec(s, len, '+', '-', false);
}
inline str armor64A(str bin)
{
    return armor64A(bin.cstr(), bin.len());
}
inline str dearmor64A(str asc)
{
    if (!asc || armor64Alen(reinterpret_cast<const u_char *>(asc.cstr())) != asc.len())
        return str();
    return dearmor64A(asc.cstr(), asc.len());
}

/* ---- Base 16 --------------------------------------------------------------------------------- */

inline bool hexconv(int &out, const char in)
{
    if (in >= '0' && in <= '9')
        out = in - '0';
    else if (in >= 'a' && in <= 'f')
        out = in - 'a' + 10;
    else if (in >= 'A' && in <= 'F')
        out = in - 'A' + 10;
    else
        return false;
    return true;
}

inline str hex2bytes(str asc)
{
    if (asc.len() & 1)
        return str();
    mstr m(asc.len() / 2);
    const char *p = asc.cstr();
    for (size_t i = 0; i < asc.len() / 2; i++) {
        int h, l;
        if (!hexconv(h, p[2 * i]) || !hexconv(l, p[2 * i + 1]))
            return str();
        m.cstr()[i] = (char)(h << 4 | l);
    }
    return str(m);
}

#endif /* MELY_COMPAT_SERIAL_H */
