#!/usr/bin/env bash
# Certificates for the test services' TLS listeners, made with the openssl command.
#
#   certs.sh make DIR    a test CA (ca.pem, ca.key), a server certificate for localhost
#                        and 127.0.0.1 (server.pem, server.key) and a client certificate
#                        (client.pem, client.key, CN=baton) signed by it, in DIR. Does
#                        nothing when DIR already holds them.
#   certs.sh sign DIR NAME CN DAYS_FROM DAYS_TO [SAN]
#                        another certificate NAME.pem / NAME.key signed by DIR's CA, valid
#                        from DAYS_FROM to DAYS_TO days from now (negative: in the past, for
#                        an expired one); SAN like "DNS:localhost,IP:127.0.0.1".
#   certs.sh ca DIR      another, unrelated CA in DIR (ca.pem, ca.key): what a client that
#                        trusts the wrong CA has.
# Keys are ECDSA P-256, 0600; certificates 0644. Not for production: the CA key sits
# beside the certificates.
set -euo pipefail

make_ca() {
  local dir=$1
  mkdir -p "$dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 3650 \
    -subj "/CN=Baton test CA $(date +%s%N)" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
  chmod 600 "$dir/ca.key"
}

# sign DIR NAME CN FROM TO [SAN]
sign() {
  local dir=$1 name=$2 cn=$3 from=$4 to=$5 san=${6:-}
  local ext
  ext=$(mktemp)
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } >"$ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$cn" 2>/dev/null
  # `openssl x509 -req` takes whole days from now only; -not_before/-not_after need
  # OpenSSL 3.4, so an expired certificate is signed by `openssl ca` with explicit dates.
  local start end
  start=$(date -u -d "$from days" +%Y%m%d%H%M%SZ)
  end=$(date -u -d "$to days" +%Y%m%d%H%M%SZ)
  local db
  db=$(mktemp -d)
  : >"$db/index.txt"
  printf '%s\n' "[ca]" "default_ca=test" "[test]" "database=$db/index.txt" \
    "new_certs_dir=$db" "serial=$db/serial" "default_md=sha256" "policy=any" \
    "unique_subject=no" "copy_extensions=none" "[any]" "commonName=supplied" >"$db/ca.cnf"
  openssl rand -hex 16 >"$db/serial"
  openssl ca -batch -config "$db/ca.cnf" -cert "$dir/ca.pem" -keyfile "$dir/ca.key" \
    -in "$dir/$name.csr" -out "$dir/$name.pem" -startdate "$start" -enddate "$end" \
    -extfile "$ext" -notext 2>"$db/err" || { cat "$db/err" >&2; rm -rf "$db" "$ext"; return 1; }
  rm -rf "$db" "$ext" "$dir/$name.csr"
  chmod 600 "$dir/$name.key"
  chmod 644 "$dir/$name.pem"
}

case "${1:-}" in
  make)
    dir=$2
    if [[ -f $dir/ca.pem && -f $dir/server.pem && -f $dir/client.pem ]]; then exit 0; fi
    make_ca "$dir"
    sign "$dir" server localhost -1 3650 "DNS:localhost,IP:127.0.0.1"
    sign "$dir" client baton -1 3650
    ;;
  sign) sign "$2" "$3" "$4" "$5" "$6" "${7:-}" ;;
  ca) make_ca "$2" ;;
  *)
    echo "usage: $0 make DIR | sign DIR NAME CN DAYS_FROM DAYS_TO [SAN] | ca DIR" >&2
    exit 2
    ;;
esac
