#!/usr/bin/env bash
# Runs the whole rate-limiter benchmark harness in one go:
#   starts a private Redis on 127.0.0.1:$PORT, runs the sanity tests, the
#   in-memory benchmarks, the 1M-key footprint, the Redis benchmarks, the Redis
#   command/round-trip cost trace and the wrk HTTP test, writes results/*.txt
#   and results/summary.md, and stops the Redis it started.
#
# Knobs (environment):
#   PORT=6392        Redis port (loopback only; the script refuses a port that is already answering)
#   COUNT=5          rounds of each benchmark (interleaved -count 1 runs; medians over rounds)
#   BENCHTIME=1s     -benchtime for Mem and Redis benchmarks
#   PEERS=.          regexp on peer names, e.g. PEERS='ping|none|xrate-syncmap|redis_rate|project.*'
#                    (keep ping in it for the ×PING ratios, none is always in the HTTP test)
#   HTTP=1           0 skips the wrk part; WRK_DURATION=8s HTTP_ROUNDS=3 WRK_CONNS=32 WRK_THREADS=2
#   PARTS="sanity mem footprint redis cost http"   subset to run
#   RESULTS=results  output directory
set -euo pipefail
cd "$(dirname "$0")"

PORT=${PORT:-6392}
COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-1s}
PEERS=${PEERS:-.}
HTTP=${HTTP:-1}
PARTS=${PARTS:-"sanity mem footprint redis cost http"}
RESULTS=${RESULTS:-results}
export GOFLAGS=${GOFLAGS:--buildvcs=false}

has_part() { [[ " $PARTS " == *" $1 "* ]]; }
log() { printf '\n=== %s  %s\n' "$(date +%H:%M:%S)" "$*"; }

mkdir -p "$RESULTS"
RESULTS_ABS=$(cd "$RESULTS" && pwd)

# ---- Redis (ours only: started here, stopped here, by port) -----------------
STARTED_REDIS=0
stop_redis() {
	if [[ $STARTED_REDIS == 1 ]]; then
		redis-cli -h 127.0.0.1 -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
		STARTED_REDIS=0
		log "redis on 127.0.0.1:$PORT stopped"
	fi
}
trap stop_redis EXIT INT TERM

if redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1; then
	echo "something already answers on 127.0.0.1:$PORT; not touching it. Stop it or use PORT=..." >&2
	exit 1
fi
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--pidfile "$RESULTS_ABS/redis.pid" --logfile "$RESULTS_ABS/redis.log"
STARTED_REDIS=1
for _ in $(seq 50); do
	redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1 && break
	sleep 0.1
done
redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null
log "redis $(redis-server --version | awk '{print $3}') on 127.0.0.1:$PORT (pid $(cat "$RESULTS_ABS/redis.pid"))"

export PERF_REDIS_ADDR=127.0.0.1:$PORT
export PERF_RESULTS=$RESULTS_ABS

# ---- environment record --------------------------------------------------------
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "go: $(go version)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
	echo "kernel: $(uname -r)"
	echo "redis: $(redis-server --version)"
	echo "wrk: $(wrk -v 2>&1 | head -1 || true)"
	echo "loadavg at start: $(cat /proc/loadavg)"
	echo "COUNT=$COUNT BENCHTIME=$BENCHTIME PEERS=$PEERS PARTS=$PARTS"
	echo "modules:"
	go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' . | sort -u | grep -v '^github.com/httpprotect/protect/bench ' | sed 's/^/  /'
} >"$RESULTS/env.txt"

go vet ./...

# ---- 1. sanity: every adapter enforces its policy, nothing refused when generous
if has_part sanity; then
	log "sanity tests"
	go test -count=1 -run 'Test(MemoryPeers|RedisPeers|HTTPPeers|IPKeyDistinct)' -v . 2>&1 | tee "$RESULTS/sanity.txt" | grep -E '^(--- |ok|FAIL|PASS)' || true
	grep -q '^ok' "$RESULTS/sanity.txt" || { echo "sanity tests failed, see $RESULTS/sanity.txt" >&2; exit 1; }
