# Sourced by .ci/run: nft and ip, for the tests of internal/nftsink and
# cmd/protectd that make network namespaces of their own (two joined by
# a veth pair) and filter between them; they never touch the host's
# ruleset. They fail under CI=true where no namespace can be made.
echo "== nftables"
apt_install nftables iproute2
nft --version
