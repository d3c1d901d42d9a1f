#!/usr/bin/env bash
# Installs from Debian's packages what a make target needs, if missing:
#   scripts/deps.sh demo   redis-server (the nodes) and libfaketime (the hunt
#                          profile's clock jumps and drift): make demo, mutants,
#                          image, bench
#   scripts/deps.sh test   the demo's, postgresql (the SQL fencing guard's tests)
#                          and chromium (renders the HTML report for its check):
#                          make test; the default
# Run as root, or install the packages yourself.
#
# It stops and signals no process it did not start: the tests start their own
# servers on free ports, and a redis-server or PostgreSQL running here is the
# user's. The services the packages come with are kept from starting during
# the install by a policy-rc.d that refuses them, put in place only if the
# machine has none, and removed afterwards. Where the machine's own
# policy-rc.d let one start, that service is stopped by name, and only if the
# install started it.
set -euo pipefail

# Where invoke-rc.d looks for the policy; the script's tests point it at a
# file of their own, so that they leave the machine's alone.
policy=${FENCEDLOCK_POLICY_RC_D:-/usr/sbin/policy-rc.d}

need=()
command -v redis-server >/dev/null || need+=(redis-server)
compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || need+=(libfaketime)
case ${1:-test} in
demo) ;;
test)
	compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || need+=(postgresql)
	command -v chromium >/dev/null || need+=(chromium)
	;;
*)
	echo "usage: $0 [demo|test]" >&2
	exit 2
	;;
esac

if ((${#need[@]} == 0)); then
	exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "missing packages: ${need[*]}" >&2
	echo "install them with: sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi

# The services of the packages to install: the ones the install may start.
services=()
for p in "${need[@]}"; do
	case $p in
	redis-server | postgresql) services+=("$p") ;;
	esac
done
running() { command -v service >/dev/null && service "$1" status >/dev/null 2>&1; }
before=" "
for s in "${services[@]}"; do
	if running "$s"; then before+="$s "; fi
done

ours=
cleanup() { if [[ -n $ours ]]; then rm -f "$policy"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
if [[ ! -e $policy && ! -L $policy ]]; then
	# noclobber: a policy-rc.d put in place meanwhile by someone else stays.
	if (set -o noclobber && printf '#!/bin/sh\n# scripts/deps.sh: no service starts during its install\nexit 101\n' >"$policy") 2>/dev/null; then
		ours=1
		chmod 755 "$policy"
	fi
fi

echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

for s in "${services[@]}"; do
	if [[ $before != *" $s "* ]] && running "$s"; then
		echo "stopping the $s service the install started (the tests start their own servers)" >&2
		service "$s" stop >/dev/null 2>&1 || echo "could not stop the $s service: service $s stop" >&2
	fi
done
