/* SPDX-License-Identifier: MIT */
/*
 * fuzz_recmark.cpp: a libFuzzer target for the record-marking decoder
 * (compat/lib/recmark.h, what axprt_pipe runs on its input). Built and run
 * by run.sh (clang++ -fsanitize=fuzzer,address,undefined).
 *
 * The input's first two bytes choose the record size limit (ps) and how the
 * stream is cut into reads; the rest is the stream. It is fed as the
 * transport feeds it (a buffer, reads appended, taken bytes dropped) and the
 * records and the outcome (end, or a record over ps at a given record) must
 * be exactly those of a plain model that parses the whole stream at once.
 * Written for mely; no line comes from libasync.
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "recmark.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

struct outcome {
    std::vector<std::string> recs;
    bool over = false;
    size_t overlen = 0;
};

/* The model: fragments one after the other, from the whole stream. */
outcome model(const uint8_t *p, size_t n, size_t ps)
{
    outcome o;
    std::string cur;
    size_t off = 0;
    while (n - off >= 4) {
        uint32_t h = (uint32_t)p[off] << 24 | (uint32_t)p[off + 1] << 16 |
                     (uint32_t)p[off + 2] << 8 | p[off + 3];
        uint64_t flen = h & 0x7fffffffu;
        if ((uint64_t)cur.size() + flen > ps) {
            o.over = true;
            o.overlen = cur.size() + (size_t)flen;
            return o;
        }
        if (n - off - 4 < flen)
            break;
        cur.append(reinterpret_cast<const char *>(p + off + 4), (size_t)flen);
        off += 4 + (size_t)flen;
        if (h & 0x80000000u) {
            o.recs.push_back(cur);
            cur.clear();
        }
    }
    return o;
}

} // namespace

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const size_t sizes[] = {0, 1, 4, 7, 8, 64, 100, 4096, 0x10400};
    size_t ps = sizes[data[0] % (sizeof(sizes) / sizeof(sizes[0]))];
    unsigned cut = data[1];
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    outcome want = model(p, n, ps);

    outcome got;
    std::string buf; /* read, not yet taken */
    char *rec = nullptr;
    size_t reclen = 0;
    size_t fed = 0;
    unsigned seed = cut;
    while (!got.over) {
        /* A read of 1 to 16 bytes, or all that is left (cut 0). */
        if (fed < n) {
            seed = seed * 1103515245u + 12345u;
            size_t chunk = cut ? 1 + (seed >> 16) % 16 : n;
            if (chunk > n - fed)
                chunk = n - fed;
            buf.append(reinterpret_cast<const char *>(p + fed), chunk);
            fed += chunk;
        }
        for (;;) {
            size_t used = 0, len = 0, over = 0;
            const char *out = nullptr;
            rm_result r = rm_next(rec, reclen, ps, buf.data(), buf.size(), &used, &out, &len, &over);
            if (used > buf.size())
                abort();
            if (r == RM_RECORD) {
                if (len > ps || !used)
                    abort();
                got.recs.push_back(std::string(out, len));
            } else if (r == RM_OVER) {
                got.over = true;
                got.overlen = over;
            } else if (reclen > ps) {
                abort();
            }
            buf.erase(0, used);
            if (r != RM_RECORD)
                break;
        }
        if (fed == n)
            break;
    }
    free(rec);
    if (got.recs != want.recs || got.over != want.over || got.overlen != want.overlen)
        abort();
    return 0;
}
