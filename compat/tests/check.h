/* SPDX-License-Identifier: MIT */
/*
 * check.h: CHECK(cond), the compat tests' assertion: a message on stderr and
 * _Exit(1) (no exit-time code: it may fail inside a forked child or a handler).
 * Includes nothing, so that the transitive tests use it without adding a
 * header: the includer gives fprintf (<stdio.h>) and _Exit (<stdlib.h>).
 */
#ifndef MELY_COMPAT_CHECK_H
#define MELY_COMPAT_CHECK_H

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);          \
            _Exit(1);                                                                         \
        }                                                                                     \
    } while (0)

#endif
