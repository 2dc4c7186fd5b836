#!/usr/bin/env bash
# Starts a throwaway PgBouncer in transaction mode in front of the server `.ci/postgres.sh`
# started, for the tests that prove the Postgres saver and run queue work behind a
# transaction-mode pooler. Installs the distribution's `pgbouncer` package if it is missing.
# Runs as root (the pooler runs as the `postgres` user, as PgBouncer refuses root), without
# systemd and with no standard input. Idempotent: a second call reuses the running pooler.
# Prints the pooler's URL as STATEGRAPH_PGB_URL=postgres://... on its last line.
#
#   .ci/pgbouncer.sh        start (or reuse) the pooler and print its URL
#   .ci/pgbouncer.sh stop   stop the pooler
#
# Use it as:  eval "export $(.ci/pgbouncer.sh | tail -n 1)"   (after .ci/postgres.sh)
# Settings: STATEGRAPH_PGB_PORT (default 54339), STATEGRAPH_PGB_DIR (default
# /tmp/stategraph-pgbouncer-<port>), STATEGRAPH_PGB_POOL (server connections per database
# and user, default 4: far fewer than the tests' clients, so they really share them), and
# the server's STATEGRAPH_PG_PORT (default 54329) and STATEGRAPH_PG_DB (default stategraph).
set -euo pipefail

port="${STATEGRAPH_PGB_PORT:-54339}"
dir="${STATEGRAPH_PGB_DIR:-/tmp/stategraph-pgbouncer-$port}"
pool="${STATEGRAPH_PGB_POOL:-4}"
pg_port="${STATEGRAPH_PG_PORT:-54329}"
db="${STATEGRAPH_PG_DB:-stategraph}"
ini="$dir/pgbouncer.ini"
users="$dir/userlist.txt"
log="$dir/pgbouncer.log"
pidfile="$dir/pgbouncer.pid"
url="postgres://postgres@127.0.0.1:$port/$db"

say() { echo "pgbouncer: $*" >&2; }

# Run a command as the postgres user (we are root; without root, as ourselves).
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# The pid of the pooler this script started, if it still runs.
running_pid() {
    local pid
    [ -f "$pidfile" ] || return 1
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

if [ "${1:-start}" = stop ]; then
    if pid="$(running_pid)"; then
        # SIGINT: a safe shutdown, after the clients' transactions end.
        kill -INT "$pid" || true
        for _ in $(seq 1 40); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.25
        done
        kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" || true
        rm -f "$pidfile"
        say "stopped the pooler on port $port"
    else
        say "no pooler running from $dir"
    fi
    exit 0
fi

bin="$(command -v pgbouncer || true)"
[ -n "$bin" ] || bin=/usr/sbin/pgbouncer
if [ ! -x "$bin" ]; then
    say "installing PgBouncer from the distribution's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null >&2
    apt-get install -y -qq --no-install-recommends pgbouncer </dev/null >&2
    [ -x "$bin" ] || { say "the pgbouncer package left no /usr/sbin/pgbouncer"; exit 1; }
fi

# psql and pg_isready of the newest installed server (Debian keeps them out of PATH).
pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
[ -n "$pgbin" ] && [ -x "$pgbin/psql" ] \
    || { say "no PostgreSQL client binaries: run .ci/postgres.sh first"; exit 1; }

if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir "$dir" --shell /usr/sbin/nologin postgres
fi

# Whether a client gets through the pooler to the server and back.
ready() {
    "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -d "$db" -w -tAc "SELECT 1" \
        </dev/null 2>/dev/null | grep -qx 1
}

if ! running_pid >/dev/null || ! ready; then
    "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$pg_port" -d postgres -U postgres \
        || { say "no server on 127.0.0.1:$pg_port: run .ci/postgres.sh first"; exit 1; }
    # A pooler of ours that runs but does not answer: stop it before starting anew.
    if pid="$(running_pid)"; then
        kill -TERM "$pid" || true
        sleep 1
    fi
    rm -f "$pidfile"
    mkdir -p "$dir"
    # The server trusts local TCP clients (postgres.sh); the pooler trusts its clients too
    # and only needs the user listed.
    echo '"postgres" ""' >"$users"
    cat >"$ini" <<EOF
[databases]
$db = host=127.0.0.1 port=$pg_port dbname=$db user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $users
pool_mode = transaction
max_client_conn = 200
default_pool_size = $pool
min_pool_size = 0
reserve_pool_size = 0
max_db_connections = $pool
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = $log
pidfile = $pidfile
admin_users = postgres
EOF
    [ "$(id -u)" = 0 ] && chown -R postgres: "$dir"
    say "starting the pooler on 127.0.0.1:$port (transaction mode, $pool server connections)"
    as_pg "$bin" -d "$ini" </dev/null >&2 || { tail -n 20 "$log" >&2 || true; exit 1; }
fi

for _ in $(seq 1 60); do
    ready && break
    sleep 0.5
done
ready || { say "the pooler on port $port does not pass queries"; tail -n 20 "$log" >&2; exit 1; }
say "ready: database $db through port $port, log in $log"
echo "STATEGRAPH_PGB_URL=$url"
