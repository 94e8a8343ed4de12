/* SPDX-License-Identifier: MIT */
/*
 * symtab.c: function names from an object's symbol table (symtab.h).
 *
 * dladdr() reads only the dynamic symbol table (.dynsym), which holds the
 * exported functions: a static handler comes out as "prog+0x12f0", and a
 * user needs nm or addr2line to find it. The full symbol table (.symtab) of
 * an unstripped file names it.
 *
 * Why in the runtime, and why a reader of our own:
 *  - Names are needed in three places: stall warnings (said by the monitor
 *    while the program runs), trace files (written by the runtime) and
 *    mely-trace's tables (which print the names the trace holds). Naming in
 *    mely__handler_name (stall.c) serves all three with one reader. Naming in
 *    tools/mely-trace after the fact would need the trace to record each
 *    object's path and load address, and an ELF reader in Python, and would
 *    leave stall warnings unnamed.
 *  - Finding a symbol by its address in .symtab takes <elf.h>'s structures,
 *    a walk over the section headers and a sorted array: about as much code
 *    as the same through libelf, without a new dependency (configure, CI,
 *    packages) for every user of the library.
 *
 * Each object's file is read once, lazily, the first time one of its
 * functions needs a name (never on the post/run path), then kept for the
 * process's life: its function symbols sorted by address, their names
 * pointing into the file's mapping (read-only, shared with the page cache,
 * never unmapped), so a name returned stays valid. Objects are found by
 * path and load address (a library unloaded and another loaded at the same
 * address under another name is a new entry). The executable is read
 * through /proc/self/exe: the file the process runs, even if its path has
 * since been replaced.
 *
 * Not read: separate debug files (.gnu_debuglink, debuginfod). A stripped
 * object's static functions keep the "OBJECT+OFFSET" name.
 */
#include "mely/observe/symtab.h"

#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct fsym {
    uintptr_t addr; /* st_value: the object's own address, before its load bias */
    const char *name;
};

struct symobj {
    struct symobj *next;
    char *path;         /* l_name ("" for the executable) */
    uintptr_t bias;     /* l_addr */
    struct fsym *sym;   /* by addr; NULL: no .symtab or no functions */
    size_t n;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct symobj *objs; /* under mu; never freed */

static int by_addr(const void *a, const void *b)
{
    const struct fsym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Whether [off, off + len) lies within a file of size size. */
static bool within(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* Reads the function symbols of the ELF file at map (size bytes) into o.
 * Anything malformed leaves o without symbols. */
static void read_symbols(struct symobj *o, const unsigned char *map, size_t size)
{
    const ElfW(Ehdr) *eh = (const void *)map;
    if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff % _Alignof(ElfW(Shdr)) ||
        !within(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)), size))
        return;
    const ElfW(Shdr) *sh = (const void *)(map + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_entsize != sizeof(ElfW(Sym)) ||
            sh[i].sh_offset % _Alignof(ElfW(Sym)) || sh[i].sh_link >= eh->e_shnum ||
            !within(sh[i].sh_offset, sh[i].sh_size, size))
            continue;
        const ElfW(Shdr) *st = &sh[sh[i].sh_link];
        if (!within(st->sh_offset, st->sh_size, size) || st->sh_size == 0)
            continue;
        const char *str = (const char *)map + st->sh_offset;
        const ElfW(Sym) *sym = (const void *)(map + sh[i].sh_offset);
        size_t count = sh[i].sh_size / sizeof(ElfW(Sym));
        struct fsym *f = malloc((count ? count : 1) * sizeof(*f));
        if (!f)
            return;
        size_t n = 0;
        for (size_t k = 0; k < count; k++) {
            /* ELF32_ST_TYPE and ELF64_ST_TYPE are the same: the low 4 bits. */
            if (ELF64_ST_TYPE(sym[k].st_info) != STT_FUNC || sym[k].st_shndx == SHN_UNDEF ||
                sym[k].st_value == 0 || sym[k].st_name >= st->sh_size ||
                !memchr(str + sym[k].st_name, 0, st->sh_size - sym[k].st_name))
                continue;
            f[n++] = (struct fsym){.addr = (uintptr_t)sym[k].st_value,
                                   .name = str + sym[k].st_name};
        }
        if (!n) {
            free(f);
            return;
        }
        qsort(f, n, sizeof(*f), by_addr);
        o->sym = f;
        o->n = n;
        return;
    }
}

/* A new entry for the object at path, loaded at bias, with its symbols if
 * its file has them; NULL without memory. The file stays mapped while it
 * has symbols (their names point into it). */
static struct symobj *load(const char *path, uintptr_t bias)
{
    struct symobj *o = calloc(1, sizeof(*o));
    if (!o || !(o->path = strdup(path))) {
        free(o);
        return NULL;
    }
    o->bias = bias;
    int fd = open(path[0] ? path : "/proc/self/exe", O_RDONLY | O_CLOEXEC);
    struct stat stt;
    if (fd >= 0 && fstat(fd, &stt) == 0 && stt.st_size > 0) {
        size_t size = (size_t)stt.st_size;
        void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            read_symbols(o, map, size);
            if (!o->sym)
                munmap(map, size);
        }
    }
    if (fd >= 0)
        close(fd);
    return o;
}

const char *mely__symtab_name(const struct link_map *lm, const void *fn)
{
    const char *path = lm->l_name ? lm->l_name : "";
    const char *name = NULL;
    pthread_mutex_lock(&mu);
    struct symobj *o = objs;
    while (o && !(o->bias == (uintptr_t)lm->l_addr && strcmp(o->path, path) == 0))
        o = o->next;
    if (!o && (o = load(path, (uintptr_t)lm->l_addr)) != NULL) {
        o->next = objs;
        objs = o;
    }
    if (o && o->n) {
        struct fsym key = {.addr = (uintptr_t)fn - o->bias};
        const struct fsym *f = bsearch(&key, o->sym, o->n, sizeof(key), by_addr);
        if (f)
            name = f->name;
    }
    pthread_mutex_unlock(&mu);
    return name;
}
