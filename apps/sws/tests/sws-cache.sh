#!/bin/sh
# SPDX-License-Identifier: MIT
# sws-cache.sh: SWS's file cache (doc/sws.md, "The file cache") seen from
# curl, on loopback, with the sws binary and a document root of its own:
#  - start-up with a 42 GB root of 2,000 files (a 2 GB and a 40 GB sparse
#    file among them) reads nothing of them: under 16 MB read in all
#    (/proc/PID/io rchar; a time bound failed on loaded machines);
#  - the 2 GB file served byte-exact (CRC and length, with marks at its
#    start, middle and end) while the server's peak RSS (VmHWM) stays within
#    64 MB of its idle RSS; the 40 GB file's Content-Length and first MB;
#  - changes seen within the validity period (--cache-valid-ms 100): a
#    rewritten file (new size, same size, renamed over, written in place;
#    small and streamed) serves its new bytes and, once settled
#    (--cache-settle-ms 100), a new ETag, the old ETag no longer gives 304; a
#    deleted file 404; a new file 200 at once;
#  - a streamed file truncated under a download: the connection is closed
#    short (curl exit 18), never padded; one that grows: exactly the
#    Content-Length sent;
#  - still refused: symbolic links (to a file, in a directory of the path,
#    a directory swapped for one after it was cached), dot files and
#    directories, "//", a FIFO (answered at once, 404), directories without
#    an index.html; SIGTERM exits 0.
# Every curl has --max-time and every wait a bound. Needs curl, truncate,
# cksum, mkfifo (fails without them). Run from the build directory.
set -u
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$(dirname "$0")/sws-lib.sh"
sws_script_init curl truncate cksum mkfifo

