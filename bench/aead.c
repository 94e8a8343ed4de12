/* SPDX-License-Identifier: MIT */
/*
 * aead.c: the sealing rate of every candidate AEAD for SFS (doc/sfs.md) on
 * one core, and SFS's crypto ceiling: the chosen AEAD's rate times the
 * workers.
 *
 * Each row seals 64 KB blocks (SFS_MAX_READ: a full READ reply) with 4 bytes
 * of associated data and a fresh counter nonce per block, as proto.c does,
 * from one buffer into another, on a thread pinned to one CPU. The rows run
 * in --passes interleaved passes of --mb MB each (pass 1 of every row, then
 * pass 2, ...), and the table shows each row's median pass: MB/s and TSC
 * cycles per byte. The rows:
 *
 *   libcrypto  AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 (EVP, one context
 *              per row with its key set once, as a session's direction is);
 *   proto.c    sfs_seal(): AES-128-GCM as sfsd runs it (the chosen AEAD);
 *   libsodium  crypto_aead_aes256gcm (precomputed key; only where the CPU has
 *              AES-NI and PCLMUL), chacha20poly1305_ietf and
 *              xchacha20poly1305_ietf, when configure found libsodium.
 *
 * The last line, for scripts: "aead: chosen=aes-128-gcm mbps=R workers=W
 * ceiling_mbps=R*W", R the sfs_seal row's median. MB is 2^20 bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#ifdef HAVE_SODIUM
#include <sodium.h>
#endif

#include "apps/sfs/proto.h"
#include "bench/harness.h"

#define MB (1024.0 * 1024.0)
#define BLOCK SFS_MAX_READ
#define MAX_PASSES 99u

static struct {
    unsigned passes;
    unsigned mb;
    int workers;
    bool quick;
    const char *csv;
} opt;

static const struct bench_opt options[] = {
    {.name = "passes", .kind = OPT_UINT, .var = &opt.passes, .lo = 1, .hi = MAX_PASSES,
     .dflt = 7, .quick = 3, .param = true, .help = "interleaved passes per row (the median is shown)"},
    {.name = "mb", .kind = OPT_UINT, .var = &opt.mb, .lo = 1, .hi = 65536, .dflt = 256,
     .quick = 32, .param = true, .help = "MB sealed per row and pass"},
    {.name = "workers", .kind = OPT_INT, .var = &opt.workers, .lo = 1, .hi = 1024, .dflt = -1,
     .none = "online CPUs", .param = true, .help = "workers the ceiling assumes"},
    {.name = "quick", .kind = OPT_QUICK, .var = &opt.quick, .help = "a short run (noisy)"},
    {.name = "csv", .kind = OPT_STR, .var = &opt.csv, .sdflt = "bench/results/aead.csv",
     .help = "CSV file of the table"},
    {.name = NULL},
};

/* ---- The candidates --------------------------------------------------------------------- */

enum impl { EVP_ROW, SFS_ROW, NA_AES256GCM, NA_CHACHA, NA_XCHACHA };

struct row {
    const char *name, *lib;
    enum impl impl;
    const EVP_CIPHER *(*cipher)(void); /* EVP_ROW */
    /* state, set by row_init() */
    bool ok;
    bool absent;  /* cannot run on this machine: not a failure */
    char why[96]; /* not ok: why */
    EVP_CIPHER_CTX *ctx;
    struct sfs_session s;
#ifdef HAVE_SODIUM
    crypto_aead_aes256gcm_state *gcm; /* 16-byte aligned: allocated with it */
#endif
    uint8_t key[32];
    struct bench_sample pass[MAX_PASSES];
};

