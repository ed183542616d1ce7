package io.sparkmlt;

import org.apache.spark.QueryContext;
import org.apache.spark.SparkRuntimeException;

/**
 * The failure of a query that meets an invalid row: what {@code raise_error} raises on the same
 * Spark line, so that every engine fails alike. Spark 3.5 raises a plain RuntimeException;
 * Spark 4 a SparkRuntimeException of error class USER_RAISED_EXCEPTION. The line is read from
 * Spark's version, not Scala's (Spark 3.5 also runs on Scala 2.13).
 */
final class MltErrors {
  private MltErrors() {}

  private static final boolean ERROR_CLASSES = !org.apache.spark.package$.MODULE$.SPARK_VERSION().startsWith("3.");

  static RuntimeException invalid(String message) {
    if (!ERROR_CLASSES) {
      return new RuntimeException(message);
    }
    return new SparkRuntimeException("USER_RAISED_EXCEPTION",
        new scala.collection.immutable.Map.Map1<>("errorMessage", message), null, new QueryContext[0], "");
  }
}
