#!/usr/bin/env bash
# Replays one year of one-minute data for ten symbols, 10 positions × 10 rules,
# through `riskguard backtest --csv`, and prints the wall time and the peak
# memory (max RSS) of the replay. Targets (issue 5): under 30 s, within
# 150 MB. Run from anywhere:
#   scripts/replay-year.sh              # 365 days, seed 1
#   DAYS=30 SEED=2 scripts/replay-year.sh
# The data (about 170 MB of CSV for a year) is generated into a temporary
# directory by scripts/gen-minute-data.go and removed afterwards; the
# scenario and the rules are scripts/testdata/year-*.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
days=${DAYS:-365}
seed=${SEED:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/riskguard" ./cmd/riskguard
echo "generating $days days of one-minute prices for 10 symbols (seed $seed)..."
go run scripts/gen-minute-data.go -out "$tmp/prices.csv" -days "$days" -seed "$seed"
echo "data: $(wc -l <"$tmp/prices.csv") rows, $(du -m "$tmp/prices.csv" | cut -f1) MB"

args=(backtest --config scripts/testdata/year-config.yaml --scenario scripts/testdata/year-scenario.yaml --csv "$tmp/prices.csv")
timer=/usr/bin/time
if [ ! -x "$timer" ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
	echo "installing Debian's time for the max RSS..."
	{ apt-get update -qq && apt-get install -y -qq time; } >/dev/null 2>&1 || true
fi
start=$(date +%s%N)
if [ -x "$timer" ]; then
	"$timer" -v -o "$tmp/time.txt" "$tmp/riskguard" "${args[@]}" >"$tmp/summary.txt"
else
	"$tmp/riskguard" "${args[@]}" >"$tmp/summary.txt"
fi
end=$(date +%s%N)

sed -n '1,10p' "$tmp/summary.txt"
echo
ms=$(((end - start) / 1000000))
printf 'wall time: %d.%d s (target < 30 s)\n' $((ms / 1000)) $((ms % 1000 / 100))
if [ -f "$tmp/time.txt" ]; then
	grep -E 'User time|System time' "$tmp/time.txt" | sed 's/^\s*//'
	rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time.txt")
	printf 'max RSS: %d MB (target ≤ 150 MB)\n' $((rss / 1024))
else
	echo "max RSS: unknown (/usr/bin/time is missing: apt-get install time)"
fi
