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
# <cache>/go-mod). A second run finds the binaries and takes well under a
# second. Measured on 2 cores with empty caches: Jaeger 232 s and the
# collector 136 s (its modules already downloaded) on a quiet machine;
# 13 min 25 s for both from nothing while another CPU-heavy job shared the
# cores. A manifest change with warm Go caches rebuilds the collector in ~10 s.
#
# stdout gets only two lines, ready for `eval` or an env file:
#   SEAMSCOPE_JAEGER_BIN=/…/jaeger-v1.76.0/jaeger
#   SEAMSCOPE_OTELCOL_BIN=/…/otelcol-seamscope-0.161.0-<hash>/otelcol-seamscope
# progress goes to stderr. Needs Go >= 1.25 and the Go module proxy.
set -euo pipefail

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

mkdir -p "$cache"

# --- Jaeger v2 -------------------------------------------------------------
jaeger_dir="$cache/jaeger-$JAEGER_VERSION"
jaeger_bin="$jaeger_dir/jaeger"
if [ -x "$jaeger_bin" ]; then
  log "jaeger $JAEGER_VERSION: cached"
else
  log "jaeger $JAEGER_VERSION: building (cold: several minutes)"
  start=$SECONDS
  work="$cache/src/jaeger-$JAEGER_VERSION"
  rm -rf "$work" && mkdir -p "$work"
  (
    cd "$work"
    # A plain `go install …@version` refuses the module's replace directive:
    # pull it into a scratch module as a tool, then build it there.
    go mod init seamscope.invalid/jaeger-build >/dev/null 2>&1
    go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION"
    go build -trimpath -ldflags='-s -w' -o "$work/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger
  )
  mkdir -p "$jaeger_dir"
  mv "$work/jaeger" "$jaeger_bin.tmp" && mv "$jaeger_bin.tmp" "$jaeger_bin"
  rm -rf "$work"
  log "jaeger $JAEGER_VERSION: built in $((SECONDS - start)) s"
fi

# --- otelcol-seamscope -------------------------------------------------------
dist_version="$(sed -n 's/^  version: *//p' "$manifest" | head -1)"
# Comments do not count: only a change of what is built makes a new binary.
manifest_hash="$(grep -v '^[[:space:]]*#' "$manifest" | sha256sum | cut -c1-12)"
otelcol_dir="$cache/otelcol-seamscope-$dist_version-$manifest_hash"
otelcol_bin="$otelcol_dir/otelcol-seamscope"
if [ -x "$otelcol_bin" ]; then
  log "otelcol-seamscope $dist_version ($manifest_hash): cached"
else
  ocb="$cache/ocb-$OCB_VERSION/builder"
  if [ ! -x "$ocb" ]; then
    log "ocb $OCB_VERSION: installing"
    GOBIN="$cache/ocb-$OCB_VERSION" go install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION"
  fi
  log "otelcol-seamscope $dist_version ($manifest_hash): building (cold: several minutes)"
  start=$SECONDS
  work="$cache/src/otelcol-seamscope-$dist_version-$manifest_hash"
  rm -rf "$work" && mkdir -p "$work"
  # The manifest's output_path is relative: the sources and the binary land
  # in the work directory.
  (cd "$work" && "$ocb" --config "$manifest" >&2)
  mkdir -p "$otelcol_dir"
  mv "$work/otelcol-seamscope/otelcol-seamscope" "$otelcol_bin.tmp" && mv "$otelcol_bin.tmp" "$otelcol_bin"
  cp "$manifest" "$otelcol_dir/builder-manifest.yaml"
  rm -rf "$work"
  log "otelcol-seamscope: built in $((SECONDS - start)) s"
fi

echo "SEAMSCOPE_JAEGER_BIN=$jaeger_bin"
echo "SEAMSCOPE_OTELCOL_BIN=$otelcol_bin"
