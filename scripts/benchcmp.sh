#!/usr/bin/env bash
# Compares the performance of two revisions side by side on this machine, in
# one run, and prints the ratios HEAD/BASE. Run from anywhere in the repository:
#   scripts/benchcmp.sh BASE [HEAD]     # e.g. scripts/benchcmp.sh main
#   scripts/benchcmp.sh main .          # HEAD "." = the working tree as it is
#   COUNT=10 BENCHTIME=2s scripts/benchcmp.sh v1 v2
#   SKIP_YEAR=1 scripts/benchcmp.sh HEAD~3   # without the year replay
# BASE and HEAD are any git revisions; HEAD defaults to the commit HEAD (not
# the uncommitted changes: pass "." for those). Each revision other than "."
# is checked out in a temporary worktree, removed on exit.
#
# Measured, one core each (-cpu 1 -benchmem), BASE and HEAD alternating (the
# order swaps every round, so a drift of the machine's load hits both alike):
#   BenchmarkTick, BenchmarkTickWindowed  found by name under ./engine/...
#                                         in each revision (they may move)
#   BenchmarkReplay                       likewise (./engine/backtest today)
#   the year replay                       scripts/replay-year.sh, wall time
# Settings: COUNT (rounds of the benchmarks, default 6), BENCHTIME (default
# 1s), YEAR_COUNT (rounds of the year replay, default 2, ~20 s each and side),
# SKIP_YEAR=1, ALLOCS_BENCHTIME (default 200x: the ticks' allocs/op in the
# summary come from one more run of each at this fixed count, the same on
# both sides, as allocs/op varies with b.N), BENCHSTAT (a benchstat command
# to use instead of the pinned `go run golang.org/x/perf/cmd/benchstat@...`).
#
# Prints the machine, benchstat's comparison (skipped with a warning if
# benchstat cannot be had) and a summary of medians: metric, BASE, HEAD,
# HEAD/BASE, target, met. Exits non-zero only if a build or a run fails,
# never because a target is missed.
set -euo pipefail

# golang.org/x/perf has no tags: a pseudo-version verified to build with Go 1.26.
benchstat_version=v0.0.0-20260908200009-22c9c6c9d4da
search=./engine/...
benches=(BenchmarkTick BenchmarkTickWindowed BenchmarkReplay)

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case $1 in -h | --help) usage ;; esac

count=${COUNT:-6}
benchtime=${BENCHTIME:-1s}
year_count=${YEAR_COUNT:-2}
for n in "$count" "$year_count"; do
	case $n in '' | *[!0-9]* | 0) echo "benchcmp: COUNT and YEAR_COUNT must be positive integers" >&2 && exit 2 ;; esac
done

