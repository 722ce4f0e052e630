#!/usr/bin/env bash
# Prints riskguard's performance figures. Run from the repository root:
#   scripts/bench.sh            # all figures
#   BENCHTIME=2s scripts/bench.sh
#   SKIP_YEAR=1 scripts/bench.sh   # without the year replay (about a minute)
#   SKIP_FASTLANE=1 scripts/bench.sh   # without the fast lane's real-time run (about 90 s)
# Figures depend on the machine: the script prints it first.
set -euo pipefail
cd "$(dirname "$0")/.."
benchtime=${BENCHTIME:-1s}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3)"
echo
echo "== engine: one tick excluding the network, 1,000 positions × 20 rules, one core (target ≤ 2 ms)"
go test -run '^$' -bench '^BenchmarkTick$' -benchmem -benchtime "$benchtime" -cpu 1 ./engine/ | grep -E '^Benchmark'
echo
echo "== engine: the same with account rules and functions over time among the 20 (target ≤ 2 ms)"
go test -run '^$' -bench '^BenchmarkTickWindowed$' -benchmem -benchtime "$benchtime" -cpu 1 ./engine/ | grep -E '^Benchmark'
echo
echo "== engine: a whole tick through the client and the simulated exchange on loopback (target 2 calls/tick)"
go test -run '^$' -bench '^BenchmarkTickOverHTTP$' -benchtime "$benchtime" -cpu 1 ./engine/ | grep -E '^Benchmark'
echo
echo "== rules: one evaluation of a typical rule vs a bare expr.Run (target ≤ 1.3×)"
go test -run '^$' -bench 'Eval|Bare' -benchmem -benchtime "$benchtime" -cpu 1 ./rules/ | grep -E '^Benchmark' || true
echo
echo "== backtest: replay of one-minute steps, 10 symbols × 10 rules, guarded and unguarded runs, one core (target ≥ 2,000,000 evals/s)"
go test -run '^$' -bench '^BenchmarkReplay$' -benchmem -benchtime "$benchtime" -cpu 1 ./engine/backtest/ | grep -E '^Benchmark'
if [ "${SKIP_FASTLANE:-}" != 1 ]; then
	echo
	echo "== fast lane: price crossing → action request, and requests per hour; three guards in real time against simulated exchanges on loopback (targets p50 < 300 ms near danger, ≤ 1.2× the requests of a fixed 2 s over a day; SKIP_FASTLANE=1 skips)"
	go run scripts/fastlane.go
fi
if [ "${SKIP_YEAR:-}" != 1 ]; then
	echo
	echo "== backtest: one year of one-minute data, 10 positions × 10 rules, through the binary (targets < 30 s, ≤ 150 MB RSS; SKIP_YEAR=1 skips)"
	scripts/replay-year.sh | grep -E '^(data|backtest|wall time|User time|System time|max RSS)'
fi
