#!/usr/bin/env bash
# Runs each fuzz target for a short time: FUZZTIME each (default 6s), one
# target at a time, as go test -fuzz requires. Seventeen targets at 6s keep
# the whole run near three minutes, compilation included (the longer runs
# before a release are in FUZZING.md). A failing input is written by go
# test under <package>/testdata/fuzz/<Target>/; commit it with the fix so
# that it runs as a regression test from then on. See FUZZING.md.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-6s}
# Minimizing each new interesting input may take 60s by default: keep it
# short so that the time goes to fuzzing.
minimize=${FUZZMINIMIZETIME:-5s}

targets=(
	". FuzzDecodeOffer"
	". FuzzDecodeStatus"
	". FuzzParseHandoff"
	". FuzzReceive"
	". FuzzReceiveCost"
	". FuzzReceiveShapes"
	"./jws FuzzOpen"
	"./cose FuzzOpen"
	"./evidence FuzzDecode"
	"./evidence FuzzCanonicalize"
	"./scitt FuzzCheckRef"
	"./learnlog FuzzCheckRef"
	"./replay/internal/codec FuzzDecode"
	"./keyset FuzzDocument"
	"./internal/jsoncheck FuzzCheck"
	"./internal/cborhead FuzzWalk"
	"./internal/cborhead FuzzRepeated"
)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	for try in 1 2; do
		echo "== $pkg $name ($fuzztime)"
		if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" -fuzzminimizetime="$minimize" "$pkg" 2>&1 | tee "$log"; then
			break
		fi
		# The fuzzing engine itself can end a run whose time is up while it
		# minimizes a new input, as "context deadline exceeded", with no
		# failing input: that run is tried once more. Any other failure,
		# or one that wrote a failing input, fails at once.
		if ((try == 2)) || ! grep -q 'context deadline exceeded' "$log" || grep -q 'Failing input written' "$log"; then
			exit 1
		fi
		echo "== $pkg $name: the engine ran out of time while minimizing; once more"
	done
done
