/* SPDX-License-Identifier: MIT */
/*
 * str.cpp: str, mstr, strbuf and suio (str.h, suio++.h), reached the way a
 * libasync program reaches them: through async.h.
 */
#include "async.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <sstream>
#include <thread>
#include <vector>

#include <fcntl.h>

#include "ctest.h"

static bool same_bytes(const str &s, const char *p, size_t n)
{
    return s && s.len() == n && !memcmp(s.cstr(), p, n) && s.cstr()[n] == '\0';
}

static bool eq(const strbuf &sb, const char *want)
{
    str s(sb);
    return same_bytes(s, want, strlen(want));
}

static void test_null_and_empty()
{
    str n;
    CHECK(!n);
    CHECK(!(bool)n);
    CHECK(n.cstr() == NULL);
    CHECK(n.len() == 0);
    CHECK(n == (const char *)NULL);
    CHECK(n == str());
    CHECK(n != "");

    str e("");
    CHECK(!!e);
    CHECK((bool)e);
    CHECK(e.len() == 0);
    CHECK(e.cstr() && e.cstr()[0] == '\0');
    CHECK(e == "");
    CHECK(e != n && n != e);
    CHECK(n < e && !(e < n));
    CHECK(e.cmp(n) > 0 && n.cmp(e) < 0 && n.cmp(str()) == 0);
    CHECK(e != (const char *)NULL);

    str fromnull((const char *)NULL);
    CHECK(!fromnull);
    str a("x");
    a = (const char *)NULL;
    CHECK(!a);
    str z((const char *)NULL, 0);
    CHECK(z && z.len() == 0);
}

static void test_bytes_and_nuls()
{
    str s("hello");
    CHECK(s.len() == 5);
    CHECK(!strcmp(s.cstr(), "hello"));
    CHECK(s[0] == 'h' && s[4] == 'o' && s[5] == '\0');
    /* libasync's implicit conversion to const char *. */
    const char *p = s;
    CHECK(p == s.cstr());
    CHECK(strlen(s) == 5);

    str nul("a\0b", 3);
    CHECK(nul.len() == 3);
    CHECK(nul[0] == 'a' && nul[1] == '\0' && nul[2] == 'b' && nul.cstr()[3] == '\0');
    CHECK(nul != "a");
    CHECK(nul.cmp("a") > 0);
    CHECK(nul == str("a\0b", 3));
    CHECK(nul != str("a\0c", 3));
    CHECK(nul < str("a\0c", 3));
    CHECK(str("a", 1) < nul);
    CHECK((u_int)hash_t(nul) != (u_int)hash_t(str("a")));
    str copy = nul;
    CHECK(same_bytes(copy, "a\0b", 3));

    std::string big(100000, 'q');
    big[500] = '\0';
    str b(big.data(), big.size());
    CHECK(b.len() == big.size() && !memcmp(b.cstr(), big.data(), big.size()));
}

static void test_compare()
{
    str a("abc"), b("abd"), pre("ab"), hi("\xff");
    CHECK(a < b && b > a && a <= b && b >= a && a != b);
    CHECK(pre < a && a > pre);
    CHECK(a < hi); /* bytes compare unsigned */
    CHECK(a.cmp(b) < 0 && b.cmp(a) > 0 && a.cmp(str("abc")) == 0);
    CHECK(a.cmp("abc") == 0 && a.cmp("abcd") < 0 && a.cmp("ab") > 0 && a.cmp("\xff") < 0);
    CHECK(a == "abc" && "abc" == a && a != "abd" && "abd" != a);
    CHECK(a == str("abc") && a <= str("abc") && a >= str("abc"));

    compare<str> c;
    CHECK(c(a, b) < 0 && c(b, "abc") > 0 && c("abc", a) == 0);
    equals<str> e;
    CHECK(e(a, "abc") && e("abc", a) && !e(a, b));
}

static void test_hash()
{
    str a("some key");
    CHECK((u_int)hash_t(a) == hash_string("some key"));
    CHECK((u_int)hash_t(a) == hash_bytes("some key", 8));
    hashfn<str> h;
    CHECK((u_int)h(a) == (u_int)h("some key"));
    CHECK((u_int)h(a) != (u_int)h(str("some kez")));
    CHECK((u_int)h(str("")) == HASHSEED);
    hashfn<const char *> hc;
    CHECK((u_int)hc("some key") == (u_int)h(a));
    hashfn<int> hi;
    CHECK((u_int)hi(42) == 42u);
}

