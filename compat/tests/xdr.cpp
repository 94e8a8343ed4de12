/* SPDX-License-Identifier: MIT */
/*
 * xdr.cpp: XDR through mely-rpcc's output (rpc_test_prot.x): the wire bytes
 * of each type (RFC 4506), round trips through xdrsuio and xdrmem, unions
 * and their arms, optional data, bounds on decode (every truncation of a
 * valid message and hostile lengths fail without a crash or a large
 * allocation), xdr_free/xdr_delete, printing, the program tables.
 */
#include "async.h"
#include "rpc_test_prot.h"

#include "ctest.h"

static str hexof(const str &s)
{
    strbuf sb;
    for (size_t i = 0; i < s.len(); i++)
        sb.fmt("%02x", (unsigned char)s[(ptrdiff_t)i]);
    return sb;
}

/* A value using every field. */
static void fill(test_all &a)
{
    a.flag = true;
    a.i = -2;
    a.u = 0xdeadbeef;
    a.h = -5;
    a.uh = 0x0102030405060708ULL;
    a.dbl = 1.5;
    a.flt = -0.25f;
    a.color = TEST_BLUE;
    for (int k = 0; k < TEST_HASHSIZE; k++)
        a.hash[k] = (char)k;
    a.blob.setsize(5);
    memcpy(a.blob.base(), "hello", 5);
    a.small.setsize(0);
    a.any = "wire";
    a.ints.push_back(1);
    a.ints.push_back(-1);
    a.fixed[0] = 10;
    a.fixed[1] = 11;
    a.fixed[2] = 12;
    a.list.alloc();
    a.list->name = "first";
    a.list->value = 1;
    a.list->next.alloc();
    a.list->next->name = "second";
    a.list->next->value = 2;
    a.res.set_color(TEST_GREEN);
    a.res.node->name = "arm";
    a.res.node->value = 77;
    a.opt.set_present(true);
    *a.opt.h = 1LL << 40;
    a.strict.set_kind(TEST_NEG);
    *a.strict.d = -2.0;
}

static void check_same(const test_all &a, const test_all &b)
{
    CHECK(a.flag == b.flag && a.i == b.i && a.u == b.u && a.h == b.h && a.uh == b.uh);
    CHECK(a.dbl == b.dbl && a.flt == b.flt && a.color == b.color);
    CHECK(a.hash == b.hash && a.blob == b.blob && a.small == b.small && a.any == b.any);
    CHECK(a.ints.size() == b.ints.size() && a.ints[0] == b.ints[0] && a.ints[1] == b.ints[1]);
    CHECK(a.fixed[2] == b.fixed[2]);
    CHECK(b.list && b.list->name == "first" && b.list->next && b.list->next->value == 2);
    CHECK(!b.list->next->next);
    CHECK(b.res.color == TEST_GREEN && b.res.node->value == 77 && b.res.node->name == "arm");
    CHECK(b.opt.present && *b.opt.h == (1LL << 40));
    CHECK(b.strict.kind == TEST_NEG && *b.strict.d == -2.0);
}

