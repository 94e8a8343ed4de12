/* SPDX-License-Identifier: MIT */
/*
 * err.cpp: err.h as a libasync program uses it (reached through async.h):
 * warn/warnx/warnt/fatal/panic as strbufs that take the program's own
 * strbuf_cat overloads, their prefixes and endings, progname/progdir/
 * setprogname/setprogpid, errfd, fatalhook, fatal_no_destruct,
 * _err_output/err_reset, sfs_warn, vwarn, traceobj, assert. The expected
 * bytes are what sfslite's libasync prints for the same statements.
 */
#include "async.h"

#include <string>
#include <thread>
#include <vector>

#include "ctest.h"

/* A program's own type, printed through its strbuf_cat overload... */
struct point {
    int x, y;
};
const strbuf &strbuf_cat(const strbuf &sb, const point &p)
{
    return sb << "(" << p.x << "," << p.y << ")";
}
/* ...also from a namespace of its own (found by argument-dependent lookup). */
namespace geo {
struct segment {
    point a, b;
};
const strbuf &strbuf_cat(const strbuf &sb, const segment &s)
{
    return sb << s.a << "-" << s.b;
}
} // namespace geo
enum color { RED, GREEN };

static std::string S(const strbuf &b)
{
    str s = b;
    return std::string(s.cstr(), s.len());
}

/* A function taking a strbuf, given warn itself. */
static void describe(const strbuf &sb, int n)
{
    sb << "n is " << n;
}

/* Compiles only if the compiler knows fatal does not return (-Werror builds
 * reject a missing return otherwise). */
static int must_return(int x)
{
    if (x)
        return x;
    fatal << "never\n";
}

static void test_streams_and_hooks()
{
    std::string err;
    int st = ct_fork(
        [] {
            warn << "no name yet\n";
            setprogname("/usr/local/bin/lt-errtest");
            warn << "pt " << point{1, 2} << " seg " << geo::segment{{0, 0}, {3, 4}} << " c "
                 << GREEN << " ch " << 'a' << " null " << str() << " p " << (void *)NULL
                 << " s " << str("x") << "\n";
            warn("fmt %p %d%% %s\n", (void *)NULL, 5, "five");
            warn("a ") << point{7, 8} << "\n";
            warnx << "x stream " << point{5, 6} << "\n";
            warnx("x fmt %d\n", 9);
            warn << "no newline";
            warn << "|\n";
            describe(warn, 3);
            warn << "\n";
            warn.fmt("member fmt %u\n", 4u);
            (void)must_return(1);
        },
        &err);
    CHECK(ct_exited(st, 0));
    CHECK(err == "no name yet\n"
                 "errtest: pt (1,2) seg (0,0)-(3,4) c 1 ch 97 null (null) p 0x0 s x\n"
                 "errtest: fmt 0x0 5% five\n"
                 "errtest: a (7,8)\n"
                 "x stream (5,6)\n"
                 "x fmt 9\n"
                 "errtest: no newlineerrtest: |\n"
                 "errtest: n is 3errtest: \n"
                 "errtest: member fmt 4\n");
}

static void vboth(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vboth(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
    va_start(ap, fmt);
    vwarnx(fmt, ap);
    va_end(ap);
}

static void test_names()
{
    std::string err;
    int st = ct_fork(
        [] {
            setprogname("/a/b/lt-tool");
            CHECK(progname == "tool" && progdir == "/a/b/");
            setprogname("plain");
            CHECK(progname == "plain" && !progdir);
            char argv0[] = "./prog";
            setprogname(argv0); /* char *, as main's argv */
            CHECK(progname == "prog" && progdir == "./");
            vboth("v %d\n", 1);
            sfs_warn("sfs %d\n", 2); /* libasync printed no ": " here */
            sfs_warnx("sfsx %d\n", 3);
            setprogpid(42);
            warn << "pid\n";
            warnx << "x pid\n";
            progname = "renamed";
            warn << "renamed\n";
            warnt << "timed\n";
        },
        &err);
    CHECK(ct_exited(st, 0));
    const char *want = "prog: v 1\n"
                       "v 1\n"
                       "progsfs 2\n"
                       "sfsx 3\n"
                       "prog[42]: pid\n"
                       "x pid\n"
                       "renamed[42]: renamed\n";
    CHECK(err.compare(0, strlen(want), want) == 0);
    /* warnt: "seconds.microseconds " first */
    std::string t = err.substr(strlen(want));
    size_t dot = t.find('.');
    CHECK(dot != std::string::npos && dot > 0 && t.size() > dot + 8 && t[dot + 7] == ' ');
    for (size_t i = 0; i < dot + 7; i++)
        CHECK(i == dot || isdigit((unsigned char)t[i]));
    CHECK(t.substr(dot + 8) == "renamed[42]: timed\n");
}

static void hook_note()
{
    ssize_t r = write(2, "hook\n", 5);
    (void)r;
}
static void at_exit_note()
{
    ssize_t r = write(2, "atexit\n", 7);
    (void)r;
}

static void test_fatal_and_panic()
{
    std::string err;
    int st = ct_fork(
        [] {
            setprogname("p");
            fatal << "bad " << point{1, 1} << "\n";
        },
        &err);
    CHECK(ct_exited(st, 1) && err == "p: fatal: bad (1,1)\n");

    st = ct_fork(
        [] {
            setprogname("p");
            fatal("bad %d", 2);
        },
        &err);
    CHECK(ct_exited(st, 1) && err == "p: fatal: bad 2"); /* no newline added */

    /* fatalhook runs after the line; exit() runs atexit handlers... */
    st = ct_fork(
        [] {
            setprogname("p");
            atexit(at_exit_note);
            fatalhook = hook_note;
            fatal << "hooked\n";
        },
        &err);
    CHECK(ct_exited(st, 1) && err == "p: fatal: hooked\nhook\natexit\n");
    /* ...and fatal_no_destruct makes it _exit(). */
    st = ct_fork(
        [] {
            atexit(at_exit_note);
            fatal_no_destruct = true;
            fatal << "quick\n";
        },
        &err);
    CHECK(ct_exited(st, 1) && err == "fatal: quick\n");

    /* panic: the place, then the message, then abort(). */
    int line = __LINE__; st = ct_fork([] { setprogname("p"); panic << "boom\n"; }, &err);
    std::string place = S(strbuf("%s:%d", __FILE__, line));
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(err == "p: PANIC: " + place + "\nboom\n");
    line = __LINE__; st = ct_fork([] { panic("boom %d\n", 3); }, &err);
    place = S(strbuf("%s:%d", __FILE__, line));
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && err == "PANIC: " + place + "\nboom 3\n");

    /* assert: never compiled out, a panic with the expression. */
    line = __LINE__; st = ct_fork([] { int two = 2; assert(two == 3); }, &err);
    place = S(strbuf("%s:%d", __FILE__, line));
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(err == "PANIC: " + place + "\nassertion \"two == 3\" failed at " + place + "\n");
}

