/* SPDX-License-Identifier: MIT */
/*
 * fuzz_xdr.cpp: a libFuzzer target for the XDR decoders: compat's XDR
 * streams and built-in types (compat/lib/xdr.cpp, rpctypes.h, xdrmisc.h)
 * through mely-rpcc's output for compat/tests/rpc_test_prot.x, which has
 * every construct (strings, fixed and variable opaques, bounded and
 * unbounded vectors, optional data and linked lists, unions with and
 * without default arms, enums, bool, hyper, float, double). Built and run
 * by run.sh (clang++ -fsanitize=fuzzer,address,undefined).
 *
 * The first byte picks a type, the rest is decoded as it (from an xdrmem
 * and from an xdrsuio). Decoding must never read past the input or crash;
 * when it succeeds, the value must encode again, to at most the bytes
 * decoded, and that encoding must decode and encode to itself; every value
 * is freed (leaks are errors under ASan).
 * Written for mely; no line comes from libasync.
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "rpc_test_prot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The runtime's (runtime.cpp, not linked here): a ref<T> made NULL. */
void mely_compat_ref_null(void)
{
    abort();
}

namespace {

struct type {
    xdrproc_t xdr;
    void *(*alloc)();
};

const type types[] = {
    {xdr_test_all, test_all_alloc},       {xdr_test_node, test_node_alloc},
    {xdr_test_result, test_result_alloc}, {xdr_test_opt, test_opt_alloc},
    {xdr_test_strict, test_strict_alloc}, {xdr_test_name, test_name_alloc},
    {xdr_test_hash, test_hash_alloc},     {xdr_test_blob, test_blob_alloc},
    {xdr_test_ints, test_ints_alloc},     {xdr_test_color, test_color_alloc},
    {xdr_test_big, test_big_alloc},
};

bool encode(const type &t, void *obj, std::string *out)
{
    xdrsuio x(XDR_ENCODE);
    if (!t.xdr(x.xdrp(), obj))
        return false;
    out->clear();
    const iovec *iov = x.iov();
    for (u_int i = 0; i < x.iovcnt(); i++)
        out->append(static_cast<const char *>(iov[i].iov_base), iov[i].iov_len);
    return true;
}

/* Decodes n bytes at p as t: the object (to free) or NULL; *used bytes taken. */
void *decode(const type &t, const char *p, size_t n, size_t *used)
{
    /* A copy of its own, so that ASan sees any read past the end. */
    char *copy = static_cast<char *>(malloc(n ? n : 1));
    if (n)
        memcpy(copy, p, n);
    void *obj = t.alloc();
    xdrmem x(copy, n, XDR_DECODE);
    bool ok = t.xdr(x.xdrp(), obj);
    *used = XDR_GETPOS(x.xdrp());
    free(copy);
    if (!ok) {
        xdr_delete(t.xdr, obj);
        return nullptr;
    }
    if (*used > n)
        abort();
    return obj;
}

} // namespace

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const type &t = types[data[0] % (sizeof(types) / sizeof(types[0]))];
    const char *p = reinterpret_cast<const char *>(data + 1);
    size_t n = size - 1;

    size_t used = 0;
    void *obj = decode(t, p, n, &used);

    /* The same bytes through an xdrsuio: the same verdict. */
    {
        xdrsuio xs(XDR_DECODE);
        xs.uio()->copy(p, n);
        void *o2 = t.alloc();
        bool ok2 = t.xdr(xs.xdrp(), o2);
        xdr_delete(t.xdr, o2);
        if (ok2 != (obj != nullptr))
            abort();
    }
    if (!obj)
        return 0;

    std::string e1, e2;
    if (!encode(t, obj, &e1) || e1.size() > used)
        abort();
    xdr_delete(t.xdr, obj);
    size_t used2 = 0;
    void *again = decode(t, e1.data(), e1.size(), &used2);
    if (!again || used2 != e1.size())
        abort();
    if (!encode(t, again, &e2) || e2 != e1)
        abort();
    xdr_delete(t.xdr, again);
    return 0;
}
