/* SPDX-License-Identifier: MIT */
/*
 * main.C: sfsd's command line, the served root, the crypto handlers' cost
 * annotations (measured here, at start-up), and the loop.
 */
#include "apps/sfs/sfsd.h"

#include <getopt.h>
#include <malloc.h>
#include <sys/resource.h>
#include <time.h>

#include <mely/mely.h>

sfsd_options g_opt;
sfsd_stats g_stats;
int g_rootfd = -1;
int g_seal_cycles, g_open_cycles;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sfsd --root DIR [--port N] [--addr A] [--no-annotations]\n"
            "            [--max-conns N] [--max-per-addr N] [--handshake-timeout S]\n"
            "            [--idle-timeout S] [--max-backlog N] [--max-handles N]\n"
            "Serves DIR over the SFS protocol (doc/sfs.md) on A:N (127.0.0.1:7070;\n"
            "--port 0 picks a free port). Limits (defaults): --max-conns 1024,\n"
            "--max-per-addr 256 connections from one address, --handshake-timeout 10 s,\n"
            "--idle-timeout 300 s (0: none); when full, a new connection evicts the\n"
            "oldest one still in its handshake. The runtime comes from the environment:\n"
            "MELY_WORKERS, MELY_STEAL (off, base, all, all+measured...), MELY_ENGINE\n"
            "(mely, or legacy: libasync-smp's). --no-annotations posts the crypto\n"
            "handlers without time-left and penalty. SIGTERM or SIGINT: print the\n"
            "statistics line and exit 0.\n");
}

static unsigned number(const char *opt, const char *arg, unsigned lo, unsigned hi)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(arg, &end, 10);
    if (errno || *arg == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "sfsd: --%s: expected a whole number in %u..%u, got '%s'\n", opt, lo, hi, arg);
        exit(2);
    }
    return (unsigned)v;
}

static void parse(int argc, char **argv)
{
    static const option opts[] = {
        { "root", required_argument, nullptr, 'r' },   { "port", required_argument, nullptr, 'p' },
        { "addr", required_argument, nullptr, 'a' },   { "no-annotations", no_argument, nullptr, 'n' },
        { "max-conns", required_argument, nullptr, 'c' },
        { "max-per-addr", required_argument, nullptr, 'A' },
        { "handshake-timeout", required_argument, nullptr, 'T' },
        { "idle-timeout", required_argument, nullptr, 'I' },
        { "max-backlog", required_argument, nullptr, 'b' },
        { "max-handles", required_argument, nullptr, 'H' }, { "help", no_argument, nullptr, 'h' },
        { nullptr, 0, nullptr, 0 },
    };
    for (int c, i; (c = getopt_long(argc, argv, "", opts, &i)) != -1;) {
        switch (c) {
        case 'r': g_opt.root = optarg; break;
        case 'p': g_opt.port = number("port", optarg, 0, 65535); break;
        case 'a': g_opt.addr = optarg; break;
        case 'n': g_opt.annotate = false; break;
        case 'c': g_opt.max_conns = number("max-conns", optarg, 1, 1u << 20); break;
        case 'A': g_opt.max_per_addr = number("max-per-addr", optarg, 1, 1u << 20); break;
        case 'T': g_opt.handshake_timeout = number("handshake-timeout", optarg, 0, 86400); break;
        case 'I': g_opt.idle_timeout = number("idle-timeout", optarg, 0, 86400); break;
        case 'b': g_opt.max_backlog = number("max-backlog", optarg, 1, 1024); break;
        case 'H': g_opt.max_handles = number("max-handles", optarg, 1, 1u << 16); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc || g_opt.root.empty()) {
        usage(stderr);
        exit(2);
    }
}

/* The time-stamp counter: the runtime's unit for time-left (cycles). */
static uint64_t cycles()
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
#endif
}

/* The cheapest of 9 seals of n bytes, in cycles. */
static int seal_cost(sfs_session *s, uint8_t *buf, size_t n)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 9; i++) {
        uint64_t t0 = cycles();
        if (sfs_seal(s, buf + SFS_LENGTH, n, buf) == 0)
            fatal << "the AEAD does not work (libcrypto)\n";
        best = std::min(best, cycles() - t0);
    }
    return (int)std::min<uint64_t>(best, INT32_MAX);
}

/* Measures what the crypto handlers cost on this machine, for their
 * time-left annotations: sealing a full READ reply and a small message. */
static void measure_costs()
{
    sfs_session s;
    if (sfs_session_local(&s) != 0)
        fatal << "the key exchange does not work (libcrypto)\n";
    std::vector<uint8_t> buf(SFS_LENGTH + SFS_MAX_READ + SFS_TAG, 0x5a);
    g_seal_cycles = seal_cost(&s, buf.data(), SFS_MAX_READ);
    g_open_cycles = seal_cost(&s, buf.data(), 64);
    sfs_session_free(&s);
}

/* Descriptors kept for everything but connections: stdio, the listening
 * socket, the root, the runtime's pollers and wake-ups, some handles. */
static const rlim_t FD_RESERVE = 64;

/* Connections must fit in the descriptor limit, or accept fails (EMFILE)
 * before the table is full and its evictions never happen: silent
 * connections would lock the others out after all. So the soft limit goes
 * up to the hard one (the usual soft default, 1024, is no more than the
 * default --max-conns), and --max-conns comes down, with a warning, to what
 * the limit leaves. */
static void fit_descriptors()
{
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlimit up = rl;
        up.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl = up;
    }
    rlim_t room = rl.rlim_cur > FD_RESERVE + 1 ? rl.rlim_cur - FD_RESERVE : 1;
    if (rl.rlim_cur != RLIM_INFINITY && g_opt.max_conns > room) {
        warn << "--max-conns " << g_opt.max_conns << " does not fit in " << (unsigned long)rl.rlim_cur
             << " descriptors (ulimit -n): " << (unsigned long)room << " connections at most\n";
        g_opt.max_conns = (unsigned)room;
    }
}

static void on_signal()
{
    sfsd_print_stats();
    exit(0);
}

/* Replies are ~64 KB buffers, malloc'd on color 0 and freed on the
 * connections' colors. glibc's defaults hand such memory back to the kernel
 * as soon as the top of a heap is free, so the next pread() faults fresh
 * zeroed pages in: ~5% of the server's CPU under 16 clients (perf). Keep up
 * to 64 MB of free heap instead (the slow-reader bound is per connection,
 * and the pages stay reusable). */
static void keep_reply_memory()
{
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

int main(int argc, char **argv)
{
    setprogname(argv[0]);
    parse(argc, argv);
    fit_descriptors();
    keep_reply_memory();
    g_rootfd = open(g_opt.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (g_rootfd < 0)
        fatal << "--root " << g_opt.root.c_str() << ": " << strerror(errno) << "\n";
    measure_costs();
    sigcb(SIGTERM, wrap(on_signal));
    sigcb(SIGINT, wrap(on_signal));
    unsigned port = sfsd_listen();
    const char *steal = getenv("MELY_STEAL"), *engine = getenv("MELY_ENGINE");
    printf("sfsd: serving %s on %s:%u (%d workers, engine %s, stealing %s, annotations %s; "
           "seal of 64 KB: %d cycles)\n",
           g_opt.root.c_str(), g_opt.addr.c_str(), port, task_get_nthreads(),
           engine ? engine : "mely", steal ? steal : "off", g_opt.annotate ? "on" : "off",
           g_seal_cycles);
    fflush(stdout);
    amain();
}
