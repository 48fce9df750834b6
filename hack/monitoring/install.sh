#!/usr/bin/env bash
# Installs what the monitoring tests (test/deploy/monitoring) need on a Debian
# machine: Debian's prometheus package, for promtool (`promtool check rules`,
# `promtool test rules`) and the Prometheus server that scrapes a real daemon.
# Idempotent: when both are there it returns at once without touching apt.
# The package's own service is not started: the tests run their own
# Prometheus on a free port of 127.0.0.1. Needs root to install.
set -euo pipefail

pkgs=(prometheus)
if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
	echo "monitoring: installed ($(prometheus --version 2>&1 | head -1))"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "monitoring: promtool or prometheus missing; run as root: apt-get install --no-install-recommends ${pkgs[*]}" >&2
	exit 1
fi
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
# Keep the package's scripts from starting its service (invoke-rc.d asks
# policy-rc.d; 101: action forbidden), unless the machine has a policy of
# its own.
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 0755 "$policy"
	own_policy=1
fi
cleanup() { if [ -n "$own_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT
# (another install may hold apt's lock: wait for it)
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
for tool in promtool prometheus; do
	if ! command -v "$tool" >/dev/null; then
		echo "monitoring: $tool still missing after apt-get install ${pkgs[*]}" >&2
		exit 1
	fi
done
echo "monitoring: installed ${pkgs[*]} in $((SECONDS - start)) s ($(prometheus --version 2>&1 | head -1))"
