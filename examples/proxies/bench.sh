#!/usr/bin/env bash
# bench.sh: what protectd costs behind nginx, on loopback.
#
#   examples/proxies/bench.sh                 # 3 rounds of 10s per run
#   DURATION=30s CONNECTIONS=64 ROUNDS=5 examples/proxies/bench.sh
#
# Runs wrk against:
#   1. nginx → a hello-world upstream (nginx alone)
#   2. nginx → auth_request to protectd (memory store) → the same upstream,
#      with examples/proxies/nginx as shipped (site-fail-closed.conf);
#      then the same with protectd on a unix socket
#      (HTTP_PROTECT_LISTEN=unix:PATH, "server unix:PATH;")
#   3. nginx → the same auth_request asked of an nginx that answers 200
#      at once (the hop with an auth service that does nothing: the
#      ceiling), and asked of a Go net/http server that answers 200 at
#      once (the ceiling for an auth service written in Go)
#   4. protectd's /verify alone, memory store
#   5. protectd's /verify alone, Redis store (when PROTECT_REDIS_ADDR is
#      set; its keys get a namespace of their own, deleted afterwards)
# ROUNDS times each, interleaved, and prints the medians of requests/s,
# p50 latency and protectd's CPU per request, and the throughput ratios of 2 and 3
# to 1 with the p50 latency each adds. Needs go, nginx (with auth_request) and wrk.
# Every process it starts it stops by its PID.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
for tool in go nginx wrk; do
	command -v "$tool" >/dev/null || { echo "bench.sh: $tool is not installed" >&2; exit 1; }
done

dir=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	rm -rf "$dir"
}
trap cleanup EXIT

# port: a free loopback port.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_port PORT: until something listens on it.
wait_port() {
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "bench.sh: nothing listens on 127.0.0.1:$1" >&2; exit 1
}

go build -o "$dir/protectd" ./cmd/protectd

# start_protectd LISTEN [ENV...]: protectd on LISTEN (a port on
# 127.0.0.1, or unix:PATH) counting every client, never refusing one (the
# bench measures the decision, not refusals). wrk and nginx connect from
# 127.0.0.1, its trusted proxy, and wrk's direct requests to /verify carry
# X-Forwarded-For as nginx would write it.
start_protectd() {
	local l=$1; shift
	case $l in unix:*) ;; *) l="127.0.0.1:$l" ;; esac
	env -i PATH="$PATH" HTTP_PROTECT_LISTEN="$l" HTTP_PROTECT_MAX_REQUESTS=1000000000000 \
		HTTP_PROTECT_BAN_LIMIT=-1 HTTP_PROTECT_TRUSTED_PROXIES=127.0.0.1 HTTP_PROTECT_TRUST_UNIX_SOCKET=true \
		"$@" "$dir/protectd" >>"$dir/protectd.log" 2>&1 &
	pids+=($!)
	pd_pid=$!
	case $l in
	unix:*)
		for _ in $(seq 100); do [ -S "${l#unix:}" ] && return 0; sleep 0.05; done
		echo "bench.sh: protectd does not listen on $l" >&2; cat "$dir/protectd.log" >&2; exit 1 ;;
	*) wait_port "${l##*:}" ;;
	esac
}

# nginx_up NAME PORT WORKERS: nginx serving $dir/NAME/site.conf, which
# listens on PORT.
nginx_up() {
	local name=$1
	cat >"$dir/$name/nginx.conf" <<CONF
worker_processes $3;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/$name/body;
    proxy_temp_path $dir/$name/proxy;
    fastcgi_temp_path $dir/$name/fastcgi;
    uwsgi_temp_path $dir/$name/uwsgi;
    scgi_temp_path $dir/$name/scgi;
    include site.conf;
}
CONF
	nginx -p "$dir/$name" -c "$dir/$name/nginx.conf" -e "$dir/$name/error.log" \
		-g "daemon off; pid $dir/$name/nginx.pid; error_log $dir/$name/error.log warn;" >>"$dir/nginx.out" 2>&1 &
	pids+=($!)
	wait_port "$2"
}

