# Sourced by .ci/run: Debian's crowdsec-firewall-bouncer, unpacked rather
# than installed (its postinst registers it with a local CrowdSec, which
# the test replaces with protectd's Local API). cmd/protectd's
# TestCrowdSecFirewallBouncer runs it in a namespace it makes
# (PROTECT_CS_FIREWALL_BOUNCER).
echo "== crowdsec-firewall-bouncer"
csfb_dir="$ci_tmp/crowdsec-firewall-bouncer"
mkdir -p "$csfb_dir"
[ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
(cd "$csfb_dir" && apt-get download -qq crowdsec-firewall-bouncer 2>/dev/null) ||
	{ echo "apt-get download crowdsec-firewall-bouncer failed"; exit 1; }
dpkg -x "$csfb_dir"/crowdsec-firewall-bouncer_*.deb "$csfb_dir/root"
export PROTECT_CS_FIREWALL_BOUNCER="$csfb_dir/root/usr/bin/crowdsec-firewall-bouncer"
"$PROTECT_CS_FIREWALL_BOUNCER" -V 2>&1 | head -1
