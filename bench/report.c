/*
 * report.c: rows of results, the aligned table and the CSV file (see report.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench/report.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

/* ---- An aligned table ------------------------------------------------------------ */

static void print_line(FILE *f, const struct bench_column *cols, unsigned ncols,
                       const unsigned *width, const char *const *cell)
{
    for (unsigned c = 0; c < ncols; c++) {
        const char *s = cell[c] ? cell[c] : "";
        if (c > 0)
            fprintf(f, "%*s", (int)(cols[c].gap ? cols[c].gap : 1), "");
        if (c == ncols - 1 && !cols[c].right)
            fputs(s, f);
        else
            fprintf(f, cols[c].right ? "%*s" : "%-*s", (int)width[c], s);
    }
    fputc('\n', f);
}

void bench_print_table(FILE *f, const struct bench_column *cols, unsigned ncols,
                       const char *const *cells, unsigned nrows)
{
    unsigned width[ncols ? ncols : 1];
    const char *title[ncols ? ncols : 1];

    for (unsigned c = 0; c < ncols; c++) {
        title[c] = cols[c].title;
        width[c] = cols[c].width;
        if (strlen(title[c]) > width[c])
            width[c] = (unsigned)strlen(title[c]);
        for (unsigned r = 0; r < nrows; r++) {
            const char *s = cells[r * ncols + c];
            if (s && strlen(s) > width[c])
                width[c] = (unsigned)strlen(s);
        }
    }
    print_line(f, cols, ncols, width, title);
    for (unsigned r = 0; r < nrows; r++)
        print_line(f, cols, ncols, width, cells + r * ncols);
}

/* ---- Results --------------------------------------------------------------------- */

void bench_judge(struct bench_row *r, bool has_abs, bool abs_ok)
{
    bool known = r->have_mely && r->have_peer && r->mely > 0 && r->peer > 0;

    if (known)
        r->advantage = r->lower_is_better ? r->peer / r->mely : r->mely / r->peer;
    r->why[0] = '\0';
    if (!r->have_mely) {
        r->status = "MISS";
        snprintf(r->why, sizeof(r->why), "no mely figure (see the messages above)");
        return;
    }
    bool ratio_known = known && r->ratio_target > 0;
    if (!has_abs && !ratio_known) {
        r->status = "n/a";
        return;
    }
    bool ok = true;
    if (has_abs && !abs_ok) {
        ok = false;
        snprintf(r->why, sizeof(r->why), "absolute target missed");
    }
    if (ratio_known && r->advantage < r->ratio_target) {
        size_t l = strlen(r->why);
        snprintf(r->why + l, sizeof(r->why) - l, "%sadvantage %.2fx < %.0fx", l ? "; " : "",
                 r->advantage, r->ratio_target);
        ok = false;
    }
    r->status = ok ? "PASS" : "MISS";
}

void bench_peer_line(const char *line, const char *tag, struct bench_row *rows, unsigned n)
{
    char who[64], key[64];
    double v;

    if (sscanf(line, "%63[^,],%63[^,],%lf", who, key, &v) != 3 || strcmp(who, tag) != 0)
        return;
    for (unsigned i = 0; i < n; i++)
        if (rows[i].peer_key && strcmp(key, rows[i].peer_key) == 0) {
            rows[i].peer = v * (rows[i].peer_scale != 0 ? rows[i].peer_scale : 1.0);
            rows[i].have_peer = true;
        }
}

/* A figure as the table shows it: "-" if missing, no decimals from 100 up. */
static void fmt_value(char *buf, size_t size, bool have, double v)
{
    if (!have)
        snprintf(buf, size, "-");
    else if (v >= 100)
        snprintf(buf, size, "%.0f", v);
    else
        snprintf(buf, size, "%.2f", v);
}

void bench_print_rows(FILE *f, const char *peer_title, const struct bench_row *rows,
                      unsigned n)
{
    const struct bench_column cols[] = {
        {.title = "workload", .width = 22},
        {.title = "unit", .width = 14},
        {.title = "mely", .width = 10, .right = true},
        {.title = peer_title, .width = 12, .right = true},
        {.title = "mely advantage", .width = 15, .right = true},
        {.title = "target", .width = 22, .gap = 2},
        {.title = "status"},
    };
    enum { NCOLS = sizeof(cols) / sizeof(cols[0]) };
    char text[n ? n : 1][3][32];
    const char *cells[n ? n : 1][NCOLS];

    memset(cells, 0, sizeof(cells));
    for (unsigned i = 0; i < n; i++) {
        const struct bench_row *r = &rows[i];
        fmt_value(text[i][0], sizeof(text[i][0]), r->have_mely, r->mely);
        fmt_value(text[i][1], sizeof(text[i][1]), r->have_peer, r->peer);
        if (r->have_mely && r->have_peer)
            snprintf(text[i][2], sizeof(text[i][2]), "%.2fx", r->advantage);
        else
            snprintf(text[i][2], sizeof(text[i][2]), "-");
        const char *row[NCOLS] = {r->workload, r->unit,  text[i][0], text[i][1], text[i][2],
                                  r->target[0] ? r->target : "-", r->status};
        memcpy(cells[i], row, sizeof(row));
    }
    bench_print_table(f, cols, NCOLS, &cells[0][0], n);
    for (unsigned i = 0; i < n; i++)
        if (rows[i].why[0])
            fprintf(f, "  %s: %s\n", rows[i].workload, rows[i].why);
}

