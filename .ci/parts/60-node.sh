# Sourced by .ci/run: Node and examples/express's locked dependencies, for
# TestExpressThreeInstances (cmd/protectd), which starts the app itself
# and fails without them under CI=true.
echo "== node (examples/express)"
command -v node >/dev/null 2>&1 || apt_install nodejs
command -v npm >/dev/null 2>&1 || apt_install npm
echo "node $(node --version), npm $(npm --version)"
(cd examples/express && npm ci --no-audit --no-fund --loglevel=error)
