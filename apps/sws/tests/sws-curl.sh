#!/bin/sh
# SPDX-License-Identifier: MIT
# sws-curl.sh: apps/sws/sws against a real client, curl, on loopback. Builds a
# document root in a temporary directory (index.html, a .css, a UTF-8 .txt, a
# subdirectory with its own index.html, a 3 MB random binary, names with a
# space), starts SWS on a free port with 2 workers, and checks with curl:
# every file byte-exact with its Content-Type, Content-Length, Last-Modified
# and ETag; / and /sub/ give their index.html, /sub a 301 to /sub/;
# If-None-Match gives 304 with no body; HEAD gives the headers and no body;
# POST gives 405 with Allow (and the connection stays open); a missing file
# 404; ".." traversal (raw and %2e%2e) is refused; uploads with "Expect:
# 100-continue" are answered well under curl's 1 s wait (100 Continue then
# 200 for a GET, 405 for PUT and POST, 413 for a large body), another
# expectation gets 417; one curl fetching two URLs
# reuses its connection; HTTP/1.0 (closed, or kept with Connection:
# keep-alive); /server-status in text and JSON. SIGTERM then stops SWS, which
# must exit 0 within 30 s. Every curl has --max-time 10 and every wait a
# bound; without curl the test fails (no skip). Run from the build directory.
set -u
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$(dirname "$0")/sws-lib.sh"
sws_script_init curl
test_tmpdir sws-curl
checks=0
ok() { checks=$((checks + 1)); }

# ---- the document root -------------------------------------------------------
root=$tmp/root
mkdir -p "$root/sub" || fail "mkdir"
cat >"$root/index.html" <<'EOF'
<!doctype html><html><head><title>sws-curl</title>
<link rel="stylesheet" href="/style.css"></head><body><p>root index</p></body></html>
EOF
printf 'body { color: #333; }\np { margin: 0 }\n' >"$root/style.css"
cat >"$root/utf8.txt" <<'EOF'
Grüße, naïve café — 日本語 テキスト, Ελληνικά, emoji 😀 ✓
EOF
cat >"$root/sub/index.html" <<'EOF'
<!doctype html><html><body><p>the subdirectory's own index</p></body></html>
EOF
head -c 3145728 /dev/urandom >"$root/blob.bin" || fail "head -c /dev/urandom"
# A name with a space: SWS loads it as "/with space.txt" and percent-decodes
# request paths, so it is served as /with%20space.txt.
printf 'a file whose name has a space\n' >"$root/with space.txt"
mkdir -p "$root/sub dir" || fail "mkdir"
printf '<p>a directory whose name has a space</p>\n' >"$root/sub dir/index.html"
mkdir -p "$root/100%" || fail "mkdir"
printf '<p>a directory whose name has a percent sign</p>\n' >"$root/100%/index.html"
[ "$(wc -c <"$root/blob.bin")" -eq 3145728 ] || fail "blob.bin is not 3 MB"
# A file changed less than --cache-settle-ms (1 s) before a request is served
# without ETag and not cached (it may be mid-write: doc/sws.md); these are
# checked settled, with SWS's defaults. (apps/sws/tests/sws-torn.sh checks the rest.)
sleep 1.1

: >"$tmp/sws.out"
"$sws" --root "$root" --port 0 --workers 2 --no-pin >"$tmp/sws.out" 2>"$tmp/sws.err" &
pid=$!
# up to 20 s (sanitizer builds start slowly)
port=$(sws_port "$tmp/sws.out" "$pid" 200) || fail "sws exited, or did not print its port in 20 s"
echo "sws serves $root on port $port"
base=http://127.0.0.1:$port

