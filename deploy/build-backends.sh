#!/usr/bin/env bash
# Build the trace backends the end-to-end tests run, without Docker:
#
#   - Jaeger v2 (github.com/jaegertracing/jaeger v1.76.0, the same commit as
#     Jaeger v2.13.0), from the Go module proxy;
#   - otelcol-seamscope, an OpenTelemetry Collector built by the Collector
#     Builder (ocb) from deploy/collector/builder-manifest.yaml.
#
# Binaries are cached by version outside the clone, under
#   ${SEAMSCOPE_BACKENDS_CACHE:-$HOME/.cache/seamscope-backends}/<name>-<version>/
# (the collector's version includes a hash of the manifest without its
# comments), and so are Go's build and module caches (<cache>/go-build,
# <cache>/go-mod), shared by both builds. A second run finds the binaries and
# takes well under a second. Times, disk and memory: docs/backends.md.
#
# Runs that share a cache take turns: the first holds <cache>/.lock (flock)
# for the whole run, the others wait for it and then find the binaries. Each
# run works in a directory of its own (<cache>/src/run.XXXXXX, removed when
# it ends) and moves a finished binary's directory into place with one
# rename, so no run removes or overwrites what another is building.
#
# While Jaeger compiles (CPU), the collector's sources are generated and its
# modules downloaded (network) in the background; the collector is compiled
# after Jaeger, so the two compilations do not fight over the cores.
#
# stdout gets only two lines, ready for `eval` or an env file:
#   SEAMSCOPE_JAEGER_BIN=/…/jaeger-v1.76.0/jaeger
#   SEAMSCOPE_OTELCOL_BIN=/…/otelcol-seamscope-0.161.0-<hash>/otelcol-seamscope
# progress goes to stderr. Needs Go >= 1.25, flock (util-linux) and the Go
# module proxy.
#
#   build-backends.sh jaeger   builds Jaeger alone (one binary: send spans
#                              straight to its OTLP port) and prints only its line
set -euo pipefail

only=""
case "${1:-}" in
  "") ;;
  jaeger) only=jaeger ;;
  *) printf 'usage: %s [jaeger]\n' "$0" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "$0")/.." && pwd)"
manifest="$repo/deploy/collector/builder-manifest.yaml"
home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cache="${SEAMSCOPE_BACKENDS_CACHE:-$home/.cache/seamscope-backends}"

JAEGER_VERSION=v1.76.0
OCB_VERSION=v0.161.0

# Go's caches live beside the binaries, never in the clone; the user's own
# GOFLAGS (e.g. -mod=vendor) and go.work must not leak into these builds.
export GOCACHE="$cache/go-build"
export GOMODCACHE="$cache/go-mod"
export GOPATH="$cache/go-path"
export GOFLAGS="-buildvcs=false"
export GOWORK=off
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export CGO_ENABLED=0

log() { printf '[build-backends] %s\n' "$*" >&2; }

mkdir -p "$cache/src"

# --- one run at a time per cache --------------------------------------------
exec 9>"$cache/.lock"
if ! flock -n 9; then
  log "another build holds $cache/.lock: waiting for it"
  flock 9
fi
# Holding the lock, no other run is active: a run.* directory left here was
# abandoned by a run that was killed.
for stale in "$cache"/src/run.*; do
  if [ -e "$stale" ]; then
    log "removing $stale, left by a run that did not finish"
    rm -rf "$stale"
  fi
done
run="$(mktemp -d "$cache/src/run.XXXXXX")"
prefetch_pid=""
cleanup() {
  if [ -n "$prefetch_pid" ]; then kill "$prefetch_pid" 2>/dev/null || true; wait "$prefetch_pid" 2>/dev/null || true; fi
  rm -rf "$run"
}
trap cleanup EXIT

# install DIR: move a finished directory built in this run into place, in one rename
install_dir() {
  local built="$1" target="$2"
  if [ -e "$target" ]; then
    mv "$target" "$run/replaced.$(basename "$target")"  # incomplete: it has no binary
  fi
  mv -T "$built" "$target"
}