static struct row rows[] = {
    {.name = "aes-128-gcm", .lib = "libcrypto", .impl = EVP_ROW, .cipher = EVP_aes_128_gcm},
    {.name = "aes-256-gcm", .lib = "libcrypto", .impl = EVP_ROW, .cipher = EVP_aes_256_gcm},
    {.name = "chacha20-poly1305", .lib = "libcrypto", .impl = EVP_ROW,
     .cipher = EVP_chacha20_poly1305},
    {.name = "aes-128-gcm", .lib = "proto.c sfs_seal", .impl = SFS_ROW},
#ifdef HAVE_SODIUM
    {.name = "aes-256-gcm", .lib = "libsodium", .impl = NA_AES256GCM},
    {.name = "chacha20-poly1305-ietf", .lib = "libsodium", .impl = NA_CHACHA},
    {.name = "xchacha20-poly1305-ietf", .lib = "libsodium", .impl = NA_XCHACHA},
#endif
};
enum { NROWS = sizeof(rows) / sizeof(rows[0]), CHOSEN = 3 /* the sfs_seal row */ };

static const uint8_t aad[SFS_LENGTH] = {0, 1, 0, 16}; /* a frame's length, as proto.c binds it */

/* A 24-byte nonce (XChaCha's; the others take its first 12): zeros, then the
 * counter, big-endian, in bytes 4..11. */
static void nonce_of(uint64_t counter, uint8_t nonce[24])
{
    memset(nonce, 0, 24);
    for (int i = 0; i < 8; i++)
        nonce[11 - i] = (uint8_t)(counter >> (8 * i));
}

static bool evp_init(struct row *r)
{
    r->ctx = EVP_CIPHER_CTX_new();
    return r->ctx && EVP_EncryptInit_ex(r->ctx, r->cipher(), NULL, r->key, NULL) == 1;
}

/* A session as sfsd's, from two fresh key pairs. */
static bool sfs_init(struct row *r)
{
    return sfs_session_local(&r->s) == 0;
}

/* Sets a row up; false (r->why says why) if it cannot run here. */
static bool row_init(struct row *r)
{
    for (size_t i = 0; i < sizeof(r->key); i++)
        r->key[i] = (uint8_t)(i * 29 + 7);
    switch (r->impl) {
    case EVP_ROW:
        r->ok = evp_init(r);
        break;
    case SFS_ROW:
        r->ok = sfs_init(r);
        break;
#ifdef HAVE_SODIUM
    case NA_AES256GCM:
        if (!crypto_aead_aes256gcm_is_available()) {
            snprintf(r->why, sizeof(r->why), "n/a (the CPU lacks AES-NI or PCLMUL)");
            r->absent = true;
            return false;
        }
        r->gcm = sodium_malloc(sizeof(*r->gcm));
        r->ok = r->gcm && crypto_aead_aes256gcm_beforenm(r->gcm, r->key) == 0;
        break;
    case NA_CHACHA:
    case NA_XCHACHA:
        r->ok = true;
        break;
#else
    default:
        break;
#endif
    }
    if (!r->ok)
        snprintf(r->why, sizeof(r->why), "n/a (setting the key failed)");
    return r->ok;
}

static void row_free(struct row *r)
{
    EVP_CIPHER_CTX_free(r->ctx);
    sfs_session_free(&r->s);
#ifdef HAVE_SODIUM
    if (r->gcm)
        sodium_free(r->gcm);
#endif
}

static bool evp_seal(EVP_CIPHER_CTX *ctx, const uint8_t nonce[12], const uint8_t *in, uint8_t *out)
{
    int len = 0, fin = 0;
    return EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce) == 1 &&
           EVP_EncryptUpdate(ctx, NULL, &len, aad, sizeof(aad)) == 1 &&
           EVP_EncryptUpdate(ctx, out, &len, in, BLOCK) == 1 &&
           EVP_EncryptFinal_ex(ctx, out + len, &fin) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, SFS_TAG, out + BLOCK) == 1;
}

/* Seals one block of `in` into out (BLOCK + SFS_TAG bytes; sfs_seal adds
 * its length prefix before them). @return false: the library failed. */
