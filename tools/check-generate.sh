#!/usr/bin/env bash
# Fails when the checked-in generated files differ from a fresh `go generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
go generate ./...
if ! git diff --exit-code --stat -- . ; then
	echo "check-generate: generated files are stale; run 'make generate' and commit" >&2
	exit 1
fi
untracked=$(git ls-files --others --exclude-standard)
if [ -n "$untracked" ]; then
	echo "check-generate: generator produced untracked files:" >&2
	echo "$untracked" >&2
	exit 1
fi
echo "check-generate: generated files are up to date"
