#!/usr/bin/env bash
# A MOO Arena cluster on this machine, for a demo (docs/cluster.md):
#   PostgreSQL database + Mosquitto broker + 3 nodes (a, b, c) + HAProxy (TLS, self-signed).
#
#   deploy/local-cluster.sh up       start everything; prints the addresses
#   deploy/local-cluster.sh status   what runs, and each node's /healthz
#   deploy/local-cluster.sh down     stop everything this script started (nodes drain first)
#                                    and remove what `up` made (its files; the database, if
#                                    `up` created it)
#
# Needs: a PostgreSQL server (MOO_PG below), mosquitto, haproxy, openssl, curl, and
# the venv (./dev setup). Settings (environment):
#   MOO_PG        server URL            (default postgresql://postgres@127.0.0.1:5432)
#   MOO_CLUSTER_DB database name        (default moo_cluster; created if missing)
#   MOO_MQTT_PORT broker port           (default 18830)
#   MOO_NODE_PORTS three node ports     (default "8801 8802 8803")
#   MOO_TLS_PORT / MOO_PLAIN_PORT       HAProxy ports (default 8443 / 8080)
#   MOO_KEEP_LOGS=1                     `down` leaves the logs (*.log) in place to read
# State (pids, logs, sockets, certificate) goes to deploy/var/ (or MOO_CLUSTER_VAR).
# HAProxy reaches the nodes through Unix sockets (mode 0600: only this user), and the nodes
# believe X-Forwarded-For only from there (--trusted-proxy unix): a local process that talks
# to a node's TCP port directly cannot claim another client's address.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VAR="${MOO_CLUSTER_VAR:-$ROOT/deploy/var}"
PG="${MOO_PG:-postgresql://postgres@127.0.0.1:5432}"
DBNAME="${MOO_CLUSTER_DB:-moo_cluster}"
MQTT_PORT="${MOO_MQTT_PORT:-18830}"
read -r -a NODE_PORTS <<< "${MOO_NODE_PORTS:-8801 8802 8803}"
export MOO_TLS_PORT="${MOO_TLS_PORT:-8443}" MOO_PLAIN_PORT="${MOO_PLAIN_PORT:-8080}"
NAMES=(a b c)
MOO="$ROOT/.venv/bin/moo"
PY="$ROOT/.venv/bin/python"

die() { echo "local-cluster: $*" >&2; exit 1; }
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
    [ -x "$MOO" ] || die "no .venv: run ./dev setup first"
    command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || die "haproxy is not installed"
    command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ] || die "mosquitto is not installed"
    mkdir -p "$VAR"
    for name in "${NAMES[@]}" broker haproxy; do
        running "$VAR/$name.pid" && die "already up ($name runs); run: $0 down"
    done
    # the database: created once, migrated by the nodes (and here, to see it)
    "$PY" - "$PG" "$DBNAME" "$VAR/created-db" <<'PYEOF'
import asyncio, sys
import asyncpg
async def main(url: str, name: str, marker: str) -> None:
    conn = await asyncpg.connect(url + "/postgres")
    if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
        await conn.execute(f'CREATE DATABASE "{name}"')
        open(marker, "w").write(name + "\n")  # `down` drops only what `up` created
    await conn.close()
asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
PYEOF
    DB="$PG/$DBNAME"
    "$MOO" db upgrade --db "$DB"
    # broker
    local mosq; mosq=$(command -v mosquitto || echo /usr/sbin/mosquitto)
    # the settings docs/cluster.md recommends: small messages out at once, and a queue per
    # node far above its bursts (envelopes past it would be dropped, then re-attached)
    printf '%s\n' "listener $MQTT_PORT 127.0.0.1" "allow_anonymous true" \
        "persistence false" "set_tcp_nodelay true" "max_queued_messages 100000" \
        "max_inflight_messages 0" > "$VAR/mosquitto.conf"
    "$mosq" -c "$VAR/mosquitto.conf" > "$VAR/broker.log" 2>&1 &
    echo $! > "$VAR/broker.pid"
    # nodes
    local i
    for i in 0 1 2; do
        "$MOO" serve --db "$DB" --cluster "mqtt://127.0.0.1:$MQTT_PORT" --node "${NAMES[$i]}" \
            --port "${NODE_PORTS[$i]}" --static-dir "$ROOT/clients/web" \
            --unix "$VAR/${NAMES[$i]}.sock" --trusted-proxy unix \
            > "$VAR/${NAMES[$i]}.log" 2>&1 &
        echo $! > "$VAR/${NAMES[$i]}.pid"
    done
    # a self-signed certificate for 127.0.0.1 and localhost
    if [ ! -f "$VAR/moo.pem" ]; then
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=127.0.0.1" \
            -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
            -keyout "$VAR/key.pem" -out "$VAR/cert.pem" 2>/dev/null
        cat "$VAR/cert.pem" "$VAR/key.pem" > "$VAR/moo.pem"
    fi
    export MOO_CERT="$VAR/moo.pem"
    export MOO_NODE_A="unix@$VAR/a.sock" MOO_NODE_B="unix@$VAR/b.sock"
    export MOO_NODE_C="unix@$VAR/c.sock"
    local hap; hap=$(command -v haproxy || echo /usr/sbin/haproxy)
    "$hap" -f "$ROOT/deploy/haproxy.cfg" > "$VAR/haproxy.log" 2>&1 &
    echo $! > "$VAR/haproxy.pid"
    # ready when every node answers /healthz through HAProxy's port too (a loaded machine may
    # take a while to start three Python processes: MOO_UP_TIMEOUT_S, default 120)
    local deadline=$((SECONDS + ${MOO_UP_TIMEOUT_S:-120})) ok=0
    while [ $SECONDS -lt $deadline ]; do
        local ok=1
        for i in 0 1 2; do
            curl -fsS "http://127.0.0.1:${NODE_PORTS[$i]}/healthz" >/dev/null 2>&1 || ok=0
        done
        curl -fsS "http://127.0.0.1:$MOO_PLAIN_PORT/healthz" >/dev/null 2>&1 || ok=0
        [ $ok = 1 ] && break
        sleep 0.2
    done
    [ $ok = 1 ] || { down; die "the cluster did not come up; see $VAR/*.log"; }
    echo "up: wss://127.0.0.1:$MOO_TLS_PORT/ (self-signed: SSL_CERT_FILE=$VAR/cert.pem)"
    echo "    ws://127.0.0.1:$MOO_PLAIN_PORT/  nodes ${NODE_PORTS[*]}  db $DB  broker $MQTT_PORT"
}

down() {
    local name
    # nodes first, one by one: SIGTERM drains each (its matches move to the others)
    for name in "${NAMES[@]}" haproxy broker; do
        if running "$VAR/$name.pid"; then
            kill -TERM "$(cat "$VAR/$name.pid")"
            # a drain is quick, but a loaded machine may slow it: a minute before SIGKILL
            for _ in $(seq 1 600); do running "$VAR/$name.pid" || break; sleep 0.1; done
            running "$VAR/$name.pid" && kill -KILL "$(cat "$VAR/$name.pid")"
        fi
        rm -f "$VAR/$name.pid"
    done
    # what `up` made: its files, and the database if `up` created it
    if [ -f "$VAR/created-db" ]; then
        "$PY" - "$PG" "$(cat "$VAR/created-db")" <<'PYEOF'
import asyncio, sys
import asyncpg
async def main(url: str, name: str) -> None:
    conn = await asyncpg.connect(url + "/postgres")
    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await conn.close()
asyncio.run(main(sys.argv[1], sys.argv[2]))
PYEOF
    fi
    [ "${MOO_KEEP_LOGS:-0}" = 1 ] || rm -f "$VAR"/*.log
    rm -f "$VAR"/*.sock "$VAR"/*.pem "$VAR/mosquitto.conf" "$VAR/created-db"
    rmdir "$VAR" 2>/dev/null || true
    echo "down"
}

status() {
    local name i=0
    for name in "${NAMES[@]}"; do
        if running "$VAR/$name.pid"; then
            echo "$name: $(curl -fsS "http://127.0.0.1:${NODE_PORTS[$i]}/healthz" || echo unreachable)"
        else
            echo "$name: not running"
        fi
        i=$((i + 1))
    done
    for name in broker haproxy; do
        running "$VAR/$name.pid" && echo "$name: running" || echo "$name: not running"
    done
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 {up|status|down}" >&2; exit 2 ;;
esac
