#!/usr/bin/env bash
# How fast a large HTML report becomes interactive in headless chromium (docs/performance.md).
#
#   bench/html_report_browser.sh BUILD/bench/tracetorch_html_bench [RUNS] [BENCH FLAGS...]
#
# Writes the page with tracetorch_html_bench (seed 004's size by default), then opens it RUNS
# times (default 5) in a fresh headless chromium each and prints what the page's script records:
# data-ready (ms from navigation to the script's end: parsed, laid out, script run) and
# data-script-ms (the script alone), and the CPU seconds (user + system) of the whole browser
# run; a near-empty page first, as the baseline of starting a browser and a page on this machine.
# On a busy machine the milliseconds wait for CPU; the CPU seconds over the baseline do not.
set -euo pipefail
bench=${1:?usage: html_report_browser.sh TRACETORCH_HTML_BENCH [RUNS] [BENCH FLAGS...]}
runs=${2:-5}
shift $(( $# >= 2 ? 2 : 1 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bench" --out "$work/report.html" "$@"
printf '<!DOCTYPE html><html><head><meta charset="utf-8"/><title>t</title></head><body><p>x</p><script>document.body.setAttribute("data-ready", String(Math.round(performance.now())));</script></body></html>\n' > "$work/empty.html"
open_page() {  # one fresh browser on $1: the <body> tag after the script ran, and the CPU seconds
  rm -rf "$work/profile"
  local TIMEFORMAT='%U %S' cpu
  cpu=$( { time timeout 180 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$work/profile" \
    --window-size=1200,1600 --dump-dom "file://$1" > "$work/dom.html" 2>/dev/null; } 2>&1 )
  echo "$(grep -o '<body[^>]*>' "$work/dom.html" || echo '<body (no result)>') CPU s (user system): $cpu"
}
echo "near-empty page: $(open_page "$work/empty.html")"
for i in $(seq "$runs"); do echo "report run $i: $(open_page "$work/report.html")"; done
