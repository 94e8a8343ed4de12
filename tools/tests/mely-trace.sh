#!/bin/bash
# SPDX-License-Identifier: MIT
# tools/mely-trace on a synthetic trace whose numbers are known by hand:
# the summary's per-worker shares and counts, per-handler percentiles, the
# steal pair, the dropped-records note; --runs' order, --window, the errors
# (exit 1 with a message), and --png (gnuplot-nox is required: no skip).
set -eu

tool="${srcdir:-.}/tools/mely-trace"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mely-trace-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# expect PATTERN FILE: FILE has a line matching the extended regex PATTERN.
expect() {
    grep -Eq -- "$1" "$2" || { echo "--- $2:" >&2; cat "$2" >&2; fail "no line matching: $1"; }
}

# Worker 0, span 0..1000 us: runs 100+50+300+150+50 = 650 us (busy 65.0% of
# the 1000 us trace span), a park of 200 us holding a poll of 20 us (parked,
# not polling: its record comes first, as the runtime writes it), a
# standalone poll of 50 us (5.0%), timers (3 fired); other = 100 us (10.0%).
# Worker 1, span 0..1000 us: a steal slice of 10 us (1.0%) and an older-style
# instant steal, a watch move, runs 70+25+75 = 170 us (17.0%), a spin of
# 100 us holding a poll of 10 us (both idle: spin 10.0%, poll 0.0%), a park
# of 500 us (50.0%), other = 220 us (22.0%).
# accept: 100, 300, 50, 70 -> p50 (nearest rank 2 of 4) 70, p99 = max 300.
# parse: 50, 150 -> p50 50, max 150. write: 25, 75.
# The run of worker 1 at ts 100 comes after worker 0's in the file: --runs
# keeps that order.
cat > "$tmp/trace.json" <<'EOF'
{"traceEvents":[
{"ph":"M","pid":1,"tid":0,"ts":0,"name":"process_name","args":{"name":"mely"}},
{"ph":"M","pid":1,"tid":0,"ts":0,"name":"thread_name","args":{"name":"worker 0"}},
{"ph":"X","pid":1,"tid":0,"ts":0.000,"dur":100.000,"cat":"run","name":"accept","args":{"color":1,"cycles":300}},
{"ph":"X","pid":1,"tid":0,"ts":100.000,"dur":50.000,"cat":"run","name":"parse","args":{"color":2,"cycles":150}},
{"ph":"X","pid":1,"tid":0,"ts":150.000,"dur":300.000,"cat":"run","name":"accept","args":{"color":1,"cycles":900}},
{"ph":"X","pid":1,"tid":0,"ts":510.000,"dur":20.000,"cat":"poll","name":"poll","args":{"ready":0}},
{"ph":"X","pid":1,"tid":0,"ts":500.000,"dur":200.000,"cat":"park","name":"park","args":{"woken":1}},
{"ph":"X","pid":1,"tid":0,"ts":700.000,"dur":50.000,"cat":"poll","name":"poll","args":{"ready":2}},
{"ph":"i","pid":1,"tid":0,"ts":750.000,"s":"t","cat":"timer","name":"timers","args":{"fired":3}},
{"ph":"X","pid":1,"tid":0,"ts":800.000,"dur":150.000,"cat":"run","name":"parse","args":{"color":2,"cycles":450}},
{"ph":"X","pid":1,"tid":0,"ts":950.000,"dur":50.000,"cat":"run","name":"accept","args":{"color":3,"cycles":150}},
{"ph":"M","pid":1,"tid":1,"ts":0,"name":"thread_name","args":{"name":"worker 1"}},
{"ph":"X","pid":1,"tid":1,"ts":0.000,"dur":10.000,"cat":"steal","name":"steal","args":{"victim":0,"color":3,"events":4,"cycles":30}},
{"ph":"X","pid":1,"tid":1,"ts":10.000,"dur":2.000,"cat":"move","name":"watch move","args":{"fd":7,"color":3,"from":0}},
{"ph":"X","pid":1,"tid":1,"ts":20.000,"dur":70.000,"cat":"run","name":"accept","args":{"color":3,"cycles":210}},
{"ph":"X","pid":1,"tid":1,"ts":100.000,"dur":25.000,"cat":"run","name":"write","args":{"color":3,"cycles":75}},
{"ph":"X","pid":1,"tid":1,"ts":130.000,"dur":100.000,"cat":"spin","name":"spin","args":{"found":1}},
{"ph":"X","pid":1,"tid":1,"ts":150.000,"dur":10.000,"cat":"poll","name":"poll","args":{"ready":0}},
{"ph":"i","pid":1,"tid":1,"ts":300.000,"s":"t","cat":"steal","name":"steal","args":{"victim":0,"color":2,"events":1}},
{"ph":"X","pid":1,"tid":1,"ts":400.000,"dur":75.000,"cat":"run","name":"write","args":{"color":2,"cycles":225}},
{"ph":"X","pid":1,"tid":1,"ts":500.000,"dur":500.000,"cat":"park","name":"park","args":{"woken":0}}
],"displayTimeUnit":"ns","otherData":{"dropped_records":3,"ring_records":64,"cycles_per_us":3.000}}
EOF

