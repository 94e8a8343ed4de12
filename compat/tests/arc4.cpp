/* SPDX-License-Identifier: MIT */
/*
 * arc4.cpp: the RC4 keystream of arc4.h gives sfscrypt's bytes. The expected
 * streams below were printed by sfslite's own arc4 (crypt/arc4.C, built
 * against the reference libasync) for the same keys: one key, two keys in a
 * row (as sfslite's test_bitvec keys its generator), test_bbuddy's key with
 * its NUL, no key, a 128-byte key 1000 bytes in, an empty key.
 */
#include "async.h"
#include "arc4.h"

#include <string>

#include "ctest.h"

static std::string hex(arc4 &a, int n)
{
    std::string s;
    char b[3];
    for (int i = 0; i < n; i++) {
        snprintf(b, sizeof b, "%02x", a.getbyte());
        s += b;
    }
    return s;
}

int main()
{
    {
        arc4 a;
        a.setkey("Key", 3);
        CHECK(hex(a, 16) == "444d753fdf09c7c9d45da50ae69376d8");
        a.reset();
        a.setkey("Key", 3);
        CHECK(hex(a, 16) == "444d753fdf09c7c9d45da50ae69376d8");
    }
    {
        arc4 a;
        int n = 7;
        a.setkey(&n, sizeof n);
        a.setkey("hello", 5);
        CHECK(hex(a, 16) == "11cacf7709da6016948fe85cf8926c37");
    }
    {
        arc4 a;
        char key[] = "will you be my binary buddy?";
        a.setkey(key, sizeof key);
        CHECK(hex(a, 16) == "04ae66e160d0866e80dbb62b30b6746a");
    }
    {
        arc4 a;
        CHECK(hex(a, 16) == "000205070d0d171f2828383248566575");
    }
    {
        arc4 a;
        unsigned char k[128];
        for (int i = 0; i < 128; i++)
            k[i] = (unsigned char)(i * 7 + 1);
        a.setkey(k, 128);
        for (int i = 0; i < 1000; i++)
            a.getbyte();
        CHECK(hex(a, 16) == "96a1e46506cbc0425a1c5edd481fe882");
    }
    {
        arc4 a;
        a.setkey("", 0);
        CHECK(hex(a, 8) == "000104080d0f1820");
    }
    {
        /* longer keys: every byte counts (sfscrypt's skipped the first 128) */
        unsigned char k[300];
        for (int i = 0; i < 300; i++)
            k[i] = (unsigned char)i;
        arc4 a, b;
        a.setkey(k, 300);
        k[0] ^= 1;
        b.setkey(k, 300);
        CHECK(hex(a, 16) != hex(b, 16));
    }
    printf("compat arc4: ok\n");
    return 0;
}
