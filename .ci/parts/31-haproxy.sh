# Sourced by .ci/run.
echo "== haproxy"
# TestHAProxy runs Debian's HAProxy in front of protectd, with the Lua
# action of examples/proxies/haproxy (it starts and stops HAProxy itself,
# and fails without it under CI=true).
apt_install haproxy
# Read whole first: grep -q stops reading early, and under pipefail the
# writer's SIGPIPE would fail the check.
haproxy_vv=$(haproxy -vv 2>&1)
grep -q 'Built with Lua' <<<"$haproxy_vv" ||
	{ echo "haproxy is built without Lua"; echo "$haproxy_vv"; exit 1; }
head -1 <<<"$haproxy_vv"
