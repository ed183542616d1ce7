package io.sparkmlt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Method;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.codehaus.janino.ClassBodyEvaluator;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Each codec's generated kernels, compiled by Janino (the compiler Spark's code generator
 * uses) as Spark would, against the vectors the NumPy codec wrote
 * ({@code tests/support/jvm_vectors.py}) and against the interpreted path ({@link MltCodec}).
 */
class MltKernelTest {

  /** One codec's kernels in a class of their own, called through public wrappers. */
  static final class Compiled {
    final MltCodec codec;
    final Object instance;
    final Method encodeArray;
    final Method encodeStruct;
    final Method encodePacked;
    final Method decodePacked;
    final Method decodeInts;
    final Method decodeLongs;
    final Method decodeRow;

    Compiled(MltCodec codec) throws Exception {
      this.codec = codec;
      MltKernel kernel = MltKernel.of(codec);
      boolean packed = codec.packedBits > 0;
      StringBuilder body = new StringBuilder();
      for (String[] field : kernel.fields("k")) {
        body.append("public ").append(field[0]).append(' ').append(field[1]).append(";\n");
      }
      String array = "org.apache.spark.sql.catalyst.util.ArrayData";
      body.append(kernel.encodeArray("encodeArray0", "k"))
          .append(kernel.encodeStruct("encodeStruct0", "k"))
          .append("public org.apache.spark.sql.catalyst.InternalRow encodeStruct(long id) { return encodeStruct0(id); }\n")
          .append(kernel.decodeArray("decodeInts0", "k", false))
          .append(kernel.decodeArray("decodeLongs0", "k", true))
          .append(kernel.decodeRow("decodeRow0", "k", ordinals(codec.n), widths(codec.n)))
          .append("public long decodeRow(org.apache.spark.sql.catalyst.InternalRow r) { return decodeRow0(r); }\n")
          .append("public ").append(array).append(" encodeArray(long id) { return encodeArray0(id); }\n")
          .append("public long decodeInts(").append(array).append(" t) { return decodeInts0(t); }\n")
          .append("public long decodeLongs(").append(array).append(" t) { return decodeLongs0(t); }\n");
      if (packed) {
        body.append(kernel.encodePacked("encodePacked0", "k")).append(kernel.decodePacked("decodePacked0", "k"))
            .append("public long encodePacked(long id) { return encodePacked0(id); }\n")
            .append("public long decodePacked(long v) { return decodePacked0(v); }\n");
      }
      ClassBodyEvaluator evaluator = new ClassBodyEvaluator();
      evaluator.cook(body.toString());
      Class<?> clazz = evaluator.getClazz();
      this.instance = clazz.getDeclaredConstructor().newInstance();
      for (String[] field : kernel.fields("k")) {
        clazz.getField(field[1]).set(instance, MltCodec.class.getMethod(field[2]).invoke(codec));
      }
      this.encodeArray = clazz.getMethod("encodeArray", long.class);
      this.encodeStruct = clazz.getMethod("encodeStruct", long.class);
      this.decodeInts = clazz.getMethod("decodeInts", ArrayData.class);
      this.decodeLongs = clazz.getMethod("decodeLongs", ArrayData.class);
      this.decodeRow = clazz.getMethod("decodeRow", InternalRow.class);
      this.encodePacked = packed ? clazz.getMethod("encodePacked", long.class) : null;
      this.decodePacked = packed ? clazz.getMethod("decodePacked", long.class) : null;
    }

    int[] encode(long id) throws Exception {
      return ((ArrayData) encodeArray.invoke(instance, id)).toIntArray();
    }

    int[] encodeStruct(long id) throws Exception {
      InternalRow row = (InternalRow) encodeStruct.invoke(instance, id);
      int[] out = new int[row.numFields()];
      for (int j = 0; j < out.length; j++) {
        out[j] = row.isNullAt(j) ? -1 : row.getInt(j);
      }
      return out;
    }

    long call(Method method, Object argument) throws Exception {
      return (Long) method.invoke(instance, argument);
    }
  }

