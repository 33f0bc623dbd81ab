#!/bin/sh
# build.sh builds the Gitea server the forge tests run against, once, from
# the Go module proxy, and caches it outside the repository:
#
#   $VOUCH_CACHE/gitea-$GITEA_VERSION/gitea   the binary
#   $VOUCH_CACHE/gitea-$GITEA_VERSION/src     the source (STATIC_ROOT_PATH)
#
# VOUCH_CACHE defaults to ~/.cache/vouch. A cached binary is reused; the
# build (about 7 minutes on 2 cores) runs only when it is missing. It prints
# the binary's path. forge/forgetest calls it when the binary is missing.
set -eu
version=${GITEA_VERSION:-1.26.0}
cache=${VOUCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vouch}
out=$cache/gitea-$version
bin=$out/gitea
GO=${GO:-go}

mkdir -p "$out"
# One build at a time, across test binaries and make.
exec 9>"$out/.lock"
flock 9
if [ -x "$bin" ] && [ -d "$out/src/options" ]; then
  echo "$bin"
  exit 0
fi

start=$(date +%s)
echo "building gitea $version into $out (once; several minutes)" >&2
dir=$("$GO" mod download -json "code.gitea.io/gitea@v$version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir" ]; then
  echo "build.sh: go mod download code.gitea.io/gitea@v$version gave no directory" >&2
  exit 1
fi
rm -rf "$out/src.tmp"
cp -R "$dir" "$out/src.tmp"
chmod -R u+w "$out/src.tmp"
(
  cd "$out/src.tmp"
  # The module's own go.mod and go.sum decide the dependencies; the
  # environment of the caller's module must not.
  GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=1 "$GO" build \
    -tags "sqlite sqlite_unlock_notify" \
    -ldflags "-X 'main.Version=$version'" \
    -o "$bin.tmp" .
)
rm -rf "$out/src"
mv "$out/src.tmp" "$out/src"
mv "$bin.tmp" "$bin"
echo "built gitea $version in $(( $(date +%s) - start ))s" >&2
echo "$bin"
