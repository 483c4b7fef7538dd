# Sourced by .ci/run.
echo "== nginx"
# The end-to-end tests of cmd/protectd run Debian's nginx in front of it
# (they start and stop it themselves, and fail without it under CI=true).
apt_install nginx
nginx -V 2>&1 | grep -q http_auth_request_module ||
	{ echo "nginx lacks the auth_request module"; nginx -V; exit 1; }