# start_nginx NAME PROTECTD APP_PORT [with-protect]: nginx with the
# shipped site config, asking protectd at PROTECTD (a port on 127.0.0.1,
# or unix:PATH); its port is left in $listen. (Not called as $(...): the
# subshell would wait for nginx, which keeps its stdout.)
start_nginx() {
	local name=$1 pd=$2 app=$3 with=${4:-}
	case $pd in unix:*) ;; *) pd="127.0.0.1:$pd" ;; esac
	listen=$(port)
	mkdir -p "$dir/$name"
	cp examples/proxies/nginx/protect.conf "$dir/$name/"
	sed -e "s|server 127.0.0.1:8089;|server $pd;|" \
		-e "s/server 127.0.0.1:3000;/server 127.0.0.1:$app;/" \
		-e "s/listen 127.0.0.1:8080;/listen 127.0.0.1:$listen;/" \
		examples/proxies/nginx/site-fail-closed.conf >"$dir/$name/site.conf"
	if [ "$with" != with-protect ]; then
		sed -i -e '/include protect.conf;/d' -e '/error_page 500 = @protect_down;/d' \
			-e '/X-Protect-Key \$protect_key/d' "$dir/$name/site.conf"
	fi
	nginx_up "$name" "$listen" auto
}

# The hello-world upstream: nginx answering from memory.
app=$(port)
mkdir -p "$dir/app"
echo "server { listen 127.0.0.1:$app; location / { return 200 \"hello\\n\"; } }" >"$dir/app/site.conf"
nginx_up app "$app" 1

pd=$(port)
start_protectd "$pd"
tcp_pid=$pd_pid
start_nginx alone "$pd" "$app"
alone=$listen
start_nginx guarded "$pd" "$app" with-protect
guarded=$listen
# protectd on a unix socket. Run as root, nginx's workers are nobody: the
# socket (mode 0660) gets their group, as docs/protectd.md says to do.
sock="$dir/protectd.sock"
start_protectd "unix:$sock"
unix_pid=$pd_pid
if [ "$(id -u)" = 0 ]; then
	chmod o+x "$dir"
	chgrp "$(id -gn nobody)" "$sock"
fi
start_nginx unix "unix:$sock" "$app" with-protect
unix=$listen
# The same auth_request, asked of an nginx that answers 200 at once
# instead of protectd: what the extra hop costs with an auth service that
# does nothing, the ceiling for any auth service on this machine.
stub=$(port)
mkdir -p "$dir/stub"
echo "server { listen 127.0.0.1:$stub; location / { return 200; } }" >"$dir/stub/site.conf"
nginx_up stub "$stub" auto
start_nginx hop "$stub" "$app" with-protect
hop=$listen
# The same again, asked of a Go net/http server that does nothing: the
# part of protectd's cost that is Go's own.
mkdir -p "$dir/nop"
cat >"$dir/nop/main.go" <<'GO'
package main

import (
	"net/http"
	"os"
)

func main() {
	http.ListenAndServe(os.Args[1], http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
}
GO
printf 'module nop\n\ngo 1.22\n' >"$dir/nop/go.mod"
(cd "$dir/nop" && go build -o nop .)
gonop=$(port)
"$dir/nop/nop" "127.0.0.1:$gonop" &
pids+=($!)
gonop_pid=$!
wait_port "$gonop"
start_nginx gohop "$gonop" "$app" with-protect
gohop=$listen

# Every request must be served, or the figures measure refusals.
xff="X-Forwarded-For: 198.51.100.7"
for u in "http://127.0.0.1:$alone/" "http://127.0.0.1:$guarded/" "http://127.0.0.1:$unix/" "http://127.0.0.1:$hop/" "http://127.0.0.1:$gohop/" "http://127.0.0.1:$pd/verify"; do
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "$xff" "$u")
	[ "$code" = 200 ] || { echo "bench.sh: $u answered $code" >&2; cat "$dir/protectd.log" >&2; exit 1; }
done

# cpu_ticks PID: the CPU time (user and system, in clock ticks) the
# process has used.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

# bench NAME URL [PID]: one wrk run; prints "NAME rps p50_us non2xx
# cpu_us", cpu_us being the CPU time protectd (PID) spent per request,
# which depends far less than requests/s on what else the machine runs.
bench() {
	local out rps p50 non2xx n c0 c1 cpu=-
	[ -z "${3:-}" ] || c0=$(cpu_ticks "$3")
	out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -H "$xff" "$2")
	rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
	p50=$(awk '$1 == "50%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v)} else if (v ~ /ms$/) {sub(/ms/,"",v); v*=1000} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000000}; print v}' <<<"$out")
	non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	if [ -n "${3:-}" ] && [ "${n:-0}" -gt 0 ]; then
		c1=$(cpu_ticks "$3")
		cpu=$(awk -v d=$((c1 - c0)) -v n="$n" -v t="$tck" 'BEGIN { printf "%.1f", d / t * 1e6 / n }')
	fi
	echo "$1 ${rps:-0} ${p50:-0} ${non2xx:-0} $cpu"
}