static std::string *g_captured;
static int g_flags_seen;
static void capture(suio *u, int flags)
{
    g_captured->append(str(*u).cstr(), u->resid());
    u->clear();
    g_flags_seen |= 1 << flags;
}
static int g_reset_hook_ran;
static void reset_hook()
{
    g_reset_hook_ran++;
}

static void test_outputs()
{
    /* errfd */
    int p[2];
    CHECK(pipe(p) == 0);
    errfd = p[1];
    warn << "to the pipe " << 1 << "\n";
    errfd = 2;
    close(p[1]);
    char buf[64] = {0};
    CHECK(read(p[0], buf, sizeof buf) == 14 && !strcmp(buf, "to the pipe 1\n"));
    close(p[0]);

    /* _err_output: the program's own, until err_reset() */
    std::string got;
    g_captured = &got;
    _err_output = capture;
    _err_reset_hook = reset_hook;
    warn << "one\n";
    warnx("two %d\n", 2);
    CHECK(got == "one\ntwo 2\n" && g_flags_seen == ((1 << 0) | (1 << warnobj::xflag)));
    err_reset();
    CHECK(_err_output == _err_output_sync && g_reset_hook_ran == 1 && !_err_reset_hook);
    err_reset();
    CHECK(g_reset_hook_ran == 1);

    /* fatal with an _err_output that returns: abort(), as libasync */
    std::string err;
    int st = ct_fork(
        [] {
            static std::string sink;
            g_captured = &sink;
            _err_output = capture;
            fatal << "returns\n";
        },
        &err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && err.empty());

    /* errno is kept across a line (and %m reads it) */
    st = ct_fork(
        [] {
            errno = EAGAIN;
            warn("m=%m\n");
            CHECK(errno == EAGAIN);
            warn << "e=" << errno << "\n";
            CHECK(errno == EAGAIN);
        },
        &err);
    CHECK(ct_exited(st, 0) && err == S(strbuf("m=%s\ne=%d\n", strerror(EAGAIN), EAGAIN)));
}

static void test_trace()
{
    std::string err;
    int st = ct_fork(
        [] {
            setprogname("t");
            {
                traceobj tr(2, "pre: ");
                tr(1) << "shown " << point{1, 2} << "\n";
                traceobj quiet(2, "pre: ");
                quiet(3) << "hidden\n";
                traceobj never(2); /* no threshold given: prints nothing */
                never << "hidden too\n";
            }
            traceobj(5, "tp: ")(1, "fmt %d\n", 4);
        },
        &err);
    CHECK(ct_exited(st, 0) && err == "t: pre: shown (1,2)\nt: tp: fmt 4\n");
}

/* Each line is one write: lines from four threads at once never mix. */
static void test_one_write_per_line()
{
    std::string err;
    int st = ct_fork(
        [] {
            setprogname("w");
            std::vector<std::thread> ts;
            for (int t = 0; t < 4; t++)
                ts.emplace_back([t] {
                    for (int i = 0; i < 500; i++)
                        warn << "thread " << t << " line " << i << " "
                             << str(std::string(200, (char)('a' + t)).c_str()) << "\n";
                });
            for (auto &t : ts)
                t.join();
        },
        &err);
    CHECK(ct_exited(st, 0));
    int lines = 0;
    size_t at = 0;
    while (at < err.size()) {
        size_t nl = err.find('\n', at);
        CHECK(nl != std::string::npos);
        std::string l = err.substr(at, nl - at);
        int t = -1, i = -1, n = 0;
        CHECK(sscanf(l.c_str(), "w: thread %d line %d %n", &t, &i, &n) == 2);
        CHECK(t >= 0 && t < 4 && l.substr((size_t)n) == std::string(200, (char)('a' + t)));
        lines++;
        at = nl + 1;
    }
    CHECK(lines == 2000);
}

int main()
{
    ct_watchdog(60);
    test_streams_and_hooks();
    test_names();
    test_fatal_and_panic();
    test_outputs();
    test_trace();
    test_one_write_per_line();
    printf("compat err: ok\n");
    return 0;
}
