#!/usr/bin/env bash
# Builds the end-to-end control plane (etcd, kwok, and kube-apiserver, kube-controller-manager,
# kube-scheduler of each pinned Kubernetes version), helm (which lints and renders the chart) and
# the Karpenter scheduler driver of the side-by-side benchmark (benchmarks/peers/karpenter) from
# their pinned Go modules, into
# a cache outside the work tree keyed by each module's go.mod, go.sum and own Go source, so nothing cached is
# ever built twice. Prints the folder of each set. A cold build takes tens of minutes on 2 cores.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${NODEMANAGER_CACHE:-$HOME/.cache/nodemanager}/controlplane"
mkdir -p "$cache"
FORMAT=2  # how the binaries are built (flags, version stamps): a new format builds them again

build() {  # build MODULE_DIR PACKAGE... : into $cache/<the dir's name>-<hash>, once (MODULE_DIR relative to this script)
    local dir="$1"; shift
    local key out
    local sources=()
    shopt -s nullglob; sources=("$here/$dir"/*.go); shopt -u nullglob
    key="$( (echo "$FORMAT"; cat "$here/$dir/go.mod" "$here/$dir/go.sum" "${sources[@]}") | sha256sum | cut -c1-12)"
    out="$cache/$(basename "$dir")-$key"
    if [[ -f "$out/.complete" ]]; then
        echo "controlplane: $(basename "$dir") cached in $out" >&2
        return
    fi
    rm -rf "$out.partial" && mkdir -p "$out.partial"
    local version ldflags=""
    version="$(cd "$here/$dir" && go list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null || true)"
    if [[ -n "$version" ]]; then
        local minor="${version#v1.}"; minor="${minor%%.*}"
        ldflags="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
    fi
    for pkg in "$@"; do
        local start=$SECONDS
        echo "controlplane: building $(basename "$dir"): $pkg (a cold build of kube-apiserver takes about 20 minutes on 2 cores)" >&2
        (cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$out.partial/" "$pkg")
        echo "controlplane: built $pkg in $((SECONDS - start)) s" >&2
    done
    rm -rf "$out" && mv "$out.partial" "$out" && touch "$out/.complete"
    local old  # earlier builds of the same set: one folder per set, so the binaries found are the current ones
    for old in "$cache/$(basename "$dir")"-*; do
        [[ "$old" == "$out" || "$old" == "$out.partial" ]] || rm -rf "$old"
    done
}

build etcd .
build kwok sigs.k8s.io/kwok/cmd/kwok
build helm helm.sh/helm/v3/cmd/helm
for dir in $(cd "$here" && ls -d k8s-* | sort -V); do
    build "$dir" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler
done
build ../../../benchmarks/peers/karpenter .