test_tmpdir sws-cache
fail() {
    echo "FAIL: $*"
    for f in "$tmp"/*.err "$tmp/sws.out"; do [ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
    exit 1
}
checks=0
ok() { checks=$((checks + 1)); }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# ---- the root: 42 GB in 2,000 files ------------------------------------------------
root=$tmp/root
mkdir -p "$root" || fail "mkdir"
big=$root/big.bin
truncate -s 2G "$big" || fail "truncate"
# marks (a sparse file is mostly zeros: the CRC must see them at their places)
printf 'start of the 2 GB file' | dd of="$big" conv=notrunc status=none
printf 'middle' | dd of="$big" bs=1 seek=1073741824 conv=notrunc status=none
printf 'end!' | dd of="$big" bs=1 seek=2147483644 conv=notrunc status=none
truncate -s 40G "$root/huge.bin" || fail "truncate"
printf 'huge' | dd of="$root/huge.bin" bs=1 seek=1000 conv=notrunc status=none
d=0
while [ $d -lt 20 ]; do
    mkdir "$root/d$d"
    f=0
    while [ $f -lt 100 ]; do
        printf 'file %d of directory %d\n' $f $d >"$root/d$d/f$f.txt"
        f=$((f + 1))
    done
    d=$((d + 1))
done
printf 'version 1\n' >"$root/page.txt"
head -c 1048576 /dev/urandom >"$root/large.bin" || fail "head -c /dev/urandom"
mkdir "$root/sub" "$root/.hidden" "$root/noindex"
printf 'in sub\n' >"$root/sub/f.txt"
printf 'secret\n' >"$root/.hidden/x.txt"
printf 'secret\n' >"$root/.env"
printf 'target\n' >"$root/target.txt"
ln -s target.txt "$root/inner-link"
ln -s /etc/passwd "$root/passwd-link"
ln -s /etc "$root/etc-link"
mkfifo "$root/fifo"

# ---- start-up ---------------------------------------------------------------------
t0=$(now_ms)
"$sws" --root "$root" --port 0 --workers 2 --no-pin --cache-valid-ms 100 --cache-settle-ms 100 \
    >"$tmp/sws.out" 2>"$tmp/sws.err" &
pid=$!
port=$(sws_port "$tmp/sws.out" "$pid" 200) || fail "sws exited, or did not print its port in 20 s"
t1=$(now_ms)
read_at_start=$(awk '$1 == "rchar:" { print $2 }' "/proc/$pid/io")
echo "sws serves $root (2,000 files, 42 GB) on port $port; started in $((t1 - t0)) ms, having read $read_at_start bytes"
[ -n "$read_at_start" ] && [ "$read_at_start" -lt 16777216 ] ||
    fail "start-up read ${read_at_start:-?} bytes (at most 16 MB: nothing of the root)"
ok
base=http://127.0.0.1:$port

# get NAME PATH [CURL ARGS]: body in $tmp/NAME.body, headers in $tmp/NAME.hdr, status in $code
get() {
    name=$1 path=$2
    shift 2
    rm -f "$tmp/$name.body" "$tmp/$name.hdr"
    code=$(curl -s --http1.1 --max-time 20 -D "$tmp/$name.hdr" -o "$tmp/$name.body" -w '%{http_code}' \
        "$@" "$base$path" 2>"$tmp/$name.err") || fail "curl $base$path exited $?"
    [ -f "$tmp/$name.body" ] || : >"$tmp/$name.body"
}
hdr() { tr -d '\r' <"$tmp/$1.hdr" | sed -n "s/^$2: *//Ip" | head -n 1; }
kb() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/status"; }

# ---- the 2 GB file: bytes exact, RSS bounded ----------------------------------------------
get warm /d3/f7.txt
[ "$code" = 200 ] || fail "GET /d3/f7.txt: $code"
[ "$(cat "$tmp/warm.body")" = "file 7 of directory 3" ] || fail "GET /d3/f7.txt: body differs"
get hbig /big.bin -I
[ "$(hdr hbig Content-Length)" = 2147483648 ] || fail "HEAD /big.bin: Content-Length '$(hdr hbig Content-Length)'"
ok
idle=$(kb "$pid" VmRSS)
want=$(cksum <"$big")
t0=$(now_ms)
got=$(curl -s --http1.1 --max-time 120 "$base/big.bin" | cksum)
t1=$(now_ms)
[ "$got" = "$want" ] || fail "GET /big.bin: CRC and length '$got', the file's '$want'"
ok
peak=$(kb "$pid" VmHWM)
echo "ok: 2 GB byte-exact in $((t1 - t0)) ms; RSS idle $idle kB, peak $peak kB (+$((peak - idle)) kB)"
[ $((peak - idle)) -le 65536 ] || fail "the peak RSS grew by $((peak - idle)) kB serving 2 GB (at most 65536)"
ok
get hhuge /huge.bin -I
[ "$(hdr hhuge Content-Length)" = 42949672960 ] || fail "HEAD /huge.bin: Content-Length '$(hdr hhuge Content-Length)'"
got=$(curl -s --http1.1 --max-time 20 "$base/huge.bin" 2>/dev/null | head -c 1048576 | cksum)
[ "$got" = "$(head -c 1048576 "$root/huge.bin" | cksum)" ] || fail "GET /huge.bin: the first MB differs"
ok
echo "ok: 40 GB file: Content-Length, first MB exact (download abandoned)"

# ---- changes ----------------------------------------------------------------------------------
# expect NAME PATH BODY-FILE: 200 with the file's bytes; sets etag
expect() {
    get "$1" "$2"
    [ "$code" = 200 ] || fail "GET $2: status $code, expected 200"
    cmp -s "$tmp/$1.body" "$3" || fail "GET $2: body differs from $3"
    etag=$(hdr "$1" ETag)
    ok
}
settle() { sleep 0.3; } # past --cache-valid-ms 100, and --cache-settle-ms 100 and a tick
for p in /page.txt /large.bin; do
    f=$root${p}
    expect a "$p" "$f"
    e1=$etag
    [ -n "$e1" ] || fail "GET $p: no ETag"
    get inm "$p" -H "If-None-Match: $e1"
    [ "$code" = 304 ] || fail "GET $p with its ETag: $code, expected 304"
    # a new size
    if [ "$p" = /page.txt ]; then printf 'version two\n' >"$f"; else head -c 1100000 /dev/urandom >"$f"; fi
    settle
    expect b "$p" "$f"
    e2=$etag
    [ -n "$e2" ] || fail "GET $p, settled: no ETag"
    [ "$e2" != "$e1" ] || fail "GET $p: the ETag did not change with the file ($e1)"
    get inm "$p" -H "If-None-Match: $e1"
    [ "$code" = 200 ] || fail "GET $p with the old ETag: $code, expected 200"
    cmp -s "$tmp/inm.body" "$f" || fail "GET $p with the old ETag: body differs"
    ok
    # the same size, in place
    if [ "$p" = /page.txt ]; then printf 'version 3!!\n' >"$f"; else
        head -c 4096 /dev/urandom | dd of="$f" bs=4096 seek=100 conv=notrunc status=none
    fi
    settle
    expect c "$p" "$f"
    [ -n "$etag" ] || fail "GET $p, settled: no ETag"
    [ "$etag" != "$e2" ] || fail "GET $p: the ETag did not change with an in-place write"
    # renamed over (a new inode)
    cp "$f" "$tmp/next" && printf 'X' | dd of="$tmp/next" conv=notrunc status=none && mv "$tmp/next" "$f"
    settle
    expect d "$p" "$f"
    # deleted, then back
    rm "$f"
    settle
    get gone "$p"
    [ "$code" = 404 ] || fail "GET $p after rm: $code, expected 404"
    ok
    printf 'back\n' >"$f"
    expect e "$p" "$f"
done
printf 'a new file\n' >"$root/new.txt"
expect new /new.txt "$root/new.txt"
echo "ok: rewritten, in place, renamed over, deleted, created: seen (small and streamed files)"

# ---- a streamed file that changes under a download -------------------------------------------
# resized NAME SIZE RATE NEWSIZE: downloads NAME (SIZE bytes, sparse) at RATE
# per second, truncates it to NEWSIZE after 0.5 s; prints "CODE BYTES rc=RC".
resized() {
    truncate -s "$2" "$root/$1"
    curl -s --http1.1 --max-time 60 --limit-rate "$3" -o /dev/null -w '%{http_code} %{size_download}' \
        "$base/$1" 2>/dev/null &
    sleep 0.5
    truncate -s "$4" "$root/$1"
    wait $!
    echo " rc=$?"
}
res=$(resized shrink.bin 512M 20M 1M)
case $res in
"200 "*" rc=18") ;;
*) fail "a download of a file truncated under it: '$res', expected '200 <size> rc=18' (closed short)" ;;
esac
n=$(echo "$res" | awk '{ print $2 }')
[ "$n" -lt 536870912 ] || fail "truncated download: $n bytes"
ok
res=$(resized grow.bin 64M 40M 128M)
[ "$res" = "200 67108864 rc=0" ] || fail "a download of a file grown under it: '$res', expected '200 67108864 rc=0'"
ok
settle
get h2 /grow.bin -I
[ "$(hdr h2 Content-Length)" = 134217728 ] || fail "HEAD /grow.bin after growth: '$(hdr h2 Content-Length)'"
ok
echo "ok: truncated under a download: closed short ($n bytes); grown: exactly the length sent"

# ---- refusals ---------------------------------------------------------------------------------------
expect s /sub/f.txt "$root/sub/f.txt"
mv "$root/sub" "$root/sub.real" && ln -s sub.real "$root/sub"
settle
for p in /inner-link /passwd-link /etc-link/passwd /.env /.hidden/x.txt //d1/f1.txt /fifo /noindex/ /noindex \
    /sub/f.txt; do
    get r "$p" --path-as-is --max-time 5
    [ "$code" = 404 ] || fail "GET $p: status $code, expected 404"
    ! grep -q -e 'root:' -e secret "$tmp/r.body" || fail "GET $p: served what it must not"
    ok
done
get r /sub.real/f.txt
[ "$code" = 200 ] || fail "GET /sub.real/f.txt: $code"
echo "ok: symlinks (also a directory swapped for one), dot files, //, a FIFO, no index: 404"

sws_stop "$pid" 300
src=$?
pid=
[ $src -eq 0 ] || fail "sws exited $src after SIGTERM"
ok
echo "PASS ($checks checks)"
