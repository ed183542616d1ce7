#!/bin/sh
# Stop early, with one line, when the Java that a make target needs is missing.
#   check_java.sh        running Spark (make demo, test, paper, zoo): Java 17+ (a JRE is enough)
#   check_java.sh --jdk  building spark-mlt's jars (make jvm, which test, demo and dist run): a JDK 17+
#                        (its javac) and Maven
# Looks at $JAVA_HOME/bin/java first, then `java` on the PATH, like Spark's launcher.
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    java="$JAVA_HOME/bin/java"
else
    java=$(command -v java || true)
fi
if [ "${1:-}" = "--jdk" ]; then
    need="a JDK 17 or newer (javac) to build spark-mlt's jars"
    hint="install one (Debian/Ubuntu: sudo apt-get install -y openjdk-17-jdk-headless; macOS: brew install openjdk@17) or point JAVA_HOME at a JDK 17+"
else
    need="Java 17 or newer for Spark"
    hint="install one (Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless; macOS: brew install openjdk@17) or point JAVA_HOME at a JDK 17+"
fi
if [ -z "$java" ]; then
    echo "spark-mlt needs $need and found no java: $hint" >&2
    exit 1
fi
# `java -version` prints e.g. 'openjdk version "17.0.15"' or 'java version "1.8.0_392"'.
version=$("$java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
major=$(echo "$version" | sed 's/^1\.//' | cut -d. -f1 | cut -d- -f1 | cut -d+ -f1)
case "$major" in
    ''|*[!0-9]*) echo "spark-mlt needs $need; could not read the version of $java: $hint" >&2; exit 1 ;;
esac
if [ "$major" -lt 17 ]; then
    echo "spark-mlt needs $need; $java is Java $version: $hint" >&2
    exit 1
fi
if [ "${1:-}" = "--jdk" ]; then
    # the compiler beside the java found (a JRE has none); javac on the PATH otherwise
    if [ ! -x "$(dirname "$java")/javac" ] && ! command -v javac >/dev/null 2>&1; then
        echo "spark-mlt needs $need; $java is a JRE without javac: $hint" >&2
        exit 1
    fi
    if ! command -v mvn >/dev/null 2>&1; then
        echo "spark-mlt needs Maven (mvn) to build its jars and fetch Delta's: install it (Debian/Ubuntu: sudo apt-get install -y maven; macOS: brew install maven)" >&2
        exit 1
    fi
fi