static void test_sharing_and_counts()
{
    str a("shared bytes");
    const char *bytes = a.cstr();
    {
        str b = a, c;
        c = b;
        CHECK(b.cstr() == bytes && c.cstr() == bytes);
        str d(std::move(c));
        CHECK(!c && d.cstr() == bytes);
        d = d;
        CHECK(d.cstr() == bytes);
        a = "replaced";
        CHECK(!strcmp(a.cstr(), "replaced"));
        CHECK(b.cstr() == bytes && !strcmp(b.cstr(), "shared bytes"));
    }
    /* Copies dropped on several threads at once: the counts are atomic (the
     * thread sanitizer and the address sanitizer check this run). */
    str s("across threads");
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++) {
        ts.emplace_back([s] {
            for (int i = 0; i < 20000; i++) {
                str x = s;
                str y(x);
                y = x;
                if (y.len() != 14)
                    abort();
            }
        });
    }
    for (auto &t : ts)
        t.join();
    CHECK(s == "across threads");

    str sw1("one"), sw2("two");
    sw1.swap(sw2);
    CHECK(sw1 == "two" && sw2 == "one");
}

static void test_mstr_substr()
{
    mstr m(10);
    CHECK(m.len() == 10);
    memcpy(m.cstr(), "0123456789", 10);
    m.setlen(4);
    str s(m);
    CHECK(same_bytes(s, "0123", 4));
    CHECK(m.cstr() == NULL && m.len() == 0);

    mstr m2(3);
    char *w = m2;
    memcpy(w, "xyz", 3);
    str t;
    t = m2;
    CHECK(t == "xyz");

    str h("hello world");
    CHECK(substr(h, 6) == "world");
    CHECK(substr(h, 0, 5) == "hello");
    CHECK(substr(h, 4, 100) == "o world");
    str past = substr(h, 11);
    CHECK(past && past.len() == 0);
    CHECK(substr(h, 50, 2) == "");
}

static void test_numbers()
{
    int32_t i32 = 7;
    int64_t i64 = 7;
    uint32_t u32 = 7;
    uint64_t u64 = 7;
    double d = 0;
    CHECK(str("-2147483648").to_int32(&i32) && i32 == INT32_MIN);
    CHECK(!str("2147483648").to_int32(&i32) && i32 == INT32_MIN);
    CHECK(str("ff").to_int32(&i32, 16) && i32 == 255);
    CHECK(str("0x10").to_int32(&i32, 0) && i32 == 16);
    CHECK(!str("12abc").to_int32(&i32));
    CHECK(!str("").to_int32(&i32) && !str().to_int32(&i32));
    CHECK(!str("1\0" "2", 3).to_int32(&i32));
    CHECK(str("9223372036854775807").to_int64(&i64) && i64 == INT64_MAX);
    CHECK(!str("9223372036854775808").to_int64(&i64));
    CHECK(str("4294967295").to_uint32(&u32) && u32 == UINT32_MAX);
    CHECK(!str("4294967296").to_uint32(&u32));
    CHECK(!str("-1").to_uint32(&u32) && !str(" -1").to_uint64(&u64));
    CHECK(str("18446744073709551615").to_uint64(&u64) && u64 == UINT64_MAX);
    CHECK(str("2.5").to_double(&d) && d == 2.5);
    CHECK(!str("2.5x").to_double(&d) && d == 2.5);
}

/* A user type printed through its own strbuf_cat, found by <<. */
struct point {
    int x, y;
};
const strbuf &strbuf_cat(const strbuf &sb, const point &p)
{
    return sb << "(" << p.x << "," << p.y << ")";
}

static void append_by_value(strbuf sb)
{
    sb << "+more";
}