jaeger_dir="$cache/jaeger-$JAEGER_VERSION"
jaeger_bin="$jaeger_dir/jaeger"
dist_version="$(sed -n 's/^  version: *//p' "$manifest" | head -1)"
# Comments do not count: only a change of what is built makes a new binary.
manifest_hash="$(grep -v '^[[:space:]]*#' "$manifest" | sha256sum | cut -c1-12)"
otelcol_name="otelcol-seamscope-$dist_version-$manifest_hash"
otelcol_dir="$cache/$otelcol_name"
otelcol_bin="$otelcol_dir/otelcol-seamscope"
ocb="$cache/ocb-$OCB_VERSION/builder"
otelcol_work="$run/$otelcol_name"

# --- the collector's sources and modules, in the background -----------------
prefetch() {
  local start=$SECONDS
  if [ ! -x "$ocb" ]; then
    log "ocb $OCB_VERSION: installing"
    GOBIN="$run/ocb-$OCB_VERSION" go install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION"
    install_dir "$run/ocb-$OCB_VERSION" "$cache/ocb-$OCB_VERSION"
  fi
  mkdir -p "$otelcol_work"
  # The manifest's output_path is relative: the sources land in the work directory.
  (cd "$otelcol_work" && "$ocb" --config "$manifest" --skip-compilation >&2)
  log "otelcol-seamscope: sources and modules ready in $((SECONDS - start)) s"
}
if [ -z "$only" ] && [ ! -x "$otelcol_bin" ]; then
  prefetch &
  prefetch_pid=$!
fi

# --- Jaeger v2 ----------------------------------------------------------------
if [ -x "$jaeger_bin" ]; then
  log "jaeger $JAEGER_VERSION: cached"
else
  log "jaeger $JAEGER_VERSION: building (cold: several minutes)"
  start=$SECONDS
  work="$run/jaeger-build"
  mkdir -p "$work" "$run/jaeger-$JAEGER_VERSION"
  (
    cd "$work"
    # A plain `go install …@version` refuses the module's replace directive:
    # pull it into a scratch module as a tool, then build it there.
    go mod init seamscope.invalid/jaeger-build >/dev/null 2>&1
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION"
    log "jaeger $JAEGER_VERSION: modules ready in $((SECONDS - start)) s, compiling"
    go build -trimpath -ldflags='-s -w' -o "$run/jaeger-$JAEGER_VERSION/jaeger" \
      github.com/jaegertracing/jaeger/cmd/jaeger
  )
  install_dir "$run/jaeger-$JAEGER_VERSION" "$jaeger_dir"
  log "jaeger $JAEGER_VERSION: built in $((SECONDS - start)) s"
fi

# --- otelcol-seamscope ----------------------------------------------------------
if [ -n "$only" ]; then
  log "otelcol-seamscope: not built (jaeger only)"
elif [ -x "$otelcol_bin" ]; then
  log "otelcol-seamscope $dist_version ($manifest_hash): cached"
else
  start=$SECONDS
  pid="$prefetch_pid"
  prefetch_pid=""
  wait "$pid"
  log "otelcol-seamscope $dist_version ($manifest_hash): compiling"
  (cd "$otelcol_work" && "$ocb" --config "$manifest" --skip-generate --skip-get-modules >&2)
  mkdir -p "$run/out-$otelcol_name"
  mv "$otelcol_work/otelcol-seamscope/otelcol-seamscope" "$run/out-$otelcol_name/otelcol-seamscope"
  cp "$manifest" "$run/out-$otelcol_name/builder-manifest.yaml"
  install_dir "$run/out-$otelcol_name" "$otelcol_dir"
  log "otelcol-seamscope: compiled in $((SECONDS - start)) s after Jaeger"
fi

echo "SEAMSCOPE_JAEGER_BIN=$jaeger_bin"
if [ -z "$only" ]; then
  echo "SEAMSCOPE_OTELCOL_BIN=$otelcol_bin"
fi
