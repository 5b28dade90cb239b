#!/usr/bin/env bash
# The baton command over HTTPS as a user runs it: --url https://... trusts the CA given
# as --cacert or BATON_CACERT (a private CA made here with openssl), and refuses a server
# another CA vouches for with a clear message. The server is python3's http.server over
# TLS, serving a /health answer from a file.
# Usage: https_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
command -v openssl >/dev/null && command -v python3 >/dev/null || {
  echo "SKIP: needs openssl and python3"
  exit 77
}

dir=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
(
  cd "$dir" || exit 1
  # shellcheck disable=SC2086
  openssl req -x509 $ec -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca \
    -addext basicConstraints=critical,CA:TRUE &&
    openssl req -x509 $ec -keyout other.key -out other-ca.pem -days 2 -subj /CN=other-ca \
      -addext basicConstraints=critical,CA:TRUE &&
    openssl req $ec -keyout server.key -out server.csr -subj /CN=localhost &&
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
      -out server.pem -days 2 -extfile server.ext
) >"$dir/openssl.log" 2>&1 || {
  cat "$dir/openssl.log"
  echo "FAIL: openssl could not make the certificates"
  exit 1
}
mkdir "$dir/www"
printf '{"status":"UP","version":"tls-test"}' >"$dir/www/health"

python3 - "$dir" >"$dir/server.log" 2>&1 <<'PY' &
import http.server, ssl, sys
d = sys.argv[1]
handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=d + "/www", **k)
server = http.server.HTTPServer(("127.0.0.1", 0), handler)
tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(d + "/server.pem", d + "/server.key")
server.socket = tls.wrap_socket(server.socket, server_side=True)
open(d + "/port.tmp", "w").write(str(server.server_address[1]))
import os; os.rename(d + "/port.tmp", d + "/port")
server.serve_forever()
PY
server_pid=$!
for _ in $(seq 100); do [[ -s $dir/port ]] && break; sleep 0.1; done
[[ -s $dir/port ]] || { cat "$dir/server.log"; echo "FAIL: the HTTPS server did not start"; exit 1; }
url="https://127.0.0.1:$(cat "$dir/port")"

out=$("$baton" health --url "$url" --cacert "$dir/ca.pem" 2>&1)
[[ $? -eq 0 && $out == "UP (baton tls-test)" ]] || fail "--cacert: got: $out"

out=$(BATON_CACERT="$dir/ca.pem" "$baton" health --url "$url" 2>&1)
[[ $? -eq 0 && $out == "UP (baton tls-test)" ]] || fail "BATON_CACERT: got: $out"

out=$(BATON_URL=$url BATON_CACERT="$dir/ca.pem" "$baton" health 2>&1)
[[ $? -eq 0 && $out == "UP (baton tls-test)" ]] || fail "BATON_URL + BATON_CACERT: got: $out"

out=$("$baton" health --url "$url" --cacert "$dir/other-ca.pem" 2>&1)
status=$?
[[ $status -eq 1 ]] || fail "another CA: exit $status, want 1"
[[ $out == "baton: cannot reach $url: TLS: the server's certificate is not trusted"* ]] ||
  fail "another CA: got: $out"

out=$("$baton" health --url "$url" 2>&1)
status=$?
[[ $status -eq 1 ]] || fail "no CA: exit $status, want 1"
[[ $out == *"not trusted"*"--cacert FILE or set BATON_CACERT"* ]] || fail "no CA: got: $out"

out=$("$baton" health --url "ftp://127.0.0.1:1" 2>&1)
status=$?
[[ $status -eq 2 && $out == *"invalid --url"* ]] || fail "ftp: exit $status: $out"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "https_test: all passed"
