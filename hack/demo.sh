#!/bin/sh
# hack/demo.sh — what `make demo` runs: one real run, end to end, with the
# local executor and no cluster. It builds pcsync, drops
# examples/spool/hello.yaml into a fresh spool (written as a hidden temp
# file and renamed in, as writers should), runs
#   pcsync daemon examples/demo --spool SPOOL --executor local --once
# and prints the result, which must say "succeeded".
#
# examples/demo points claude_local at examples/agents/fake-claude, a shell
# script that prints Claude Code stream-json, so pcsync's real parser runs.
# To run the real `claude` CLI instead, see docs/runs.md:
#   DEMO_CONFIG=path/to/config ANTHROPIC_API_KEY=... hack/demo.sh
#
# Environment:
#   DEMO_CONFIG   config directory (default examples/demo)
#   DEMO_REQUEST  request file to run (default examples/spool/hello.yaml)
#   DEMO_DIR      where the binary, spool and state go (default: a new temp dir)
#   PCSYNC_BIN    a pcsync binary to use instead of building one
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
config=${DEMO_CONFIG:-examples/demo}
request=${DEMO_REQUEST:-examples/spool/hello.yaml}
dir=${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/pcsync-demo.XXXXXX")}
spool=$dir/spool
bin=${PCSYNC_BIN:-$dir/pcsync}
case $bin in /*) ;; *) bin=$root/$bin ;; esac

if [ -z "${PCSYNC_BIN:-}" ]; then
	echo "==> building pcsync"
	go build -o "$bin" ./cmd/pcsync
fi

rm -rf "$spool"
mkdir -p "$spool"
base=$(basename "$request")
cp "$request" "$spool/.$base.tmp"
mv "$spool/.$base.tmp" "$spool/$base"
name=${base%.*}

echo "==> $bin daemon $config --spool $spool --executor local --once"
"$bin" daemon "$config" --spool "$spool" --executor local --once

echo "==> $spool/$name.log"
cat "$spool/$name.log"
echo "==> $spool/$name.result.json"
cat "$spool/$name.result.json"
echo "==> $bin runs list --spool $spool"
"$bin" runs list --spool "$spool"

if ! grep -q '"status": "succeeded"' "$spool/$name.result.json"; then
	echo "demo: the run did not succeed" >&2
	exit 1
fi
echo "==> demo: run $name succeeded (files in $dir)"
