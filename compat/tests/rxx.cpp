/* SPDX-License-Identifier: MIT */
/*
 * rxx.cpp: libasync's regular expressions (rxx.h) on PCRE2: search and
 * match, groups, options, errors, split and join, copies on several threads.
 */
#include "async.h"
#include "rxx.h"

#include <thread>
#include <vector>

#include <signal.h>

#include "ctest.h"

static void test_search_and_groups()
{
    rxx kv("^(\\w+)\\s*=\\s*(.*)$");
    CHECK(kv.search("name = value here"));
    CHECK(kv.success());
    CHECK(kv[0] == "name = value here" && kv[1] == "name" && kv[2] == "value here");
    CHECK(kv.start(1) == 0 && kv.end(1) == 4 && kv.len(2) == 10 && kv.start(2) == 7);
    CHECK(!kv[3] && kv.start(3) == -1 && kv.len(3) == -1); /* no such group */
    CHECK(!kv.search("= no key"));
    CHECK(!kv.success() && !kv[0] && kv.start(0) == -1);

    rxx digits("(\\d+)(?:px)?");
    str s("width: 120px;");
    rxx::matchresult m = digits.search(s);
    CHECK(m && str(m) == "120px" && m[1] == "120");
    CHECK(digits.start(0) == 7);

    /* A group that takes no part is a null str; an empty one is "". */
    rxx opt("a(x)?(y*)b");
    CHECK(opt.search("ab"));
    CHECK(!opt[1] && opt.start(1) == -1 && opt.len(1) == -1);
    CHECK(opt[2] && opt[2].len() == 0 && opt.len(2) == 0);

    rxx lazy("<(.+?)>");
    CHECK(lazy.search("<a><b>") && lazy[1] == "a");
    rxx backref("(\\w)\\1");
    CHECK(backref.search("abccd") && backref[0] == "cc");

    /* Embedded NUL bytes are matched like any other byte. */
    str bin("ab\0cd", 5);
    rxx nul("b\\x00c");
    CHECK(nul.search(bin) && nul.start(0) == 1 && nul[0] == str("b\0c", 3));
    CHECK(nul.search_cstr("xb\0c", 4) && nul.start(0) == 1 && nul[0].len() == 3);

    /* Empty and null subjects. */
    rxx any("x*");
    CHECK(any.search("") && any[0] == "");
    CHECK(any.search(str()) && any.len(0) == 0);
}

static void test_match_and_operators()
{
    rxx num("[0-9]+");
    CHECK(num.match("12345"));
    CHECK(!num.match("12345a") && !num.success());
    CHECK(!num.match("a12345"));
    CHECK(num.search("a12345") && num[0] == "12345");
    CHECK(num.match_cstr("123xyz", 3) && num[0] == "123");
    /* libasync's rule: the first anchored match must cover the subject. */
    rxx alt("a|ab");
    CHECK(!alt.match("ab"));
    CHECK(alt.match("a"));

    str line("GET /index.html HTTP/1.1");
    rxx req("^(\\S+) (\\S+) HTTP/(\\d)\\.(\\d)$");
    if (rxx::matchresult r = line / req) {
        CHECK(r[1] == "GET" && r[2] == "/index.html" && r[4] == "1");
    } else {
        CHECK(!"request line did not match");
    }
    CHECK(str(line / "in(de)x")  == "index");
    CHECK((line / "IN(DE)X" / "i")[1] == "de");
    CHECK(!(line / "IN(DE)X"));
    CHECK(line / "^GET");

    /* clear() forgets the last match. */
    CHECK(num.search("7"));
    num.clear();
    CHECK(!num.success() && !num[0]);
}

static void test_options()
{
    rxx ci("hello", "i");
    CHECK(ci.search("Say HeLLo"));
    rxx ml("^b$", "m");
    CHECK(ml.search("a\nb\nc") && ml.start(0) == 2);
    rxx single("^b$");
    CHECK(!single.search("a\nb\nc"));
    rxx dot("a.b", "s");
    CHECK(dot.search("a\nb"));
    CHECK(!rxx("a.b").search("a\nb"));
    rxx ext("a b # comment\n c", "x");
    CHECK(ext.match("abc"));
    rxx ungreedy("<(.+)>", "U");
    CHECK(ungreedy.search("<a><b>") && ungreedy[1] == "a");
    rxx anchored("b", "^");
    CHECK(!anchored.search("ab") && anchored.search("ba"));
    rxx studied("(foo|bar)+", "S");
    CHECK(studied.search("xxfoobarfoo") && studied[0] == "foobarfoo");
    rxx utf("^.$", "8");
    CHECK(utf.search("\xc3\xa9")); /* one code point, two bytes */
    CHECK(!rxx("^.$").search("\xc3\xa9"));
    rxx several("HELLO.WORLD", "is");
    CHECK(several.search("hello\nworld"));
}

