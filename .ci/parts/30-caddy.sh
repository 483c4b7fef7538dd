# Sourced by .ci/run: the Caddy binaries TestCaddy runs in front of
# protectd (PROTECT_CADDY_BINS): Debian's caddy, and the current release
# built from the Go module proxy, kept between runs on this machine.
echo "== caddy"
apt_install caddy
caddy_version=v2.11.9
caddy_cache=${PROTECT_CI_CACHE:-/var/cache/protect-ci}/caddy-$caddy_version
if [ ! -x "$caddy_cache/caddy" ]; then
	mkdir -p "$caddy_cache"
	# Built outside the repository, so that its go.mod is not consulted.
	(cd "$ci_tmp" && GOBIN="$caddy_cache" GOFLAGS=-buildvcs=false \
		go install "github.com/caddyserver/caddy/v2/cmd/caddy@$caddy_version")
fi
PROTECT_CADDY_BINS="$(command -v caddy),$caddy_cache/caddy"
export PROTECT_CADDY_BINS
echo "caddy $(caddy version | awk '{print $1}') and $caddy_version: $PROTECT_CADDY_BINS"
