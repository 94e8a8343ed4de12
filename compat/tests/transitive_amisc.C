/* SPDX-License-Identifier: MIT */
// transitive_amisc.C: a libasync-style file that includes nothing but
// "amisc.h", which in libasync began with sysconf.h and err.h (and err.h with
// str.h): str, strbuf, warn, fatal, progname, errno, xmalloc/xfree, the
// system headers and __FL__ are all there. Built with -DNDEBUG: err.h's
// assert is never compiled out. Fails to compile if compat gives less.
#include "amisc.h"

#include "check.h" // CHECK(cond): includes nothing itself

int main(int argc, char **argv)
{
    (void)argc;
    setprogname(argv[0]);
    CHECK(progname == "transitive_amisc");
    str s("abc");
    strbuf sb;
    sb << s << " " << 42 << " " << __FL__;
    str out = sb;
    CHECK(out.len() > 7 && !strncmp(out.cstr(), "abc 42 ", 7));
    char *p = static_cast<char *>(xmalloc(4));
    p = static_cast<char *>(xrealloc(p, 64));
    memcpy(p, "ok", 3); // <string.h>, from sysconf.h
    xfree(p);
    errno = 0; // <errno.h>
    pid_t pid = fork(); // <unistd.h>
    if (pid == 0) {
        int two = 2;
        assert(two == 3); // err.h's: panics (SIGABRT) even with NDEBUG
        _exit(0);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    warnx << "transitive amisc.h: " << "ok\n";
    return 0;
}
