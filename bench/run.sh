#!/usr/bin/env bash
# Runs the side-by-side benchmark harness in one go, against the protect
# checkout this directory lives in (go.mod replaces the module with ../):
#   starts a private Redis on 127.0.0.1:$PORT, runs the sanity tests, the
#   in-memory benchmarks, the 1M-key footprint, the Redis benchmarks, the Redis
#   command/round-trip cost trace and the wrk HTTP test, writes results/*.txt
#   and results/summary.md, and stops the Redis it started.
#
# Knobs (environment):
#   PORT=6392        Redis port (loopback only; the script refuses a port that is already in use)
#   COUNT=5          rounds of each benchmark (interleaved -count 1 runs; medians over rounds)
#   BENCHTIME=1s     -benchtime for Mem and Redis benchmarks
#   PEERS=.          regexp on peer names, e.g. PEERS='ping|none|xrate-syncmap|redis_rate|project.*'
#                    (keep ping in it for the ×PING ratios, none is always in the HTTP test)
#   HTTP=1           0 skips the wrk part; WRK_DURATION=8s HTTP_ROUNDS=3 WRK_CONNS=32 WRK_THREADS=2
#   PARTS="sanity mem footprint redis cost http"   subset to run
#   RESULTS=results  output directory
#
# A part that fails is reported and the next part runs all the same; the
# script exits 1 at the end if any part failed, and summary.md names them.
set -euo pipefail
cd "$(dirname "$0")"

PORT=${PORT:-6392}
COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-1s}
PEERS=${PEERS:-.}
HTTP=${HTTP:-1}
PARTS=${PARTS:-"sanity mem footprint redis cost http"}
RESULTS=${RESULTS:-results}
# The checkout may be a copy without .git, or owned by another user; the
# measurements do not need VCS stamps.
export GOFLAGS=${GOFLAGS:--buildvcs=false}

has_part() { [[ " $PARTS " == *" $1 "* ]]; }
log() { printf '\n=== %s  %s\n' "$(date +%H:%M:%S)" "$*"; }
failed=()
fail() { # part, reason
	failed+=("$1: $2")
	echo "PART FAILED: $1: $2" >&2
}

for p in $PARTS; do
	case $p in sanity | mem | footprint | redis | cost | http) ;;
	*) echo "unknown part '$p' in PARTS (sanity mem footprint redis cost http)" >&2; exit 2 ;;
	esac
done
[[ $PORT =~ ^[0-9]+$ ]] || { echo "PORT must be a number" >&2; exit 2; }

mkdir -p "$RESULTS"
RESULTS_ABS=$(cd "$RESULTS" && pwd)
# A summary must not mix this run's figures with an earlier run's. Only the
# files this script writes are removed: RESULTS may name any directory.
for f in env sanity mem mem_benchstat footprint footprint_benchstat redis redis_benchstat \
	redis_cost redis_trace redis_cost_log http http_raw http_log; do
	rm -f "$RESULTS_ABS/$f.txt" "$RESULTS_ABS/$f.txt.round"
done
rm -f "$RESULTS_ABS/summary.md" "$RESULTS_ABS/redis.log"

# ---- Redis (ours only: started here, stopped here, by PID) --------------------
needs_redis=0
for p in sanity redis cost http; do
	if has_part "$p"; then needs_redis=1; fi
