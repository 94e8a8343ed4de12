/* SPDX-License-Identifier: MIT */
/*
 * proto.h: the SFS wire protocol (doc/sfs.md), shared by the server
 * (apps/sfs, C++ over compat), the multio client (bench/multio) and the tests.
 *
 * A session is one TCP connection: a key exchange, then sealed frames.
 *
 *   hello   client -> server   "SFS1" | client's X25519 public key (32)
 *   hello   server -> client   "SFS1" | server's X25519 public key (32)
 *   frame   either way         length (u32, big-endian) | AEAD ciphertext and tag
 *
 * Both sides derive two AES-128-GCM keys (one per direction) with HKDF-SHA256
 * from the X25519 secret and both public keys. A direction's nonce is its
 * frame counter (never sent), and the length is the AEAD's associated data, so
 * a tampered, replayed, reordered, truncated or re-lengthened frame fails to
 * open. Every primitive is OpenSSL's libcrypto; nothing here is hand-written
 * crypto. Why AES-128-GCM: doc/sfs.md, measured by bench/aead.
 *
 * Inside a frame: a request or a reply, big-endian, encoded and decoded by the
 * functions below. Decoders check every length against the frame: they return
 * false for a short, overlong or malformed message, never read past it.
 *
 * Threads: a session is used by one thread at a time (the server: its
 * connection's color); everything else is pure.
 */
#ifndef SFS_PROTO_H
#define SFS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SFS_MAGIC "SFS1"
#define SFS_PUBKEY 32                     /* X25519 public key */
#define SFS_HELLO (4 + SFS_PUBKEY)        /* a hello, either way */
#define SFS_KEY 16                        /* AES-128 */
#define SFS_TAG 16                        /* GCM tag */
#define SFS_LENGTH 4                      /* a frame's length prefix */
#define SFS_MAX_READ 65536u               /* a READ's largest count */
#define SFS_MAX_PATH 1024u                /* a LOOKUP's longest path */
#define SFS_MAX_REQUEST 2048u             /* a request's largest plaintext */
#define SFS_MAX_REPLY (SFS_MAX_READ + 64u) /* a reply's largest plaintext */
/* The largest frame (length field) each side accepts: more closes the session. */
#define SFS_MAX_REQUEST_FRAME (SFS_MAX_REQUEST + SFS_TAG)
#define SFS_MAX_REPLY_FRAME (SFS_MAX_REPLY + SFS_TAG)

enum sfs_op {
    SFS_LOOKUP = 1,  /* path (relative to the served root) -> handle, attributes */
    SFS_GETATTR = 2, /* handle -> attributes */
    SFS_READ = 3,    /* handle, offset, count -> data (short at the end of the file) */
    SFS_READDIR = 4, /* directory handle, cookie -> entries, next cookie, eof */
    SFS_RELEASE = 5, /* handle -> (the handle is gone) */
};

/* A reply's status: 0, or an errno value (ENOENT, EACCES, EISDIR, EBADF...). */

struct sfs_attr {
    uint64_t size;
    uint32_t mode;     /* st_mode: type and permissions */
    uint64_t mtime_ns; /* modification time, ns since the epoch */
};

struct sfs_request {
    uint32_t id; /* echoed in the reply */
    uint8_t op;  /* enum sfs_op */
    uint64_t handle;
    uint64_t offset;  /* READ */
    uint32_t count;   /* READ: 1..SFS_MAX_READ; READDIR: the cookie */
    uint16_t pathlen; /* LOOKUP */
    const char *path; /* LOOKUP: not NUL-terminated, points into the message */
};

/* A directory entry in a READDIR reply. */
struct sfs_dirent {
    uint8_t type; /* DT_REG, DT_DIR, ... (dirent.h) */
    uint16_t namelen;
    const char *name; /* not NUL-terminated, points into the message */
};

struct sfs_reply {
    uint32_t id;
    uint8_t op;
    uint16_t status; /* 0 or an errno value; the fields below only when 0 */
    uint64_t handle; /* LOOKUP */
    struct sfs_attr attr; /* LOOKUP, GETATTR */
    uint32_t count;       /* READ: data bytes; READDIR: entries */
    const uint8_t *data;  /* READ: the bytes; READDIR: the encoded entries */
    uint32_t datalen;     /* the bytes at data */
    uint32_t cookie;      /* READDIR: the next cookie */
    bool eof;             /* READDIR: no entries after these */
};

/* ---- The key exchange ---------------------------------------------------------------- */

