/* SPDX-License-Identifier: MIT */
/*
 * uprintf.cpp: suio_vuprintf, the printf of strbuf::fmt, strbuf(fmt, ...),
 * warn(fmt, ...) and friends. It prints what libasync's printf printed, which
 * is not glibc's (doc/porting.md, "printf-style formatting"):
 *
 *   - conversions d i o u x X c s p m and libasync's D O U (long); flags
 *     '-' '+' ' ' '#' '0', width and precision (digits or '*'); length
 *     modifiers h (hh is h), l, ll, q (long long) and z;
 *   - %p is "0x" and lower-case hex digits, NULL too ("0x0", not "(nil)");
 *   - no floating point: %e %f %g %E %G %a %A print their letter and take no
 *     argument; any other letter after '%' (j t L n ' I $ ...) is printed
 *     as such, its flags and width applied, and takes no argument;
 *   - the '0' flag pads %s, %c and those letters with zeros too; "%#.0o" of
 *     0 prints nothing;
 *   - a format byte that is negative as a char (>= 0x80 where char is signed,
 *     as on x86) is read as a '%': the byte is dropped and the next one is
 *     taken as a conversion;
 *   - %s of NULL prints "(null)" (libasync panicked).
 *
 * Written for mely from that observable behaviour; no line comes from
 * libasync or from BSD's vfprintf.
 */
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstring>

#include "suio++.h"

namespace {

enum : unsigned {
    LEN_SHORT = 1,
    LEN_SIZE = 2,
    LEN_LONG = 4,
    LEN_QUAD = 8,
};

struct conv {
    bool left = false;  /* '-' */
    bool zero = false;  /* '0' */
    bool alt = false;   /* '#' */
    char sign = 0;      /* '+', ' ', or '-' for a negative number */
    int width = 0;
    int prec = -1;      /* -1: none given */
    unsigned len = 0;   /* LEN_* bits; the widest wins */
};

/* Pads and writes one converted field: `pfx` (a sign or "0x", pfxlen bytes),
 * then `mind` - n zeros (a number's precision), then the n bytes at body. */
void put_field(suio *u, const conv &c, const char *pfx, size_t pfxlen, int mind,
               const char *body, size_t n)
{
    long shown = (long)n > mind ? (long)n : mind;
    shown += (long)pfxlen;
    long pad = c.width - shown;
    if (!c.left && !c.zero && pad > 0)
        u->fill(' ', pad);
    if (pfxlen)
        u->copy(pfx, pfxlen);
    if (!c.left && c.zero && pad > 0)
        u->fill('0', pad);
    if ((long)n < mind)
        u->fill('0', mind - (long)n);
    if (n)
        u->copy(body, n);
    if (c.left && pad > 0)
        u->fill(' ', pad);
}

/* Writes v in `base` (8, 10 or 16) with its prefix and padding. */
void put_number(suio *u, conv c, uint64_t v, int base, bool upper, bool hexprefix, char letter)
{
    static const char lower_digits[] = "0123456789abcdef";
    static const char upper_digits[] = "0123456789ABCDEF";
    const char *digits = upper ? upper_digits : lower_digits;
    char buf[32];
    char *end = buf + sizeof buf, *p = end;
    if (c.prec >= 0)
        c.zero = false;
    if (v != 0 || c.prec != 0) {
        do {
            *--p = digits[v % (unsigned)base];
            v /= (unsigned)base;
        } while (v);
        if (base == 8 && c.alt && *p != '0')
            *--p = '0';
    }
    char pfx[2];
    size_t pfxlen = 0;
    if (c.sign) {
        pfx[pfxlen++] = c.sign;
    } else if (hexprefix) {
        pfx[pfxlen++] = '0';
        pfx[pfxlen++] = letter;
    }
    put_field(u, c, pfx, pfxlen, c.prec, p, (size_t)(end - p));
}

int read_decimal(const char *&f, int first)
{
    int n = first - '0';
    while (*f >= '0' && *f <= '9')
        n = 10 * n + (*f++ - '0');
    return n;
}

} // namespace

