#!/usr/bin/env bash
# Fails when a checked-in generated file differs from a fresh `go generate`.
# Only generated files are compared, so unrelated local edits do not matter.
set -euo pipefail
cd "$(dirname "$0")/.."
go generate ./...
mapfile -t generated < <(git grep -l -E '^(// |\\\* )?Code generated .* DO NOT EDIT' -- ':!tools/check-generate.sh'; echo docs/cm-states.svg)
if ! git diff --exit-code --stat -- "${generated[@]}"; then
	echo "check-generate: generated files are stale; run 'make generate' and commit" >&2
	exit 1
fi
echo "check-generate: ${#generated[@]} generated files are up to date"
