/* SPDX-License-Identifier: MIT */
/*
 * kvstore.h: the table and the command language of examples/kv.c (on
 * streams) and bench/e2e/kv_bufferevent.c (on libevent bufferevents), shared
 * so that the two servers differ in their I/O only.
 *
 *   GET key        VALUE value | NOT_FOUND
 *   SET key value  OK                (the value: the rest of the line)
 *   DEL key        OK | NOT_FOUND
 *   anything else  ERROR why
 * Keys: 1 to KV_MAX_KEY bytes without a space.
 *
 * A table is an array of buckets; the caller decides who touches which
 * (kv.c: each key color its own part of the array, so no lock). Not
 * thread-safe otherwise.
 */
#ifndef MELY_EXAMPLES_KVSTORE_H
#define MELY_EXAMPLES_KVSTORE_H

#include <stddef.h>

#define KV_MAX_KEY 250

struct kv_entry;

/* The key of the line "OP KEY[ VALUE]": *klen bytes at the address returned
 * (*klen 0: none). */
const char *kv_key(const char *line, size_t len, size_t *klen);

/* Runs one command line on the n buckets at b; *reply and *rlen: its reply
 * line, LF included, valid until the next call on those buckets. */
void kv_command(struct kv_entry **b, size_t n, const char *line, size_t len, const char **reply,
                size_t *rlen);

/* Frees every entry of the n buckets at b. */
void kv_free(struct kv_entry **b, size_t n);

#endif /* MELY_EXAMPLES_KVSTORE_H */
