/* SPDX-License-Identifier: MIT */
/*
 * proto.c: the SFS wire protocol (proto.h): the key exchange and the sealed
 * frames on OpenSSL's libcrypto, and the message codecs.
 */
#include "proto.h"

#include <string.h>

#include <openssl/evp.h>
#include <openssl/kdf.h>

/* ---- Big-endian fields ---- */

static uint8_t *put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
    return p + 2;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
    return put16(put16(p, (uint16_t)(v >> 16)), (uint16_t)v);
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
    return put32(put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

/* A reader over a message: every get checks the room left, and a failed
 * one leaves the reader failed, so a decoder checks once at the end. */
struct rd {
    const uint8_t *p, *end;
    bool bad;
};

static const uint8_t *take(struct rd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    return at;
}

static uint64_t get(struct rd *r, unsigned bytes)
{
    const uint8_t *p = take(r, bytes);
    uint64_t v = 0;
    for (unsigned i = 0; p && i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

/* ---- The key exchange ---- */

int sfs_kx_new(struct sfs_kx *kx)
{
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "X25519");
    size_t len = SFS_PUBKEY;
    if (!pkey)
        return -1;
    memcpy(kx->hello, SFS_MAGIC, 4);
    if (EVP_PKEY_get_raw_public_key(pkey, kx->hello + 4, &len) != 1 || len != SFS_PUBKEY) {
        EVP_PKEY_free(pkey);
        return -1;
    }
    kx->pkey = pkey;
    return 0;
}

void sfs_kx_free(struct sfs_kx *kx)
{
    EVP_PKEY_free(kx->pkey);
    kx->pkey = NULL;
}

/* The X25519 secret of our key and the peer's public key (libcrypto refuses
 * a low-order point, whose secret would be all zeros). */
static bool x25519(EVP_PKEY *ours, const uint8_t *peer_pub, uint8_t secret[32])
{
    EVP_PKEY *peer = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, NULL, peer_pub, SFS_PUBKEY);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(ours, NULL);
    size_t len = 32;
    bool ok = peer && ctx && EVP_PKEY_derive_init(ctx) == 1 &&
              EVP_PKEY_derive_set_peer(ctx, peer) == 1 &&
              EVP_PKEY_derive(ctx, secret, &len) == 1 && len == 32;
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(peer);
    return ok;
}

/* HKDF-SHA256 of the secret, bound to both hellos (client's first): the
 * client-to-server key, then the server-to-client key. */
static bool hkdf(const uint8_t secret[32], const uint8_t *client_hello,
                 const uint8_t *server_hello, uint8_t keys[2 * SFS_KEY])
{
    static const char label[] = "sfs1 session keys";
    uint8_t info[sizeof label - 1 + 2 * SFS_HELLO];
    memcpy(info, label, sizeof label - 1);
    memcpy(info + sizeof label - 1, client_hello, SFS_HELLO);
    memcpy(info + sizeof label - 1 + SFS_HELLO, server_hello, SFS_HELLO);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
    size_t len = 2 * SFS_KEY;
    bool ok = ctx && EVP_PKEY_derive_init(ctx) == 1 &&
              EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) == 1 &&
              EVP_PKEY_CTX_set1_hkdf_salt(ctx, (const unsigned char *)SFS_MAGIC, 4) == 1 &&
              EVP_PKEY_CTX_set1_hkdf_key(ctx, secret, 32) == 1 &&
              EVP_PKEY_CTX_add1_hkdf_info(ctx, info, (int)sizeof info) == 1 &&
              EVP_PKEY_derive(ctx, keys, &len) == 1 && len == 2 * SFS_KEY;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

static bool dir_init(struct sfs_dir *d, const uint8_t key[SFS_KEY], bool seal)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int ok = ctx ? seal ? EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, key, NULL)
                        : EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, key, NULL)
                 : 0;
    if (ok != 1) {
        EVP_CIPHER_CTX_free(ctx);
        return false;
    }
    d->ctx = ctx;
    d->counter = 0;
    return true;
}

int sfs_session_init(struct sfs_session *s, struct sfs_kx *kx, const uint8_t peer[SFS_HELLO],
                     bool client)
{
    uint8_t secret[32], keys[2 * SFS_KEY];
    memset(s, 0, sizeof *s);
    if (memcmp(peer, SFS_MAGIC, 4) != 0 || !x25519(kx->pkey, peer + 4, secret))
        return -1;
    const uint8_t *ch = client ? kx->hello : peer, *sh = client ? peer : kx->hello;
    bool ok = hkdf(secret, ch, sh, keys);
    const uint8_t *c2s = keys, *s2c = keys + SFS_KEY;
    ok = ok && dir_init(&s->tx, client ? c2s : s2c, true) &&
         dir_init(&s->rx, client ? s2c : c2s, false);
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(keys, sizeof keys);
    if (!ok) {
        sfs_session_free(s);
        return -1;
    }
    return 0;
}

