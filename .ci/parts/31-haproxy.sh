# Sourced by .ci/run.
echo "== haproxy"
# TestHAProxy runs Debian's HAProxy in front of protectd, with the Lua
# action of examples/proxies/haproxy (it starts and stops HAProxy itself,
# and fails without it under CI=true).
apt_install haproxy
haproxy -vv | grep -q 'Built with Lua' ||
	{ echo "haproxy is built without Lua"; haproxy -vv; exit 1; }
echo "$(haproxy -v | head -1)"
