#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the real-server tests and the bench, installing
# the server from the distribution's packages if it is missing. Runs as root (the cluster
# runs as the `postgres` user), without systemd and with no standard input. Idempotent: a
# second call reuses the running cluster. Prints the database URL as
# STATEGRAPH_PG_URL=postgres://... on its last line.
#
#   .ci/postgres.sh        start (or reuse) the cluster and print its URL
#   .ci/postgres.sh stop   stop the cluster (its files stay for the next start)
#
#   .ci/postgres.sh ca     print STATEGRAPH_PG_CA=<file>: the CA that signed the server's
#                          certificate (the cluster accepts TLS as well as plain TCP)
#   .ci/postgres.sh client print STATEGRAPH_PG_CLIENT_CERT=<file> STATEGRAPH_PG_CLIENT_KEY=<file>:
#                          a certificate the CA signed for the user sg_cert, who may log in
#                          over TLS with it and in no other way (pg_hba.conf: cert)
#
# Use it as:  eval "export $(.ci/postgres.sh | tail -n 1)"
#             eval "export $(.ci/postgres.sh ca | tail -n 1)"
#             eval "export $(.ci/postgres.sh client | tail -n 1)"
# Settings: STATEGRAPH_PG_PORT (default 54329), STATEGRAPH_PG_DIR (default
# /tmp/stategraph-pg-<port>), STATEGRAPH_PG_DB (default stategraph).
set -euo pipefail

port="${STATEGRAPH_PG_PORT:-54329}"
dir="${STATEGRAPH_PG_DIR:-/tmp/stategraph-pg-$port}"
db="${STATEGRAPH_PG_DB:-stategraph}"
data="$dir/data"
log="$dir/server.log"
tls="$dir/tls"
url="postgres://postgres@127.0.0.1:$port/$db"

say() { echo "postgres: $*" >&2; }

# The newest installed server's binaries (Debian keeps them out of PATH).
find_bin() {
    local d
    d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$d" ] && [ -x "$d/postgres" ] && [ -x "$d/initdb" ]; then
        echo "$d"
    fi
}

# Run a command as the postgres user (we are root; without root, as ourselves).
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

bin="$(find_bin)"

# A test CA and a server certificate it signed, for 127.0.0.1 and localhost.
make_certs() {
    [ -f "$tls/server.key" ] && [ -f "$tls/ca.crt" ] && return 0
    command -v openssl >/dev/null 2>&1 || {
        say "installing openssl from the distribution's packages"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl </dev/null >&2
    }
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=stategraph test CA" \
        -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
    sign server 127.0.0.1 "subjectAltName=IP:127.0.0.1,DNS:localhost" "extendedKeyUsage=serverAuth"
}

# A key $tls/NAME.key and a certificate $tls/NAME.crt for the common name CN, signed by the
# test CA, with the extensions given after CN; the files go to the postgres user.
sign() {
    local name="$1" cn="$2"
    shift 2
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=digitalSignature,keyEncipherment" "$@" \
        >"$tls/$name-ext.cnf"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$cn" \
        -keyout "$tls/$name.key" -out "$tls/$name.csr" 2>/dev/null
    openssl x509 -req -in "$tls/$name.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
        -CAcreateserial -days 3650 -extfile "$tls/$name-ext.cnf" -out "$tls/$name.crt" 2>/dev/null
    chmod 600 "$tls/$name.key"
    if [ "$(id -u)" = 0 ]; then chown -R postgres: "$tls"; fi
}

# The user that logs in by client certificate, and its certificate (CN = the user).
cert_user=sg_cert
make_client_cert() {
    [ -f "$tls/client.crt" ] && [ -f "$tls/client.key" ] && return 0
    sign client "$cert_user" "extendedKeyUsage=clientAuth"
}