  /** A struct's token fields: token j is field j + 1 (field 0 is another column's). */
  static int[] ordinals(int n) {
    int[] out = new int[n];
    for (int j = 0; j < n; j++) {
      out[j] = j + 1;
    }
    return out;
  }

  /** ints and bigints, alternately. */
  static int[] widths(int n) {
    int[] out = new int[n];
    for (int j = 0; j < n; j++) {
      out[j] = j % 2 == 0 ? 4 : 8;
    }
    return out;
  }

  static InternalRow row(long[] tokens) {
    Object[] fields = new Object[tokens.length + 1];
    fields[0] = org.apache.spark.unsafe.types.UTF8String.fromString("other");
    for (int j = 0; j < tokens.length; j++) {
      fields[j + 1] = j % 2 == 0 ? (Object) Integer.valueOf((int) tokens[j]) : (Object) Long.valueOf(tokens[j]);
    }
    return new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(fields);
  }

  private static String resource(String name) throws IOException {
    try (InputStream in = MltKernelTest.class.getResourceAsStream(name)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      byte[] buffer = new byte[1 << 16];
      for (int read; (read = in.read(buffer)) > 0; ) {
        out.write(buffer, 0, read);
      }
      return new String(out.toByteArray(), StandardCharsets.UTF_8);
    }
  }

  @SuppressWarnings("unchecked")
  private static List<Map<String, Object>> families() throws IOException {
    return (List<Map<String, Object>>) MltCodec.Json.object(resource("vectors.json")).get("families");
  }

  @SuppressWarnings("unchecked")
  private static List<Object> list(Map<String, Object> family, String key) {
    return (List<Object>) family.get(key);
  }

  private static long[] longs(Object row) {
    List<?> values = (List<?>) row;
    long[] out = new long[values.size()];
    for (int j = 0; j < out.length; j++) {
      out[j] = ((BigInteger) values.get(j)).longValue();
    }
    return out;
  }

  private static int[] ints(long[] values) {
    int[] out = new int[values.length];
    for (int j = 0; j < out.length; j++) {
      out[j] = (int) values[j];
    }
    return out;
  }

  @TestFactory
  Stream<DynamicTest> every_kernel_writes_and_reads_the_numpy_codecs_vectors() throws IOException {
    List<DynamicTest> tests = new ArrayList<>();
    for (Map<String, Object> family : families()) {
      String name = "p=" + family.get("p") + " n=" + family.get("n");
      tests.add(DynamicTest.dynamicTest(name, () -> check(family)));
    }
    return tests.stream();
  }

  private static void check(Map<String, Object> family) throws Exception {
    MltCodec codec = MltCodec.of((String) family.get("codec"));
    Compiled kernel = new Compiled(codec);
    String strategy = MltKernel.of(codec).strategy();
    List<Object> ids = list(family, "ids");
    List<Object> tokens = list(family, "tokens");
    List<Object> packed = codec.packedBits > 0 ? list(family, "packed") : null;
    int[] interpreted = new int[codec.n];
    for (int row = 0; row < ids.size(); row++) {
      long id = ((BigInteger) ids.get(row)).longValueExact();
      long[] expected = longs(tokens.get(row));
      String where = strategy + ", id " + id;
      assertArrayEquals(ints(expected), kernel.encode(id), where);
      assertArrayEquals(ints(expected), kernel.encodeStruct(id), where + " (struct)");
      codec.encode(id, interpreted);
      assertArrayEquals(ints(expected), interpreted, where + " (interpreted)");
      assertEquals(id, kernel.call(kernel.decodeInts, UnsafeArrayData.fromPrimitiveArray(ints(expected))), where);
      assertEquals(id, kernel.call(kernel.decodeLongs, UnsafeArrayData.fromPrimitiveArray(expected)), where);
      assertEquals(id, kernel.call(kernel.decodeRow, row(expected)), where + " (struct)");
      if (packed != null) {
        long value = ((BigInteger) packed.get(row)).longValue();
        assertEquals(value, kernel.call(kernel.encodePacked, id), where);
        assertEquals(id, kernel.call(kernel.decodePacked, value), where);
      }
    }
    List<Object> vectors = list(family, "vectors");
    List<Object> vectorIds = list(family, "vector_ids");
    for (int row = 0; row < vectors.size(); row++) {
      long[] vector = longs(vectors.get(row));
      Object id = vectorIds.get(row);
      long expected = id == null ? -1L : ((BigInteger) id).longValueExact();
      String where = strategy + ", tokens " + vectors.get(row);
      assertEquals(expected, kernel.call(kernel.decodeInts, UnsafeArrayData.fromPrimitiveArray(ints(vector))), where);
      assertEquals(expected, kernel.call(kernel.decodeRow, row(vector)), where + " (struct)");
      assertEquals(expected, codec.decode(vector) == MltCodec.INVALID ? -1L : codec.decode(vector), where);
      if (codec.packedBits > 0) {
        assertEquals(expected, kernel.call(kernel.decodePacked, codec.pack(ints(vector))), where);
      }
    }
  }