/* One side's ephemeral X25519 key pair. */
struct sfs_kx {
    void *pkey; /* EVP_PKEY * */
    uint8_t hello[SFS_HELLO];
};

/* Generates a fresh key pair and the hello that carries its public key.
 * @return 0; -1 (libcrypto failed; *kx unchanged). */
int sfs_kx_new(struct sfs_kx *kx);

/* Frees the key pair (kx may have failed sfs_kx_new or been used up). */
void sfs_kx_free(struct sfs_kx *kx);

/* One direction of a session: its AEAD context and frame counter. */
struct sfs_dir {
    void *ctx; /* EVP_CIPHER_CTX * with the key set */
    uint64_t counter;
};

struct sfs_session {
    struct sfs_dir tx, rx;
};

/* Derives a session from our key pair and the peer's hello. `client` says
 * which side we are (it picks which derived key seals). kx is left usable
 * for nothing but sfs_kx_free().
 * @return 0; -1 (bad magic, a low-order public key, libcrypto failed). */
int sfs_session_init(struct sfs_session *s, struct sfs_kx *kx, const uint8_t peer[SFS_HELLO],
                     bool client);

void sfs_session_free(struct sfs_session *s);

/* A session keyed between two fresh key pairs of this process: nothing can
 * talk to it, but it seals as a real session does (to measure the AEAD).
 * @return 0; -1 (libcrypto failed). */
int sfs_session_local(struct sfs_session *s);

/* ---- Frames ----------------------------------------------------------------------------- */

/* Seals n bytes of plaintext at `in` into out: the length prefix, then the
 * ciphertext and tag (SFS_LENGTH + n + SFS_TAG bytes; in and out + SFS_LENGTH
 * may be the same buffer). Uses the next tx counter.
 * @return the frame's size; 0 if libcrypto failed. */
size_t sfs_seal(struct sfs_session *s, const uint8_t *in, size_t n, uint8_t *out);

/* A frame's length field (the first SFS_LENGTH bytes), 0 if it exceeds max
 * or is too short to hold a tag: the session must end. */
uint32_t sfs_frame_length(const uint8_t *prefix, uint32_t max);

/* Uses up the next rx nonce without opening a frame: a reader that skips a
 * frame (a client that does not verify) stays in step for the next one. */
void sfs_skip(struct sfs_session *s);

/* Opens a frame whose length field is len (from sfs_frame_length): body is
 * the len bytes after the prefix; the plaintext (len - SFS_TAG bytes) goes
 * to out, which may be body. Uses the next rx counter.
 * @return the plaintext's size; -1: the frame does not authenticate (tampered,
 *         replayed, reordered or from another session): the session must end. */
long sfs_open(struct sfs_session *s, uint32_t len, const uint8_t *body, uint8_t *out);

/* ---- Messages --------------------------------------------------------------------------- */

/* Encodes a request into out (at least SFS_MAX_REQUEST bytes).
 * @return its size; 0 if it cannot be encoded (unknown op, path too long,
 *         READ count 0 or over SFS_MAX_READ). */
size_t sfs_request_encode(const struct sfs_request *r, uint8_t *out);

/* Decodes a request. @return false: malformed (see the file's comment). */
bool sfs_request_decode(const uint8_t *in, size_t n, struct sfs_request *r);

/* The size of what sfs_reply_encode_head() writes for r: everything but
 * READ's data and READDIR's entries. */
size_t sfs_reply_head_size(const struct sfs_reply *r);

/* Encodes a reply's head into out; a READ's data (r->datalen bytes) or a
 * READDIR's entries follow it, written there by the caller (so that a READ
 * lands in place, with no copy). @return the head's size. */
size_t sfs_reply_encode_head(const struct sfs_reply *r, uint8_t *out);

/* Appends one directory entry at out (room bytes free).
 * @return its size; 0 if it does not fit. */
size_t sfs_dirent_encode(const struct sfs_dirent *d, uint8_t *out, size_t room);

/* Decodes a reply (data, for READ and READDIR, points into in).
 * @return false: malformed. */
bool sfs_reply_decode(const uint8_t *in, size_t n, struct sfs_reply *r);

/* The next entry of a READDIR reply's data: *pos is the offset into it.
 * @return false at the end, or if the rest is malformed. */
bool sfs_dirent_next(const struct sfs_reply *r, size_t *pos, struct sfs_dirent *d);

#ifdef __cplusplus
}
#endif

#endif
