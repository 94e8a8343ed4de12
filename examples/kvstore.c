/* SPDX-License-Identifier: MIT */
/*
 * kvstore.c: the key-value table and its command language (kvstore.h).
 * An entry keeps its GET reply ready ("VALUE value\n"), so a hit is one
 * write of the caller's, without formatting.
 */
#include "examples/kvstore.h"

#include <stdlib.h>
#include <string.h>

struct kv_entry {
    struct kv_entry *next;
    size_t klen, rlen;
    char *reply; /* "VALUE value\n", after the key */
    char key[];
};

/* Where the key's entry is in its bucket, or would be. */
static struct kv_entry **find(struct kv_entry **b, size_t n, const char *key, size_t klen)
{
    size_t h = 5381;
    for (size_t i = 0; i < klen; i++)
        h = h * 33 + (unsigned char)key[i];
    struct kv_entry **e = &b[h % n];
    while (*e && ((*e)->klen != klen || memcmp((*e)->key, key, klen) != 0))
        e = &(*e)->next;
    return e;
}

static struct kv_entry *entry_new(const char *key, size_t klen, const char *val, size_t vlen)
{
    struct kv_entry *e = malloc(sizeof(*e) + klen + vlen + 7);
    if (!e)
        return NULL;
    e->klen = klen;
    e->rlen = vlen + 7;
    e->reply = e->key + klen;
    memcpy(e->key, key, klen);
    memcpy(e->reply, "VALUE ", 6);
    memcpy(e->reply + 6, val, vlen);
    e->reply[vlen + 6] = '\n';
    return e;
}

/* "GET", "SET", "DEL" as 'G', 'S', 'D' (followed by a space or the end); 0. */
static char op_of(const char *line, size_t len)
{
    if (len < 3 || (len > 3 && line[3] != ' '))
        return 0;
    return !memcmp(line, "GET", 3) ? 'G' : !memcmp(line, "SET", 3) ? 'S'
           : !memcmp(line, "DEL", 3) ? 'D' : 0;
}

const char *kv_key(const char *line, size_t len, size_t *klen)
{
    const char *key = memchr(line, ' ', len), *end = line + len;
    key = key ? key + 1 : end;
    const char *sp = memchr(key, ' ', (size_t)(end - key));
    *klen = (size_t)((sp ? sp : end) - key);
    return key;
}

/* Why the line is not a command, as an ERROR line; NULL if it is one. */
static const char *check(char op, size_t klen, const char *after_key, const char *end)
{
    if (!op)
        return "ERROR unknown command (GET, SET or DEL)\n";
    if (klen == 0)
        return "ERROR missing key\n";
    if (klen > KV_MAX_KEY)
        return "ERROR key too long\n";
    if (op == 'S' && after_key == end)
        return "ERROR missing value\n";
    if (op != 'S' && after_key != end)
        return "ERROR too many arguments\n";
    return NULL;
}

void kv_command(struct kv_entry **b, size_t n, const char *line, size_t len, const char **reply,
                size_t *rlen)
{
    char op = op_of(line, len);
    size_t klen;
    const char *key = kv_key(line, len, &klen), *end = line + len;
    const char *val = key + klen + (key + klen < end), *why = check(op, klen, key + klen, end);
    struct kv_entry **e = why ? NULL : find(b, n, key, klen), *old = e ? *e : NULL, *new;
    if (why)
        *reply = why;
    else if (op == 'G' && old) {
        *reply = old->reply;
        *rlen = old->rlen;
        return;
    } else if (op == 'S' && (new = entry_new(key, klen, val, (size_t)(end - val)))) {
        new->next = old ? old->next : NULL;
        *e = new;
        free(old);
        *reply = "OK\n";
    } else if (op == 'S') {
        *reply = "ERROR out of memory\n";
    } else if (op == 'D' && old) {
        *e = old->next;
        free(old);
        *reply = "OK\n";
    } else {
        *reply = "NOT_FOUND\n";
    }
    *rlen = strlen(*reply);
}

void kv_free(struct kv_entry **b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (struct kv_entry *e = b[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
}
