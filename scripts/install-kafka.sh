#!/usr/bin/env bash
# Apache Kafka for the tests and the benchmark, without Docker or a release tarball: the broker's
# runtime jars (the version pinned in scripts/kafka/pom.xml) resolved with Maven into
# .tools/kafka/lib, with its log4j2 configuration. Idempotent: a second run returns at once.
# Needs Java 17+ and Maven; without them it says so in one line and exits 1 (make tools goes on,
# the tests that need the broker skip locally and fail under CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."
POM=scripts/kafka/pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
DEST=.tools/kafka
STAMP="$DEST/installed-$(sha256sum "$POM" scripts/kafka/log4j2.properties | sha256sum | cut -c1-16)"
if [ -f "$STAMP" ]; then
  echo "kafka: Apache Kafka $VERSION at $DEST"
  exit 0
fi
if ! command -v java >/dev/null 2>&1; then
  echo "kafka: no java on PATH (Apache Kafka $VERSION needs Java 17 or newer)" >&2
  exit 1
fi
JAVA_MAJOR=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/.*java.specification.version = \([0-9]*\).*/\1/p')
if [ "${JAVA_MAJOR:-0}" -lt 17 ]; then
  echo "kafka: java ${JAVA_MAJOR:-unknown} is too old (Apache Kafka $VERSION needs Java 17 or newer)" >&2
  exit 1
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "kafka: no mvn on PATH (Maven resolves Apache Kafka's jars)" >&2
  exit 1
fi
rm -rf "$DEST"
mkdir -p "$DEST"
if ! mvn -q -B -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
  -DoutputDirectory="$PWD/$DEST/lib" >"$DEST/maven.log" 2>&1; then
  echo "kafka: Maven could not resolve Apache Kafka $VERSION (see $DEST/maven.log)" >&2
  exit 1
fi
cp scripts/kafka/log4j2.properties "$DEST/"
touch "$STAMP"
echo "kafka: Apache Kafka $VERSION at $DEST ($(ls "$DEST/lib" | wc -l) jars)"