# ---- helpers -------------------------------------------------------------------
# req NAME PATH [CURL ARGS...]: one request; headers in $tmp/NAME.hdr, body in
# $tmp/NAME.body, curl's stderr in $tmp/NAME.err; the status in $code.
req() {
    name=$1
    path=$2
    shift 2
    rm -f "$tmp/$name.hdr" "$tmp/$name.body"
    code=$(curl -s --http1.1 --max-time 10 -D "$tmp/$name.hdr" -o "$tmp/$name.body" \
        -w '%{http_code}' "$@" "$base$path" 2>"$tmp/$name.err")
    rc=$?
    [ $rc -eq 0 ] || fail "curl $* $base$path exited $rc"
    # curl creates -o's file only when a body comes: none is an empty one.
    [ -f "$tmp/$name.body" ] || : >"$tmp/$name.body"
}
# hdr NAME FIELD: the value of header FIELD (case-insensitive) in $tmp/NAME.hdr.
hdr() {
    tr -d '\r' <"$tmp/$1.hdr" | sed -n "s/^$2: *//Ip" | head -n 1
}
size() { wc -c <"$1" | tr -d ' '; }
# mtime_http FILE: the file's mtime as an HTTP date (GNU date).
mtime_http() { date -u -r "$1" '+%a, %d %b %Y %H:%M:%S GMT'; }

# file URLPATH FILE TYPE: a GET of URLPATH returns FILE byte-exact, with
# Content-Type TYPE, Content-Length, Last-Modified (FILE's mtime) and an ETag.
file() {
    req get "$1"
    [ "$code" = 200 ] || fail "GET $1: status $code"
    cmp -s "$tmp/get.body" "$2" || fail "GET $1: body differs from $2"
    ok
    t=$(hdr get Content-Type)
    [ "$t" = "$3" ] || fail "GET $1: Content-Type '$t', expected '$3'"
    ok
    l=$(hdr get Content-Length)
    [ "$l" = "$(size "$2")" ] || fail "GET $1: Content-Length '$l', file has $(size "$2") bytes"
    ok
    m=$(hdr get Last-Modified)
    [ "$m" = "$(mtime_http "$2")" ] || fail "GET $1: Last-Modified '$m', expected '$(mtime_http "$2")'"
    ok
    e=$(hdr get ETag)
    case $e in \"?*\") ;; *) fail "GET $1: no strong ETag ('$e')" ;; esac
    ok
}

html='text/html; charset=utf-8'

# ---- files, byte-exact, with their headers -----------------------------------------
file /index.html "$root/index.html" "$html"
file / "$root/index.html" "$html"
file /style.css "$root/style.css" 'text/css; charset=utf-8'
file /utf8.txt "$root/utf8.txt" 'text/plain; charset=utf-8'
file /sub/index.html "$root/sub/index.html" "$html"
file /sub/ "$root/sub/index.html" "$html"
file /blob.bin "$root/blob.bin" application/octet-stream
file /with%20space.txt "$root/with space.txt" 'text/plain; charset=utf-8'
file /sub%20dir/ "$root/sub dir/index.html" "$html"
echo "ok: 9 GETs byte-exact with Content-Type, Content-Length, Last-Modified, ETag"

# /sub (no slash): 301 to /sub/, which curl -L follows.
req redir /sub
[ "$code" = 301 ] || fail "GET /sub: status $code, expected 301"
[ "$(hdr redir Location)" = /sub/ ] || fail "GET /sub: Location '$(hdr redir Location)', expected /sub/"
ok
req follow /sub -L --max-redirs 2
[ "$code" = 200 ] || fail "GET -L /sub: status $code"
cmp -s "$tmp/follow.body" "$root/sub/index.html" || fail "GET -L /sub: body differs"
ok
echo "ok: /sub -> 301 Location: /sub/"

# SWS BUG (found by this test, not fixed here): the 301's Location is the
# decoded path, not percent-encoded again, so "/sub%20dir" answers
# "Location: /sub dir/" (not a valid URI-reference) and "/100%25" answers
# "Location: /100%/", which a client follows to a 400. Expected: the path
# encoded as a URI, and curl -L arriving at the index.
req redir2 /sub%20dir
[ "$code" = 301 ] || fail "GET /sub%20dir: status $code, expected 301"
[ "$(hdr redir2 Location)" = /sub%20dir/ ] ||
    fail "SWS BUG: GET /sub%20dir: Location '$(hdr redir2 Location)', expected /sub%20dir/ (percent-encoded)"
ok
req redir3 /100%25
[ "$code" = 301 ] || fail "GET /100%25: status $code, expected 301"
[ "$(hdr redir3 Location)" = /100%25/ ] ||
    fail "SWS BUG: GET /100%25: Location '$(hdr redir3 Location)', expected /100%25/ (percent-encoded)"
