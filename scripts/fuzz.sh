#!/usr/bin/env bash
# Runs every fuzz target for a short budget each (FUZZTIME, default 10000x
# executions), from the repository root:
#   scripts/fuzz.sh                 # all targets
#   FUZZTIME=2m scripts/fuzz.sh     # longer, by the clock
# The default budget is a count, not a duration: with a duration, Go 1.26's
# fuzz coordinator can report a spurious "context deadline exceeded" failure
# when the time runs out while a worker is busy on a loaded machine
# (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
#   scripts/fuzz.sh FuzzLoadConfig  # the targets named
# Seed corpora live in each package's testdata/fuzz/<Target>/; a crash the
# fuzzer finds is written there too: fix it and commit the file as the
# regression test. Each target also pays a few seconds of instrumented build
# and start-up on top of its budget.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10000x}
targets=(
	"./exchange FuzzDecodeEnvelope"
	"./exchange FuzzDecodePosition"
	"./exchange FuzzCanonicalText"
	"./exchange/margin FuzzRiskLevel"
	"./exchange/margin FuzzLiquidationPrice"
	"./exchange/margin FuzzSurvival"
	"./exchange/margin FuzzStress"
	"./exchange/margin FuzzForfeit"
	"./rules FuzzParse"
	"./rules FuzzCompileExpr"
	"./rules FuzzFastVsVM"
	"./notify FuzzParseConfig"
	"./config FuzzLoadConfig"
	"./engine FuzzControlTimesKeepStateWritable"
)
start=$SECONDS
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
		continue
	fi
	echo "== $pkg $name ($fuzztime)"
	out=$(mktemp)
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >"$out" 2>&1; then
		# The whole output: the failing input and where it was saved.
		cat "$out"
		rm -f "$out"
		exit 1
	fi
	tail -n 3 "$out"
	rm -f "$out"
done
echo "== fuzzing took $((SECONDS - start))s"
