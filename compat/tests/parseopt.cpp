/* SPDX-License-Identifier: MIT */
/*
 * parseopt.cpp: parseopt.h. parseargs' rules (comments only at a line's
 * start, quotes, escapes, continuations, empty arguments, line numbers, a
 * descriptor instead of a file), its errors (fatal by default, to a
 * subclass's error() otherwise), convertint/strtoi64/mytolower, and conftab:
 * every kind of setting, defaults, bounds, unknown names, settings given
 * twice, the messages and report(). The expected values are those of
 * sfslite's own build (this file also builds against it).
 */
#include "async.h"
#include "parseopt.h"

#include <fcntl.h>

#include <string>
#include <vector>

#include "ctest.h"

static std::string g_dir;

static str write_file(const char *name, const char *text)
{
    std::string path = g_dir + "/" + name;
    int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    return str(path.c_str());
}

static std::vector<std::string> args_of(const vec<str> &av)
{
    std::vector<std::string> v;
    for (size_t i = 0; i < av.size(); i++)
        v.push_back(std::string(av[i].cstr(), av[i].len()));
    return v;
}

typedef std::vector<std::string> sv;

static void test_parseargs()
{
    str f = write_file("args.conf", "# a comment line\n"
                                    "first a b\t  c\n"
                                    "  # not a comment here\n"
                                    "\n"
                                    "second \"quoted  arg\" \"\" x\\ y\\\"z\n"
                                    "third cont\\\n"
                                    "inued arg\\\n"
                                    "   2 \"multi\n"
                                    "line\"\n"
                                    "\\#notcomment # trailing\n"
                                    "#last comment\n"
                                    "last");
    parseargs pa(f);
    vec<str> av;
    int line = -1;
    CHECK(pa.getline(&av, &line));
    CHECK(line == 2 && args_of(av) == (sv{"first", "a", "b", "c"}));
    CHECK(pa.getline(&av, &line));
    CHECK(line == 3 && args_of(av) == (sv{"#", "not", "a", "comment", "here"}));
    CHECK(pa.getline(&av, &line));
    CHECK(line == 5 && args_of(av) == (sv{"second", "quoted  arg", "", "x y\"z"}));
    CHECK(pa.getline(&av, &line));
    CHECK(line == 6 && args_of(av) == (sv{"third", "continued", "arg2", "multi\nline"}));
    /* a newline inside quotes is not counted: line 10 of the file says 9 */
    CHECK(pa.getline(&av, &line));
    CHECK(line == 9 && args_of(av) == (sv{"#notcomment", "#", "trailing"}));
    CHECK(pa.getline(&av, &line));
    CHECK(line == 11 && args_of(av) == (sv{"last"}));
    CHECK(!pa.getline(&av, &line));
    CHECK(av.size() == 0);
    CHECK(!pa.getline(&av));

    /* from a descriptor; the name is only for messages */
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(write(p[1], "k v\n", 4) == 4);
    close(p[1]);
    parseargs pp("(pipe)", p[0]);
    CHECK(pp.getline(&av, &line) && line == 1 && args_of(av) == (sv{"k", "v"}));
    CHECK(!pp.getline(&av, &line));
    CHECK(fcntl(p[0], F_GETFD) < 0 && errno == EBADF); /* closed once read */

    /* an empty file */
    parseargs pe(write_file("empty.conf", ""));
    CHECK(!pe.getline(&av, &line));
}

/* A subclass that keeps its errors instead of exiting. */
static std::vector<std::string> g_errors;
class quiet_args : public parseargs {
protected:
    void error(str msg) override
    {
        g_errors.push_back(std::string(msg.cstr(), msg.len()) + "@" + std::to_string(lineno));
    }

public:
    quiet_args(str f) : parseargs(f) {}
};

