# Sourced by .ci/run: Debian's chromium, which TestChallengeBrowser drives
# through chromedp to solve the challenge page (it finds it on PATH).
echo "== chromium"
apt_install chromium
echo "$(chromium --version 2>/dev/null | head -1)"
