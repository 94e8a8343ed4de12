/* SPDX-License-Identifier: MIT */
// transitive_str.C: a libasync-style file that includes nothing but "str.h",
// which in libasync brought sysconf.h (xmalloc, xrealloc, xfree, __FL__, the
// system headers), suio++.h, vec.h, keyfunc.h and stllike.h. Fails to
// compile if compat gives less.
#include "str.h"

#include "check.h" // CHECK(cond): includes nothing itself

int main()
{
    char *p = static_cast<char *>(xmalloc(8));
    p = static_cast<char *>(xrealloc(p, 32));
    strcpy(p, "bytes"); // <string.h>
    str s(p);
    xfree(p);
    str place = strbuf() << __FL__;
    CHECK(s == "bytes" && place.len() > 2);
    vec<int> v; // vec.h
    v.push_back(max(1, 2)); // stllike.h
    CHECK(v.size() == 1 && v[0] == 2 && (u_int)hash_t(s) == hash_string("bytes"));
    suio u; // suio++.h
    suio_print(&u, s);
    CHECK(u.resid() == 5);
    printf("transitive str.h: ok\n"); // <stdio.h>
    return 0;
}