static void test_errors()
{
    vec<str> av;
    g_errors.clear();
    quiet_args q(write_file("bs.conf", "ok 1\nbad arg\\"));
    CHECK(q.getline(&av) && args_of(av) == (sv{"ok", "1"}));
    CHECK(q.getline(&av) && args_of(av) == (sv{"bad"}));
    CHECK(g_errors == (sv{"invalid '\\' before end of file@2"}));
    CHECK(!q.getline(&av));

    g_errors.clear();
    quiet_args q2(write_file("quote.conf", "a \"open"));
    CHECK(q2.getline(&av) && args_of(av) == (sv{"a", "open"}));
    CHECK(g_errors == (sv{"closing '\"' missing@1"}));

    /* by default, fatal: the file and line, exit status 1 */
    std::string err;
    str qf = write_file("quote2.conf", "\n\nx \"y");
    int st = ct_fork([qf] {
        setprogname("popt");
        parseargs pa(qf);
        vec<str> v;
        pa.getline(&v);
        _exit(0);
    }, &err);
    CHECK(ct_exited(st, 1));
    /* (libasync's fatal says "popt: fatal: ...") */
    std::string want = std::string(qf.cstr()) + ":3: closing '\"' missing\n";
    CHECK(err.compare(0, 6, "popt: ") == 0 && err.size() > want.size() &&
          err.compare(err.size() - want.size(), want.size(), want) == 0);

    st = ct_fork([] {
        setprogname("popt");
        parseargs pa("/nonexistent/file.conf");
        _exit(0);
    }, &err);
    CHECK(ct_exited(st, 1));
    want = "/nonexistent/file.conf: No such file or directory\n";
    CHECK(err.compare(0, 6, "popt: ") == 0 && err.size() > want.size() &&
          err.compare(err.size() - want.size(), want.size(), want) == 0);
}

static void test_numbers()
{
    int i = 0;
    CHECK(convertint("42", &i) && i == 42);
    CHECK(convertint("-0x10", &i) && i == -16);
    CHECK(convertint("010", &i) && i == 8);
    CHECK(convertint("010", &i, 10) && i == 10);
    CHECK(convertint(" 5", &i) && i == 5);
    i = 77;
    CHECK(!convertint("", &i) && i == 77);
    CHECK(!convertint("12a", &i) && i == 77);
    CHECK(!convertint("5 ", &i) && i == 77);
    u_int8_t b = 0;
    CHECK(convertint("300", &b) && b == 44); /* converted, not range-checked */
    int64_t big = 0;
    CHECK(convertint(str("9223372036854775807"), &big) && big == INT64_MAX);
    CHECK(convertint(str("-9223372036854775808"), &big) && big == INT64_MIN);
    char *end;
    CHECK(strtoi64("0x7fz", &end, 0) == 127 && *end == 'z');
    CHECK(strtoi64("99999999999999999999", &end, 10) == INT64_MAX && *end == '\0');
    CHECK(mytolower(str("MiXeD Case 42")) == "mixed case 42");
    char buf[16];
    mytolower(buf, "ABC");
    CHECK(!strcmp(buf, "abc"));
}

static vec<str> g_hook_args;
static str g_hook_loc;
static void hook(vec<str> av, str loc, bool *err)
{
    g_hook_args = av;
    g_hook_loc = loc;
    CHECK(err && !*err);
}
static str g_first;
static void first(str s)
{
    g_first = s;
}

struct settings {
    int port = 0, limit = 0;
    u_int16_t small = 0;
    str name, title;
    str once = ""; /* libasync's add_check reads its length: not a null str */
    bool debug = false, quiet = false;
    double ratio = 0;
};

static void fill(conftab &ct, settings &s)
{
    ct.add("Port", &s.port, 1, 65535)
        .add("Limit", &s.limit, 0, 100, 50)
        .add("Small", &s.small, 1, 1000)
        .add("Name", &s.name)
        .add_check("Once", &s.once)
        .add("Title", &s.title, "untitled")
        .add("Debug", &s.debug)
        .add("Quiet", &s.quiet, true)
        .add("Ratio", &s.ratio, 0.0, 1.0)
        .add("Hook", wrap(hook))
        .ads("First", wrap(first))
        .ignore("Old");
}

