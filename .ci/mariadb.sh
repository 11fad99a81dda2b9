#!/usr/bin/env bash
# Starts a throwaway MariaDB server on 127.0.0.1:$HANDOFF_MYSQL_PORT (3319
# by default) for the MySQL tests of the ledger, installing it first
# (Debian package mariadb-server, as root) when no mariadbd or mysqld is
# found. Idempotent: a server already answering on the port is left alone.
#
# The data directory is a fresh temporary directory, owned by the user
# mysql (or nobody) when run as root, and the server runs as that user. It
# has a user handoff@127.0.0.1 without a password, with every privilege,
# so that the tests can create and drop their own databases.
#
# When it starts a server and MARIADB_PIDFILE is set, it writes there the
# server's process id on the first line and the directory to remove on the
# second, so that the caller can stop exactly that server (.ci/run does, on
# exit, with SIGTERM: a normal shutdown). Connect with
#
#	handoff@tcp(127.0.0.1:3319)/
set -euo pipefail

port=${HANDOFF_MYSQL_PORT:-3319}

server() { command -v mariadbd || command -v mysqld || ls /usr/sbin/mariadbd /usr/sbin/mysqld 2>/dev/null | head -1; }
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

if answers; then
	echo "mariadb: already answering on 127.0.0.1:$port (left running)"
	exit 0
fi

bin=$(server || true)
if [[ -z $bin ]]; then
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
	apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null
	if [[ -n $guard ]]; then
		rm -f "$guard"
		trap - EXIT
	fi
	bin=$(server)
fi
client=$(command -v mariadb || command -v mysql)
installdb=$(command -v mariadb-install-db || command -v mysql_install_db)

dir=$(mktemp -d /tmp/handoff-mariadb.XXXXXX)
chmod 755 "$dir"
user=$(id -un)
if [[ $(id -u) == 0 ]]; then
	user=mysql
	id "$user" >/dev/null 2>&1 || user=nobody
	chown "$user" "$dir"
fi

"$installdb" --no-defaults --user="$user" --datadir="$dir/data" --auth-root-authentication-method=normal \
	--skip-test-db >"$dir/install.log" 2>&1 || {
	cat "$dir/install.log" >&2
	exit 1
}
setsid "$bin" --no-defaults --user="$user" --datadir="$dir/data" --socket="$dir/sock" --pid-file="$dir/pid" \
	--port="$port" --bind-address=127.0.0.1 --skip-name-resolve --skip-log-bin \
	--innodb-flush-log-at-trx-commit=2 --innodb-buffer-pool-size=64M --max-connections=200 \
	--log-error="$dir/server.log" </dev/null >/dev/null 2>&1 &
# setsid from a shell without job control execs the server in place: $! is
# the server's pid, written at once so that the caller stops it even when
# it never gets ready.
if [[ -n ${MARIADB_PIDFILE:-} ]]; then
	printf '%s\n%s\n' "$!" "$dir" >"$MARIADB_PIDFILE"
fi

for _ in $(seq 1 300); do
	if [[ -S $dir/sock ]] && "$client" --no-defaults -S "$dir/sock" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
		"$client" --no-defaults -S "$dir/sock" -uroot -e \
			"CREATE USER IF NOT EXISTS 'handoff'@'127.0.0.1'; GRANT ALL ON *.* TO 'handoff'@'127.0.0.1';"
		echo "mariadb: $("$bin" --version | sed 's/^.*Ver //') ready on 127.0.0.1:$port"
		exit 0
	fi
	sleep 0.1
done
echo "mariadb: no answer on 127.0.0.1:$port after 30s" >&2
cat "$dir/server.log" >&2 || true
exit 1