int main()
{
    ct_watchdog(30);
    CHECK(RPC_TEST_PASSTHROUGH == 42); /* a %-line */
    CHECK(TEST_NEG == -3 && TEST_BLUE == 7);

    /* Wire bytes of scalars and strings. */
    int32_t i = -2;
    CHECK(hexof(xdr2str(i)) == "fffffffe");
    test_big big = 0x0102030405060708ULL;
    CHECK(hexof(xdr2str(big)) == "0102030405060708");
    test_name nm = "abcde";
    CHECK(hexof(xdr2str(nm)) == "000000056162636465000000");
    test_hash hs;
    CHECK(xdr2str(hs).len() == 20);
    test_ints iv;
    iv.push_back(3);
    CHECK(hexof(xdr2str(iv)) == "0000000100000003");
    test_opt o;
    CHECK(hexof(xdr2str(o)) == "00000000");
    o.set_present(true);
    *o.h = 9;
    CHECK(hexof(xdr2str(o)) == "000000010000000000000009");
    test_node n;
    n.name = "x";
    n.value = 1;
    CHECK(hexof(xdr2str(n)) == "00000001" "78000000" "00000001" "00000000");
    /* A name longer than its bound does not encode. */
    test_name toolong = "0123456789abcdefg";
    CHECK(!xdr2str(toolong));

    /* Round trip through xdrsuio (encode) and xdrmem (decode). */
    test_all a;
    fill(a);
    str wire = xdr2str(a);
    CHECK(wire && wire.len() % 4 == 0);
    test_all b;
    CHECK(str2xdr(b, wire));
    check_same(a, b);
    CHECK(xdr2str(b) == wire);
    /* ... and a copy, an assignment (union arms copy). */
    test_all c(b), d;
    d = c;
    check_same(a, d);
    d.res.set_color(TEST_RED);
    CHECK(c.res.node->value == 77);
    /* Decoding from an xdrsuio. */
    {
        xdrsuio xs(XDR_DECODE);
        xs.uio()->copy(wire.cstr(), wire.len());
        test_all e;
        XDR *xp = xs.xdrp();
        CHECK(rpc_traverse(xp, e));
        check_same(a, e);
        CHECK(xs.uio()->resid() == 0);
    }
    /* xdr_T through the generated function, and xdr_free / xdr_delete. */
    {
        test_all *p = static_cast<test_all *>(test_all_alloc());
        xdrmem xm(wire.cstr(), wire.len());
        CHECK(xdr_test_all(xm.xdrp(), p));
        check_same(a, *p);
        xdr_free(xdr_test_all, p);
        CHECK(!p->list && p->any.len() == 0);
        xdr_delete(xdr_test_all, p);
    }
    /* xdrmem encoding stops at the buffer's end. */
    {
        char buf[16];
        xdrmem xm(buf, sizeof buf, XDR_ENCODE);
        XDR *xp = xm.xdrp();
        CHECK(!rpc_traverse(xp, a));
        char buf2[4096];
        xdrmem xm2(buf2, sizeof buf2, XDR_ENCODE);
        xp = xm2.xdrp();
        CHECK(rpc_traverse(xp, a));
        CHECK(XDR_GETPOS(xp) == wire.len() && !memcmp(buf2, wire.cstr(), wire.len()));
    }

    /* Every truncation of a valid message fails. */
    for (size_t k = 0; k < wire.len(); k++) {
        test_all t;
        CHECK(!str2xdr(t, str(wire.cstr(), k)));
    }

    /* Hostile input. */
    {
        /* A string length beyond the bound, and beyond the bytes there. */
        test_name t;
        CHECK(!str2xdr(t, str("\0\0\0\x11" "0123456789abcdefg\0\0\0", 24)));
        str huge("\x7f\xff\xff\xff" "abcd", 8);
        str any;
        CHECK(!str2xdr(any, huge));
        test_blob blob;
        CHECK(!str2xdr(blob, huge));
        /* A vector of 2^31-1 ints in 8 bytes: refused before allocating. */
        rpc_vec<int32_t, RPC_INFINITY> v;
        CHECK(!str2xdr(v, huge));
        CHECK(v.size() == 0);
        /* A bool that is 2; a pointer flag that is 5. */
        bool bb = false;
        CHECK(!str2xdr(bb, str("\0\0\0\x02", 4)));
        test_opt op;
        CHECK(!str2xdr(op, str("\0\0\0\x05", 4)));
        /* A union tag no arm takes (test_strict has no default). */
        test_strict s;
        CHECK(!str2xdr(s, str("\0\0\0\x09", 4)));
        CHECK(str2xdr(s, str("\0\0\0\x01\0\0\0\0", 8)) && s.kind == 1 && s.s->len() == 0);
        /* The default arm takes the rest (test_result: tag 3 -> code). */
        test_result r;
        CHECK(str2xdr(r, str("\0\0\0\x03\0\0\0\x2a", 8)) && r.color == 3 && *r.code == 42);
        /* Random bytes: any outcome but a crash. */
        u_int32_t seed = 12345;
        for (int round = 0; round < 2000; round++) {
            char buf[256];
            size_t len = (size_t)(round % 256);
            for (size_t k = 0; k < len; k++) {
                seed = seed * 1103515245 + 12345;
                buf[k] = (char)(seed >> 16);
                if (k % 4 == 0 && (seed & 0x300) == 0)
                    buf[k] = 0; /* small lengths and tags more often */
            }
            test_all t;
            (void)buf2xdr(t, buf, len);
        }
    }

    /* Printing. */
    {
        strbuf sb;
        rpc_print(sb, n, -1, "n");
        str s = sb;
        CHECK(strstr(s.cstr(), "name = \"x\""));
        CHECK(strstr(s.cstr(), "value = 1"));
        strbuf sb2;
        print_test_all(&a, &sb2, -1, "a", "");
        str s2 = sb2;
        CHECK(strstr(s2.cstr(), "uh = 72623859790382856"));
        CHECK(strstr(s2.cstr(), "blob = 0x68656c6c6f"));
        CHECK(rpc_enum_name(TEST_BLUE) && !strcmp(rpc_enum_name(TEST_BLUE), "TEST_BLUE"));
        CHECK(rpc_enum_name(test_color(5)) == NULL);
    }

    /* The program tables. */
    CHECK(test_prog_1.progno == 0x20000123 && test_prog_1.versno == 1);
    CHECK(test_prog_1.nproc == 4); /* 0..3, 2 is a gap */
    CHECK(!strcmp(test_prog_1.tbl[TEST_ECHO].name, "TEST_ECHO"));
    CHECK(test_prog_1.tbl[2].name == NULL);
    CHECK(test_prog_1.tbl[TEST_ADD].xdr_arg == xdr_test_ints);
    CHECK(test_prog_1.tbl[TEST_ADD].xdr_res == xdr_int32_t);
    CHECK(*test_prog_1.tbl[TEST_ECHO].type_arg == typeid(test_all));
    u_int32_t pn;
    CHECK(test_prog_1.lookup("TEST_ADD", &pn) && pn == 3);
    CHECK(!test_prog_1.lookup("NOPE", &pn));
    CHECK(test_prog_2.versno == 2 && test_prog2_1.nproc == 6 && TEST2_COUNT == 5);
    return 0;
}