# ---- the summary
"$tool" "$tmp/trace.json" > "$tmp/out" || fail "summary: exit status $?"
out="$tmp/out"
expect '^  span: +1\.000 ms' "$out"
expect '^  workers: +2$' "$out"
expect '^  dropped: +3 records: the rings overwrote the oldest records' "$out"
expect '^  cycles/us: +3\.0$' "$out"
# worker, span, busy, poll, steal, spin, park, other, runs, steals, parks w/n, polls, timers, moves
expect '^  worker 0 +1\.000 +65\.0 +5\.0 +0\.0 +0\.0 +20\.0 +10\.0 +5 +0 +1/0 +2 +3 +0$' "$out"
expect '^  worker 1 +1\.000 +17\.0 +0\.0 +1\.0 +10\.0 +50\.0 +22\.0 +3 +2 +0/1 +1 +0 +1$' "$out"
# handler, runs, total ms, share %, p50, p99, max (us); by total time
expect '^  accept +4 +0\.520 +63\.4 +70\.00 +300\.0 +300\.0$' "$out"
expect '^  parse +2 +0\.200 +24\.4 +50\.00 +150\.0 +150\.0$' "$out"
expect '^  write +2 +0\.100 +12\.2 +25\.00 +75\.00 +75\.00$' "$out"
grep -A4 '^Handlers' "$out" | sed -n 3,5p | awk '{print $1}' | tr '\n' ' ' > "$tmp/order"
[ "$(cat "$tmp/order")" = "accept parse write " ] || fail "handler order: $(cat "$tmp/order")"
# colors: 1 = 100+300, 2 = 50+150+75, 3 = 50+70+25
expect '^  1 +2 +0\.400 +48\.8 +100\.0 +300\.0 +300\.0$' "$out"
expect '^  2 +3 +0\.275 +33\.5 +75\.00 +150\.0 +150\.0$' "$out"
# steals: 2 (a slice of 10 us, and an instant as older traces have them),
# 5 events; the median is over the steals with a duration: 10 us
expect '^Steals: 2, 5 events moved; watch moves: 1$' "$out"
expect '^  1 <- 0 +2 +5 +10\.00$' "$out"
expect '^  3 +1 +4$' "$out"

# ---- never a negative zero: a poll of 0.001 us at 0.008 us, inside a spin
# from 0, is covered by 0.001 us of the spin less a rounding error, so its
# polling time outside idle is -8.7e-19 us (floats); it prints 0.0.
cat > "$tmp/negzero.json" <<'EOF'
{"traceEvents":[
{"ph":"M","pid":1,"tid":0,"ts":0,"name":"thread_name","args":{"name":"worker 0"}},
{"ph":"X","pid":1,"tid":0,"ts":0.000,"dur":5.000,"cat":"spin","name":"spin","args":{"found":1}},
{"ph":"X","pid":1,"tid":0,"ts":0.008,"dur":0.001,"cat":"poll","name":"poll","args":{"ready":0}},
{"ph":"X","pid":1,"tid":0,"ts":5.000,"dur":5.000,"cat":"run","name":"h","args":{"color":1,"cycles":15}}
],"otherData":{"dropped_records":0}}
EOF
"$tool" "$tmp/negzero.json" > "$tmp/negzero" || fail "negzero: exit status $?"
expect '^  worker 0 +0\.010 +50\.0 +0\.0 +0\.0 +50\.0 +0\.0 +0\.0 ' "$tmp/negzero"
if grep -q -- '-0\.0' "$tmp/negzero"; then cat "$tmp/negzero" >&2; fail "a negative zero"; fi

# --top 1: one handler row and a line about the rest
"$tool" --top 1 "$tmp/trace.json" > "$tmp/top"
expect '^  \.\.\. and 2 more handlers' "$tmp/top"
if grep -q '^  parse ' "$tmp/top"; then fail "--top 1 printed parse"; fi

# ---- --runs: D, W lines, then the runs by start time (file order on ties)
"$tool" --runs "$tmp/trace.json" > "$tmp/runs"
cat > "$tmp/runs.expected" <<'EOF'
D 3
W 0 worker 0
W 1 worker 1
R 1 0 accept
R 3 1 accept
R 2 0 parse
R 3 1 write
R 1 0 accept
R 2 1 write
R 2 0 parse
R 3 0 accept
EOF
diff -u "$tmp/runs.expected" "$tmp/runs" || fail "--runs output"

