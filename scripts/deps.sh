#!/usr/bin/env bash
# Installs what the tests and the demo need from Debian's packages, if missing:
# redis-server (the nodes), postgresql (the SQL fencing guard's tests),
# faketime/libfaketime (clock-skew faults), chromium (renders the HTML report).
# Run as root, or install the packages yourself.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v faketime >/dev/null || need+=(faketime)
compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || need+=(libfaketime)
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || need+=(postgresql)
if [[ "${1:-}" != "--minimal" ]]; then
	command -v chromium >/dev/null || need+=(chromium)
fi

if ((${#need[@]} == 0)); then
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "missing packages: ${need[*]}" >&2
	echo "install them with: sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the packaged services; the tests start their own on free ports.
pkill -x redis-server 2>/dev/null || true
