# Sourced by .ci/run: Debian's redis-server, one node and a three-master
# Redis Cluster on loopback for the tests that share them
# (PROTECT_REDIS_ADDR, PROTECT_REDIS_CLUSTER_ADDRS).
echo "== redis-server"
apt_install redis-server
redis_dir="$ci_tmp/redis"
mkdir -p "$redis_dir"
# start_redis PORT [ARGS...]: a redis-server on loopback, no persistence.
start_redis() {
	local port=$1; shift
	mkdir -p "$redis_dir/$port"
	redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
		--dir "$redis_dir/$port" --protected-mode yes --loglevel warning "$@" \
		>"$redis_dir/$port/log" 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do
		if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then return 0; fi
		sleep 0.2
	done
	echo "redis-server did not start on 127.0.0.1:$port:"; cat "$redis_dir/$port/log"; exit 1
}

# One single node.
port=""
for p in $(seq 16379 16479); do if free "$p"; then port=$p; break; fi; done
[ -n "$port" ] || { echo "no free loopback port for redis-server"; exit 1; }
start_redis "$port"
export PROTECT_REDIS_ADDR="127.0.0.1:$port"
echo "redis-server $(redis-server --version | awk '{print $3}') on $PROTECT_REDIS_ADDR"

# One Redis Cluster of three masters (each also needs its port + 10000).
nodes=()
for p in $(seq 17100 17199); do
	if free "$p" && free $((p + 10000)); then nodes+=("127.0.0.1:$p"); fi
	[ ${#nodes[@]} -eq 3 ] && break
done
[ ${#nodes[@]} -eq 3 ] || { echo "no free loopback ports for a Redis Cluster"; exit 1; }
for n in "${nodes[@]}"; do
	start_redis "${n##*:}" --cluster-enabled yes --cluster-config-file "$redis_dir/${n##*:}/nodes.conf"
done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$redis_dir/cluster.log" 2>&1 ||
	{ echo "redis-cli --cluster create failed:"; cat "$redis_dir/cluster.log"; exit 1; }
for _ in $(seq 50); do
	if redis-cli -p "${nodes[0]##*:}" cluster info | grep -q 'cluster_state:ok'; then break; fi
	sleep 0.2
done
redis-cli -p "${nodes[0]##*:}" cluster info | grep -q 'cluster_state:ok' ||
	{ echo "the Redis Cluster did not come up"; redis-cli -p "${nodes[0]##*:}" cluster info; exit 1; }
PROTECT_REDIS_CLUSTER_ADDRS=$(IFS=,; echo "${nodes[*]}")
export PROTECT_REDIS_CLUSTER_ADDRS
echo "Redis Cluster on $PROTECT_REDIS_CLUSTER_ADDRS"

