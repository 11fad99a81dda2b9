#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on 127.0.0.1:$HANDOFF_PG_PORT (5439
# by default) for the PostgreSQL tests (ledger, replay/pgstore,
# replay/replicas), installing it first (Debian package postgresql, as
# root) when no initdb is found. Idempotent: a server already answering on
# the port is left alone.
#
# The cluster lives in a fresh temporary directory, owned by the user
# postgres (or nobody) when run as root, since the server refuses to run as
# root. It trusts connections from loopback, as the user handoff, without a
# password, and keeps nothing once stopped: fsync is off.
#
# When it starts a server and POSTGRES_PIDFILE is set, it writes there the
# server's process id on the first line and the directory to remove on the
# second, so that the caller can stop exactly that server (.ci/run does, on
# exit, with SIGINT: a fast shutdown). Connect with
#
#	postgres://handoff@127.0.0.1:5439/postgres?sslmode=disable
set -euo pipefail

port=${HANDOFF_PG_PORT:-5439}

pgbin() {
	local d
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return 0
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

if answers; then
	echo "postgres: already answering on 127.0.0.1:$port (left running)"
	exit 0
fi

if ! bin=$(pgbin); then
	# The package's own service is not started: a policy-rc.d that
	# refuses, for the length of the install only.
	export DEBIAN_FRONTEND=noninteractive
	guard=
	if [[ ! -e /usr/sbin/policy-rc.d ]]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		guard=/usr/sbin/policy-rc.d
		trap 'rm -f "$guard"' EXIT
	fi
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends postgresql >/dev/null
	if [[ -n $guard ]]; then
		rm -f "$guard"
		trap - EXIT
	fi
	bin=$(pgbin)
fi

dir=$(mktemp -d /tmp/handoff-pg.XXXXXX)
chmod 755 "$dir"
run=()
if [[ $(id -u) == 0 ]]; then
	user=postgres
	id "$user" >/dev/null 2>&1 || user=nobody
	chown "$user" "$dir"
	run=("$(command -v runuser || echo /usr/sbin/runuser)" -u "$user" --)
fi

"${run[@]}" "$bin/initdb" -D "$dir/data" -U handoff --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
	cat "$dir/initdb.log" >&2
	exit 1
}
"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -s -w -t 60 start \
	-o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c max_connections=200" || {
	cat "$dir/server.log" >&2
	exit 1
}
pid=$(head -1 "$dir/data/postmaster.pid")
if [[ -n ${POSTGRES_PIDFILE:-} ]]; then
	printf '%s\n%s\n' "$pid" "$dir" >"$POSTGRES_PIDFILE"
fi

for _ in $(seq 1 100); do
	if answers; then
		echo "postgres: $("$bin/postgres" --version | sed 's/^postgres //') ready on 127.0.0.1:$port"
		exit 0
	fi
	sleep 0.1
done
echo "postgres: no answer on 127.0.0.1:$port after 10s" >&2
exit 1
