# Sourced by .ci/run: Debian's crowdsec, unpacked (not installed: its
# postinst registers with the Central API and fails offline) into a cache
# directory kept between runs on one machine. The tests of protect/crowdsec
# and cmd/protectd start their own LAPI from it on loopback
# (PROTECT_CROWDSEC_DIR holds usr/bin/crowdsec and usr/bin/cscli).
echo "== crowdsec"
crowdsec_dir=""
for d in "${PROTECT_CI_CACHE:-/var/cache/protect-ci}" "$HOME/.cache/protect-ci"; do
	if [ -x "$d/crowdsec/usr/bin/crowdsec" ]; then crowdsec_dir="$d/crowdsec"; break; fi
done
if [ -z "$crowdsec_dir" ]; then
	crowdsec_cache="${PROTECT_CI_CACHE:-/var/cache/protect-ci}"
	mkdir -p "$crowdsec_cache" 2>/dev/null && [ -w "$crowdsec_cache" ] || crowdsec_cache="$HOME/.cache/protect-ci"
	mkdir -p "$crowdsec_cache"
	[ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
	(cd "$ci_tmp" && apt-get download -qq crowdsec 2>/dev/null)
	rm -rf "$crowdsec_cache/crowdsec.tmp"
	dpkg -x "$ci_tmp"/crowdsec_*.deb "$crowdsec_cache/crowdsec.tmp"
	mv "$crowdsec_cache/crowdsec.tmp" "$crowdsec_cache/crowdsec"
	crowdsec_dir="$crowdsec_cache/crowdsec"
fi
export PROTECT_CROWDSEC_DIR="$crowdsec_dir"
echo "crowdsec $("$crowdsec_dir/usr/bin/crowdsec" -version 2>&1 | awk '/version:/{print $NF; exit}') in $PROTECT_CROWDSEC_DIR"
