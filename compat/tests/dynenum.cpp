/* SPDX-License-Identifier: MIT */
/*
 * dynenum.cpp: dynenum.h's dynamic_enum_t: lookups found and not found, the
 * default, quiet, the warning's text (to stderr, checked in a child).
 */
#include "dynenum.h"

#include "ctest.h"

class color_enum_t : public dynamic_enum_t {
public:
    explicit color_enum_t(bool quiet = false, str name = "color")
        : dynamic_enum_t(-1, quiet, name)
    {
        static const pair_t p[] = {{"red", 1}, {"green", 2}, {"blue", 3}, {NULL, 0}};
        init(p, true);
    }
};

class counting_enum_t : public dynamic_enum_t {
public:
    mutable int misses = 0;
    mutable str last;
    counting_enum_t() : dynamic_enum_t(0)
    {
        static const pair_t p[] = {{"a", 10}, {"a", 11}, {NULL, 0}};
        init(p); /* a name twice: the last value wins */
    }

protected:
    void warn_not_found(str s) const override
    {
        misses++;
        last = s;
    }
};

int main()
{
    ct_watchdog(60);
    color_enum_t e;
    CHECK(e["red"] == 1 && e["blue"] == 3);
    int v = 42;
    CHECK(e.lookup("green", &v) && v == 2);
    CHECK(!e.lookup("mauve", &v) && v == -1);
    CHECK(!e.lookup(str(), &v) && v == -1);
    CHECK(e.lookup("mauve", false) == -1);

    counting_enum_t c;
    CHECK(c["a"] == 11 && c.misses == 0);
    CHECK(c["b"] == 0 && c.misses == 1 && c.last == "b");
    CHECK(c.lookup("b", false) == 0 && c.misses == 1);
    CHECK(c.lookup("b") == 0 && c.misses == 2);

    /* The warning, and none when quiet. */
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        color_enum_t loud, quiet(true), anon(false, str());
        (void)loud["mauve"];
        (void)quiet["mauve"];
        (void)anon.lookup(str());
        _Exit(0);
    }
    close(fds[1]);
    std::string out;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
        out.append(buf, n);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(out.find("XX dynamic enum (color): no value for key=mauve\n") != std::string::npos);
    CHECK(out.find("XX dynamic enum (anonymous): no value for key=(null)\n") != std::string::npos);
    size_t first = out.find("mauve");
    CHECK(out.find("mauve", first + 1) == std::string::npos); /* quiet: none */

    printf("compat dynenum: ok\n");
    return 0;
}