ok
req follow3 /100%25 -L --max-redirs 2
[ "$code" = 200 ] || fail "SWS BUG: GET -L /100%25: status $code after the redirect, expected 200"
cmp -s "$tmp/follow3.body" "$root/100%/index.html" || fail "GET -L /100%25: body differs"
ok
echo "ok: 301 Locations are percent-encoded"

# ---- If-None-Match ----------------------------------------------------------------
for p in /style.css /blob.bin /; do
    req tag "$p"
    etag=$(hdr tag ETag)
    [ -n "$etag" ] || fail "GET $p: no ETag"
    req inm "$p" -H "If-None-Match: $etag"
    [ "$code" = 304 ] || fail "GET $p with If-None-Match $etag: status $code, expected 304"
    [ "$(size "$tmp/inm.body")" = 0 ] || fail "304 of $p has a body of $(size "$tmp/inm.body") bytes"
    [ "$(hdr inm ETag)" = "$etag" ] || fail "304 of $p: ETag '$(hdr inm ETag)', expected $etag"
    ok
    req inm2 "$p" -H 'If-None-Match: "no-such-tag"'
    [ "$code" = 200 ] || fail "GET $p with another ETag: status $code, expected 200"
    cmp -s "$tmp/inm2.body" "$tmp/tag.body" || fail "GET $p with another ETag: body differs"
    ok
done
echo "ok: If-None-Match -> 304 without a body; another tag -> 200"

# ---- HEAD ----------------------------------------------------------------------------
# curl -I prints the head; a HEAD and a GET in one invocation must share the
# connection and the GET's body must be exact, so HEAD sent no body (curl
# would otherwise see excess data or a garbled second response).
for p in /blob.bin /utf8.txt; do
    f=$root/${p#/}
    out=$(curl -s --http1.1 --max-time 10 -I -o "$tmp/head.hdr" -w '%{http_code} %{num_connects} %{size_download}\n' "$base$p" \
        --next -s --http1.1 --max-time 10 -o "$tmp/after.body" -w '%{http_code} %{num_connects}\n' "$base$p" \
        2>"$tmp/head.err") || fail "curl -I $base$p failed"
    [ "$(echo "$out" | head -n 1)" = "200 1 0" ] || fail "HEAD $p: '$(echo "$out" | head -n 1)', expected '200 1 0'"
    [ "$(echo "$out" | sed -n 2p)" = "200 0" ] || fail "GET after HEAD $p: '$(echo "$out" | sed -n 2p)', expected '200 0' (connection reused)"
    cmp -s "$tmp/after.body" "$f" || fail "GET after HEAD $p: body differs"
    [ "$(hdr head Content-Length)" = "$(size "$f")" ] || fail "HEAD $p: Content-Length '$(hdr head Content-Length)'"
    for h in ETag Last-Modified Content-Type; do
        [ -n "$(hdr head $h)" ] || fail "HEAD $p: no $h"
    done
    ok
done
echo "ok: HEAD gives the headers, no body"

# ---- errors ---------------------------------------------------------------------------
req post /index.html -X POST -d 'a=1'
[ "$code" = 405 ] || fail "POST: status $code, expected 405"
[ "$(hdr post Allow)" = 'GET, HEAD' ] || fail "POST: Allow '$(hdr post Allow)', expected 'GET, HEAD'"
ok
req post2 /index.html -X POST
[ "$code" = 405 ] || fail "POST without a body: status $code, expected 405"
[ "$(hdr post2 Allow)" = 'GET, HEAD' ] || fail "POST without a body: Allow '$(hdr post2 Allow)'"
ok
# 405 keeps the connection: a GET after it in the same curl reuses it.
out=$(curl -s --http1.1 --max-time 10 -d 'a=1' -o /dev/null -w '%{http_code} %{num_connects}\n' "$base/index.html" \
    --next -s --http1.1 --max-time 10 -o "$tmp/after405.body" -w '%{http_code} %{num_connects}\n' "$base/style.css" \
    2>"$tmp/post3.err") || fail "curl POST + GET failed"
[ "$(echo "$out" | tr '\n' ' ')" = "405 1 200 0 " ] || fail "POST then GET: '$(echo "$out" | tr '\n' ' ')', expected '405 1 200 0'"
cmp -s "$tmp/after405.body" "$root/style.css" || fail "GET after 405: body differs"
ok
echo "ok: POST -> 405 Allow: GET, HEAD (connection kept)"

req missing /no-such-file.html
[ "$code" = 404 ] || fail "GET /no-such-file.html: status $code, expected 404"
ok
req missing2 /sub/nothing/
[ "$code" = 404 ] || fail "GET /sub/nothing/: status $code, expected 404"
ok
echo "ok: missing files -> 404"

# Traversal: refused (400 or 404), never 200 and never the file.
for p in /../etc/passwd /../../../../etc/passwd /%2e%2e/etc/passwd /%2E%2E/%2e%2e/etc/passwd \
    /sub/../../etc/passwd /sub/%2e%2e/%2e%2e/etc/passwd /.%2e/etc/passwd "/sub/..%2fetc/passwd" \
    /./index.html; do
    req trav "$p" --path-as-is
    case $code in 400 | 404) ;; *) fail "GET --path-as-is $p: status $code, expected 400 or 404" ;; esac
    ! grep -q 'root:' "$tmp/trav.body" || fail "GET --path-as-is $p: the body has /etc/passwd's content"
    ok