fi

# ---- 2. in-memory Allow: hot / 10k / 1M keys, seq and parallel ---------------
# Rounds are interleaved: every peer runs once per round (-count 1, COUNT
# rounds), so drift on a noisy machine hits all peers alike; the summary
# takes medians and pairs ratios (e.g. ×PING) per round.
run_bench() { # output file, -bench regexp, extra go test args...
	local out=$1 re=$2 r
	shift 2
	: >"$RESULTS/$out"
	for r in $(seq "$COUNT"); do
		echo "--- round $r/$COUNT: $out"
		go test -run '^$' -bench "$re" -benchmem -count 1 -timeout 0 "$@" . >"$RESULTS/$out.round" 2>&1 || true
		cat "$RESULTS/$out.round" >>"$RESULTS/$out"
		grep -qE '^ok' "$RESULTS/$out.round" || { echo "benchmarks failed, see $RESULTS/$out" >&2; tail -20 "$RESULTS/$out.round" >&2; exit 1; }
		rm -f "$RESULTS/$out.round"
	done
	grep -cE '^Benchmark' "$RESULTS/$out" | sed 's/^/benchmark lines: /'
}

if has_part mem; then
	log "in-memory benchmarks (count=$COUNT)"
	run_bench mem.txt "^BenchmarkMem\$/./(${PEERS})/" -benchtime "$BENCHTIME"
fi

# ---- 3. memory growth: heap bytes per key after 1M keys -----------------------
if has_part footprint; then
	log "1M-key footprint (count=$COUNT)"
	run_bench footprint.txt "^BenchmarkFootprint\$/(${PEERS})" -benchtime 1x
fi

# ---- 4. Redis Allow over loopback, seq and 32 goroutines ---------------------
if has_part redis; then
	log "redis benchmarks (count=$COUNT)"
	run_bench redis.txt "^BenchmarkRedis\$/(${PEERS})/" -benchtime "$BENCHTIME"
fi

# ---- 5. Redis commands / round trips per Allow (commandstats + MONITOR) -------
if has_part cost; then
	log "redis command cost + MONITOR trace"
	go test -count=1 -run "^TestRedisCommandCost\$/(${PEERS})" -v . >"$RESULTS/redis_cost_log.txt" 2>&1 || { tail -20 "$RESULTS/redis_cost_log.txt"; exit 1; }
	cat "$RESULTS/redis_cost.txt"
fi

# ---- 6. HTTP: wrk against loopback servers -------------------------------------
if has_part http && [[ $HTTP == 1 ]]; then
	log "HTTP wrk test"
	PERF_HTTP=1 PERF_WRK_DURATION=${WRK_DURATION:-8s} PERF_HTTP_ROUNDS=${HTTP_ROUNDS:-3} \
		PERF_WRK_CONNS=${WRK_CONNS:-32} PERF_WRK_THREADS=${WRK_THREADS:-2} \
		PERF_HTTP_PEERS=$([[ $PEERS == . ]] && echo "" || echo "$PEERS") \
		go test -count=1 -run '^TestHTTPWrk$' -v -timeout 0 . >"$RESULTS/http_log.txt" 2>&1 || { tail -30 "$RESULTS/http_log.txt"; exit 1; }
	cat "$RESULTS/http.txt"
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
	sed 's/^/    /' "$RESULTS/env.txt"
	echo
	((${#files[@]})) && go run ./cmd/summarize "${files[@]}"
	[[ -s $RESULTS/redis_cost.txt ]] && { cat "$RESULTS/redis_cost.txt"; echo; }
	[[ -s $RESULTS/http.txt ]] && cat "$RESULTS/http.txt"
} >"$RESULTS/summary.md"
log "done: $RESULTS/summary.md"