int sfs_session_local(struct sfs_session *s)
{
    struct sfs_kx a = { 0 }, b = { 0 };
    int err = sfs_kx_new(&a) || sfs_kx_new(&b) ? -1 : sfs_session_init(s, &a, b.hello, false);
    sfs_kx_free(&a);
    sfs_kx_free(&b);
    return err;
}

void sfs_session_free(struct sfs_session *s)
{
    EVP_CIPHER_CTX_free(s->tx.ctx);
    EVP_CIPHER_CTX_free(s->rx.ctx);
    s->tx.ctx = s->rx.ctx = NULL;
}

/* ---- Frames ---- */

/* The next nonce of a direction: 4 zero bytes, then its counter. A counter
 * that would wrap ends the session instead of reusing a nonce. */
static bool next_nonce(struct sfs_dir *d, uint8_t iv[12])
{
    if (d->counter == UINT64_MAX)
        return false;
    memset(iv, 0, 4);
    put64(iv + 4, d->counter++);
    return true;
}

size_t sfs_seal(struct sfs_session *s, const uint8_t *in, size_t n, uint8_t *out)
{
    EVP_CIPHER_CTX *ctx = s->tx.ctx;
    uint8_t iv[12];
    int len = 0, fin = 0;
    if (n > UINT32_MAX - SFS_TAG || !next_nonce(&s->tx, iv))
        return 0;
    put32(out, (uint32_t)(n + SFS_TAG));
    if (EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv) != 1 ||
        EVP_EncryptUpdate(ctx, NULL, &len, out, SFS_LENGTH) != 1 ||
        EVP_EncryptUpdate(ctx, out + SFS_LENGTH, &len, in, (int)n) != 1 ||
        EVP_EncryptFinal_ex(ctx, out + SFS_LENGTH + len, &fin) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SFS_TAG, out + SFS_LENGTH + n) != 1)
        return 0;
    return SFS_LENGTH + n + SFS_TAG;
}

uint32_t sfs_frame_length(const uint8_t *prefix, uint32_t max)
{
    struct rd r = { prefix, prefix + SFS_LENGTH, false };
    uint32_t len = (uint32_t)get(&r, 4);
    return len < SFS_TAG || len > max ? 0 : len;
}

void sfs_skip(struct sfs_session *s)
{
    s->rx.counter++;
}

long sfs_open(struct sfs_session *s, uint32_t len, const uint8_t *body, uint8_t *out)
{
    EVP_CIPHER_CTX *ctx = s->rx.ctx;
    uint8_t iv[12], prefix[SFS_LENGTH];
    int n = (int)(len - SFS_TAG), got = 0, fin = 0;
    if (len < SFS_TAG || !next_nonce(&s->rx, iv))
        return -1;
    put32(prefix, len);
    if (EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, iv) != 1 ||
        EVP_DecryptUpdate(ctx, NULL, &got, prefix, SFS_LENGTH) != 1 ||
        EVP_DecryptUpdate(ctx, out, &got, body, n) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SFS_TAG, (void *)(body + n)) != 1 ||
        EVP_DecryptFinal_ex(ctx, out + got, &fin) != 1)
        return -1;
    return n;
}

/* ---- Messages ---- */

size_t sfs_request_encode(const struct sfs_request *r, uint8_t *out)
{
    uint8_t *p = put32(out, r->id);
    *p++ = r->op;
    switch (r->op) {
    case SFS_LOOKUP:
        if (r->pathlen > SFS_MAX_PATH)
            return 0;
        p = put16(p, r->pathlen);
        memcpy(p, r->path, r->pathlen);
        p += r->pathlen;
        break;
    case SFS_READ:
        if (r->count == 0 || r->count > SFS_MAX_READ)
            return 0;
        p = put32(put64(put64(p, r->handle), r->offset), r->count);
        break;
    case SFS_READDIR:
        p = put32(put64(p, r->handle), r->count);
        break;
    case SFS_GETATTR:
    case SFS_RELEASE:
        p = put64(p, r->handle);
        break;
    default:
        return 0;
    }
    return (size_t)(p - out);
}

