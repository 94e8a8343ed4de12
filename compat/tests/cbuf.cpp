/* SPDX-License-Identifier: MIT */
/*
 * cbuf.cpp: cbuf.h's circular buffer: readv into iniov and writev from
 * outiov across the wrap, find, at, unrembytes, copyout, resize, clear; then
 * 20,000 random operations against a std::deque.
 */
#include "async.h"
#include "cbuf.h"

#include <deque>
#include <string>

#include "ctest.h"

static std::string held(cbuf &b)
{
    std::string s;
    for (size_t i = 0; i < b.size(); i++)
        s += b[i];
    return s;
}

static void put(cbuf &b, const std::string &s)
{
    size_t done = 0;
    const iovec *v = b.iniov();
    for (int i = 0; i < b.iniovcnt() && done < s.size(); i++) {
        size_t k = std::min(v[i].iov_len, s.size() - done);
        memcpy(v[i].iov_base, s.data() + done, k);
        done += k;
    }
    CHECK(done == s.size());
    b.addbytes(done);
}

static void test_basic()
{
    cbuf b(8);
    CHECK(b.size() == 0 && b.space() == 8 && b.outiovcnt() == 0 && b.iniovcnt() == 1);
    put(b, "abcdef");
    CHECK(held(b) == "abcdef" && b.space() == 2 && b.bytes() == 6);
    CHECK(b.find('d') == 3 && b.find('z') == -1);
    char out[8];
    b.copyout(out, 4);
    CHECK(memcmp(out, "abcd", 4) == 0 && held(b) == "ef");
    /* The free space wraps: two iovecs. */
    CHECK(b.iniovcnt() == 2 && b.iniov()[0].iov_len == 2 && b.iniov()[1].iov_len == 4);
    put(b, "ghijkl");
    CHECK(held(b) == "efghijkl" && b.space() == 0 && b.iniovcnt() == 0);
    CHECK(b.find('k') == 6 && b.at(7) == 'l');
    CHECK(b.outiovcnt() == 2 && b.outiov()[0].iov_len == 4 && b.outiov()[1].iov_len == 4);

    /* writev out of it, readv into it, through a pipe. */
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK(writev(p[1], b.outiov(), b.outiovcnt()) == 8);
    b.rembytes(8);
    CHECK(b.size() == 0);
    b.unrembytes(3); /* the last three bytes removed come back */
    CHECK(held(b) == "jkl");
    b.rembytes(3);
    CHECK(readv(p[0], b.iniov(), b.iniovcnt()) == 8);
    b.addbytes(8);
    CHECK(held(b) == "efghijkl");
    close(p[0]);
    close(p[1]);

    b.resize(16);
    CHECK(held(b) == "efghijkl" && b.space() == 8 && b.outiovcnt() == 1);
    put(b, "mnop");
    CHECK(held(b) == "efghijklmnop");
    b.clear();
    CHECK(b.size() == 0 && b.space() == 16);
    b.resize(4);
    CHECK(b.size() == 0 && b.space() == 4);
}

static void test_random()
{
    cbuf b(37);
    std::deque<char> model;
    srand(7);
    char tmp[64];
    for (int round = 0; round < 20000; round++) {
        int op = rand() % 4;
        if (op == 0 && b.space()) {
            size_t k = 1 + rand() % b.space();
            std::string s;
            for (size_t i = 0; i < k; i++)
                s += (char)('a' + rand() % 26);
            put(b, s);
            model.insert(model.end(), s.begin(), s.end());
        } else if (op == 1 && b.size()) {
            size_t k = 1 + rand() % b.size();
            b.copyout(tmp, k);
            for (size_t i = 0; i < k; i++) {
                CHECK(tmp[i] == model.front());
                model.pop_front();
            }
        } else if (op == 2 && b.size()) {
            char c = (char)('a' + rand() % 26);
            int want = -1;
            for (size_t i = 0; i < model.size(); i++)
                if (model[i] == c) {
                    want = (int)i;
                    break;
                }
            CHECK(b.find(c) == want);
        } else if (op == 3) {
            size_t n = 0;
            const iovec *v = b.outiov();
            for (int i = 0; i < b.outiovcnt(); i++)
                n += v[i].iov_len;
            CHECK(n == model.size());
            n = 0;
            v = b.iniov();
            for (int i = 0; i < b.iniovcnt(); i++)
                n += v[i].iov_len;
            CHECK(n == b.space());
        }
        CHECK(b.size() == model.size() && b.space() == 37 - model.size());
    }
}

int main()
{
    ct_watchdog(60);
    test_basic();
    test_random();
    printf("compat cbuf: ok\n");
    return 0;
}
