#!/bin/sh
# Stop early, with one line, when no Java 17+ is available for Spark (used by `make demo`).
# Looks at $JAVA_HOME/bin/java first, then `java` on the PATH, like Spark's launcher.
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    java="$JAVA_HOME/bin/java"
else
    java=$(command -v java || true)
fi
hint="install one (Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless; macOS: brew install openjdk@17) or point JAVA_HOME at a JDK 17+"
if [ -z "$java" ]; then
    echo "spark-mlt needs Java 17 or newer for Spark and found none: $hint" >&2
    exit 1
fi
# `java -version` prints e.g. 'openjdk version "17.0.15"' or 'java version "1.8.0_392"'.
version=$("$java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
major=$(echo "$version" | sed 's/^1\.//' | cut -d. -f1 | cut -d- -f1 | cut -d+ -f1)
case "$major" in
    ''|*[!0-9]*) echo "spark-mlt needs Java 17 or newer; could not read the version of $java: $hint" >&2; exit 1 ;;
esac
if [ "$major" -lt 17 ]; then
    echo "spark-mlt needs Java 17 or newer; $java is Java $version: $hint" >&2
    exit 1
fi