  @Test
  void invalid_tokens_decode_to_minus_one_where_the_interpreted_path_says_invalid() throws Exception {
    for (Map<String, Object> family : families()) {
      MltCodec codec = MltCodec.of((String) family.get("codec"));
      Compiled kernel = new Compiled(codec);
      int n = codec.n;
      long[] zeros = new long[n];
      long[] high = new long[n];
      high[0] = codec.p; // a token of p
      long[] negative = new long[n];
      negative[n - 1] = -1;
      for (long[] bad : new long[][] {high, negative}) {
        assertEquals(MltCodec.INVALID, codec.decode(bad));
        assertEquals(-1L, kernel.call(kernel.decodeLongs, UnsafeArrayData.fromPrimitiveArray(bad)));
        assertEquals(-1L, kernel.call(kernel.decodeInts, UnsafeArrayData.fromPrimitiveArray(ints(bad))));
        assertEquals(-1L, kernel.call(kernel.decodeRow, row(bad)));
      }
      assertEquals(-1L, kernel.call(kernel.decodeInts, UnsafeArrayData.fromPrimitiveArray(new int[n + 1])));
      Object[] withNull = new Object[n];
      for (int j = 1; j < n; j++) {
        withNull[j] = 0;
      }
      assertEquals(-1L, kernel.call(kernel.decodeInts, new GenericArrayData(withNull)));
      InternalRow nullField = row(zeros);
      nullField.setNullAt(n);
      assertEquals(-1L, kernel.call(kernel.decodeRow, nullField));
      assertEquals(0L, kernel.call(kernel.decodeLongs, UnsafeArrayData.fromPrimitiveArray(zeros)));
      if (codec.packedBits > 0 && codec.packedBits * n < 64) {
        long above = 1L << (codec.packedBits * n); // a bit above the n tokens
        assertEquals(-1L, kernel.call(kernel.decodePacked, above));
      }
      if (codec.packedBits > 0 && codec.p != 2) {
        long token = (1L << codec.packedBits) - 1; // p <= token < 2^bits in the last place
        assertTrue(token >= codec.p);
        assertEquals(-1L, kernel.call(kernel.decodePacked, token << (codec.packedBits * (n - 1))));
      }
    }
  }

  @Test
  void codecs_beyond_64_tokens_have_no_kernel_and_run_the_call_path() {
    assertNull(MltKernel.of(MltCodec.of(resourceCodec(3, 65))));
  }

  /** A valid codec document of p, n: the identity matrix (its own inverse). */
  private static String resourceCodec(int p, int n) {
    StringBuilder rows = new StringBuilder("[");
    for (int i = 0; i < n; i++) {
      rows.append(i == 0 ? "[" : ",[");
      for (int j = 0; j < n; j++) {
        rows.append(j == 0 ? "" : ",").append(i == j ? 1 : 0);
      }
      rows.append(']');
    }
    String identity = rows.append(']').toString();
    return "{\"format\":\"spark-mlt/codec\",\"version\":1,\"digit_order\":\"msd-first\",\"p\":" + p + ",\"n\":" + n
        + ",\"M\":" + identity + ",\"M_inv\":" + identity + "}";
  }
}