# Each run is made ROUNDS times, the rounds interleaved, and the median
# of each figure is reported: on a machine whose cores wrk, nginx and the
# servers share, one run of a few seconds can differ from the next by
# more than what separates protectd from an empty handler.
runs=(nginx-alone "http://127.0.0.1:$alone/" -
	nginx+protectd "http://127.0.0.1:$guarded/" "$tcp_pid"
	nginx+protectd-unix "http://127.0.0.1:$unix/" "$unix_pid"
	nginx+auth-to-nginx "http://127.0.0.1:$hop/" -
	nginx+auth-to-go-nop "http://127.0.0.1:$gohop/" "$gonop_pid"
	verify-memory "http://127.0.0.1:$pd/verify" "$tcp_pid")
if [ -n "${PROTECT_REDIS_ADDR:-}" ]; then
	ns="bench$$:"
	rpd=$(port)
	start_protectd "$rpd" HTTP_PROTECT_REDIS_URL="redis://$PROTECT_REDIS_ADDR/0" HTTP_PROTECT_NAMESPACE="$ns"
	runs+=(verify-redis "http://127.0.0.1:$rpd/verify" "$pd_pid")
fi
raw=()
for round in $(seq "$ROUNDS"); do
	for ((i = 0; i < ${#runs[@]}; i += 3)); do
		pid=${runs[i + 2]}
		[ "$pid" != - ] || pid=
		raw+=("$(bench "${runs[i]}" "${runs[i + 1]}" $pid)")
	done
done
if [ -n "${ns:-}" ] && command -v redis-cli >/dev/null; then
	host=${PROTECT_REDIS_ADDR%:*} rport=${PROTECT_REDIS_ADDR##*:}
	redis-cli -h "$host" -p "$rport" --scan --pattern "$ns*" | xargs -r redis-cli -h "$host" -p "$rport" del >/dev/null
fi
# median NAME FIELD: the median of field FIELD (2 rps, 3 p50, 4 non2xx,
# 5 cpu) of NAME's rounds.
median() {
	printf '%s\n' "${raw[@]}" | awk -v n="$1" -v f="$2" '$1 == n {print $f}' | sort -g |
		awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
results=()
for ((i = 0; i < ${#runs[@]}; i += 3)); do
	name=${runs[i]} cpu=-
	[ "${runs[i + 2]}" = - ] || cpu=$(median "$name" 5)
	results+=("$name $(median "$name" 2) $(median "$name" 3) $(median "$name" 4) $cpu")
done

echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, medians of $ROUNDS rounds, loopback, $(nproc) cores"
echo
echo "| run | requests/s | p50 | non-2xx | protectd CPU per request |"
echo "|---|---:|---:|---:|---:|"
for r in "${results[@]}"; do
	read -r name rps p50 non2xx cpu <<<"$r"
	[ "$cpu" = - ] || cpu="$cpu µs"
	printf '| %s | %.0f | %.0f µs | %s | %s |\n' "$name" "$rps" "$p50" "$non2xx" "$cpu"
done
read -r _ a_rps a_p50 _ <<<"${results[0]}"
read -r _ g_rps g_p50 _ <<<"${results[1]}"
read -r _ u_rps u_p50 _ <<<"${results[2]}"
read -r _ h_rps h_p50 _ <<<"${results[3]}"
read -r _ n_rps n_p50 _ <<<"${results[4]}"
echo
ratio() { awk -v a="$a_rps" -v g="$2" -v ap="$a_p50" -v gp="$3" -v name="$1" \
	'BEGIN { printf "%s / nginx alone: %.2f× throughput, p50 +%.0f µs\n", name, (a > 0 ? g / a : 0), gp - ap }'; }
ratio nginx+protectd "$g_rps" "$g_p50"
ratio nginx+protectd-unix "$u_rps" "$u_p50"
ratio nginx+auth-to-nginx "$h_rps" "$h_p50"
ratio nginx+auth-to-go-nop "$n_rps" "$n_p50"
awk -v g="$g_rps" -v n="$n_rps" -v gp="$g_p50" -v np="$n_p50" \
	'BEGIN { printf "nginx+protectd / nginx+auth-to-go-nop: %.2f× throughput, p50 %+.0f µs\n", (n > 0 ? g / n : 0), gp - np }'
