#!/usr/bin/env bash
# Starts a throwaway redis-server on 127.0.0.1:6399 for the Redis tests
# (replay/redisstore, replay/replicas), installing it first (Debian, as root)
# when it is not on PATH. Idempotent: a server already answering on the port
# is left alone.
#
# When it starts a server and REDIS_PIDFILE is set, the server writes its
# process id there, so that the caller can stop exactly that server (.ci/run
# does, on exit). A server that was already running writes nothing.
# Data is not persisted (--save '' --appendonly no).
set -euo pipefail

port=6399

if ! command -v redis-server >/dev/null 2>&1; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq redis-server >/dev/null
fi

if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
	echo "redis: already answering on 127.0.0.1:$port (left running)"
	exit 0
fi

args=(--port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes)
if [[ -n ${REDIS_PIDFILE:-} ]]; then
	args+=(--pidfile "$REDIS_PIDFILE")
fi
redis-server "${args[@]}" >/dev/null

for _ in $(seq 1 100); do
	if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
		echo "redis: ready on 127.0.0.1:$port"
		exit 0
	fi
	sleep 0.1
done

echo "redis: no answer on 127.0.0.1:$port after 10s" >&2
exit 1
