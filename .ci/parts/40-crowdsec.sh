# Sourced by .ci/run: Debian's crowdsec, unpacked (not installed: its
# postinst registers with the Central API and fails offline) into a cache
# directory kept between runs on one machine. The tests of protect/crowdsec
# and cmd/protectd start their own LAPI from it on loopback
# (PROTECT_CROWDSEC_DIR holds usr/bin/crowdsec and usr/bin/cscli).
echo "== crowdsec"
crowdsec_cache=${PROTECT_CI_CACHE:-/var/cache/protect-ci}
crowdsec_dir=""
if [ -x "$crowdsec_cache/crowdsec/usr/bin/crowdsec" ]; then
	crowdsec_dir="$crowdsec_cache/crowdsec"
else
	mkdir -p "$crowdsec_cache" 2>/dev/null || crowdsec_cache="$HOME/.cache/protect-ci"
	mkdir -p "$crowdsec_cache"
	[ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
	(cd "$ci_tmp" && apt-get download -qq crowdsec)
	rm -rf "$crowdsec_cache/crowdsec.tmp"
	dpkg -x "$ci_tmp"/crowdsec_*.deb "$crowdsec_cache/crowdsec.tmp"
	mv "$crowdsec_cache/crowdsec.tmp" "$crowdsec_cache/crowdsec"
	crowdsec_dir="$crowdsec_cache/crowdsec"
fi
export PROTECT_CROWDSEC_DIR="$crowdsec_dir"
echo "crowdsec $("$crowdsec_dir/usr/bin/crowdsec" -version 2>&1 | awk '/^version:/{print $2; exit}') in $PROTECT_CROWDSEC_DIR"
