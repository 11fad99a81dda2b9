#!/usr/bin/env bash
# Starts a throwaway redis-server on 127.0.0.1:6399 for the replay/redisstore
# tests, installing it first (Debian, as root) when it is not on PATH.
# Idempotent: a server already answering on the port is left alone.
# Data is not persisted (--save '' --appendonly no).
set -euo pipefail

port=6399

if ! command -v redis-server >/dev/null 2>&1; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq redis-server >/dev/null
fi

if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
	echo "redis: already answering on 127.0.0.1:$port"
	exit 0
fi

redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes >/dev/null

for _ in $(seq 1 100); do
	if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
		echo "redis: ready on 127.0.0.1:$port"
		exit 0
	fi
	sleep 0.1
done

echo "redis: no answer on 127.0.0.1:$port after 10s" >&2
exit 1