done
REDIS_PID=
stop_redis() {
	if [[ -n $REDIS_PID ]]; then
		kill "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
		log "redis on 127.0.0.1:$PORT (pid $REDIS_PID) stopped"
		REDIS_PID=
	fi
}
trap stop_redis EXIT
trap 'exit 130' INT TERM

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [[ $needs_redis == 1 ]]; then
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
		{ echo "redis-server and redis-cli are needed (Debian: apt-get install -y redis-server)" >&2; exit 1; }
	if port_in_use "$PORT"; then
		echo "something already listens on 127.0.0.1:$PORT; not touching it. Stop it or use PORT=..." >&2
		exit 1
	fi
	# In the foreground of a background job, so that $! is redis-server's own
	# PID and nothing but that process is ever stopped.
	redis-server --port "$PORT" --bind 127.0.0.1 --protected-mode yes --save '' --appendonly no \
		--dir "$RESULTS_ABS" --logfile "$RESULTS_ABS/redis.log" &
	REDIS_PID=$!
	for _ in $(seq 50); do
		redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1 && break
		kill -0 "$REDIS_PID" 2>/dev/null || break
		sleep 0.1
	done
	redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1 ||
		{ echo "redis-server did not start on 127.0.0.1:$PORT, see $RESULTS/redis.log" >&2; exit 1; }
	log "redis $(redis-server --version | awk '{print $3}' | sed 's/^v=//') on 127.0.0.1:$PORT (pid $REDIS_PID)"
	export PERF_REDIS_ADDR=127.0.0.1:$PORT
fi
export PERF_RESULTS=$RESULTS_ABS

# ---- environment record --------------------------------------------------------
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "protect: $(git -C .. describe --always --dirty 2>/dev/null || echo 'not a git checkout')"
	echo "go: $(go version)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
	echo "kernel: $(uname -r)"
	echo "redis: $(redis-server --version 2>/dev/null || echo none)"
	echo "wrk: $(wrk -v 2>&1 | head -1 || true)"
	echo "loadavg at start: $(cat /proc/loadavg)"
	echo "COUNT=$COUNT BENCHTIME=$BENCHTIME PEERS=$PEERS PARTS=$PARTS HTTP=$HTTP"
	echo "modules:"
	go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}}{{end}}{{end}}' . |
		sort -u | grep -v '^github.com/httpprotect/protect/bench ' | sed 's/^/  /'
} >"$RESULTS/env.txt"

# Nothing is measured if the harness does not build.
go vet ./...

# ---- 1. sanity: every adapter enforces its policy, nothing refused when generous
if has_part sanity; then
	log "sanity tests"
	go test -count=1 -run 'Test(MemoryPeers|RedisPeers|HTTPPeers|IPKeyDistinct|ParseMonitor)' -v . >"$RESULTS/sanity.txt" 2>&1 || true
	grep -E '^(--- |ok|FAIL|PASS)' "$RESULTS/sanity.txt" || true
	grep -q '^ok' "$RESULTS/sanity.txt" || fail sanity "a peer does not enforce its policy, so its figures are not comparable; see $RESULTS/sanity.txt"
fi

# ---- 2. in-memory Allow: hot, 10k (in order and shuffled), 1M keys -----------
# Rounds are interleaved: every peer runs once per round (-count 1, COUNT
# rounds), so drift on a noisy machine hits all peers alike; the summary
# takes medians and pairs ratios (e.g. ×PING) per round.
run_bench() { # part, output file, -bench regexp, extra go test args...
	local part=$1 out=$2 re=$3 r
	shift 3
	: >"$RESULTS/$out"
	for r in $(seq "$COUNT"); do
		echo "--- round $r/$COUNT: $out"
		go test -run '^$' -bench "$re" -benchmem -count 1 -timeout 0 "$@" . >"$RESULTS/$out.round" 2>&1 || true
		cat "$RESULTS/$out.round" >>"$RESULTS/$out"
		if ! grep -qE '^ok' "$RESULTS/$out.round"; then
			tail -20 "$RESULTS/$out.round" >&2
			rm -f "$RESULTS/$out.round"
			fail "$part" "round $r failed, see $RESULTS/$out"
			return
		fi
		rm -f "$RESULTS/$out.round"
	done
	grep -cE '^Benchmark' "$RESULTS/$out" | sed 's/^/benchmark lines: /'
}

if has_part mem; then
	log "in-memory benchmarks (count=$COUNT)"
	run_bench mem mem.txt "^BenchmarkMem\$/./(${PEERS})/" -benchtime "$BENCHTIME"
fi

# ---- 3. memory growth: heap bytes per key after 1M keys -----------------------
if has_part footprint; then
	log "1M-key footprint (count=$COUNT)"
	run_bench footprint footprint.txt "^BenchmarkFootprint\$/(${PEERS})" -benchtime 1x
