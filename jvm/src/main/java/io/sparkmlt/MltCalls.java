package io.sparkmlt;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.types.Decimal;

/**
 * The static methods the expressions call, one per operation and layout: between Spark's
 * internal values (ArrayData, InternalRow, Decimal) and {@link MltCodec}. The interpreted
 * path ({@code eval}) calls them for every row; generated code calls them for the layouts
 * without a generated kernel (vectors, decimals, unpacking, n above 64) and, cold, for an
 * invalid row, to raise its error. Null inputs never arrive (the calls propagate null); an
 * invalid row returns null or fails the query, per {@link MltCall#errors}, with the other
 * engines' messages.
 */
public final class MltCalls {
  private MltCalls() {}

  private static final double TOKEN_LIMIT = 9007199254740992.0; // 2^53

  // --- ids to tokens ------------------------------------------------------------------------

  private static <T> T badId(MltCall call, String shown) {
    MltCodec c = call.codec;
    return call.invalid("id " + shown, " is outside the codec's domain [0, " + c.idEnd() + ") (p=" + c.p + ", n=" + c.n
        + "); ids must be whole numbers", "ids");
  }

  /** A decimal id as a bigint when it is a whole number within the codec's domain. */
  public static Long decimalId(MltCall call, Decimal value) {
    java.math.BigDecimal exact = value.toJavaBigDecimal();
    if (exact.signum() >= 0 && exact.stripTrailingZeros().scale() <= 0
        && exact.compareTo(java.math.BigDecimal.valueOf(call.codec.maxId)) <= 0) {
      return exact.longValueExact();
    }
    return badId(call, exact.toPlainString()); // as Spark casts a decimal to a string: never 1E-37
  }

  private static int[] tokens(MltCall call, long id) {
    int[] tokens = new int[call.codec.n];
    call.codec.encode(id, tokens);
    return tokens;
  }

  public static ArrayData encodeArray(MltCall call, long id) {
    if (!call.codec.validId(id)) {
      return badId(call, Long.toString(id));
    }
    return UnsafeArrayData.fromPrimitiveArray(tokens(call, id));
  }

  public static InternalRow encodeStruct(MltCall call, long id) {
    if (!call.codec.validId(id)) {
      return badId(call, Long.toString(id));
    }
    return row(tokens(call, id));
  }

  public static Long encodePacked(MltCall call, long id) {
    if (!call.codec.validId(id)) {
      return badId(call, Long.toString(id));
    }
    return call.codec.encodePacked(id);
  }

  /** The values of the vector layout: token / (p - 1), each in [0, 1]. */
  public static ArrayData encodeValues(MltCall call, long id) {
    if (!call.codec.validId(id)) {
      return badId(call, Long.toString(id));
    }
    int[] tokens = tokens(call, id);
    double scale = Math.max(call.codec.p - 1, 1);
    double[] values = new double[tokens.length];
    for (int j = 0; j < tokens.length; j++) {
      values[j] = tokens[j] / scale;
    }
    return UnsafeArrayData.fromPrimitiveArray(values);
  }

  private static InternalRow row(int[] tokens) {
    Object[] fields = new Object[tokens.length];
    for (int j = 0; j < tokens.length; j++) {
      fields[j] = tokens[j];
    }
    return new GenericInternalRow(fields);
  }

  // --- tokens to ids ------------------------------------------------------------------------

  private static Long badTokens(MltCall call, String what, String shown, String width) {
    MltCodec c = call.codec;
    return call.invalid(what + " " + shown, " is not a valid MLT code: expected " + c.n + " tokens in [0, " + c.p + ") "
        + width + "that decode to an id below 2^63 (p=" + c.p + ", n=" + c.n + ")", "rows");
  }

  /** Tokens as Spark shows an array or struct cast to a string: [1, 2, null] or {1, 2, null}. */
  private static String shown(ArrayData tokens, boolean longs, String open, String close) {
    StringBuilder out = new StringBuilder(open);
    for (int j = 0; j < tokens.numElements(); j++) {
      if (j > 0) {
        out.append(", ");
      }
      out.append(tokens.isNullAt(j) ? "null" : Long.toString(longs ? tokens.getLong(j) : tokens.getInt(j)));
    }
    return out.append(close).toString();
  }

  private static Long decodeArray(MltCall call, ArrayData tokens, boolean longs, String open, String close) {
    int n = call.codec.n;
    long[] read = new long[n];
    boolean ok = tokens.numElements() == n;
    for (int j = 0; ok && j < n; j++) {
      ok = !tokens.isNullAt(j);
      if (ok) {
        read[j] = longs ? tokens.getLong(j) : tokens.getInt(j);
      }
    }
    long id = ok ? call.codec.decode(read) : MltCodec.INVALID;
    return id != MltCodec.INVALID ? Long.valueOf(id)
        : badTokens(call, "token vector", shown(tokens, longs, open, close), "");
  }

  /** An array of int tokens (as every engine writes them). */
  public static Long decodeInts(MltCall call, ArrayData tokens) {
    return decodeArray(call, tokens, false, "[", "]");
  }

