/* SPDX-License-Identifier: MIT */
/*
 * main.c: SWS's command line (doc/sws.md).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/sws/sws.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sws [options]\n"
            "Serves the files under a document root, as they are now, over HTTP/1.1 on the\n"
            "mely runtime, through a bounded cache (small files pre-built in memory, large\n"
            "ones sent with sendfile). SIGINT/SIGTERM: stop accepting, finish, exit 0 (a\n"
            "second signal: exit at once).\n"
            "  --root DIR          document root (default: a built-in sample site)\n"
            "  --host ADDR         numeric address to listen on (default 127.0.0.1)\n"
            "  --port N            TCP port (default 8080; 0: any free port)\n"
            "  --workers N         worker threads (default: every usable CPU)\n"
            "  --no-pin            do not pin workers to CPUs\n"
            "  --max-clients N     connections served at once (default 10000); at the\n"
            "                      cap accepting pauses (clients wait in the backlog)\n"
            "  --max-waiting N     connections accepted at the cap anyway (--reuseport\n"
            "                      races) kept until a slot frees (default: max-clients);\n"
            "                      beyond them: 503\n"
            "  --steal POLICY      work stealing: off (default), base, locality, timeleft,\n"
            "                      penalty, measured, all, or words joined with '+'\n"
            "  --engine E          mely (default) or libasync (= legacy: one FIFO per core)\n"
            "  --placement P       where a new connection runs: load (default: on the\n"
            "                      less loaded worker, from a color pool) or fd (colored\n"
            "                      by its descriptor, the paper's way: fd %% workers)\n"
            "  --measured-costs    handlers without timeleft annotations; the policy gets\n"
            "                      \"+measured\" (the runtime measures their costs)\n"
            "  --print-costs       at exit, print each handler's measured cost\n"
            "  --reuseport         one SO_REUSEPORT listener per worker (Accept per worker)\n"
            "  --timeout-ms N      idle and request timeout (default 30000)\n"
            "  --drain-ms N        graceful shutdown limit (default 5000)\n"
            "  --epoll-handler     the paper's arrangement: one Epoll handler (color 0)\n"
            "                      polls every connection and posts ReadRequest events\n"
            "  --cache-mb N        memory for cached files, heads included (default %u)\n"
            "  --cache-file-kb N   files up to N KB (and a quarter of --cache-mb) are held\n"
            "                      in memory; larger ones are sent from an open\n"
            "                      descriptor with sendfile (default %u)\n"
            "  --cache-fds N       descriptors the cache keeps open (default: the\n"
            "                      descriptor limit / 16, between 16 and 1024)\n"
            "  --cache-valid-ms N  a cached file is checked again (stat) after N ms;\n"
            "                      0: on every request (default %u)\n"
            "  --cache-settle-ms N a small file changed less than N ms (and a clock\n"
            "                      tick) before it is read may be mid-write: it is\n"
            "                      read twice, served without ETag (no-store) and\n"
            "                      not cached until it has settled (default %u)\n"
            "  --status-path PATH  where the status page is (default /server-status;\n"
            "                      off: nowhere); where it applies, it hides a file of\n"
            "                      that name\n"
            "  --status-public     the status page for every client (default: loopback\n"
            "                      clients only, 127.0.0.0/8 and ::1; others get the file\n"
            "                      at that path, or 404)\n"
            "  --trace FILE        record what every worker does (handler runs, steals,\n"
            "                      parks, polls) into FILE, a Perfetto/Chrome trace\n"
            "                      written at exit (mely-trace summarizes it; see\n"
            "                      doc/observability.md)\n"
            "  --help              this text\n"
            "Status: http://127.0.0.1:PORT/server-status (add ?format=json).\n"
            "Protocol: GET and HEAD; at most 4 empty lines before a request line (then\n"
            "400); Expect: 100-continue answered at once (100 Continue for GET/HEAD, the\n"
            "405 for other methods), other expectations 417.\n",
            CACHE_DEFAULT_MB, CACHE_DEFAULT_FILE_KB, CACHE_DEFAULT_VALID_MS,
            CACHE_DEFAULT_SETTLE_MS);
}

static int number(const char *opt, const char *v, unsigned min, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || n < min || n > max) {
        fprintf(stderr, "sws: --%s: expected a number in %u..%u, got \"%s\"\n", opt, min, max, v);
        return -1;
    }
    *out = (unsigned)n;
    return 0;
}

/* Long options only: sws has no one-letter ones. */
enum { O_ROOT = 1, O_HOST, O_PORT, O_WORKERS, O_NOPIN, O_MAXC, O_MAXW, O_STEAL, O_ENGINE,
       O_MEASURED, O_PRINT, O_REUSE, O_TIMEOUT, O_DRAIN, O_HELP, O_EPOLL, O_STATUS,
       O_STATUS_PUBLIC, O_CACHE_MB, O_CACHE_FILE, O_CACHE_FDS, O_CACHE_VALID, O_CACHE_SETTLE,
       O_TRACE, O_PLACEMENT };