static bool seal(struct row *r, uint64_t counter, const uint8_t *in, uint8_t *out)
{
    uint8_t nonce[24];
    nonce_of(counter, nonce);
    switch (r->impl) {
    case EVP_ROW:
        return evp_seal(r->ctx, nonce, in, out);
    case SFS_ROW:
        return sfs_seal(&r->s, in, BLOCK, out) == SFS_LENGTH + BLOCK + SFS_TAG;
#ifdef HAVE_SODIUM
    case NA_AES256GCM:
        return crypto_aead_aes256gcm_encrypt_detached_afternm(out, out + BLOCK, NULL, in, BLOCK,
                                                              aad, sizeof(aad), NULL, nonce,
                                                              r->gcm) == 0;
    case NA_CHACHA:
        return crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                   out, out + BLOCK, NULL, in, BLOCK, aad, sizeof(aad), NULL, nonce, r->key) == 0;
    case NA_XCHACHA:
        return crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                   out, out + BLOCK, NULL, in, BLOCK, aad, sizeof(aad), NULL, nonce, r->key) == 0;
#else
    default:
        break;
#endif
    }
    return false;
}

/* One pass of a row: `blocks` seals, timed. */
static struct bench_sample run_pass(struct row *r, uint64_t blocks, uint64_t *counter,
                                    const uint8_t *in, uint8_t *out)
{
    struct bench_span span;
    bench_mark(&span, false);
    for (uint64_t i = 0; i < blocks; i++)
        if (!seal(r, (*counter)++, in, out)) {
            snprintf(r->why, sizeof(r->why), "n/a (sealing failed)");
            r->ok = false;
            return (struct bench_sample){.ok = false};
        }
    bench_mark(&span, true);
    return bench_span_sample(&span, blocks * BLOCK, true);
}

static void run_passes(const uint8_t *in, uint8_t *out)
{
    uint64_t blocks = (uint64_t)opt.mb * (1u << 20) / BLOCK, counter = 0;
    for (unsigned p = 0; p < opt.passes; p++)
        for (unsigned i = 0; i < NROWS; i++)
            if (rows[i].ok)
                rows[i].pass[p] = run_pass(&rows[i], blocks, &counter, in, out);
}

/* ---- The report ---------------------------------------------------------------------------- */

enum { COL_AEAD, COL_LIB, COL_MBPS, COL_CPB, COL_RANGE, COL_RATIO, COL_MIN, COL_MAX, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [COL_AEAD] = {.title = "aead", .key = "aead"},
    [COL_LIB] = {.title = "library", .key = "library", .gap = 2},
    [COL_MBPS] = {.title = "MB/s", .key = "mbps", .right = true, .gap = 2},
    [COL_CPB] = {.title = "cycles/B", .key = "cycles_per_byte", .right = true, .gap = 2},
    [COL_RANGE] = {.title = "passes min..max MB/s", .right = true, .gap = 2},
    [COL_RATIO] = {.title = "vs chosen", .key = "ratio_to_chosen", .right = true, .gap = 2},
    [COL_MIN] = {.key = "mbps_min"},
    [COL_MAX] = {.key = "mbps_max"},
};

/* A row's cells; its median MB/s (0 if it has none). */
static double row_cells(struct bench_table *t, unsigned i, double chosen)
{
    struct row *r = &rows[i];
    double bps, cpb, lo = 0, hi = 0;
    bench_cell(t, i, COL_AEAD, "%s", r->name);
    bench_cell(t, i, COL_LIB, "%s", r->lib);
    if (!r->ok || !bench_sample_medians(r->pass, opt.passes, &bps, &cpb)) {
        bench_cell(t, i, COL_MBPS, "%s", r->why[0] ? r->why : "n/a");
        return 0;
    }
    for (unsigned p = 0; p < opt.passes; p++) {
        double v = r->pass[p].value / MB;
        lo = p == 0 || v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    bench_cell(t, i, COL_MBPS, "%.0f", bps / MB);
    bench_cell(t, i, COL_CPB, "%.2f", cpb);
    bench_cell(t, i, COL_RANGE, "%.0f..%.0f", lo, hi);
    bench_cell(t, i, COL_MIN, "%.0f", lo);
    bench_cell(t, i, COL_MAX, "%.0f", hi);
    if (chosen > 0)
        bench_cell(t, i, COL_RATIO, "%.2f", bps / MB / chosen);
    return bps / MB;
}

/* The CPU's flags that decide these rates. */
static void print_cpu_flags(void)
{
    static const char *const want[] = {"aes", "pclmulqdq", "avx", "avx2", "vaes", "vpclmulqdq",
                                       "avx512f", "sha_ni"};
    char line[8192], *flags = NULL;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && !flags && fgets(line, sizeof(line), f))
        if (!strncmp(line, "flags", 5))
            flags = strchr(line, ':');
    if (f)
        fclose(f);
    printf("CPU flags for AEADs:");
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char pat[32];
        snprintf(pat, sizeof(pat), " %s", want[i]);
        const char *at = flags ? strstr(flags, pat) : NULL;
        bool has = at && (at[strlen(pat)] == ' ' || at[strlen(pat)] == '\n');
        printf(" %s%s", has ? "" : "no-", want[i]);
    }
    printf("\n");
}