# Let $cert_user log in over TLS with a certificate the CA signed, and in no other way over
# TCP; checks the client certificates against the CA. Also brings a running cluster an older
# script started up to date (a reload, no restart).
client_auth() {
    local psql=("$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qtA)
    local hba="$data/pg_hba.conf" changed=""
    if ! grep -q "^hostssl all $cert_user " "$hba"; then
        local tmp
        tmp="$(mktemp)"
        printf '%s\n' "hostssl all $cert_user 127.0.0.1/32 cert" \
            "host all $cert_user 127.0.0.1/32 reject" | cat - "$hba" >"$tmp"
        cat "$tmp" >"$hba"
        rm -f "$tmp"
        changed=1
    fi
    if [ "$("${psql[@]}" -c "SHOW ssl_ca_file" </dev/null)" != "$tls/ca.crt" ]; then
        "${psql[@]}" -c "ALTER SYSTEM SET ssl_ca_file = '$tls/ca.crt'" </dev/null >&2
        changed=1
    fi
    "${psql[@]}" -c "DO \$\$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$cert_user')
        THEN CREATE ROLE $cert_user LOGIN SUPERUSER; END IF; END \$\$" </dev/null >&2
    if [ -n "$changed" ]; then
        "${psql[@]}" -c "SELECT pg_reload_conf()" </dev/null >/dev/null
        for _ in $(seq 1 40); do
            [ "$("${psql[@]}" -c "SHOW ssl_ca_file" </dev/null)" = "$tls/ca.crt" ] && break
            sleep 0.25
        done
    fi
}

if [ "${1:-start}" = stop ]; then
    if [ -n "$bin" ] && [ -f "$data/postmaster.pid" ]; then
        as_pg "$bin/pg_ctl" -D "$data" -m fast -w stop >&2 || true
        say "stopped the cluster on port $port"
    else
        say "no cluster running in $data"
    fi
    exit 0
fi

if [ -z "$bin" ]; then
    say "installing the server from the distribution's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null >&2
    apt-get install -y -qq --no-install-recommends postgresql </dev/null >&2
    bin="$(find_bin)"
    [ -n "$bin" ] || { say "the postgresql package left no server binaries"; exit 1; }
fi

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir "$dir" --shell /usr/sbin/nologin postgres
fi

ready() { "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -d postgres -U postgres; }

if [ "${1:-start}" = ca ]; then
    if [ ! -f "$tls/ca.crt" ]; then
        if ready; then
            say "the cluster on port $port runs without TLS (an older script started it):"
            say "stop it (.ci/postgres.sh stop) and start it again (.ci/postgres.sh)"
        else
            say "no CA yet: start the cluster first (.ci/postgres.sh)"
        fi
        exit 1
    fi
    echo "STATEGRAPH_PG_CA=$tls/ca.crt"
    exit 0
fi

if [ "${1:-start}" = client ]; then
    if [ ! -f "$tls/client.crt" ] || ! grep -q "^hostssl all $cert_user " "$data/pg_hba.conf" 2>/dev/null; then
        say "no client certificate yet: start the cluster first (.ci/postgres.sh)"
        exit 1
    fi
    echo "STATEGRAPH_PG_CLIENT_CERT=$tls/client.crt STATEGRAPH_PG_CLIENT_KEY=$tls/client.key"
    exit 0
fi

if ! ready; then
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    if [ ! -f "$data/PG_VERSION" ]; then
        say "creating a cluster in $data"
        as_pg "$bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 \
            --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    # A stale pid file from a killed server would stop pg_ctl from starting a new one.
    if [ -f "$data/postmaster.pid" ] && ! as_pg "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        rm -f "$data/postmaster.pid"
    fi
    make_certs
    say "starting the server on 127.0.0.1:$port (plain TCP and TLS)"
    # Tests run in parallel, each with its own pool: room for many connections.
    as_pg "$bin/pg_ctl" -D "$data" -l "$log" -w -t 60 start -o \
        "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir \
         -c max_connections=300 -c shared_buffers=128MB -c synchronous_commit=on \
         -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key" >&2 \
        || { tail -n 20 "$log" >&2; exit 1; }
fi

for _ in $(seq 1 60); do
    ready && break
    sleep 0.5
done
ready || { say "the server on port $port does not accept connections"; tail -n 20 "$log" >&2; exit 1; }

if ! "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = '$db'" </dev/null | grep -q 1; then
    "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE \"$db\"" </dev/null >&2
fi
if [ -f "$tls/ca.key" ]; then
    make_client_cert
    client_auth
fi
say "ready: database $db on port $port"
echo "STATEGRAPH_PG_URL=$url"