static void test_errors()
{
    rrxx bad("a(b");
    CHECK(bad.geterr() && strstr(bad.geterr().cstr(), "invalid regular expression"));
    CHECK(!bad.search("ab") && !bad.success());
    CHECK(bad.compile("a(b)"));
    CHECK(!bad.geterr() && bad.search("xab") && bad[1] == "b");
    CHECK(!bad.compile("[z-a]"));
    CHECK(bad.geterr());
    rrxx badopt("a", "q");
    CHECK(badopt.geterr() && strstr(badopt.geterr().cstr(), "option 'q'"));
    rrxx fresh;
    CHECK(fresh.geterr() == "uninitialized" && !fresh.search("a"));
    rrxx good(str("g+"));
    CHECK(!good.geterr() && good.search("egg") && good[0] == "gg");

    /* rxx with a bad pattern is fatal, as libasync's panic. */
    std::string err;
    int st = ct_fork(
        [] {
            signal(SIGABRT, SIG_DFL);
            rxx r("(unclosed");
            (void)r;
        },
        &err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(ct_contains(err, "PANIC") && ct_contains(err, "invalid regular expression"));
    CHECK(ct_contains(err, "(unclosed"));

    /* A failure other than "no match" (here an option bit pcre2_match()
     * refuses; runaway backtracking would give the match limit's error the
     * same way, only slower): a warning, and no match. */
    st = ct_fork(
        [] {
            rxx r("a");
            bool ok = r._exec("a", 1, 1 << 20);
            _exit(!ok && !r.success() && r.errcode() < 0 ? 0 : 3);
        },
        &err);
    CHECK(ct_exited(st, 0));
    CHECK(ct_contains(err, "pcre2_match error"));
}

static void test_split_join()
{
    vec<str> v;
    CHECK(split(&v, rxx(","), "a,b,,c") == 4);
    CHECK(v.size() == 4 && v[0] == "a" && v[1] == "b" && v[2] == "" && v[3] == "c");
    CHECK(split(&v, rxx("\\s+"), "one  two\tthree") == 3 && v[2] == "three");
    /* A trailing separator: no empty last piece unless asked for. */
    CHECK(split(&v, rxx(","), "a,b,") == 2 && v.size() == 2 && v[1] == "b");
    CHECK(split(&v, rxx(","), "a,b,", (size_t)-1, true) == 3 && v[2] == "");
    /* lim: at most lim pieces, the last one the rest. */
    CHECK(split(&v, rxx(","), "a,b,c,d", 2) == 2 && v[0] == "a" && v[1] == "b,c,d");
    CHECK(split(&v, rxx(","), "a,b", 0) == 0 && v.empty());
    CHECK(split(NULL, rxx(","), "a,b,c") == 3);
    CHECK(split(&v, rxx(","), "") == 0 && v.empty());
    CHECK(split(&v, rxx(","), "", (size_t)-1, true) == 1 && v[0] == "");
    CHECK(split(&v, rxx(","), "no separator") == 1 && v[0] == "no separator");
    /* A separator that matches no bytes still moves on one byte. */
    CHECK(split(&v, rxx("x*"), "ab") == 2 && v[0] == "" && v[1] == "");
    /* Separators with groups and anchors are searched in the rest. */
    CHECK(split(&v, rxx("^-"), "-a-b") == 2 && v[0] == "" && v[1] == "a-b");

    vec<str> parts;
    parts.push_back("x");
    parts.push_back("y");
    parts.push_back("z");
    CHECK(join(", ", parts) == "x, y, z");
    vec<int> nums;
    for (int i = 1; i <= 3; i++)
        nums.push_back(i);
    CHECK(join("+", nums) == "1+2+3");
    CHECK(join(",", vec<str>()) == "");
}

/* Copies share the compiled pattern and match on several threads at once;
 * each copy has its own results. */
static void test_copies_threads()
{
    rxx proto("^item-(\\d+)$");
    rxx copy(proto);
    CHECK(copy.search("item-5") && copy[1] == "5");
    CHECK(!proto.success()); /* results are per object */
    rxx assigned("nothing");
    assigned = copy;
    CHECK(!assigned.success() && assigned.search("item-77") && assigned[1] == "77");
    assigned = assigned;
    CHECK(assigned.search("item-8"));

    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int t = 0; t < 4; t++) {
        ts.emplace_back([proto, t, &bad]() mutable {
            for (int i = 0; i < 3000; i++) {
                str s = strbuf() << "item-" << (t * 10000 + i);
                rxx mine(proto);
                if (!mine.match(s) || mine[1] != str(strbuf() << (t * 10000 + i)))
                    bad++;
                if (proto.search("nope"))
                    bad++;
            }
        });
    }
    for (auto &t : ts)
        t.join();
    CHECK(bad == 0);
}

int main()
{
    ct_watchdog(60);
    test_search_and_groups();
    test_match_and_operators();
    test_options();
    test_errors();
    test_split_join();
    test_copies_threads();
    printf("compat rxx: ok\n");
    return 0;
}
