/*
 * report.h: the results of mely's benchmark programs.
 *
 * Rows of mely's figure next to a peer's (e.g. Boost.Asio's), judged against
 * targets, printed as an aligned table and written to a CSV file. A program
 * fills the rows (designated initializers, then the figures: its own runs,
 * bench_peer_line() for the peer's stdout), calls bench_judge() on each, then
 * bench_print_rows() and bench_write_csv().
 *
 * Everything here is mely-agnostic and works on the caller's data only: no
 * state of its own. Messages go to stderr as "<b->name>: ...". Call from one
 * thread at a time, normally the program's main thread.
 */
#ifndef MELY_BENCH_REPORT_H
#define MELY_BENCH_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "bench/harness.h" /* struct bench, struct bench_machine */

/* ---- An aligned table ------------------------------------------------------------ */

struct bench_column {
    const char *title;
    unsigned width; /* minimum; the column grows to its widest cell or title */
    bool right;     /* right-aligned (numbers) */
    unsigned gap;   /* spaces before the column (not the first): 0 means 1 */
};

/* Prints a header line and nrows lines of ncols cells (cells[row * ncols +
 * col], NULL prints as ""). The last column is not padded. */
void bench_print_table(FILE *f, const struct bench_column *cols, unsigned ncols,
                       const char *const *cells, unsigned nrows);

/* ---- Results: mely next to a peer, against targets ------------------------------- */

/* One row of results: mely's figure, the peer's (e.g. Boost.Asio's), mely's
 * advantage, the target and whether it is met. The caller fills the first
 * part (designated initializers), the figures, then calls bench_judge(). */
struct bench_row {
    const char *workload; /* in the table */
    const char *key;      /* in the CSV file */
    const char *unit;
    const char *peer_key; /* the peer's name for its figure (bench_peer_line()); NULL: none */
    double peer_scale;    /* from the peer's unit to the unit shown; 0 means 1 */
    bool lower_is_better; /* times: yes; throughputs: no */
    double ratio_target;  /* mely's advantage must be at least this; 0: no such target */
    const char *target;   /* shown as is; "" for none */

    bool have_mely, have_peer;
    double mely, peer; /* in the unit shown */

    /* set by bench_judge() */
    double advantage;   /* > 1: mely is better (peer/mely for times); valid if both figures */
    const char *status; /* PASS, MISS, n/a (nothing to judge) */
    char why[160];      /* what missed, or "" */
};

/* Sets r's advantage (if both figures are there) and status: MISS without a
 * mely figure; n/a with neither an absolute target (has_abs) nor a known
 * ratio; else PASS if the absolute target is met (abs_ok) and the advantage
 * reaches ratio_target (when both figures are there), MISS otherwise, with the
 * reasons in why. */
void bench_judge(struct bench_row *r, bool has_abs, bool abs_ok);

/* A line of the peer's stdout, "<tag>,<peer_key>,<value>": the row with that
 * peer_key gets value * peer_scale as its peer figure. Other lines are ignored. */
void bench_peer_line(const char *line, const char *tag, struct bench_row *rows, unsigned n);

/* Prints the rows as a table (workload, unit, mely, <peer_title>, mely
 * advantage, target, status), then "  <workload>: <why>" for each miss. */
void bench_print_rows(FILE *f, const char *peer_title, const struct bench_row *rows,
                      unsigned n);

/* ---- CSV ------------------------------------------------------------------------- */

/* mkdir -p for the directories of `path` (not its last component).
 * @return 0 or a negative errno (-ENAMETOOLONG, or mkdir()'s). */
int bench_make_parents(const char *path);

/* The run's parameters, repeated on every line of the CSV file. */
struct bench_param {
    const char *name;
    char value[32];
};

/* Writes the rows to path (its directories are created, the file replaced):
 * a header line, then per row date (UTC), cpu_model, usable_cpus, kernel, the
 * params, workload (the key), unit, mely, <peer>, mely_advantage, target,
 * status; missing figures are empty fields.
 * @return 0, or a negative errno (reported on stderr). */
int bench_write_csv(const struct bench *b, const char *path, const struct bench_machine *mc,
                    const struct bench_param *params, unsigned nparams, const char *peer,
                    const struct bench_row *rows, unsigned n);

/* Writes any table to path as CSV (its directories are created, the file
 * replaced): a header line date, cpu_model, usable_cpus, kernel, the params'
 * names, then titles[0..ncols-1]; then per row the same date, machine and
 * param values, and the row's cells (cells[row * ncols + col]; NULL or "" is
 * an empty field). For tables that are not mely-next-to-a-peer rows.
 * @return 0, or a negative errno (reported on stderr). */
int bench_write_cells_csv(const struct bench *b, const char *path, const struct bench_machine *mc,
                          const struct bench_param *params, unsigned nparams,
                          const char *const *titles, unsigned ncols, const char *const *cells,
                          unsigned nrows);

#endif /* MELY_BENCH_REPORT_H */
