/* SPDX-License-Identifier: MIT */
/*
 * serial.cpp: serial.h: big-endian integers, str2file/file2str (with excl,
 * the added newline, binary, stat), base 64 (RFC 1521 and the file-name
 * form) and hex.
 */
#include "async.h"
#include "serial.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "ctest.h"

static void test_ints()
{
    u_char b[9];
    putshort(b + 1, 0x1234);
    CHECK(b[1] == 0x12 && b[2] == 0x34 && getshort(b + 1) == 0x1234);
    putint(b + 1, 0xdeadbeef);
    CHECK(b[1] == 0xde && b[4] == 0xef && getint(b + 1) == 0xdeadbeefu);
    puthyper(b + 1, 0x0102030405060708ULL);
    CHECK(b[1] == 1 && b[8] == 8 && gethyper(b + 1) == 0x0102030405060708ULL);
    puthyper(b, ~0ULL);
    CHECK(gethyper(b) == ~0ULL);
}

static void test_files()
{
    char dir[] = "/tmp/compat-serial-XXXXXX";
    CHECK(mkdtemp(dir));
    str f = strbuf() << dir << "/f";
    struct stat sb;
    CHECK(str2file(f, "hello", 0600, false, &sb));
    CHECK(file2str(f) == "hello\n"); /* the newline added */
    CHECK(sb.st_size == 6 && (sb.st_mode & 0777) == 0600);
    CHECK(str2file(f, "bin", 0644, false, NULL, true));
    CHECK(file2str(f) == "bin");
    CHECK(str2file(f, "line\n"));
    CHECK(file2str(f) == "line\n");
    CHECK(str2file(f, ""));
    str empty = file2str(f);
    CHECK(empty && empty.len() == 0);
    /* excl: fails if the file exists. */
    CHECK(!str2file(f, "x", 0666, true) && errno == EEXIST);
    str g = strbuf() << dir << "/g";
    CHECK(str2file(g, "y", 0666, true) && file2str(g) == "y\n");
    str tilde = strbuf() << g << "~";
    CHECK(access(tilde.cstr(), F_OK) < 0); /* no temporary left */
    CHECK(!str2file(strbuf() << dir << "/", "z") && errno == EISDIR);
    CHECK(!file2str(strbuf() << dir << "/none") && errno == ENOENT);
    CHECK(!file2str(dir) && errno == EINVAL); /* not a regular file (warns) */
    unlink(f.cstr());
    unlink(g.cstr());
    rmdir(dir);
}

static void test_armor()
{
    /* RFC 4648's vectors. */
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        CHECK(armor64(str(plain[i])) == enc[i]);
        CHECK(dearmor64(str(enc[i])) == plain[i]);
        CHECK(armor64len((const u_char *)enc[i]) == strlen(enc[i]));
    }
    u_char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (u_char)i;
    str a = armor64(all, sizeof all);
    CHECK(a.len() == 344 && strchr(a.cstr(), '/'));
    str back = dearmor64(a);
    CHECK(back.len() == 256 && memcmp(back.cstr(), all, 256) == 0);
    /* What is not whole base 64. */
    CHECK(armor64len((const u_char *)"Zm9v!xx") == 4);
    CHECK(!dearmor64(str("Zm9v!xx")));
    CHECK(!dearmor64(str("Zm9")));        /* not a multiple of 4 */
    CHECK(dearmor64("Zm9v!xx") == "foo"); /* up to the end of the base 64 */

    str fa = armor64A(all, sizeof all);
    CHECK(!strchr(fa.cstr(), '/') && strchr(fa.cstr(), '-') && !strchr(fa.cstr(), '='));
    CHECK(fa.len() == 342 && armor64Alen((const u_char *)fa.cstr()) == fa.len());
    back = dearmor64A(fa);
    CHECK(back.len() == 256 && memcmp(back.cstr(), all, 256) == 0);
    CHECK(armor64A(str("f")) == "Zg" && dearmor64A(str("Zm8")) == "fo");

    int d;
    CHECK(hexconv(d, 'a') && d == 10 && hexconv(d, 'F') && d == 15 && hexconv(d, '7') && d == 7);
    CHECK(!hexconv(d, 'g'));
    str h = hex2bytes("00ff10Ab");
    CHECK(h.len() == 4 && (u_char)h[0] == 0 && (u_char)h[1] == 0xff && h[2] == 0x10 &&
          (u_char)h[3] == 0xab);
    CHECK(!hex2bytes("abc") && !hex2bytes("zz"));
    CHECK(hex2bytes("") && hex2bytes("").len() == 0);
}

int main()
{
    ct_watchdog(60);
    test_ints();
    test_files();
    test_armor();
    printf("compat serial: ok\n");
    return 0;
}