void suio_vuprintf(suio *uio, const char *fmt, va_list ap)
{
    va_list args;
    va_copy(args, ap);
    const char *f = fmt;
    for (;;) {
        /* Plain bytes up to a '%', the end, or a byte that is negative as
         * a char (which libasync's printf took for a '%'). */
        const char *run = f;
        while (*f > 0 && *f != '%')
            f++;
        if (f > run)
            uio->copy(run, (size_t)(f - run));
        if (!*f)
            break;
        f++;

        conv c;
        bool done = false;
        while (!done) {
            int ch = *f++;
            switch (ch) {
            case '-':
                c.left = true;
                break;
            case '+':
                c.sign = '+';
                break;
            case ' ':
                if (!c.sign)
                    c.sign = ' ';
                break;
            case '#':
                c.alt = true;
                break;
            case '0':
                c.zero = true;
                break;
            case '*': {
                int w = va_arg(args, int);
                if (w < 0) {
                    c.left = true;
                    w = -w;
                }
                c.width = w;
                break;
            }
            case '.':
                if (*f == '*') {
                    f++;
                    int p = va_arg(args, int);
                    c.prec = p < 0 ? -1 : p;
                } else {
                    c.prec = read_decimal(f, '0');
                }
                break;
            case '1': case '2': case '3': case '4': case '5':
            case '6': case '7': case '8': case '9':
                c.width = read_decimal(f, ch);
                break;
            case 'h':
                c.len |= LEN_SHORT;
                break;
            case 'l':
                if (*f == 'l') {
                    f++;
                    c.len |= LEN_QUAD;
                } else {
                    c.len |= LEN_LONG;
                }
                break;
            case 'q':
                c.len |= LEN_QUAD;
                break;
            case 'z':
                c.len |= LEN_SIZE;
                break;

            case 'D':
            case 'd':
            case 'i': {
                if (ch == 'D')
                    c.len |= LEN_LONG;
                int64_t v;
                if (c.len & LEN_QUAD)
                    v = va_arg(args, long long);
                else if (c.len & LEN_LONG)
                    v = va_arg(args, long);
                else if (c.len & LEN_SIZE)
                    v = va_arg(args, ssize_t);
                else if (c.len & LEN_SHORT)
                    v = (short)va_arg(args, int);
                else
                    v = va_arg(args, int);
                uint64_t mag = (uint64_t)v;
                if (v < 0) {
                    mag = 0 - mag;
                    c.sign = '-';
                }
                put_number(uio, c, mag, 10, false, false, 0);
                done = true;
                break;
            }
            case 'O':
            case 'o':
            case 'U':
            case 'u':
            case 'X':
            case 'x': {
                if (ch == 'O' || ch == 'U')
                    c.len |= LEN_LONG;
                uint64_t v;
                if (c.len & LEN_QUAD)
                    v = va_arg(args, unsigned long long);
                else if (c.len & LEN_LONG)
                    v = va_arg(args, unsigned long);
                else if (c.len & LEN_SIZE)
                    v = va_arg(args, size_t);
                else if (c.len & LEN_SHORT)
                    v = (unsigned short)va_arg(args, int);
                else
                    v = va_arg(args, unsigned);
                c.sign = 0;
                int base = (ch == 'o' || ch == 'O') ? 8 : (ch == 'x' || ch == 'X') ? 16 : 10;
                bool prefix = base == 16 && c.alt && v != 0;
                put_number(uio, c, v, base, ch == 'X', prefix, (char)ch);
                done = true;
                break;
            }
            case 'p': {
                uint64_t v = (uintptr_t)va_arg(args, void *);
                c.sign = 0;
                put_number(uio, c, v, 16, false, true, 'x');
                done = true;
                break;
            }
            case 'c': {
                char b = (char)va_arg(args, int);
                c.sign = 0;
                put_field(uio, c, nullptr, 0, 0, &b, 1);
                done = true;
                break;
            }
            case 'm':
            case 's': {
                const char *s = ch == 'm' ? strerror(errno) : va_arg(args, const char *);
                if (!s)
                    s = "(null)";
                size_t n = c.prec >= 0 ? strnlen(s, (size_t)c.prec) : strlen(s);
                c.sign = 0;
                put_field(uio, c, nullptr, 0, 0, s, n);
                done = true;
                break;
            }
            case '\0':
                va_end(args);
                return;
            default: {
                /* An unknown conversion prints its own byte. */
                char b = (char)ch;
                c.sign = 0;
                put_field(uio, c, nullptr, 0, 0, &b, 1);
                done = true;
                break;
            }
            }
        }
    }
    va_end(args);
}

void suio_uprintf(suio *uio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    suio_vuprintf(uio, fmt, ap);
    va_end(ap);
}