die() {
	echo "benchcmp: $*" >&2
	exit 1
}
warn() { echo "benchcmp: warning: $*" >&2; }

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel) || die "not in a git repository"
cd "$root"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/benchcmp.XXXXXX")
worktrees=()
cleanup() {
	local wt
	for wt in ${worktrees[@]+"${worktrees[@]}"}; do
		git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true
	done
	rm -rf "$tmp"
	git -C "$root" worktree prune >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# side NAME REV: sets dirs[NAME] and labels[NAME], checking REV out if need be.
declare -A dirs labels
side() {
	local name=$1 rev=$2 dir sha label
	if [ "$rev" = . ]; then
		dir=$root
		sha=$(git rev-parse --short HEAD)
		label="$sha+wt"
		if [ -z "$(git status --porcelain --untracked-files=no)" ]; then label=$sha; fi
		echo "$name: the working tree at $root (HEAD $(git log -1 --format='%h %s' HEAD | cut -c1-70)$([ "$label" = "$sha" ] || echo ', with uncommitted changes'))"
	else
		sha=$(git rev-parse --verify --quiet "$rev^{commit}") || die "$name: no such revision: $rev"
		dir=$tmp/$name
		git worktree add --detach --quiet "$dir" "$sha" || die "$name: cannot check out $rev"
		worktrees+=("$dir")
		label=$(git rev-parse --short "$sha")
		echo "$name: $rev = $(git log -1 --format='%h %s' "$sha" | cut -c1-70)"
	fi
	dirs[$name]=$dir
	labels[$name]=$label
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(go version | cut -d' ' -f3)"
side base "$1"
side head "${2:-HEAD}"
# The benchmarks' columns and the summary say BASE and HEAD with the commit.
col_base="BASE ${labels[base]}"
col_head="HEAD ${labels[head]}"
if [ "$col_base" = "$col_head" ]; then col_head="$col_head'"; fi
if [ -n "${DAYS:-}" ] && [ "${SKIP_YEAR:-}" != 1 ]; then warn "DAYS=$DAYS: the \"year\" replay replays $DAYS days (its target is for 365)"; fi
echo "settings: COUNT=$count BENCHTIME=$benchtime -cpu 1 -benchmem$([ "${SKIP_YEAR:-}" = 1 ] && echo ', year replay skipped' || echo ", YEAR_COUNT=$year_count")"
echo

# discover NAME: finds the package of each benchmark in side NAME and builds
# its test binary once; writes "Benchmark binary package-dir" lines to
# $tmp/NAME.plan. -trimpath lets the build cache serve every temporary
# worktree alike.
discover() {
	local name=$1 dir=${dirs[$1]} list re pkg pkgdir bin b found
	re="^($(
		IFS='|'
		echo "${benches[*]}"
	))\$"
	list=$tmp/$name.list
	echo "[$name] finding ${benches[*]} under $search and building..."
	if ! (cd "$dir" && go test -trimpath -vet=off -list "$re" "$search") >"$list" 2>&1; then
		cat "$list" >&2
		die "$name: go test -list $search failed (build failure?)"
	fi
	# go test prints each package's matching names, then "ok <package> <time>".
	awk '/^Benchmark/ { names[n++] = $1; next }
		/^ok[ \t]/ { for (i = 0; i < n; i++) print names[i], $2; n = 0 }' "$list" >"$tmp/$name.found"
	: >"$tmp/$name.plan"
	for b in "${benches[@]}"; do
		found=$(awk -v b="$b" '$1 == b { print $2 }' "$tmp/$name.found")
		if [ -z "$found" ]; then
			warn "$name: no $b under $search: not measured there"
			continue
		fi
		if [ "$(echo "$found" | wc -l)" -gt 1 ]; then
			warn "$name: $b is in several packages ($(echo "$found" | tr '\n' ' ')): using the first"
		fi
		pkg=$(echo "$found" | head -n1)
		echo "[$name] $b: $pkg"
		bin=$tmp/bin/$name-$(echo "$pkg" | tr '/.' '__').test
		pkgdir=$(cd "$dir" && go list -f '{{.Dir}}' "$pkg") || die "$name: go list $pkg failed"
		if [ ! -x "$bin" ]; then
			mkdir -p "$tmp/bin"
			(cd "$dir" && go test -trimpath -vet=off -c -o "$bin" "$pkg") || die "$name: cannot build the tests of $pkg"
		fi
		echo "$b $bin $pkgdir" >>"$tmp/$name.plan"
	done
}

# bench NAME BENCHTIME DEST [ONLY]: one round of the benchmarks of side NAME
# (those whose name matches the regexp ONLY, if given), appended to
# $tmp/NAME.DEST; one run of each test binary with the benchmarks it holds.
bench() {
	local name=$1 bt=$2 dest=$tmp/$1.$3 only=${4:-.} bin pkgdir names out
	while read -r bin pkgdir; do
		names=$(awk -v bin="$bin" -v only="$only" '$2 == bin && $1 ~ only { printf "%s%s", sep, $1; sep = "|" }' "$tmp/$name.plan")
		[ -n "$names" ] || continue
		out=$tmp/$name.run
		if ! (cd "$pkgdir" && "$bin" -test.run '^$' -test.bench "^($names)\$" -test.benchmem -test.cpu 1 \
			-test.benchtime "$bt" -test.count 1) >"$out" 2>&1; then
			cat "$out" >&2
			die "$name: benchmark run failed: $bin -test.bench '^($names)\$' -test.benchtime $bt"
		fi
		cat "$out" >>"$dest"
		grep -E '^Benchmark' "$out" | sed "s/^/  $name  /"
	done < <(awk '{ print $2, $3 }' "$tmp/$name.plan" | sort -u)
}

# year NAME: one year replay of side NAME, its wall time appended to
# $tmp/NAME.txt as a benchmark line in seconds (unit wall-s).
year() {
	local name=$1 dir=${dirs[$1]} out s
	out=$tmp/$name.year
	if [ ! -x "$dir/scripts/replay-year.sh" ]; then
		warn "$name: no scripts/replay-year.sh: year replay not measured there"
		return 0
	fi
	if ! "$dir/scripts/replay-year.sh" >"$out" 2>&1; then
		cat "$out" >&2
		die "$name: scripts/replay-year.sh failed"
	fi
	s=$(sed -n 's/^wall time: \([0-9.]*\) s.*/\1/p' "$out" | head -n1)
	if [ -z "$s" ]; then
		warn "$name: no \"wall time: N s\" line in the output of scripts/replay-year.sh: not counted"
		return 0
	fi
	echo "BenchmarkYearReplay 1 $s wall-s" >>"$tmp/$name.txt"
	echo "  $name  year replay: $s s"
}

discover base
discover head
: >"$tmp/base.txt"
: >"$tmp/head.txt"
# ABBA order: round 1 BASE then HEAD, round 2 HEAD then BASE, ...
order() { if [ $(($1 % 2)) = 1 ]; then echo base head; else echo head base; fi; }
echo
for i in $(seq 1 "$count"); do
	echo "round $i/$count"
	for s in $(order "$i"); do bench "$s" "$benchtime" txt; done