done
echo "ok: .. traversal (raw and encoded) refused"

# ---- Expect: 100-continue ----------------------------------------------------------------
# curl sends "Expect: 100-continue" with an upload (-T) and waits up to 1 s
# for an answer before it sends the body: SWS must answer at once.
head -c 2048 /dev/urandom >"$tmp/upload.bin" || fail "head -c /dev/urandom"
# quick WHAT LIMIT: the last exp took less than LIMIT seconds.
quick() {
    awk -v t="$took" -v l="$2" 'BEGIN { exit !(t + 0 < l + 0) }' ||
        fail "$1: $took s (curl waits 1 s for a 100 Continue that does not come)"
}
# exp NAME PATH [CURL ARGS...]: req, with curl's total time in $took.
exp() {
    name=$1
    path=$2
    shift 2
    out=$(curl -s --http1.1 --max-time 10 -D "$tmp/$name.hdr" -o "$tmp/$name.body" \
        -w '%{http_code} %{time_total}' "$@" "$base$path" 2>"$tmp/$name.err") ||
        fail "curl $* $base$path failed"
    code=${out% *}
    took=${out#* }
    [ -f "$tmp/$name.body" ] || : >"$tmp/$name.body"
}
exp put /utf8.txt -T "$tmp/upload.bin"
[ "$code" = 405 ] || fail "PUT (-T, Expect: 100-continue): status $code, expected 405"
[ "$(hdr put Connection)" = close ] || fail "PUT answered before its body: Connection '$(hdr put Connection)', expected close"
quick "PUT -T" 0.5
ok
exp post100 /utf8.txt --data-binary @"$tmp/upload.bin" -H 'Expect: 100-continue'
[ "$code" = 405 ] || fail "POST with Expect: status $code, expected 405"
quick "POST with Expect" 0.5
ok
exp get100 /utf8.txt -X GET --data-binary @"$tmp/upload.bin" -H 'Expect: 100-continue'
[ "$code" = 200 ] || fail "GET with a body and Expect: status $code, expected 200"
cmp -s "$tmp/get100.body" "$root/utf8.txt" || fail "GET with a body and Expect: body differs"
grep -q '^HTTP/1.1 100 Continue' "$tmp/get100.hdr" || fail "GET with a body and Expect: no 100 Continue"
quick "GET with a body and Expect" 0.5
ok
exp big100 /utf8.txt -X GET --data-binary @"$root/blob.bin" -H 'Expect: 100-continue'
[ "$code" = 413 ] || fail "GET with a 3 MB body and Expect: status $code, expected 413"
quick "a 3 MB body and Expect" 0.5
ok
exp e417 /utf8.txt -H 'Expect: the-unexpected'
[ "$code" = 417 ] || fail "Expect: the-unexpected: status $code, expected 417"
ok
echo "ok: Expect: 100-continue answered at once (100 then 200, or 405/413); others 417"

# ---- keep-alive --------------------------------------------------------------------------
out=$(curl -s --http1.1 --max-time 10 -w '%{num_connects}\n' -o "$tmp/ka1.body" "$base/index.html" \
    -o "$tmp/ka2.body" "$base/blob.bin" 2>"$tmp/ka.err") || fail "curl (keep-alive) failed"
[ "$(echo "$out" | tr '\n' ' ')" = "1 0 " ] || fail "keep-alive: num_connects '$(echo "$out" | tr '\n' ' ')', expected '1 0'"
cmp -s "$tmp/ka1.body" "$root/index.html" || fail "keep-alive: the first body differs"
cmp -s "$tmp/ka2.body" "$root/blob.bin" || fail "keep-alive: the second body (3 MB) differs"
ok
curl -sv --http1.1 --max-time 10 -o /dev/null "$base/style.css" -o /dev/null "$base/utf8.txt" 2>"$tmp/kav.err" ||
    fail "curl -v (keep-alive) failed"
grep -q 'Re-using existing connection' "$tmp/kav.err" || fail "keep-alive: curl -v did not re-use the connection"
ok
echo "ok: keep-alive: two URLs, one connection"

# ---- HTTP/1.0 ---------------------------------------------------------------------------
req h10 /utf8.txt --http1.0
[ "$code" = 200 ] || fail "HTTP/1.0 GET: status $code"
cmp -s "$tmp/h10.body" "$root/utf8.txt" || fail "HTTP/1.0 GET: body differs"
[ "$(hdr h10 Connection)" = close ] || fail "HTTP/1.0 GET: Connection '$(hdr h10 Connection)', expected close"
ok
out=$(curl -s --http1.0 --max-time 10 -H 'Connection: keep-alive' -D "$tmp/h10k.hdr" -w '%{http_code} %{num_connects}\n' \
    -o "$tmp/h10k1.body" "$base/index.html" -o "$tmp/h10k2.body" "$base/style.css" 2>"$tmp/h10k.err") ||
    fail "curl --http1.0 keep-alive failed"
[ "$(echo "$out" | tr '\n' ' ')" = "200 1 200 0 " ] || fail "HTTP/1.0 keep-alive: '$(echo "$out" | tr '\n' ' ')', expected '200 1 200 0'"
[ "$(hdr h10k Connection)" = keep-alive ] || fail "HTTP/1.0 keep-alive: Connection '$(hdr h10k Connection)'"
cmp -s "$tmp/h10k1.body" "$root/index.html" || fail "HTTP/1.0 keep-alive: the first body differs"
cmp -s "$tmp/h10k2.body" "$root/style.css" || fail "HTTP/1.0 keep-alive: the second body differs"
ok
echo "ok: HTTP/1.0 (closed, or kept with Connection: keep-alive)"

# ---- /server-status -----------------------------------------------------------------------
req st /server-status
[ "$code" = 200 ] || fail "/server-status: status $code"
case $(hdr st Content-Type) in text/plain*) ;; *) fail "/server-status: Content-Type '$(hdr st Content-Type)'" ;; esac
grep -qi 'requests' "$tmp/st.body" || fail "/server-status: no 'requests' in the text"
ok
req stj '/server-status?format=json'
[ "$code" = 200 ] || fail "/server-status?format=json: status $code"
case $(hdr stj Content-Type) in application/json*) ;; *) fail "/server-status?format=json: Content-Type '$(hdr stj Content-Type)'" ;; esac
# No JSON parser on a fresh Debian: an object with the keys we expect.
[ "$(head -c 1 "$tmp/stj.body")" = '{' ] || fail "/server-status?format=json: does not start with {"
for k in '"requests":[0-9]' '"connections":{' '"per_worker":\['; do
    grep -q "$k" "$tmp/stj.body" || fail "/server-status?format=json: no $k"
done
[ "$(tr -d ' \n' <"$tmp/stj.body" | tail -c 1)" = '}' ] || fail "/server-status?format=json: does not end with }"
ok
echo "ok: /server-status (text and JSON)"

# ---- SIGTERM ---------------------------------------------------------------------------------
sws_stop "$pid" 300 # up to 30 s
src=$?
pid=
[ $src -eq 124 ] && fail "sws still ran 30 s after SIGTERM"
[ $src -eq 0 ] || fail "sws exited $src after SIGTERM"
ok
echo "ok: SIGTERM -> exit 0"
echo "PASS ($checks checks)"