/* ---- CSV ------------------------------------------------------------------------- */

int bench_make_parents(const char *path)
{
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof(dir), "%s", path) >= sizeof(dir))
        return -ENAMETOOLONG;
    char *end = strrchr(dir, '/');
    if (!end)
        return 0;
    *end = '\0';
    for (char *p = dir + 1; p <= end; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return -errno;
        *p = c;
    }
    return 0;
}

/* One field, quoted if it holds ',', '"' or a newline, then ',' or '\n'. */
static void csv_field(FILE *f, const char *s, bool last)
{
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

/* A number field, or an empty one if there is no figure. */
static void csv_number(FILE *f, bool have, const char *fmt, double v)
{
    char buf[64];
    if (have)
        snprintf(buf, sizeof(buf), fmt, v);
    csv_field(f, have ? buf : "", false);
}

/* The machine and run columns every CSV line starts with. */
struct csv_prefix {
    char when[32], usable[16];
    const struct bench_machine *mc;
    const struct bench_param *params;
    unsigned nparams;
};

/* Opens path for writing (creating its directories) and fills p's date;
 * NULL with *err set (and reported) on error. */
static FILE *csv_open(const struct bench *b, const char *path, struct csv_prefix *p, int *err)
{
    *err = bench_make_parents(path);
    if (*err) {
        fprintf(stderr, "%s: cannot create the directory of %s: %s\n", b->name, path,
                strerror(-*err));
        return NULL;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        *err = -errno;
        fprintf(stderr, "%s: cannot write %s: %s\n", b->name, path, strerror(-*err));
        return NULL;
    }
    time_t t = time(NULL);
    struct tm tm;
    strftime(p->when, sizeof(p->when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    snprintf(p->usable, sizeof(p->usable), "%u", p->mc->usable);
    return f;
}

/* The prefix's titles (header) or values (a row), each followed by ','. */
static void csv_prefix_fields(FILE *f, const struct csv_prefix *p, bool header)
{
    if (header)
        fputs("date,cpu_model,usable_cpus,kernel,", f);
    else {
        csv_field(f, p->when, false);
        csv_field(f, p->mc->cpu, false);
        csv_field(f, p->usable, false);
        csv_field(f, p->mc->kernel, false);
    }
    for (unsigned i = 0; i < p->nparams; i++)
        csv_field(f, header ? p->params[i].name : p->params[i].value, false);
}

/* Closes f; -EIO (reported) if anything failed. */
static int csv_close(const struct bench *b, FILE *f, const char *path)
{
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "%s: writing %s: %s\n", b->name, path, strerror(failed ? EIO : errno));
        return -EIO;
    }
    return 0;
}

int bench_write_csv(const struct bench *b, const char *path, const struct bench_machine *mc,
                    const struct bench_param *params, unsigned nparams, const char *peer,
                    const struct bench_row *rows, unsigned n)
{
    struct csv_prefix p = {.mc = mc, .params = params, .nparams = nparams};
    int err;
    FILE *f = csv_open(b, path, &p, &err);
    if (!f)
        return err;
    csv_prefix_fields(f, &p, true);
    fprintf(f, "workload,unit,mely,%s,mely_advantage,target,status\n", peer);
    for (unsigned i = 0; i < n; i++) {
        const struct bench_row *r = &rows[i];
        csv_prefix_fields(f, &p, false);
        csv_field(f, r->key, false);
        csv_field(f, r->unit, false);
        csv_number(f, r->have_mely, "%.4f", r->mely);
        csv_number(f, r->have_peer, "%.4f", r->peer);
        csv_number(f, r->have_mely && r->have_peer, "%.3f", r->advantage);
        csv_field(f, r->target, false);
        csv_field(f, r->status, true);
    }
    return csv_close(b, f, path);
}

int bench_write_cells_csv(const struct bench *b, const char *path, const struct bench_machine *mc,
                          const struct bench_param *params, unsigned nparams,
                          const char *const *titles, unsigned ncols, const char *const *cells,
                          unsigned nrows)
{
    struct csv_prefix p = {.mc = mc, .params = params, .nparams = nparams};
    int err;
    FILE *f = csv_open(b, path, &p, &err);
    if (!f)
        return err;
    csv_prefix_fields(f, &p, true);
    for (unsigned c = 0; c < ncols; c++)
        csv_field(f, titles[c], c == ncols - 1);
    for (unsigned r = 0; r < nrows; r++) {
        csv_prefix_fields(f, &p, false);
        for (unsigned c = 0; c < ncols; c++) {
            const char *s = cells[r * ncols + c];
            csv_field(f, s ? s : "", c == ncols - 1);
        }
    }
    return csv_close(b, f, path);
}