static void test_strbuf_basics()
{
    strbuf sb;
    CHECK(sb.len() == 0 && eq(sb, ""));
    str made(sb);
    CHECK(made && made.len() == 0); /* an empty strbuf gives "", never null */

    sb << "a" << str("b") << 12 << -3;
    CHECK(eq(sb, "ab12-3"));
    CHECK(sb.len() == 6);
    sb.clear();
    CHECK(sb.len() == 0);

    strbuf n;
    n << INT_MIN << " " << UINT_MAX << " " << LONG_MIN << " " << ULONG_MAX << " " << LLONG_MIN
      << " " << ULLONG_MAX << " " << (short)-5 << " " << (unsigned short)7;
    std::ostringstream want;
    want << INT_MIN << " " << UINT_MAX << " " << LONG_MIN << " " << ULONG_MAX << " " << LLONG_MIN
         << " " << ULLONG_MAX << " -5 7";
    CHECK(eq(n, want.str().c_str()));

    /* A char is a small integer, as in libasync. */
    strbuf c;
    c << 'A' << true << (unsigned char)200;
    CHECK(eq(c, "651200"));

    strbuf d;
    d << 2.5 << " " << 1.0f;
    CHECK(eq(d, "2.500000 1.000000"));

    int x = 0;
    strbuf pt;
    pt << &x;
    char want_p[64];
    snprintf(want_p, sizeof want_p, "%p", (void *)&x);
    CHECK(eq(pt, want_p));

    strbuf hx;
    hx << hexdump("\x00\x7f\xff\x10", 4);
    CHECK(eq(hx, "007fff10"));

    strbuf u;
    u << point{3, -4};
    CHECK(eq(u, "(3,-4)"));

    strbuf nulls;
    nulls << str() << (const char *)NULL << "x";
    CHECK(eq(nulls, "x"));

    char mutable_chars[] = "mut";
    strbuf m;
    m << mutable_chars;
    CHECK(eq(m, "mut"));
}

static void test_strbuf_fmt_and_sharing()
{
    strbuf f("%d-%s", 42, "x");
    CHECK(eq(f, "42-x"));
    /* libasync's printf has no floating point: %f prints "f" (padded here)
     * and takes no argument, so %c gets 'z' (sfslite prints the same). */
    f.fmt("|%05.1f|%c", 3.14159, 'z');
    CHECK(eq(f, "42-x|0000f|z"));
    errno = ENOENT;
    strbuf em;
    em.fmt("%m");
    CHECK(eq(em, strerror(ENOENT)));

    std::string longarg(5000, 'L');
    strbuf lf;
    lf << "[";
    lf.fmt("%s", longarg.c_str());
    lf << "]";
    CHECK(eq(lf, ("[" + longarg + "]").c_str()));

    /* Copies share one buffer; strbuf(str) starts a new one. */
    strbuf orig;
    orig << "base";
    append_by_value(orig);
    CHECK(eq(orig, "base+more"));
    strbuf copy(orig);
    copy << "!";
    CHECK(eq(orig, "base+more!"));
    str snapshot = orig;
    orig << "?";
    CHECK(snapshot == "base+more!");

    strbuf self;
    self << "ab";
    self << self;
    self << self;
    CHECK(eq(self, "abababab"));

    strbuf other;
    other << "other";
    self << other;
    CHECK(eq(self, "ababababother") && eq(other, "other"));
    strbuf taker;
    taker << "t:";
    taker.take(other);
    CHECK(eq(taker, "t:other") && other.len() == 0);

    /* Temporaries, and str << x giving a strbuf. */
    str t = strbuf() << "n = " << 5;
    CHECK(t == "n = 5");
    str s("left");
    str t2 = s << "+right";
    CHECK(t2 == "left+right" && s == "left");
    str t3 = s << str("/") << 7;
    CHECK(t3 == "left/7");
    str t4 = s << s;
    CHECK(t4 == "leftleft");

    strbuf bin;
    bin.buf("a\0b", 3);
    bin.copy("\0", 1);
    str bs = bin;
    CHECK(same_bytes(bs, "a\0b\0", 4));
    CHECK(bs.len() == 4);

    strbuf cat;
    cat.cat("x").cat(1).cat(str("y"));
    CHECK(eq(cat, "x1y"));

    /* Many pieces: the buffer grows. */
    strbuf many;
    std::string want;
    for (int i = 0; i < 20000; i++) {
        many << i << ",";
        want += std::to_string(i) + ",";
    }
    CHECK(many.len() == want.size() && eq(many, want.c_str()));
    str s2;
    s2 = many;
    CHECK(s2.len() == want.size());
}

/* printf through a format the compiler cannot check (the formats below are
 * deliberately not glibc's). */
static std::string F(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    strbuf b;
    b.vfmt(fmt, ap);
    va_end(ap);
    str s = b;
    return std::string(s.cstr(), s.len());
}

/* libasync's printf dialect: each expected string is what sfslite's
 * strbuf::fmt prints for the same call. */