static bool report(const struct bench_machine *mc, int cpu)
{
    struct bench_table t;
    struct bench_param params[4];
    bench_table_init(&t, columns, NCOLS, NROWS);
    double chosen = row_cells(&t, CHOSEN, 0);
    bool all = chosen > 0;
    for (unsigned i = 0; i < NROWS; i++)
        all &= i == CHOSEN || row_cells(&t, i, chosen) > 0 || rows[i].absent;
    bench_cell(&t, CHOSEN, COL_RATIO, "%s", chosen > 0 ? "1.00" : "");
    printf("sealing 64 KB blocks on CPU %d: 4 bytes of associated data, a counter nonce per "
           "block; %u interleaved passes of %u MB per row, the median pass shown\n",
           cpu, opt.passes, opt.mb);
    bench_table_print(stdout, &t);
    long online = mc->online > 0 ? mc->online : 1;
    unsigned workers = opt.workers > 0 ? (unsigned)opt.workers : (unsigned)online;
    printf("chosen: aes-128-gcm, as proto.c seals it (sfs_seal): %.0f MB/s on one core; "
           "crypto ceiling with %u workers: %.0f MB/s\n",
           chosen, workers, chosen * workers);
#ifndef HAVE_SODIUM
    printf("libsodium not built in (configure did not find it): its rows are missing\n");
#endif
    bench_table_csv(&(struct bench){.name = "aead"}, opt.csv, mc, params,
                    bench_opt_params(options, params, 4), &t);
    printf("aead: chosen=aes-128-gcm mbps=%.0f workers=%u ceiling_mbps=%.0f\n", chosen, workers,
           chosen * workers);
    bench_table_free(&t);
    return all;
}

int main(int argc, char **argv)
{
    struct bench_machine mc;
    int cpu;
    int rc = bench_options("aead [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
#ifdef HAVE_SODIUM
    if (sodium_init() < 0) {
        fprintf(stderr, "aead: sodium_init() failed\n");
        return 1;
    }
#endif
    uint8_t *in = malloc(BLOCK), *out = malloc(SFS_LENGTH + BLOCK + SFS_TAG);
    if (!in || !out) {
        fprintf(stderr, "aead: out of memory\n");
        return 1;
    }
    for (unsigned i = 0; i < BLOCK; i++)
        in[i] = (uint8_t)(i * 131 + 17);
    printf("AEAD sealing rates on one core, and SFS's crypto ceiling\n");
    bench_machine_get(&mc, stdout);
    first_cpus(&cpu, 1);
    pin_self(cpu);
    printf("TSC %.3f GHz\n", bench_tsc_per_ns());
    print_cpu_flags();
    fflush(stdout);
    for (unsigned i = 0; i < NROWS; i++)
        row_init(&rows[i]);
    run_passes(in, out);
    bool all = report(&mc, cpu);
    for (unsigned i = 0; i < NROWS; i++)
        row_free(&rows[i]);
    free(in);
    free(out);
    return all ? 0 : 1;
}
