#!/usr/bin/env bash
# The release tool (internal/release; RELEASING.md says how to cut a
# release). It is a module of its own, outside the workspace, so it runs
# with GOWORK=off; the arguments go to it as they are:
#   ./release.sh v0.2.0     the whole release of v0.2.0
#   ./release.sh sync       refresh cmd/handoff's, the demo's and examples'
#                           go.sum after a change to a module they require
#   ./release.sh            the list of commands
set -euo pipefail
cd "$(dirname "$0")"
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
exec env GOWORK=off go -C internal/release run . "$@"