done
# allocs/op includes the setup amortised over b.N, which a time-based
# BENCHTIME makes differ between the sides: the ticks' allocations are
# compared at one fixed count of iterations on both sides.
case $benchtime in
*x) alloc_src=txt ;;
*)
	alloc_src=allocs
	echo "allocations: ticks at a fixed ${ALLOCS_BENCHTIME:-200x} on both sides"
	for s in base head; do bench "$s" "${ALLOCS_BENCHTIME:-200x}" allocs '^BenchmarkTick'; done
	;;
esac
if [ "${SKIP_YEAR:-}" != 1 ]; then
	for i in $(seq 1 "$year_count"); do
		echo "year replay $i/$year_count"
		for s in $(order "$i"); do year "$s"; done
	done
fi

echo
echo "== benchstat ($col_base vs $col_head; pkg ignored, as the benchmarks may have moved)"
bs=()
if [ -n "${BENCHSTAT:-}" ]; then
	read -r -a bs <<<"$BENCHSTAT"
else
	bs=(go run "golang.org/x/perf/cmd/benchstat@$benchstat_version")
	if command -v timeout >/dev/null; then bs=(timeout 300 "${bs[@]}"); fi
fi
if ! (cd "$tmp" && "${bs[@]}" -ignore pkg "$col_base=base.txt" "$col_head=head.txt") >"$tmp/benchstat.out" 2>&1; then
	sed -n '1,5p' "$tmp/benchstat.out" >&2
	warn "benchstat could not be run (${bs[*]}): only the summary below"
else
	grep -v '^go: downloading' "$tmp/benchstat.out" || true
fi

# median FILE BENCH UNIT: the median of BENCH's UNIT values in $tmp/FILE (a
# -N suffix of GOMAXPROCS ignored), or nothing if there are none.
median() {
	[ -f "$tmp/$1" ] || return 0
	awk -v b="$2" -v u="$3" '{ n = $1; sub(/-[0-9]+$/, "", n) } n == b {
		for (i = 3; i < NF; i++) if ($(i + 1) == u) print $i }' "$tmp/$1" |
		sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.10g\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# row SRC LABEL BENCH UNIT SCALE FORMAT KIND TARGET TARGET-TEXT: one line of
# the summary from $tmp/base.SRC and $tmp/head.SRC; SCALE divides the values
# (1e6 for ns → ms); KIND is le (HEAD <= TARGET), ge (HEAD >= TARGET) or
# base (HEAD <= BASE).
row() {
	local b h
	b=$(median "base.$1" "$3" "$4")
	h=$(median "head.$1" "$3" "$4")
	shift
	awk -v label="$1" -v b="$b" -v h="$h" -v scale="$4" -v f="$5" -v kind="$6" -v t="$7" -v tt="$8" '
		function show(v) { return v == "" ? "n/a" : sprintf(f, v / scale) }
		BEGIN {
			ratio = (b != "" && h != "" && b + 0 != 0) ? sprintf("%.2f", h / b) : "n/a"
			if (h == "" || kind == "base" && b == "") met = "n/a"
			else if (kind == "le") met = h / scale <= t ? "yes" : "NO"
			else if (kind == "ge") met = h / scale >= t ? "yes" : "NO"
			else met = h + 0 <= b + 0 ? "yes" : "NO"
			printf "%-24s %13s %13s %9s  %-10s %s\n", label, show(b), show(h), ratio, tt, met
		}'
}

echo
years=""
if [ "${SKIP_YEAR:-}" != 1 ]; then years=", year replay $year_count"; fi
echo "== summary: medians of $count runs$years; HEAD/BASE < 1 is faster (for evals/s, > 1 is)"
printf '%-24s %13s %13s %9s  %-10s %s\n' metric "$col_base" "$col_head" HEAD/BASE target met
row txt "tick ms/op" BenchmarkTick ns/op 1e6 %.3f le 0.5 "<= 0.5"
row "$alloc_src" "tick allocs/op" BenchmarkTick allocs/op 1 %.4g base 0 "<= BASE"
row txt "windowed tick ms/op" BenchmarkTickWindowed ns/op 1e6 %.3f le 1 "<= 1"
row "$alloc_src" "windowed tick allocs/op" BenchmarkTickWindowed allocs/op 1 %.4g base 0 "<= BASE"
row txt "replay evals/s" BenchmarkReplay evals/s 1e6 %.2fM ge 8 ">= 8M"
if [ "${SKIP_YEAR:-}" != 1 ]; then
	row txt "year replay s (wall)" BenchmarkYearReplay wall-s 1 %.1f le 10 "<= 10"
fi
if [ "$alloc_src" = allocs ]; then echo "(allocs/op of the ticks: at ${ALLOCS_BENCHTIME:-200x}, both sides)"; fi