bool sfs_request_decode(const uint8_t *in, size_t n, struct sfs_request *r)
{
    struct rd d = { in, in + n, false };
    memset(r, 0, sizeof *r);
    r->id = (uint32_t)get(&d, 4);
    r->op = (uint8_t)get(&d, 1);
    switch (r->op) {
    case SFS_LOOKUP:
        r->pathlen = (uint16_t)get(&d, 2);
        r->path = (const char *)take(&d, r->pathlen);
        if (r->pathlen > SFS_MAX_PATH)
            return false;
        break;
    case SFS_READ:
        r->handle = get(&d, 8);
        r->offset = get(&d, 8);
        r->count = (uint32_t)get(&d, 4);
        if (r->count == 0 || r->count > SFS_MAX_READ)
            return false;
        break;
    case SFS_READDIR:
        r->handle = get(&d, 8);
        r->count = (uint32_t)get(&d, 4);
        break;
    case SFS_GETATTR:
    case SFS_RELEASE:
        r->handle = get(&d, 8);
        break;
    default:
        return false;
    }
    return !d.bad && d.p == d.end;
}

static bool has_attr(const struct sfs_reply *r)
{
    return r->status == 0 && (r->op == SFS_LOOKUP || r->op == SFS_GETATTR);
}

size_t sfs_reply_encode_head(const struct sfs_reply *r, uint8_t *out)
{
    uint8_t *p = put32(out, r->id);
    *p++ = r->op;
    p = put16(p, r->status);
    if (r->status == 0 && r->op == SFS_LOOKUP)
        p = put64(p, r->handle);
    if (has_attr(r))
        p = put64(put32(put64(p, r->attr.size), r->attr.mode), r->attr.mtime_ns);
    if (r->status == 0 && r->op == SFS_READ)
        p = put32(p, r->count);
    if (r->status == 0 && r->op == SFS_READDIR) {
        p = put32(put32(p, r->count), r->cookie);
        *p++ = r->eof;
    }
    return (size_t)(p - out);
}

/* Through the encoder, so that the layout is written once. */
size_t sfs_reply_head_size(const struct sfs_reply *r)
{
    uint8_t scratch[64];
    return sfs_reply_encode_head(r, scratch);
}

size_t sfs_dirent_encode(const struct sfs_dirent *d, uint8_t *out, size_t room)
{
    size_t n = 1 + 2 + (size_t)d->namelen;
    if (n > room)
        return 0;
    out[0] = d->type;
    memcpy(put16(out + 1, d->namelen), d->name, d->namelen);
    return n;
}

bool sfs_reply_decode(const uint8_t *in, size_t n, struct sfs_reply *r)
{
    struct rd d = { in, in + n, false };
    memset(r, 0, sizeof *r);
    r->id = (uint32_t)get(&d, 4);
    r->op = (uint8_t)get(&d, 1);
    r->status = (uint16_t)get(&d, 2);
    if (r->op < SFS_LOOKUP || r->op > SFS_RELEASE)
        return false;
    if (r->status == 0 && r->op == SFS_LOOKUP)
        r->handle = get(&d, 8);
    if (has_attr(r)) {
        r->attr.size = get(&d, 8);
        r->attr.mode = (uint32_t)get(&d, 4);
        r->attr.mtime_ns = get(&d, 8);
    }
    if (r->status == 0 && r->op == SFS_READ)
        r->count = (uint32_t)get(&d, 4);
    if (r->status == 0 && r->op == SFS_READDIR) {
        r->count = (uint32_t)get(&d, 4);
        r->cookie = (uint32_t)get(&d, 4);
        r->eof = get(&d, 1) != 0;
    }
    if (d.bad)
        return false;
    r->data = d.p;
    r->datalen = (uint32_t)(d.end - d.p);
    if (r->status != 0 || r->op == SFS_LOOKUP || r->op == SFS_GETATTR || r->op == SFS_RELEASE)
        return r->datalen == 0;
    if (r->op == SFS_READ)
        return r->count == r->datalen && r->count <= SFS_MAX_READ;
    return true; /* READDIR: the entries are checked as they are read */
}

bool sfs_dirent_next(const struct sfs_reply *r, size_t *pos, struct sfs_dirent *d)
{
    if (*pos >= r->datalen)
        return false;
    struct rd rd = { r->data + *pos, r->data + r->datalen, false };
    d->type = (uint8_t)get(&rd, 1);
    d->namelen = (uint16_t)get(&rd, 2);
    d->name = (const char *)take(&rd, d->namelen);
    if (rd.bad)
        return false;
    *pos = (size_t)(rd.p - r->data);
    return true;
}
