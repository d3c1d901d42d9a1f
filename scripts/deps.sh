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
# machine has none (or only one that a run of this script, now gone, left),
# and removed however the run ends, short of SIGKILL: the next run then
# removes it. Where the machine's own
# policy-rc.d let one start, that service is stopped by name, and only if the
# install started it.
set -euo pipefail

# Where invoke-rc.d looks for the policy; the script's tests point it at a
# file of their own, so that they leave the machine's alone.
policy=${FENCEDLOCK_POLICY_RC_D:-/usr/sbin/policy-rc.d}

need=()
command -v redis-server >/dev/null || need+=(redis-server)
# Where the chaos package looks for it (chaos/internal/faketime Find).
have_faketime() {
	local g
	for g in /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 \
		/usr/lib64/faketime/libfaketime.so.1 /usr/local/lib/faketime/libfaketime.so.1; do
		[[ -e $g ]] && return 0
	done
	return 1
}
have_faketime || need+=(libfaketime)
case ${1:-test} in
demo) ;;
test)
	compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || need+=(postgresql)
	# The names chaos/report's Screenshot tries.
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
		command -v google-chrome >/dev/null || command -v google-chrome-stable >/dev/null ||
		need+=(chromium)
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

# The script's policy-rc.d names the run that put it there: its pid and
# the pid's start time (field 22 of /proc/PID/stat, so a reused pid is not
# taken for it). Any run removes one whose run is gone: a run killed
# outright (SIGKILL, the OOM killer, a power cut) cannot remove its own, and
# left in place it would refuse every service start on the machine.
marker_of() { # the marker line of run $1, or nothing if it is gone
	local stat f
	{ read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 0
	stat=${stat##*) } # after the command name, which may hold spaces
	read -ra f <<<"$stat"
	echo "# scripts/deps.sh run: pid $1 started ${f[19]}"
}
marker=$(marker_of $$)
header='# scripts/deps.sh: no service starts during its install'
if [[ -f $policy && ! -L $policy ]]; then
	first= second=
	{ read -r _ && read -r first && read -r second; } <"$policy" || true
	if [[ $first == "$header" && $second =~ ^'# scripts/deps.sh run: pid '([0-9]+)' ' &&
		$(marker_of "${BASH_REMATCH[1]}") != "$second" ]]; then
		echo "removing the policy-rc.d a run of this script left (pid ${BASH_REMATCH[1]}, gone)" >&2
		rm -f "$policy"
	fi
fi

# ours is set before the file is made, and cleanup removes the file only if
# it holds this run's marker: a run that ends in between leaves none behind,
# and removes no one else's.
ours=
cleanup() {
	local line=
	if [[ -n $ours ]]; then
		{ read -r _ && read -r _ && read -r line; } 2>/dev/null <"$policy" || true
		if [[ $line == "$marker" ]]; then rm -f "$policy"; fi
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
if [[ ! -e $policy && ! -L $policy ]]; then
	ours=1
	# noclobber: a policy-rc.d put in place meanwhile by someone else stays.
	if (set -o noclobber && printf '#!/bin/sh\n%s\n%s\nexit 101\n' "$header" "$marker" >"$policy") 2>/dev/null; then
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