static void test_printf_dialect()
{
    CHECK(F("%p", (void *)NULL) == "0x0"); /* glibc: (nil) */
    CHECK(F("%p", (void *)0x1234abcd) == "0x1234abcd");
    CHECK(F("%10p|%-10p|%010p", (void *)NULL, (void *)0x12, (void *)0x12) ==
          "       0x0|0x12      |0x00000012");
    /* no floating point: the letter is printed, the double is not taken */
    CHECK(F("%f %d", 1.5, 7) == "f 7");
    CHECK(F("%e %g %E %G %a %d", 1.5, 2.5, 3.5, 4.5, 5.5, 7) == "e g E G a 7");
    CHECK(F("%Lf %d", (long double)1.5, 8) == "Lf 8");
    /* lengths: hh is h; j, t, n, ', I, $ are unknown letters */
    CHECK(F("%hhd %hd %hhu %hu", 300, 70000, 300, 70000) == "300 4464 300 4464");
    CHECK(F("%jd %td", (intmax_t)5, (ptrdiff_t)6) == "jd td");
    CHECK(F("a%nb", (int *)NULL) == "anb");
    CHECK(F("%w %y %k|%1$d", 3) == "w y k|$d");
    CHECK(F("%'d %Id", 12345, 6) == "'d Id");
    CHECK(F("%zu %zd %zx", (size_t)5, (ssize_t)-6, (size_t)255) == "5 -6 ff");
    CHECK(F("%lld %llu %qd %llx", -5LL, 6ULL, -7LL, 255ULL) == "-5 6 -7 ff");
    CHECK(F("%ld %lu %lx %lo", -5L, 6UL, 255UL, 8UL) == "-5 6 ff 10");
    CHECK(F("%u|%+u|% u|%D|%U|%O", 4294967295u, 5u, 5u, 9L, 10UL, 8UL) == "4294967295|5|5|9|10|10");
    CHECK(F("%d %ld %lld", INT_MIN, LONG_MIN, LLONG_MIN) ==
          "-2147483648 -9223372036854775808 -9223372036854775808");
    CHECK(F("%hx %hhx %ho", -1, -1, -1) == "ffff ffff 177777");
    /* %% takes a width; '0' pads strings and characters with zeros */
    CHECK(F("100%% %5%| %-5%|") == "100%     %| %    |");
    CHECK(F("%05s|%-05s|%5s|%.2s|%5.1s|%.0s|", "ab", "cd", "ef", "ghij", "kl", "mn") ==
          "000ab|cd   |   ef|gh|    k||");
    CHECK(F("%c|%5c|%-3c|%03c|", 'a', 'b', 'c', 'd') == "a|    b|c  |00d|");
    CHECK(F("%+d|% d|%+ d|% +d|%05d|%-5d|%.3d|%5.3d|%05.3d|%+05d|%.0d|%0-5d|", 5, 5, 5, 5, -5,
            -5, 5, 5, 5, 5, 0, 3) == "+5| 5|+5|+5|-0005|-5   |005|  005|  005|+0005||3    |");
    CHECK(F("%#x|%#X|%#o|%#o|%x|%X|%#x|%#08x|%08x|%#.5x|%.0x|%#.0o", 255, 255, 8, 0, 255, 255, 0,
            255, 255, 255, 0, 0) == "0xff|0XFF|010|0|ff|FF|0|0x0000ff|000000ff|0x000ff||");
    CHECK(F("%*d|%-*d|%*d|%.*d|%.*s|", 5, 1, 5, 2, -5, 3, 3, 4, 2, "xyz") ==
          "    1|2    |3    |004|xy|");
    errno = ENOENT;
    CHECK(F("%m|%10.3m|") == std::string(strerror(ENOENT)) + "|" + std::string(7, ' ') +
                                 std::string(strerror(ENOENT), 3) + "|");
    CHECK(F("abc%") == "abc");
    /* a format byte >= 0x80 is read as a '%' (here it eats the 0xc3) */
    CHECK(F("h\xc3\xa9llo %d", 5) == "h\xa9llo 5");
    /* libasync panicked on %s of NULL; here it prints (null) */
    CHECK(F("%s|", (const char *)NULL) == "(null)|");

    /* strbuf << double is glibc's %f, cut at 127 bytes */
    str d = strbuf() << 1.5 << " " << 1e20 << " " << -0.0;
    CHECK(d == "1.500000 100000000000000000000.000000 -0.000000");
    str big = strbuf() << 1e200;
    char whole[400];
    CHECK(snprintf(whole, sizeof whole, "%f", 1e200) > 200);
    CHECK(big.len() == 127 && !memcmp(big.cstr(), whole, 127));
    str chars = strbuf() << 'a' << (signed char)'b' << (unsigned char)'c' << true << (short)-3;
    CHECK(chars == "9798991-3");
    str ptrs = strbuf() << (void *)NULL << " " << (const char *)"cs" << " " << (int *)NULL;
    CHECK(ptrs == "0x0 cs 0x0");
}

