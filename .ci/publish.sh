#!/usr/bin/env bash
# The publish, rehearsed (RELEASING.md). It builds a module proxy from the
# tree (./release.sh proxy: every module zipped at versions.yaml's version
# with golang.org/x/mod/zip, as the module proxy serves a tag), then, in a
# fresh module outside the tree, with that proxy first and the real one
# behind it for every other module:
#   - go gets every module of the repository at the version, and builds
#     every package of every module;
#   - builds and runs internal/release/testdata/consumer (the root, a
#     durable store, an authority ledger, each host's middleware) with the
#     current Go and with the minimum one (GO_MIN, default: the machine's);
#   - runs the README's block "After a release" as written (go get, and go
#     install github.com/agentproto/handoff/cmd/handoff@VERSION), then the
#     installed binary's demo and conformance (against its own verify).
# It removes the repository's modules from the module cache before and
# after, so that nothing of an earlier tree is used.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"; (cd "$root" && ./release.sh forget >/dev/null 2>&1) || true' EXIT

version=$(sed -n 's/^version: //p' versions.yaml)
gomin=${GO_MIN:-local}
./release.sh proxy "$tmp/proxy"
export GOPROXY="file://$tmp/proxy,$(go env GOPROXY)" GONOSUMDB=github.com/agentproto/handoff GOWORK=off
export GOFLAGS="-modcacherw ${GOFLAGS:-}"
export GODEBUG="${GODEBUG:+$GODEBUG,}goindex=0" # see .ci/run
mapfile -t modules < <(./release.sh modules)

mkdir "$tmp/consumer"
cp internal/release/testdata/consumer/main.go "$tmp/consumer/"
cd "$tmp/consumer"
go mod init example.com/consumer >/dev/null 2>&1
go mod edit -go=1.26.0
paths=()
for m in "${modules[@]}"; do
	if [[ $m == . ]]; then paths+=("github.com/agentproto/handoff@$version"); else paths+=("github.com/agentproto/handoff/$m@$version"); fi
done
echo "== publish: go get ${#paths[@]} modules at $version"
go get "${paths[@]}"
echo "== publish: go build every package of every module"
go build -mod=mod github.com/agentproto/handoff/...
go mod tidy
echo "== publish: the consumer program, $(go env GOVERSION)"
go run .
echo "== publish: the consumer program, $(GOTOOLCHAIN=$gomin go env GOVERSION)"
GOTOOLCHAIN=$gomin go run .

# The README's block "After a release", as written, in a fresh module: its
# go get lines and its go install of the CLI.
echo "== publish: the README's \"After a release\""
mkdir "$tmp/readme"
cd "$tmp/readme"
go mod init example.com/readme >/dev/null 2>&1
go mod edit -go=1.26.5
awk '/^### After a release/{f=1} f&&/^```sh$/{b=1;next} b&&/^```$/{exit} b' "$root/README.md" >"$tmp/after.sh"
grep -q "go install github.com/agentproto/handoff/cmd/handoff@$version" "$tmp/after.sh" ||
	{ echo "publish: the README's \"After a release\" does not install cmd/handoff@$version" >&2; exit 1; }
sed 's/^/  /' "$tmp/after.sh"
GOBIN=$tmp/bin bash -euo pipefail "$tmp/after.sh"
cd "$tmp"
"$tmp/bin/handoff" demo >"$tmp/demo.out"
tail -n 2 "$tmp/demo.out"
"$tmp/bin/handoff" conformance -- "$tmp/bin/handoff" verify | tail -n 1
echo "== publish: rehearsed"