static void test_conftab()
{
    str good = write_file("good.conf", "port 8080\n"
                                       "SMALL 999 # a comment after the value\n"
                                       "Name \"Some Name\"\n"
                                       "once x\n"
                                       "debug 1\n"
                                       "ratio 0.25\n"
                                       "hook a b c\n"
                                       "first one two\n"
                                       "old whatever it says\n");
    settings s;
    conftab ct;
    fill(ct, s);
    conftab::status_t st = conftab::ERROR;
    CHECK(ct.run(good, CONFTAB_APPLY_DEFAULTS, -1, &st));
    CHECK(st == conftab::OK);
    CHECK(s.port == 8080 && s.small == 999 && s.name == "Some Name" && s.once == "x");
    CHECK(s.debug && s.ratio == 0.25);
    CHECK(s.limit == 50 && s.quiet && s.title == "untitled"); /* defaults */
    CHECK(args_of(g_hook_args) == (sv{"hook", "a", "b", "c"}));
    CHECK(g_hook_loc == strbuf() << good << ":7");
    CHECK(g_first == "one");

    vec<str> rep;
    ct.report(&rep);
    CHECK(args_of(rep) == (sv{"'Port'   ->  8080",
                              "'Limit'  ->  50 (by default)",
                              "'Small'  ->  999",
                              "'Name'   ->  \"Some Name\"",
                              "'Once'   ->  \"x\"",
                              "'Title'  ->  \"untitled\" (by default)",
                              "'Debug'  ->  True",
                              "'Quiet'  ->  True (by default)",
                              "'Ratio'  ->  0.250000",
                              "'Hook'   ->  \"hook a b c\"",
                              "'First'  ->  (null)",
                              "'Old'    ->  IGNORED"}));

    /* only an unknown name: UNKNOWN */
    settings s2;
    conftab ct2;
    fill(ct2, s2);
    CHECK(!ct2.run(write_file("unknown.conf", "Port 1\nColour blue\n"), 0, -1, &st));
    CHECK(st == conftab::UNKNOWN && s2.port == 1);
    vec<str> rep2;
    ct2.report(&rep2);
    CHECK(rep2.size() == 12 && rep2[1] == "'Limit'  ->  (not set)" && s2.limit == 0);

    /* bad values: ERROR, the value left as it was; a null file reads nothing */
    settings s3;
    conftab ct3;
    fill(ct3, s3);
    std::string err;
    str bad = write_file("bad.conf", "Port 70000\nDebug yes\nOnce a\nOnce b\nRatio x\n"
                                     "Colour blue\nName\nSmall 0x10\n");
    int w = ct_fork([&] {
        setprogname("popt");
        conftab::status_t st3 = conftab::OK;
        CHECK(!ct3.run(bad, 0, -1, &st3));
        CHECK(st3 == conftab::ERROR);
        CHECK(s3.port == 0 && !s3.debug && s3.once == "a" && s3.small == 16);
        CHECK(ct3.run(NULL, CONFTAB_APPLY_DEFAULTS, -1, &st3) && st3 == conftab::OK);
        CHECK(s3.limit == 50 && s3.title == "untitled");
        _exit(0);
    }, &err);
    CHECK(ct_exited(w, 0));
    std::string f = bad.cstr();
    CHECK(err == "popt: " + f + ":1: Port out of range\n" +
                 "popt: " + f + ":2: usage: Debug <value>\n" +
                 "popt: " + f + ":4: Once: variable already defined\n" +
                 "popt: " + f + ":5: usage: Ratio <value>\n" +
                 "popt: " + f + ":6: unknown config parameter\n" +
                 "popt: " + f + ":7: usage: Name <value>\n");

    /* CONFTAB_VERBOSE: what is parsed, then the report, on stderr */
    settings s4;
    conftab ct4;
    ct4.add("Port", &s4.port, 1, 65535).add("Name", &s4.name);
    str one = write_file("one.conf", "Port 7\n");
    w = ct_fork([&] {
        setprogname("popt");
        CHECK(ct4.run(one, CONFTAB_VERBOSE));
        _exit(0);
    }, &err);
    CHECK(ct_exited(w, 0));
    CHECK(err == std::string("popt: Parsing configuration file: ") + one.cstr() + "\n" +
                 "popt:  'Port'  ->  7\n" + "popt:  'Name'  ->  (not set)\n");
}

int main()
{
    ct_watchdog(30);
    char tmpl[] = "/tmp/parseopt.XXXXXX";
    CHECK(mkdtemp(tmpl));
    g_dir = tmpl;
    test_parseargs();
    test_errors();
    test_numbers();
    test_conftab();
    CHECK(system((std::string("rm -rf ") + g_dir).c_str()) == 0);
    return 0;
}
