/* SPDX-License-Identifier: MIT */
/*
 * crypt.cpp: compat's crypt.h, in a libasync program (async.h first, as
 * sfslite's tests/test_timecb.C has it): sfscrypt's `rnd` (getword,
 * gethyper, getbytes), from several threads at once, and the C library's
 * crypt(3) still declared by the same include (include_next). The Mely side
 * (nothing added) is checked by mely_names.
 */
#include "async.h"
#include "crypt.h"

#include <set>
#include <thread>
#include <type_traits>

#include "ctest.h"

#ifdef _CRYPT_H /* the system's <crypt.h> (glibc, libxcrypt) came along */
static_assert(std::is_same<decltype(crypt("key", "$1$salt")), char *>::value,
              "crypt(3) is the C library's");
static const bool g_system_crypt = true;
#else
static const bool g_system_crypt = false;
#endif

int main()
{
    ct_watchdog(30);
    /* 64 words: random ones repeat with probability ~2^-22 */
    std::set<u_int32_t> words;
    for (int i = 0; i < 64; i++)
        words.insert(rnd.getword());
    CHECK(words.size() == 64);
    /* bounded draws, as test_timecb makes them: every value comes up */
    std::set<u_int32_t> mod8;
    for (int i = 0; i < 1000; i++)
        mod8.insert(rnd.getword() % 8);
    CHECK(mod8.size() == 8);
    u_int64_t h1 = rnd.gethyper(), h2 = rnd.gethyper();
    CHECK(h1 != h2);
    /* bytes: both halves of a byte's values, no stretch left untouched */
    unsigned char buf[4096];
    memset(buf, 0, sizeof buf);
    rnd.getbytes(buf, sizeof buf);
    int zeros = 0, high = 0;
    for (unsigned char c : buf) {
        zeros += c == 0;
        high += c >= 128;
    }
    CHECK(zeros < 64 && high > 1700 && high < 2400);
    CHECK(buf[sizeof buf - 1] != 0 || buf[sizeof buf - 2] != 0);
    rnd.getbytes(buf, 0); /* nothing asked: nothing done */
    /* four threads at once */
    std::set<u_int32_t> all[4];
    std::thread th[4];
    for (int t = 0; t < 4; t++)
        th[t] = std::thread([t, &all] {
            for (int i = 0; i < 1000; i++)
                all[t].insert(rnd.getword());
        });
    for (auto &t : th)
        t.join();
    std::set<u_int32_t> merged;
    for (auto &s : all)
        merged.insert(s.begin(), s.end());
    CHECK(merged.size() > 3990);
    printf("compat crypt: ok (system crypt.h %s)\n", g_system_crypt ? "included" : "absent");
    return 0;
}