static const struct option opts[] = {
    { "root", required_argument, NULL, O_ROOT },
    { "host", required_argument, NULL, O_HOST },
    { "port", required_argument, NULL, O_PORT },
    { "workers", required_argument, NULL, O_WORKERS },
    { "no-pin", no_argument, NULL, O_NOPIN },
    { "max-clients", required_argument, NULL, O_MAXC },
    { "max-waiting", required_argument, NULL, O_MAXW },
    { "steal", required_argument, NULL, O_STEAL },
    { "engine", required_argument, NULL, O_ENGINE },
    { "placement", required_argument, NULL, O_PLACEMENT },
    { "measured-costs", no_argument, NULL, O_MEASURED },
    { "print-costs", no_argument, NULL, O_PRINT },
    { "reuseport", no_argument, NULL, O_REUSE },
    { "timeout-ms", required_argument, NULL, O_TIMEOUT },
    { "drain-ms", required_argument, NULL, O_DRAIN },
    { "epoll-handler", no_argument, NULL, O_EPOLL },
    { "status-path", required_argument, NULL, O_STATUS },
    { "status-public", no_argument, NULL, O_STATUS_PUBLIC },
    { "cache-mb", required_argument, NULL, O_CACHE_MB },
    { "cache-file-kb", required_argument, NULL, O_CACHE_FILE },
    { "cache-fds", required_argument, NULL, O_CACHE_FDS },
    { "cache-valid-ms", required_argument, NULL, O_CACHE_VALID },
    { "cache-settle-ms", required_argument, NULL, O_CACHE_SETTLE },
    { "trace", required_argument, NULL, O_TRACE },
    { "help", no_argument, NULL, O_HELP },
    { NULL, 0, NULL, 0 },
};

/* The command line into cfg and print_costs: -1 to go on, else the status
 * to exit with (0 after --help, 2 for a usage error, said on stderr). */
static int parse_args(int argc, char **argv, struct sws_config *cfg, bool *print_costs)
{
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int rc = 0;
        unsigned v;
        switch (o) {
        case O_ROOT: cfg->root = optarg; break;
        case O_HOST: cfg->host = optarg; break;
        case O_PORT: rc = number("port", optarg, 0, 65535, &cfg->port); break;
        case O_WORKERS: rc = number("workers", optarg, 1, MELY_MAX_WORKERS, &cfg->workers); break;
        case O_NOPIN: cfg->pin = 0; break;
        case O_MAXC: rc = number("max-clients", optarg, 1, 1u << 20, &cfg->max_clients); break;
        case O_MAXW: rc = number("max-waiting", optarg, 1, 1u << 20, &cfg->max_waiting); break;
        case O_STEAL: cfg->steal = optarg; break;
        case O_ENGINE:
            if (strcmp(optarg, "mely") == 0)
                cfg->engine = NULL;
            else if (strcmp(optarg, "libasync") == 0 || strcmp(optarg, "legacy") == 0)
                cfg->engine = "legacy";
            else {
                fprintf(stderr, "sws: --engine: mely, libasync or legacy, not \"%s\"\n", optarg);
                rc = -1;
            }
            break;
        case O_MEASURED: cfg->measured_costs = true; break;
        case O_PRINT: *print_costs = true; break;
        case O_REUSE: cfg->reuseport = true; break;
        case O_TIMEOUT: rc = number("timeout-ms", optarg, 1, 86400000, &cfg->timeout_ms); break;
        case O_DRAIN: rc = number("drain-ms", optarg, 0, 86400000, &cfg->drain_ms); break;
        case O_EPOLL: cfg->epoll_handler = true; break;
        case O_STATUS: cfg->status_path = optarg; break;
        case O_STATUS_PUBLIC: cfg->status_public = true; break;
        case O_CACHE_MB:
            if ((rc = number("cache-mb", optarg, 0, 1u << 20, &v)) == 0)
                cfg->cache.budget = (size_t)v << 20;
            break;
        case O_CACHE_FILE:
            if ((rc = number("cache-file-kb", optarg, 0, 1u << 22, &v)) == 0)
                cfg->cache.max_file = (size_t)v << 10;
            break;
        case O_CACHE_FDS: rc = number("cache-fds", optarg, 1, 1u << 20, &cfg->cache.max_fds); break;
        case O_CACHE_VALID: rc = number("cache-valid-ms", optarg, 0, 86400000, &cfg->cache.valid_ms); break;
        case O_CACHE_SETTLE:
            rc = number("cache-settle-ms", optarg, 0, 86400000, &cfg->cache.settle_ms);
            break;
        case O_TRACE: cfg->trace = optarg; break;
        case O_PLACEMENT:
            if (strcmp(optarg, "load") == 0 || strcmp(optarg, "fd") == 0) {
                cfg->place_by_fd = optarg[0] == 'f';
            } else {
                fprintf(stderr, "sws: --placement: load or fd, not \"%s\"\n", optarg);
                rc = -1;
            }
            break;
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (rc)
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "sws: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct sws_config cfg;
    sws_config_init(&cfg);
    cfg.signals = true;
    bool print_costs = false;
    int status = parse_args(argc, argv, &cfg, &print_costs);
    if (status >= 0)
        return status;
    static struct sws s;
    char err[512] = "";
    if (sws_start(&s, &cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "sws: %s\n", err);
        sws_free(&s);
        return 1;
    }
    char url[128];
    sws_url(url, sizeof(url), s.cfg.host, sws_port(&s));
    printf("sws: serving %s (cache %zu MB, files up to %zu KB in memory, %u descriptors, checked "
           "every %u ms) on %s with %u workers, engine %s, steal %s, placement %s\n",
           cfg.root ? cfg.root : "the sample site", s.cache.budget >> 20, s.cache.max_file >> 10,
           s.cache.max_fds, cfg.cache.valid_ms, url, s.workers, cfg.engine ? cfg.engine : "mely",
           cfg.steal ? cfg.steal : "off", cfg.place_by_fd ? "fd" : "load");
    fflush(stdout);
    int rc = sws_run(&s);
    if (rc != 0)
        fprintf(stderr, "sws: run: %s\n", mely_strerror(rc));
    if (print_costs)
        sws_print_costs(&s, stdout);
    sws_free(&s);
    return rc == 0 ? 0 : 1;
}
