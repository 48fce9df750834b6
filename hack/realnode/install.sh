#!/usr/bin/env bash
# Installs what internal/testing/testcluster's real node needs on a Debian machine:
# containerd, runc, the CNI plugins (/usr/lib/cni), iptables and iproute2, ipset (with
# iptables, what kube-router's NetworkPolicy firewall and kube-proxy drive: see
# hack/kuberouter), plus debootstrap and tini for the agent images other tests build, and git (its
# http-backend serves the Git repository test/realnode's git-sync follows). Idempotent: when
# everything is there it returns at once without touching apt. Needs root.
set -euo pipefail

pkgs=(containerd runc containernetworking-plugins iptables ipset iproute2 debootstrap tini git)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
	echo "realnode: all installed (${pkgs[*]})"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "realnode: missing ${missing[*]}; run as root: apt-get install ${missing[*]}" >&2
	exit 1
fi
start=$SECONDS
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts containerd as a service where systemd runs; the real node runs its
# own containerd with its own socket and state, so the service is not needed.
echo "realnode: installed ${missing[*]} in $((SECONDS - start)) s"