# ---- --window: events starting from 0.4 ms on; then up to 0.12 ms
"$tool" --window 0.4: "$tmp/trace.json" > "$tmp/win"
expect '^  worker 0 .* +2 +0 +1/0 +2 +3 +0$' "$tmp/win"
expect '^  worker 1 .* +1 +0 +0/1 +0 +0 +0$' "$tmp/win"
expect '^  accept +1 ' "$tmp/win"
expect '^Steals: 0, 0 events moved; watch moves: 0$' "$tmp/win"
"$tool" --window :0.12 --runs "$tmp/trace.json" | grep -c '^R' > "$tmp/nwin"
[ "$(cat "$tmp/nwin")" = 4 ] || fail "--window :0.12 --runs: $(cat "$tmp/nwin") runs, not 4"

# ---- rings that dropped records wrapped at different times: by default the
# tables cover the window where every worker has records (worker 1's from
# 0.3 ms on here: its instant steal), and say so
awk '/"tid":1,"ts":(0|10|20|100|130|150)\.000/ { next } { print }' "$tmp/trace.json" > "$tmp/wrapped.json"
"$tool" "$tmp/wrapped.json" > "$tmp/wrapped"
expect '^  window: +0\.3 to end ms .*where every worker has records' "$tmp/wrapped"
expect '^  worker 0 .* +2 +0 +1/0 +2 +3 +0$' "$tmp/wrapped"
"$tool" --window 0: "$tmp/wrapped.json" > "$tmp/chosen"
expect '^  worker 0 .* +5 +0 +1/0 +2 +3 +0$' "$tmp/chosen"

# ---- errors: exit status 1 and a one-line message
# must_fail WHAT ARGS...: the tool exits 1 and says something on stderr.
must_fail() {
    local what=$1 rc=0
    shift
    "$tool" "$@" > /dev/null 2> "$tmp/err" || rc=$?
    [ "$rc" = 1 ] || fail "$what: exit status $rc, not 1"
    [ "$(wc -l < "$tmp/err")" = 1 ] || fail "$what: not one line on stderr: $(cat "$tmp/err")"
    echo "$what: $(cat "$tmp/err")"
}
echo 'this is not {json' > "$tmp/bad.json"
must_fail "not JSON" "$tmp/bad.json"
grep -q 'not JSON' "$tmp/err" || fail "not JSON: message $(cat "$tmp/err")"
echo '{"hello": [1, 2, 3]}' > "$tmp/other.json"
must_fail "not a trace" "$tmp/other.json"
grep -q 'not a mely trace' "$tmp/err" || fail "not a trace: message $(cat "$tmp/err")"
must_fail "missing file" "$tmp/does-not-exist.json"
# a run without args.cycles, as check_trace's reader refused it
sed 's/,"cycles":300//' "$tmp/trace.json" > "$tmp/nocycles.json"
must_fail "run without cycles" --runs "$tmp/nocycles.json"
rc=0
"$tool" --window nonsense "$tmp/trace.json" > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "usage error: exit status $rc, not 2"

# ---- --png: gnuplot-nox is part of what the tests need
command -v gnuplot > /dev/null || fail "gnuplot not installed (Debian package gnuplot-nox)"
"$tool" --png "$tmp/t.png" "$tmp/trace.json" > /dev/null || fail "--png: exit status $?"
[ -f "$tmp/t.png" ] || fail "--png wrote no file"
sig=$(head -c 8 "$tmp/t.png" | od -An -tx1 | tr -d ' \n')
[ "$sig" = 89504e470d0a1a0a ] || fail "--png: not a PNG (starts with $sig)"
size=$(wc -c < "$tmp/t.png")
[ "$size" -gt 10000 ] || fail "--png: only $size bytes"
# more runs than a timeline can draw one by one: shares of time bins
awk 'BEGIN { printf "{\"traceEvents\":[{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"ts\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"worker 0\"}}"
    for (i = 0; i < 6000; i++)
        printf ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":%d,\"dur\":1.5,\"cat\":\"run\",\"name\":\"h%d\",\"args\":{\"color\":%d,\"cycles\":3}}", 2 * i, i % 10, i % 7
    printf "\n],\"otherData\":{\"dropped_records\":0}}\n" }' > "$tmp/many.json"
"$tool" --png "$tmp/many.png" "$tmp/many.json" > /dev/null || fail "--png of 6,000 runs: exit status $?"
[ "$(wc -c < "$tmp/many.png")" -gt 10000 ] || fail "--png of 6,000 runs: too small"
echo "mely-trace: all checks passed"