fi

# ---- 4. Redis Allow over loopback, seq and 32 goroutines ---------------------
if has_part redis; then
	log "redis benchmarks (count=$COUNT)"
	run_bench redis redis.txt "^BenchmarkRedis\$/(${PEERS})/" -benchtime "$BENCHTIME"
fi

# ---- 5. Redis commands / round trips per Allow (commandstats + MONITOR) -------
if has_part cost; then
	log "redis command cost + MONITOR trace"
	if ! go test -count=1 -run "^TestRedisCommandCost\$/(${PEERS})" -v . >"$RESULTS/redis_cost_log.txt" 2>&1; then
		tail -20 "$RESULTS/redis_cost_log.txt" >&2
		fail cost "see $RESULTS/redis_cost_log.txt"
	fi
	if [[ -s $RESULTS/redis_cost.txt ]]; then cat "$RESULTS/redis_cost.txt"; fi
fi

# ---- 6. HTTP: wrk against loopback servers -------------------------------------
if has_part http && [[ $HTTP == 1 ]]; then
	log "HTTP wrk test"
	if ! WRK=$(command -v wrk); then
		fail http "wrk not found (Debian: apt-get install -y wrk)"
	elif ! PERF_HTTP=1 PERF_WRK=$WRK PERF_WRK_DURATION=${WRK_DURATION:-8s} PERF_HTTP_ROUNDS=${HTTP_ROUNDS:-3} \
		PERF_WRK_CONNS=${WRK_CONNS:-32} PERF_WRK_THREADS=${WRK_THREADS:-2} \
		PERF_HTTP_PEERS=$([[ $PEERS == . ]] && echo "" || echo "$PEERS") \
		go test -count=1 -run '^TestHTTPWrk$' -v -timeout 0 . >"$RESULTS/http_log.txt" 2>&1; then
		tail -30 "$RESULTS/http_log.txt" >&2
		fail http "see $RESULTS/http_log.txt"
	fi
	if [[ -s $RESULTS/http.txt ]]; then cat "$RESULTS/http.txt"; fi
fi

stop_redis

# ---- summaries -------------------------------------------------------------------
BENCHSTAT=$(command -v benchstat || true)
[[ -z $BENCHSTAT && -x "$(go env GOPATH)/bin/benchstat" ]] && BENCHSTAT="$(go env GOPATH)/bin/benchstat"
if [[ -z $BENCHSTAT ]]; then
	go install golang.org/x/perf/cmd/benchstat@latest >/dev/null 2>&1 && BENCHSTAT="$(go env GOPATH)/bin/benchstat" || true
fi
for f in mem footprint redis; do
	if [[ -s $RESULTS/$f.txt ]]; then
		if [[ -n $BENCHSTAT ]]; then
			"$BENCHSTAT" "$RESULTS/$f.txt" >"$RESULTS/${f}_benchstat.txt" 2>&1 || true
		else
			echo "benchstat not available" >"$RESULTS/${f}_benchstat.txt"
		fi
	fi
done

files=()
for f in mem footprint redis; do [[ -s $RESULTS/$f.txt ]] && files+=("$RESULTS/$f.txt"); done
{
	echo "# Rate limiter harness results"
	echo
	if ((${#failed[@]})); then
		echo "**Failed parts** (their figures are missing or not to be trusted):"
		echo
		printf -- '- %s\n' "${failed[@]}"
		echo
	fi
	sed 's/^/    /' "$RESULTS/env.txt"
	echo
	if ((${#files[@]})); then go run ./cmd/summarize "${files[@]}" || echo "(cmd/summarize failed)"; fi
	if [[ -s $RESULTS/redis_cost.txt ]]; then cat "$RESULTS/redis_cost.txt"; echo; fi
	if [[ -s $RESULTS/http.txt ]]; then cat "$RESULTS/http.txt"; fi
} >"$RESULTS/summary.md"
log "done: $RESULTS/summary.md"
if ((${#failed[@]})); then
	echo "failed parts:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
