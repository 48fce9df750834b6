#!/usr/bin/env bash
# Builds pcsync's runtime images from the Dockerfiles under images/ with
# docker, podman or buildah (`make images BUILDER=docker`), in the catalog's
# order (go run ./hack/images -list), and pushes them when PUSH is set.
# Environment: BUILDER (docker, podman or buildah), REGISTRY (default
# localhost), TAG (default the release version, pkg/images/version.go), PUSH.
set -euo pipefail
cd "$(dirname "$0")/../.."

builder="${BUILDER:-docker}"
registry="${REGISTRY:-localhost}"
tag="${TAG:-$(sed -n 's/^const Version = "\(.*\)"$/\1/p' pkg/images/version.go)}"
command -v "$builder" >/dev/null || { echo "images: $builder not found (BUILDER=docker, podman or buildah)" >&2; exit 1; }
build=("$builder" build)
[[ "$builder" == buildah ]] && build=(buildah bud)

go run ./hack/images -list | while read -r name dir; do
	ref="$registry/$name:$tag"
	start=$SECONDS
	"${build[@]}" -f "$dir/Dockerfile" --build-arg REGISTRY="$registry" --build-arg TAG="$tag" \
		--build-arg VERSION="$tag" -t "$ref" .
	if [[ -n "${PUSH:-}" ]]; then
		"$builder" push "$ref"
	fi
	echo "images: $ref in $((SECONDS - start)) s"
done
