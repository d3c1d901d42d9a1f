#!/usr/bin/env bash
# Builds a Redis container image from this machine's own redis-server, with
# no pull and no registry: a tarball of /usr/bin/redis-server, /usr/bin/redis-cli,
# the dynamic loader, every library ldd lists for them, and libfaketime (for
# the chaos harness's clock-skew faults), imported with `docker import`.
#
#   scripts/redis-image.sh [TAG]        default TAG: fencedlock/redis:local
#
# Then point the harness and docker-compose.yml at it:
#   export FENCEDLOCK_REDIS_IMAGE=fencedlock/redis:local FENCEDLOCK_PULL_POLICY=never
#
# Idempotent: the image carries a label with the sha256 of everything it
# holds; when the tag exists with the same sum, nothing is rebuilt (a
# redis-server or library upgrade changes the sum, and the image is rebuilt).
#
# The image: ENTRYPOINT ["/usr/bin/redis-server"], CMD ["--protected-mode", "no"]
# (Debian's build keeps protected mode on; the public image's does not),
# WORKDIR /data, PATH=/usr/local/bin:/usr/bin:/bin, and redis-cli and
# redis-server also under /usr/local/bin, where the public redis image keeps
# them, so that an exec healthcheck works the same on both.
# libfaketime is at /usr/lib/faketime/libfaketime.so.1. There is no shell.
set -euo pipefail

tag=${1:-fencedlock/redis:local}
# Bump when the layout below changes, so that existing images are rebuilt.
recipe=2
label=fencedlock.image.sha256

die() {
	echo "redis-image: $*" >&2
	exit 1
}

command -v docker >/dev/null || die "docker not found"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info failed)"
server=$(command -v redis-server) || die "redis-server not found: run scripts/deps.sh (Debian: apt-get install redis-server)"
cli=$(command -v redis-cli) || die "redis-cli not found: run scripts/deps.sh (Debian: apt-get install redis-tools)"
faketime=$(compgen -G "/usr/lib/*/faketime/libfaketime.so.1" | head -n1) ||
	die "libfaketime not found: run scripts/deps.sh (Debian: apt-get install libfaketime)"

# Every file of the image: "path-in-image<TAB>path-on-host".
files() {
	printf '%s\t%s\n' /usr/bin/redis-server "$server" /usr/bin/redis-cli "$cli" \
		/usr/lib/faketime/libfaketime.so.1 "$faketime"
	# ldd prints "libx.so.1 => /lib/.../libx.so.1 (0x...)" for libraries and
	# "/lib64/ld-linux-x86-64.so.2 (0x...)" for the loader; both keep their path.
	ldd "$server" "$cli" "$faketime" | awk '
		$2 == "=>" && $3 ~ /^\// { print $3 }
		$1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }' | sort -u | while read -r lib; do
		printf '%s\t%s\n' "$lib" "$lib"
	done
}

list=$(files)
# The sum covers the recipe and the content of every file (symlinks followed).
sum=$({
	echo "recipe $recipe"
	while IFS=$'\t' read -r dst src; do
		printf '%s %s\n' "$dst" "$(sha256sum <"$src" | cut -d' ' -f1)"
	done <<<"$list"
} | sha256sum | cut -d' ' -f1)

old=$(docker image inspect --format '{{.Id}} {{index .Config.Labels "'"$label"'"}}' "$tag" 2>/dev/null || true)
if [[ "${old#* }" == "$sum" ]]; then
	echo "redis-image: $tag is up to date ($("$server" --version | cut -d' ' -f3))"
	exit 0
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
while IFS=$'\t' read -r dst src; do
	mkdir -p "$stage$(dirname "$dst")"
	# -L: the loader and most libraries are symlink chains; the image gets the
	# files under the names the binaries ask for. redis-server keeps its name
	# (Debian's is a link to redis-check-rdb, and Redis picks its mode from argv[0]).
	cp -L "$src" "$stage$dst"
done <<<"$list"
mkdir -p "$stage/usr/local/bin" "$stage/data" "$stage/tmp" "$stage/etc"
ln -s /usr/bin/redis-server "$stage/usr/local/bin/redis-server"
ln -s /usr/bin/redis-cli "$stage/usr/local/bin/redis-cli"
chmod 1777 "$stage/tmp"
echo 'root:x:0:0:root:/root:/usr/bin/redis-server' >"$stage/etc/passwd"
echo 'root:x:0:' >"$stage/etc/group"

tar -C "$stage" --numeric-owner --owner=0 --group=0 -cf - . |
	docker import \
		--change 'ENTRYPOINT ["/usr/bin/redis-server"]' \
		--change 'CMD ["--protected-mode", "no"]' \
		--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
		--change 'WORKDIR /data' \
		--change 'EXPOSE 6379' \
		--change "LABEL $label=$sum" \
		--message "redis-server from the host's $(dpkg -S "$server" 2>/dev/null | cut -d: -f1 || echo package)" \
		- "$tag" >/dev/null

# The image this tag named before is now unnamed: remove it unless in use.
if [[ -n "$old" ]]; then
	docker image rm "${old%% *}" >/dev/null 2>&1 || true
fi

# Smoke test: the server starts and says which version it is.
docker run --rm --entrypoint /usr/bin/redis-server "$tag" --version >/dev/null ||
	die "built $tag, but redis-server does not run in it"
echo "redis-image: built $tag ($("$server" --version | cut -d' ' -f3), sum ${sum:0:12})"