static void test_streams()
{
    std::ostringstream os;
    strbuf sb;
    sb << "sb";
    os << str("a\0b", 3) << str() << sb;
    CHECK(os.str() == std::string("a\0bsb", 5));

    std::string err;
    int st = ct_fork(
        [] {
            setprogname("strtest");
            strbuf b;
            b << "buf";
            warn << str("stream ") << b << " " << 3 << "\n";
        },
        &err);
    CHECK(ct_exited(st, 0));
    CHECK(err == "strtest: stream buf 3\n");
}

static void test_suio()
{
    suio u;
    CHECK(u.resid() == 0 && u.iovcnt() == 0 && u.linelen() == 0);
    u.copy("line one\nline", 13);
    u.fill('!', 3);
    CHECK(u.resid() == 16 && u.iovcnt() == 1);
    CHECK(u.linelen() == 9);
    char out[32] = {0};
    CHECK(u.copyout(out, 4) == 4 && !memcmp(out, "line", 4));
    CHECK(u.resid() == 16);
    u.rembytes(9);
    CHECK(u.resid() == 7 && u.linelen() == 0);
    CHECK(str(u) == "line!!!");
    char *sp = u.getspace(3);
    memcpy(sp, "xyz", 3);
    u.print(sp, 3);
    CHECK(str(u) == "line!!!xyz");
    CHECK(u.copyout(out) == 10);
    const iovec *v = u.iov();
    CHECK(v->iov_len == 10 && !memcmp(v->iov_base, "line!!!xyz", 10));
    u.rembytes(10);
    CHECK(u.resid() == 0);

    /* The suio_ helpers. */
    suio l;
    suio_print(&l, str("first\r\nsecond\nthi"));
    suio_uprintf(&l, "rd %d\n", 3);
    suio_print(&l, "x", 1);
    suio_fill(&l, '-', 2);
    CHECK(suio_getline(&l) == "first");
    CHECK(suio_getline(&l) == "second");
    CHECK(suio_getline(&l) == "third 3");
    CHECK(!suio_getline(&l) && l.resid() == 3); /* "x--": no whole line */
    suio_copy(&l, "\n\n", 2);
    str empty_line = suio_getline(&l);
    CHECK(empty_line == "x--");
    empty_line = suio_getline(&l);
    CHECK(empty_line && empty_line.len() == 0 && l.resid() == 0);
    suio_print(&l, str("a\0b", 3));
    char *flat = suio_flatten(&l);
    CHECK(!memcmp(flat, "a\0b", 3));
    free(flat);
    std::string longer(1000, 'z');
    suio_uprintf(&l, "%s", longer.c_str());
    CHECK(l.resid() == 1003);

    /* output() to a non-blocking pipe: drains what fits, 0 at EAGAIN, and
     * input() reads it back. */
    int p[2];
    CHECK(pipe(p) == 0);
    make_async(p[1]);
    make_async(p[0]);
    strbuf big;
    std::string pattern;
    for (int i = 0; i < 200000; i++)
        pattern += (char)('a' + i % 26);
    big << str(pattern.data(), pattern.size());
    suio *bu = big.tosuio();
    CHECK(bu->output(p[1]) == 1);
    size_t left = bu->resid();
    CHECK(left > 0 && left < pattern.size()); /* a pipe holds less than 200 KB */
    CHECK(bu->output(p[1]) == 0);
    suio in;
    while (in.resid() < pattern.size() - left) {
        int n = in.input(p[0]);
        CHECK(n > 0);
    }
    CHECK(in.resid() == pattern.size() - left);
    CHECK(!memcmp(in.iov()->iov_base, pattern.data(), in.resid()));
    CHECK(in.input(p[0]) == -1 && errno == EAGAIN);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    CHECK(bu->output(p[1]) == -1 && errno == EPIPE);
    close(p[1]);
}

int main()
{
    ct_watchdog(60);
    test_null_and_empty();
    test_bytes_and_nuls();
    test_compare();
    test_hash();
    test_sharing_and_counts();
    test_mstr_substr();
    test_numbers();
    test_strbuf_basics();
    test_strbuf_fmt_and_sharing();
    test_printf_dialect();
    test_streams();
    test_suio();
    printf("compat str: ok\n");
    return 0;
}
