#!/bin/sh
# SPDX-License-Identifier: MIT
# plot-steal.sh: PNG bar charts from bench/steal's CSV files.
#
#   bench/plot-steal.sh [RESULTS_DIR]      (default: bench/results)
#
# For each of steal-unbalanced.csv, steal-penalty.csv and steal-cache.csv found
# in RESULTS_DIR: steal-<workload>.png, KEvents/s per configuration. For
# steal-stealcost.csv: steal-stealcost.png, the thief's median cycles per steal
# per configuration and queue length (log scale). Rows without a figure are
# drawn as gaps. Needs gnuplot (Debian package gnuplot-nox); fails without it.
set -eu

dir=${1:-bench/results}

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "plot-steal.sh: gnuplot not found: install the Debian package gnuplot-nox" \
        "(apt-get install gnuplot-nox)" >&2
    exit 1
fi
if [ ! -d "$dir" ]; then
    echo "plot-steal.sh: no directory $dir (run bench/steal first)" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# columns FILE NAME...: the named columns of a CSV file (quotes understood),
# one row per line, each field as a gnuplot string ("...") separated by spaces;
# an empty field becomes NaN (a gap). The CPU model of the first row goes to
# $tmp/cpu.
columns() {
    file=$1
    shift
    awk -v want="$*" -v cpufile="$tmp/cpu" '
    function split_csv(line, f,    n, i, c, q, cur) {
        n = 0; cur = ""; q = 0
        for (i = 1; i <= length(line); i++) {
            c = substr(line, i, 1)
            if (q) {
                if (c == "\"") {
                    if (substr(line, i + 1, 1) == "\"") { cur = cur c; i++ } else q = 0
                } else cur = cur c
            } else if (c == "\"") q = 1
            else if (c == ",") { f[++n] = cur; cur = "" }
            else cur = cur c
        }
        f[++n] = cur
        return n
    }
    NR == 1 {
        n = split_csv($0, h)
        k = split(want, names, " ")
        for (j = 1; j <= k; j++) {
            col[j] = 0
            for (i = 1; i <= n; i++) if (h[i] == names[j]) col[j] = i
            if (!col[j]) { print "plot-steal.sh: no column " names[j] > "/dev/stderr"; exit 1 }
        }
        next
    }
    {
        split_csv($0, f)
        if (NR == 2) print f[2] > cpufile
        out = ""
        for (j = 1; j <= k; j++) {
            v = f[col[j]]
            if (v == "") v = "NaN"
            else if (v !~ /^[-+0-9.eE]+$/) { gsub(/"/, "", v); v = "\"" v "\"" }
            out = out (j > 1 ? " " : "") v
        }
        print out
    }' "$file"
}

plot_rounds() {
    name=$1
    csv="$dir/steal-$name.csv"
    [ -f "$csv" ] || return 0
    columns "$csv" label kevents_per_s >"$tmp/$name.dat"
    gnuplot <<EOF
set terminal pngcairo size 1300,700 noenhanced
set output "$dir/steal-$name.png"
set title "bench/steal $name: KEvents/s per configuration ($(cat "$tmp/cpu"))"
set style data histograms
set style fill solid 0.8 border -1
set boxwidth 0.8
set ylabel "KEvents/s (higher is better)"
set yrange [0:*]
set xtics rotate by -35 left
set grid ytics
set bmargin 12
set rmargin 30
unset key
plot "$tmp/$name.dat" using 2:xtic(1) linecolor rgb "#4a7ab5"
EOF
    echo "$dir/steal-$name.png"
}

plot_cost() {
    csv="$dir/steal-stealcost.csv"
    [ -f "$csv" ] || return 0
    columns "$csv" configuration pending steal_cycles_median >"$tmp/cost.raw"
    # One line per queue length, one column per configuration (in CSV order).
    awk '
    { gsub(/"/, "", $1); if (!($1 in seen)) { seen[$1] = 1; cfg[++nc] = $1 }
      if (!($2 in seenN)) { seenN[$2] = 1; ns[++nn] = $2 }
      v[$1 SUBSEP $2] = $3 }
    END {
        printf "pending"; for (c = 1; c <= nc; c++) printf " %s", cfg[c]; printf "\n"
        for (i = 1; i <= nn; i++) {
            printf "%s", ns[i]
            for (c = 1; c <= nc; c++) {
                x = v[cfg[c] SUBSEP ns[i]]
                printf " %s", (x == "NaN" || x + 0 <= 0) ? "NaN" : x
            }
            printf "\n"
        }
    }' "$tmp/cost.raw" >"$tmp/cost.dat"
    ncfg=$(head -n 1 "$tmp/cost.dat" | awk '{ print NF - 1 }')
    gnuplot <<EOF
set terminal pngcairo size 900,600 noenhanced
set output "$dir/steal-stealcost.png"
set title "bench/steal stealcost: the thief's median cycles per steal ($(cat "$tmp/cpu"))"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "TSC cycles per steal, median (log; lower is better)"
set xlabel "events pending on the victim"
set grid ytics
set key top left
plot for [c=2:$((ncfg + 1))] "$tmp/cost.dat" using c:xtic(1) title columnheader(c)
EOF
    echo "$dir/steal-stealcost.png"
}

for w in unbalanced penalty cache; do
    plot_rounds "$w"
done
plot_cost
