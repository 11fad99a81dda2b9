#!/usr/bin/env bash
# JavaScript clients against the Go middlewares over real transports, and
# the MCP conformance suite against a guarded MCP server (integrations/js).
#
# It installs the pinned npm packages (npm ci, from package-lock.json),
# builds the handoff CLI and the Go servers of integrations/js/servers into
# a temporary directory, makes keys and a trust file with the CLI, starts
# the servers on loopback ports and runs:
#   - node --test: @a2a-js/sdk (A2A 1.0, against a2a1hop) and
#     @modelcontextprotocol/sdk (against mcphop), with Handoffs made by
#     `handoff offer` and statuses checked by `handoff verify-status`;
#     `handoff gateway` in front of two JS A2A servers that know nothing of
#     handoffs (integrations/js/servers/upstream, one reached over JSON-RPC,
#     one over HTTP+JSON), with a bbolt store, and `handoff gateway
#     --delegator` for a JS A2A client, in front of the Go agent;
#   - @modelcontextprotocol/conformance (every server scenario) against the
#     MCP SDK's conformance server, without and with the handoff middleware
#     (calls without a Handoff let through): both runs must pass, and pass
#     the same scenarios.
# It stops every server it started, whatever the outcome, and fails when a
# test or a conformance scenario fails. Needs node, npm, go and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
tmp=$(mktemp -d)
pids=()
finish() {
	rc=$?
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	((${#pids[@]} == 0)) || echo "js: stopped the servers it started (pids ${pids[*]})"
	rm -rf "$tmp"
	echo "js: $( ((rc == 0)) && echo passed || echo FAILED) in $((SECONDS - start))s"
}
trap finish EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_http URL PID: until URL answers, or fail when PID exits or 15 s pass.
wait_http() {
	for _ in $(seq 1 150); do
		kill -0 "$2" 2>/dev/null || { echo "js: the server for $1 exited" >&2; return 1; }
		node -e 'fetch(process.argv[1]).then(() => process.exit(0), () => process.exit(1))' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "js: $1 did not answer within 15 s" >&2
	return 1
}

(cd integrations/js && npm ci --no-audit --no-fund --loglevel=error)
(cd cmd/handoff && GOWORK=off go build -o "$tmp/handoff" .)
(cd integrations/js/servers && GOWORK=off go build -o "$tmp/" ./interop ./conformance)

planner=spiffe://a.example/agent/js-planner
coder=spiffe://b.example/agent/go-coder
"$tmp/handoff" keygen --out "$tmp/planner.jwk" >"$tmp/planner.pub.jwk"
"$tmp/handoff" keygen --out "$tmp/coder.jwk" >"$tmp/coder.pub.jwk"
printf '{"%s":{"keys":[%s]},"%s":{"keys":[%s]}}\n' "$planner" "$(cat "$tmp/planner.pub.jwk")" \
	"$coder" "$(cat "$tmp/coder.pub.jwk")" >"$tmp/trust.json"

"$tmp/interop" -id "$coder" -key "$tmp/coder.jwk" -trust "$tmp/trust.json" -peer "$planner" \
	-ready "$tmp/interop.url" 2>"$tmp/interop.log" &
pids+=($!)
for _ in $(seq 1 150); do [[ -s $tmp/interop.url ]] && break; sleep 0.1; done
[[ -s $tmp/interop.url ]] || { cat "$tmp/interop.log" >&2; exit 1; }
url=$(cat "$tmp/interop.url")

plain=$(freeport) guarded=$(freeport)
"$tmp/conformance" -http="127.0.0.1:$plain" -stateless=false 2>"$tmp/plain.log" &
pids+=($!)
wait_http "http://127.0.0.1:$plain/mcp" $!
"$tmp/conformance" -http="127.0.0.1:$guarded" -stateless=false -handoff 2>"$tmp/guarded.log" &
pids+=($!)
wait_http "http://127.0.0.1:$guarded/mcp" $!

# The JS A2A servers that know nothing of handoffs, and the gateways: the
# coder's in front of each (its hops in a bbolt file), and the planner's
# for the JS client, in front of the Go agent.
# upstream VAR NAME [rest-first]: a JS server; its base URL in VAR.
upstream() {
	node integrations/js/servers/upstream/server.js "$tmp/$2.url" ${3:+"$3"} >"$tmp/$2.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 150); do [[ -s $tmp/$2.url ]] && break; sleep 0.1; done
	[[ -s $tmp/$2.url ]] || { cat "$tmp/$2.log" >&2; return 1; }
	printf -v "$1" '%s' "$(tr -d '\n' <"$tmp/$2.url")"
}
# gateway VAR NAME ARGS...: `handoff gateway ARGS` on a free port; its base
# URL in VAR once its card answers.
gateway() {
	local var=$1 name=$2 gwport
	shift 2
	gwport=$(freeport)
	"$tmp/handoff" gateway --listen "127.0.0.1:$gwport" --trust "$tmp/trust.json" "$@" >"$tmp/$name.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:$gwport/.well-known/agent-card.json" $! || { cat "$tmp/$name.log" >&2; return 1; }
	printf -v "$var" 'http://127.0.0.1:%s' "$gwport"
}
upstream up upstream
upstream up_rest upstream-rest rest-first
coder_gw=(--id "$coder" --key "$tmp/coder.jwk" --peer "$planner")
gateway gw gateway "${coder_gw[@]}" --upstream "$up" --store "$tmp/gateway.db"
gateway gw_rest gateway-rest "${coder_gw[@]}" --upstream "$up_rest" --store "$tmp/gateway-rest.db"
gateway dg delegator --delegator --id "$planner" --key "$tmp/planner.jwk" --to "$coder" --upstream "$url"

t=$SECONDS
echo "== js: node --test (A2A and MCP clients and servers, the gateway)"
(cd integrations/js && HANDOFF_BIN="$tmp/handoff" HANDOFF_JS_DIR="$tmp" HANDOFF_INTEROP_URL="$url" \
	HANDOFF_PLANNER="$planner" HANDOFF_CODER="$coder" \
	HANDOFF_UPSTREAM_URL="$up" HANDOFF_GATEWAY_URL="$gw" HANDOFF_UPSTREAM_REST_URL="$up_rest" HANDOFF_GATEWAY_REST_URL="$gw_rest" \
	HANDOFF_DELEGATOR_URL="$dg" node --test --test-reporter=spec test/)
echo "== js: node --test: $((SECONDS - t))s"

# conform NAME PORT: the whole suite against one server; its summary lines.
conform() {
	mkdir -p "$tmp/$1"
	local rc=0
	(cd "$tmp/$1" && "$root/integrations/js/node_modules/.bin/conformance" server --suite all \
		--url "http://127.0.0.1:$2/mcp" -o "$tmp/$1/results" >"$tmp/$1.out" 2>&1) || rc=$?
	sed -n '/=== SUMMARY ===/,$p' "$tmp/$1.out" | sed 's/^/  /'
	if ((rc != 0)); then
		echo "js: the MCP conformance suite failed $3 (exit $rc)" >&2
		tail -n 40 "$tmp/$1.out" >&2
		return 1
	fi
	grep -E '^[✓✗] ' "$tmp/$1.out" >"$tmp/$1.scenarios"
}
t=$SECONDS
echo "== js: MCP conformance, without the handoff middleware"
conform plain "$plain" "without the middleware"
echo "== js: MCP conformance, with the handoff middleware (calls without a Handoff let through)"
conform guarded "$guarded" "with the middleware"
if ! diff "$tmp/plain.scenarios" "$tmp/guarded.scenarios" >&2; then
	echo "js: the MCP conformance scenarios differ with the handoff middleware" >&2
	exit 1
fi
[[ -s $tmp/plain.scenarios ]] || { echo "js: the conformance suite ran no scenario" >&2; exit 1; }
echo "== js: MCP conformance: the same $(wc -l <"$tmp/plain.scenarios") scenarios with and without the middleware: $((SECONDS - t))s"
