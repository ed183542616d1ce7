package io.sparkmlt;

import org.apache.spark.QueryContext;
import org.apache.spark.SparkRuntimeException;

/**
 * The failure of a query that meets an invalid row: what {@code raise_error} raises on the same
 * Spark line, so that every engine fails alike. Spark 3.5 (the Scala 2.12 jar) raises a plain
 * RuntimeException; Spark 4 a SparkRuntimeException of error class USER_RAISED_EXCEPTION.
 */
final class MltErrors {
  private MltErrors() {}

  private static final boolean ERROR_CLASSES = !scala.util.Properties.versionNumberString().startsWith("2.12");

  static RuntimeException invalid(String message) {
    if (!ERROR_CLASSES) {
      return new RuntimeException(message);
    }
    return new SparkRuntimeException("USER_RAISED_EXCEPTION",
        new scala.collection.immutable.Map.Map1<>("errorMessage", message), null, new QueryContext[0], "");
  }
}
