#!/usr/bin/env bash
# govulncheck, offline, on every module of the repository (in the
# workspace, whose graph is each module's: ./release.sh deps checks it),
# with the toolchain in effect (GOTOOLCHAIN). The database is the pinned
# golang.org/x/vulndb module's OSV files, indexed with its own indexdb
# command into a local directory; nothing is fetched from vuln.go.dev. It
# fails when the code reaches a known vulnerability (govulncheck exits 3).
set -euo pipefail
cd "$(dirname "$0")/.."
vulndb=golang.org/x/vulndb@v0.0.0-20261105234957-e22db6528018
govulncheck=golang.org/x/vuln/cmd/govulncheck@v1.9.0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=$(GOWORK=off go mod download -json "$vulndb" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d $dir/data/osv ]] || { echo "vulncheck: no data/osv in $vulndb" >&2; exit 1; }
GOWORK=off go run "golang.org/x/vulndb/cmd/indexdb@${vulndb#*@}" -vulns "$dir/data/osv" -out "$tmp/db"
mapfile -t patterns < <(./release.sh modules | sed 's|^\.$||; s|^\(.\)|./\1|; s|$|/...|; s|^/\.\.\.$|./...|')
echo "== vulncheck: $(go env GOVERSION), database $vulndb ($(ls "$dir/data/osv" | wc -l) entries), ${#patterns[@]} modules"
go run "$govulncheck" -db "file://$tmp/db" "${patterns[@]}"