  /** An array of bigint tokens (tokens of another integer type, cast). */
  public static Long decodeLongs(MltCall call, ArrayData tokens) {
    return decodeArray(call, tokens, true, "[", "]");
  }

  /** A struct's fields t0..t{n-1}, as bigints in an array (see {@link #decodeRow}). */
  static Long decodeStruct(MltCall call, ArrayData tokens) {
    return decodeArray(call, tokens, true, "{", "}");
  }

  /**
   * A struct's token fields, read in place: field {@code ordinals[j]} is token j, a tinyint,
   * smallint, int or bigint ({@code widths[j]}: 1, 2, 4 or 8 bytes).
   */
  public static Long decodeRow(MltCall call, InternalRow row, int[] ordinals, int[] widths) {
    Object[] tokens = new Object[ordinals.length];
    for (int j = 0; j < ordinals.length; j++) {
      tokens[j] = row.isNullAt(ordinals[j]) ? null : Long.valueOf(field(row, ordinals[j], widths[j]));
    }
    return decodeStruct(call, new org.apache.spark.sql.catalyst.util.GenericArrayData(tokens));
  }

  static long field(InternalRow row, int ordinal, int width) {
    switch (width) {
      case 1: return row.getByte(ordinal);
      case 2: return row.getShort(ordinal);
      case 4: return row.getInt(ordinal);
      default: return row.getLong(ordinal);
    }
  }

  /** The values of a vector: each times p - 1, rounded half up, is a token. */
  public static Long decodeValues(MltCall call, ArrayData values) {
    int n = call.codec.n;
    int size = values.numElements();
    double scale = Math.max(call.codec.p - 1, 1);
    long[] read = new long[size];
    for (int j = 0; j < size; j++) {
      read[j] = values.isNullAt(j) ? Long.MIN_VALUE : token(values.getDouble(j) * scale);
    }
    if (size == n) {
      long id = call.codec.decode(read);
      if (id != MltCodec.INVALID) {
        return id;
      }
    }
    StringBuilder shown = new StringBuilder("[");
    for (int j = 0; j < size; j++) {
      shown.append(j > 0 ? ", " : "").append(read[j] == Long.MIN_VALUE ? "null" : Long.toString(read[j]));
    }
    return badTokens(call, "token vector", shown.append("]").toString(), "");
  }

  /** A scaled value rounded half away from zero, within [-2^53, 2^53] (NaN: 2^53, never a token). */
  private static long token(double scaled) {
    if (Double.isNaN(scaled)) {
      return (long) TOKEN_LIMIT;
    }
    double magnitude = Math.abs(scaled);
    double whole = Math.floor(magnitude);
    double rounded = magnitude - whole >= 0.5 ? whole + 1 : whole;
    double signed = Math.copySign(Math.min(rounded, TOKEN_LIMIT), scaled);
    return (long) signed;
  }

  public static Long decodePacked(MltCall call, long packed) {
    MltCodec c = call.codec;
    long[] read = new long[c.n];
    if (c.unpack(packed, read)) {
      long id = c.decode(read);
      if (id != MltCodec.INVALID) {
        return id;
      }
    }
    return badTokens(call, "packed tokens", Long.toString(packed), "of " + c.tokenBits + " bits each ");
  }

  // --- packed tokens to tokens --------------------------------------------------------------

  private static long[] unpacked(MltCall call, long packed) {
    long[] read = new long[call.codec.n];
    return call.codec.unpack(packed, read) ? read : null;
  }

  private static <T> T badPacked(MltCall call, long packed) {
    MltCodec c = call.codec;
    return call.invalid("packed tokens " + packed, " are not " + c.n + " tokens of " + c.packedBits + " bits each in [0, "
        + c.p + ") (p=" + c.p + ", n=" + c.n + ")", "rows");
  }

  private static int[] ints(long[] tokens) {
    int[] out = new int[tokens.length];
    for (int j = 0; j < tokens.length; j++) {
      out[j] = (int) tokens[j];
    }
    return out;
  }

  public static ArrayData unpackArray(MltCall call, long packed) {
    long[] tokens = unpacked(call, packed);
    return tokens != null ? UnsafeArrayData.fromPrimitiveArray(ints(tokens)) : badPacked(call, packed);
  }

  public static InternalRow unpackStruct(MltCall call, long packed) {
    long[] tokens = unpacked(call, packed);
    return tokens != null ? row(ints(tokens)) : badPacked(call, packed);
  }
  // --- the same, for calls that fail on an invalid row: never null, so a primitive (no box) ------

  public static long encodePackedStrict(MltCall call, long id) {
    return encodePacked(call, id);
  }

  public static long decodeIntsStrict(MltCall call, ArrayData tokens) {
    return decodeInts(call, tokens);
  }

  public static long decodeLongsStrict(MltCall call, ArrayData tokens) {
    return decodeLongs(call, tokens);
  }

  public static long decodeRowStrict(MltCall call, InternalRow row, int[] ordinals, int[] widths) {
    return decodeRow(call, row, ordinals, widths);
  }

  public static long decodeValuesStrict(MltCall call, ArrayData values) {
    return decodeValues(call, values);
  }

  public static long decodePackedStrict(MltCall call, long packed) {
    return decodePacked(call, packed);
  }
}
