/* SPDX-License-Identifier: MIT */
/*
 * symtab.h: names of functions that dladdr() cannot name (static functions,
 * and a program's own when it is not linked with -rdynamic), from the symbol
 * table (.symtab) of the object that holds them. symtab.c says why here.
 */
#ifndef MELY_SYMTAB_H
#define MELY_SYMTAB_H

#include <link.h>

/* The name of the function that starts at fn, in the object lm (dladdr1's
 * RTLD_DL_LINKMAP), from that object's file's .symtab; NULL if the file has
 * none (stripped) or no function starts at fn. The name lives as long as the
 * process. Slow the first time an object is asked about (its file is read):
 * never on the post/run path, only when a name is written (stall warnings,
 * trace files). Any thread. */
const char *mely__symtab_name(const struct link_map *lm, const void *fn);

#endif /* MELY_SYMTAB_H */
