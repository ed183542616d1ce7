package io.sparkmlt;

import java.io.Serializable;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * An MLT codec, read from the JSON document spark-mlt writes (the string a Delta table's
 * properties hold): the kernel of the JVM engine, with no Spark in it.
 *
 * <p>Tokens of an id: its n base-p digits, most significant first, times M, mod p. The id of
 * tokens: the tokens times M^-1, mod p, read as base-p digits. All arithmetic is on longs and
 * never overflows: digits and entries are below p &lt; 2^31, products below 2^62, and sums
 * are reduced before they could reach 2^63.
 *
 * <p>Instances are immutable and shared: {@link #of} caches one per document, and a
 * deserialised codec (a plan shipped to an executor) resolves to that executor's cached one,
 * so the tables are built once per JVM.
 *
 * <pre>{@code
 * MltCodec codec = MltCodec.of(json);
 * int[] tokens = new int[codec.n];
 * if (codec.validId(42L)) codec.encode(42L, tokens);
 * }</pre>
 */
public final class MltCodec implements Serializable {
  private static final long serialVersionUID = 1L;

  /** What {@link #decode} returns for tokens that are no MLT code of an id below 2^63. */
  public static final long INVALID = -1L;

  private static final ConcurrentHashMap<String, MltCodec> CACHE = new ConcurrentHashMap<>();

  /** The document: the only state that is serialised. */
  private final String json;

  public final transient int p;
  public final transient int n;
  /** The largest id: min(p^n, 2^63) - 1. */
  public final transient long maxId;
  /** Bits that hold any token: bit_length(p - 1), at least 1. */
  public final transient int tokenBits;
  /** Bits per token in a packed bigint, or 0 when n tokens do not fit in 64 bits. */
  public final transient int packedBits;
  public final transient String fingerprint;
  /** p^n exceeds 2^63: the leading digits of valid ids are bounded, decoding checks overflow. */
  private final transient boolean wide;
  /** M, row-major: row i is what digit i adds to the tokens. */
  private final transient int[] m;
  /** M^-1, column-major: column i is what the tokens give digit i. */
  private final transient int[] inverseColumns;
  /** The largest power of p below 2^31, and its exponent: digits come out k at a time. */
  private final transient long chunk;
  private final transient int chunkDigits;
  /** How many products fit in a long before a reduction mod p. */
  private final transient int termsPerReduction;
  /** Beyond it, one more base-p digit may take an id past 2^63 (wide codecs check it). */
  private final transient long hornerLimit;
  private final transient double inverseP;
  /** Lookup tables for small p, else null (direct arithmetic). */
  private final transient MltTables tables;
  /** The generated kernels' smaller tables (see {@link MltKernel}), or null. */
  final transient MltTables kernelTables;
  /** How many base-p digits an id up to maxId has (1 .. n). */
  final transient int places;

  private MltCodec(String json) {
    this.json = json;
    Map<String, Object> document = Json.object(json);
    expect(document, "format", "spark-mlt/codec");
    expect(document, "version", BigInteger.ONE);
    expect(document, "digit_order", "msd-first");
    BigInteger bigP = integer(document, "p");
    if (bigP.compareTo(BigInteger.valueOf(2)) < 0 || bigP.compareTo(BigInteger.valueOf(Integer.MAX_VALUE)) > 0
        || !bigP.isProbablePrime(64)) {
      throw new IllegalArgumentException("codec JSON: p must be a prime in [2, 2^31 - 1], got " + bigP);
    }
    this.p = bigP.intValueExact();
    BigInteger bigN = integer(document, "n");
    if (bigN.signum() <= 0 || bigN.compareTo(BigInteger.valueOf(4096)) > 0) {
      throw new IllegalArgumentException("codec JSON: n must be in [1, 4096], got " + bigN);
    }
    this.n = bigN.intValueExact();
    int[] matrix = matrix(document, "M");
    int[] inverse = matrix(document, "M_inv");
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) {
        long sum = 0;
        for (int k = 0; k < n; k++) {
          sum = (sum + (long) matrix[i * n + k] * inverse[k * n + j]) % p;
        }
        if (sum != (i == j ? 1 : 0)) {
          throw new IllegalArgumentException("codec JSON: M_inv is not the inverse of M mod p=" + p);
        }
      }
    }
    Object print = document.get("fingerprint");
    this.fingerprint = print instanceof String ? (String) print : "";
    this.m = matrix;
    this.inverseColumns = new int[n * n];
    for (int j = 0; j < n; j++) {
      for (int i = 0; i < n; i++) {
        inverseColumns[i * n + j] = inverse[j * n + i];
      }
    }
    BigInteger capacity = bigP.pow(n);
    this.wide = capacity.bitLength() > 64 || capacity.compareTo(BigInteger.ONE.shiftLeft(63)) > 0;
    this.maxId = wide ? Long.MAX_VALUE : capacity.subtract(BigInteger.ONE).longValueExact();
    this.tokenBits = Math.max(1, 32 - Integer.numberOfLeadingZeros(p - 1));
    this.packedBits = tokenBits * n <= 64 ? tokenBits : 0;
    long power = p;
    int digits = 1;
    while (power * p <= Integer.MAX_VALUE) {
      power *= p;
      digits++;
    }
    this.chunk = power;
    this.chunkDigits = digits;
    long square = (long) (p - 1) * (p - 1);
    this.termsPerReduction = square == 0 ? Integer.MAX_VALUE
        : (int) Math.max(1, Math.min(Integer.MAX_VALUE, (Long.MAX_VALUE - p) / square));
    this.hornerLimit = (Long.MAX_VALUE - (p - 1)) / p;
    this.inverseP = 1.0 / p;
    int places = 0;
    for (long rest = maxId; rest > 0; rest /= p) {
      places++;
    }
    this.places = Math.max(1, Math.min(n, places));
    this.tables = MltTables.build(p, n, matrix, inverse, this.places, tokenBits, MltTables.MAX_ENTRIES,
        MltTables.MAX_ENTRIES, MltTables.MAX_INDEX_BITS, MltTables.MAX_BYTES, false);
    this.kernelTables = MltTables.build(p, n, matrix, inverse, this.places, tokenBits, MltTables.KERNEL_P,
        MltTables.KERNEL_ENTRIES, MltTables.KERNEL_INDEX_BITS, MltTables.KERNEL_BYTES, true);
  }

  /** The codec of a JSON document, built once per JVM and document. */
  public static MltCodec of(String json) {
    MltCodec cached = CACHE.get(json);
    if (cached != null) {
      return cached;
    }
    MltCodec built = new MltCodec(json);
    MltCodec raced = CACHE.putIfAbsent(json, built);
    return raced != null ? raced : built;
  }

  private Object readResolve() {
    return of(json);
  }

  /** The generated kernels' encoding table (shared: never write to it), or null. */
  public long[] kernelEncodeTable() {
    return kernelTables == null ? null : kernelTables.encTable;
  }

  /** The generated kernels' decoding table (shared: never write to it), or null. */
  public long[] kernelDecodeTable() {
    return kernelTables == null ? null : kernelTables.decTable;
  }

  /** M, row-major, as longs: the generated kernels' matrix where they loop (a copy). */
  public long[] kernelMatrix() {
    return longs(m);
  }

  /** M^-1, column-major ([i * n + j]: what token j gives digit i), as longs (a copy). */
  public long[] kernelInverse() {
    return longs(inverseColumns);
  }

  private static long[] longs(int[] values) {
    long[] out = new long[values.length];
    for (int k = 0; k < values.length; k++) {
      out[k] = values[k];
    }
    return out;
  }

  /** M, row-major (a copy). */
  int[] matrix() {
    return m.clone();
  }

  /** M^-1, column-major: entry [i * n + j] is what token j gives digit i (a copy). */
  int[] inverseColumns() {
    return inverseColumns.clone();
  }

  /** The number of products a long sum takes before it must be reduced mod p. */
  int termsPerReduction() {
    return termsPerReduction;
  }

  boolean wide() {
    return wide;
  }

  public String json() {
    return json;
  }

  /** min(p^n, 2^63) as text: the end of the id range [0, end). */
  public String idEnd() {
    return Long.toUnsignedString(maxId + 1);
  }

  public boolean validId(long id) {
    return id >= 0 && id <= maxId;
  }

  /** The n tokens of a valid id (see {@link #validId}) into {@code out}. */
  public void encode(long id, int[] out) {
    MltTables t = tables;
    if (t != null) {
      if (t.encLanes.longs == 1) {
        long lanes = t.encodeLane(id);
        for (int j = 0; j < n; j++) {
          out[j] = t.token(lanes, j);
        }
      } else {
        long[] lanes = new long[t.encLanes.longs];
        t.encodeLanes(id, lanes);
        for (int j = 0; j < n; j++) {
          out[j] = t.token(lanes, j);
        }
      }
      return;
    }
    int[] digits = new int[n];
    int i = n - 1;
    long rest = id;
    if (p >= 4096) { // p >= 2^12: a quotient through a double is exact after one correction
      while (rest != 0 && i >= 0) {
        long high = MltTables.quotient(rest, p, inverseP);
        digits[i--] = (int) (rest - high * p);
        rest = high;
      }
    }
    while (rest != 0 && i >= 0) {
      long high = rest / chunk;
      int low = (int) (rest - high * chunk);
      for (int k = 0; k < chunkDigits && i >= 0; k++) {
        int next = low / p;
        digits[i--] = low - next * p;
        low = next;
      }
      rest = high;
    }
    long[] sums = new long[n];
    int terms = 0;
    for (int d = 0; d < n; d++) {
      long digit = digits[d];
      if (digit == 0) {
        continue;
      }
      int row = d * n;
      for (int j = 0; j < n; j++) {
        sums[j] += digit * m[row + j];
      }
      if (++terms == termsPerReduction) {
        for (int j = 0; j < n; j++) {
          sums[j] %= p;
        }
        terms = 0;
      }
    }
    for (int j = 0; j < n; j++) {
      out[j] = (int) (sums[j] % p);
    }
  }

  /** The tokens of a valid id, packed (token j in bits [j*b, (j+1)*b)); needs packedBits > 0. */
  public long encodePacked(long id) {
    MltTables t = tables;
    if (t != null && t.encLanes.longs == 1) {
      long lanes = t.encodeLane(id);
      if (t.xor) {
        return lanes; // p = 2: lane j is token j, one bit each: the packed tokens
      }
      long packed = 0;
      for (int j = 0; j < n; j++) {
        packed |= ((long) t.token(lanes, j)) << (packedBits * j);
      }
      return packed;
    }
    int[] tokens = new int[n];
    encode(id, tokens);
    return pack(tokens);
  }

  public long pack(int[] tokens) {
    long packed = 0;
    for (int j = 0; j < n; j++) {
      packed |= ((long) tokens[j]) << (packedBits * j);
    }
    return packed;
  }

  /**
   * The tokens of a packed value into {@code out}, or false when a bit above the n tokens is
   * set or a token is p or more.
   */
  public boolean unpack(long packed, long[] out) {
    int top = packedBits * n;
    if (top < 64 && (packed >>> top) != 0) {
      return false;
    }
    long mask = packedBits == 64 ? -1L : (1L << packedBits) - 1;
    boolean valid = true;
    for (int j = 0; j < n; j++) {
      long token = (packed >>> (packedBits * j)) & mask;
      out[j] = token;
      valid &= token < p;
    }
    return valid;
  }

  /** The id of n tokens (any longs), or {@link #INVALID}: a token outside [0, p), or an id of 2^63 or more. */
  public long decode(long[] tokens) {
    for (int j = 0; j < n; j++) {
      if (tokens[j] < 0 || tokens[j] >= p) {
        return INVALID;
      }
    }
    if (tables != null) {
      return decodeTables(tokens);
    }
    long id = 0;
    for (int i = 0; i < n; i++) {
      long sum = 0;
      int column = i * n;
      int terms = 0;
      for (int j = 0; j < n; j++) {
        sum += tokens[j] * inverseColumns[column + j];
        if (++terms == termsPerReduction) {
          sum %= p;
          terms = 0;
        }
      }
      long digit = sum % p;
      if (wide && id > hornerLimit && id > (Long.MAX_VALUE - digit) / p) {
        return INVALID;
      }
      id = id * p + digit;
    }
    return id;
  }

  /** {@link #decode} of tokens in [0, p), through the tables. */
  private long decodeTables(long[] tokens) {
    MltTables t = tables;
    MltTables.Lanes lanes = t.decLanes;
    long[] sums = lanes.longs == 1 ? null : new long[lanes.longs];
    long sum = 0;
    int j = 0;
    for (int k = 0; k < t.decChunks; k++) {
      int index = 0;
      for (int s = 0; s < t.tokensPerChunk && j < n; s++, j++) {
        index |= ((int) tokens[j]) << (s * tokenBits);
      }
      int at = ((k << t.indexBits) + index) * lanes.longs;
      if (sums == null) {
        sum = t.xor ? sum ^ t.decTable[at] : sum + t.decTable[at];
      } else {
        for (int w = 0; w < lanes.longs; w++) {
          sums[w] = t.xor ? sums[w] ^ t.decTable[at + w] : sums[w] + t.decTable[at + w];
        }
      }
    }
    if (t.xor && sums == null) {
      return sum < 0 ? INVALID : sum; // p = 2, n <= 64: lane e is the id's bit e; bit 63 set: 2^63 or more
    }
    long id = 0;
    for (int e = n - 1; e >= 0; e--) {
      long lane = sums == null ? sum >>> lanes.shifts[e] : sums[lanes.words[e]] >>> lanes.shifts[e];
      int digit = t.reduce[(int) (lane & lanes.mask)];
      if (wide && id > hornerLimit && id > (Long.MAX_VALUE - digit) / p) {
        return INVALID;
      }
      id = id * p + digit;
    }
    return id;
  }

  @Override
  public String toString() {
    return "MltCodec(p=" + p + ", n=" + n + ", fingerprint=" + fingerprint.substring(0, Math.min(12, fingerprint.length())) + ")";
  }

  // --- reading the document -----------------------------------------------------------------

  private static void expect(Map<String, Object> document, String key, Object wanted) {
    Object found = document.get(key);
    if (!wanted.equals(found)) {
      throw new IllegalArgumentException("codec JSON: " + key + " must be " + Json.show(wanted) + ", got " + Json.show(found)
          + " (is this a codec spark-mlt wrote, MLTCodec.to_json()?)");
    }
  }

  private static BigInteger integer(Map<String, Object> document, String key) {
    Object found = document.get(key);
    if (!(found instanceof BigInteger)) {
      throw new IllegalArgumentException("codec JSON: " + key + " must be an integer, got " + Json.show(found));
    }
    return (BigInteger) found;
  }

  private int[] matrix(Map<String, Object> document, String key) {
    Object found = document.get(key);
    String shape = "codec JSON: " + key + " must be an " + n + " x " + n + " matrix of integers in [0, " + p + ")";
    if (!(found instanceof List) || ((List<?>) found).size() != n) {
      throw new IllegalArgumentException(shape);
    }
    int[] out = new int[n * n];
    int i = 0;
    for (Object row : (List<?>) found) {
      if (!(row instanceof List) || ((List<?>) row).size() != n) {
        throw new IllegalArgumentException(shape);
      }
      int j = 0;
      for (Object entry : (List<?>) row) {
        if (!(entry instanceof BigInteger) || ((BigInteger) entry).signum() < 0
            || ((BigInteger) entry).compareTo(BigInteger.valueOf(p)) >= 0) {
          throw new IllegalArgumentException(shape + ", got " + Json.show(entry) + " at [" + i + "][" + j + "]");
        }
        out[i * n + j] = ((BigInteger) entry).intValue();
        j++;
      }
      i++;
    }
    return out;
  }

  /** A small JSON reader: objects, arrays, strings, integers, true, false, null. */
  static final class Json {
    private final String text;
    private int at;

    private Json(String text) {
      this.text = text;
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> object(String text) {
      if (text == null) {
        throw new IllegalArgumentException("codec JSON is null");
      }
      Json reader = new Json(text);
      Object value = reader.value();
      reader.space();
      if (reader.at != text.length()) {
        throw reader.error("text after the document");
      }
      if (!(value instanceof Map)) {
        throw new IllegalArgumentException("codec JSON must be an object, got " + show(value));
      }
      return (Map<String, Object>) value;
    }

    static String show(Object value) {
      if (value == null) {
        return "nothing";
      }
      String shown = value instanceof String ? "'" + value + "'" : value.toString();
      return shown.length() > 40 ? shown.substring(0, 40) + "..." : shown;
    }

    private IllegalArgumentException error(String what) {
      return new IllegalArgumentException("codec JSON is not valid JSON: " + what + " at character " + at);
    }

    private void space() {
      while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
        at++;
      }
    }

    private Object value() {
      space();
      if (at >= text.length()) {
        throw error("unexpected end");
      }
      char c = text.charAt(at);
      if (c == '{') {
        Map<String, Object> map = new LinkedHashMap<>();
        at++;
        space();
        if (peek('}')) {
          return map;
        }
        do {
          space();
          if (!peek('"')) {
            throw error("expected a key");
          }
          String key = string();
          space();
          if (!peek(':')) {
            throw error("expected ':'");
          }
          map.put(key, value());
          space();
        } while (peek(','));
        if (!peek('}')) {
          throw error("expected ',' or '}'");
        }
        return map;
      }
      if (c == '[') {
        List<Object> list = new ArrayList<>();
        at++;
        space();
        if (peek(']')) {
          return list;
        }
        do {
          list.add(value());
          space();
        } while (peek(','));
        if (!peek(']')) {
          throw error("expected ',' or ']'");
        }
        return list;
      }
      if (c == '"') {
        at++;
        return string();
      }
      if (text.startsWith("null", at)) {
        at += 4;
        return null;
      }
      if (text.startsWith("true", at)) {
        at += 4;
        return Boolean.TRUE;
      }
      if (text.startsWith("false", at)) {
        at += 5;
        return Boolean.FALSE;
      }
      int start = at;
      if (c == '-') {
        at++;
      }
      while (at < text.length() && Character.isDigit(text.charAt(at))) {
        at++;
      }
      if (at == start || (at == start + 1 && c == '-')) {
        throw error("unexpected '" + c + "'");
      }
      if (at < text.length() && ".eE".indexOf(text.charAt(at)) >= 0) {
        throw error("a number that is not an integer");
      }
      return new BigInteger(text.substring(start, at));
    }

    private boolean peek(char c) {
      if (at < text.length() && text.charAt(at) == c) {
        at++;
        return true;
      }
      return false;
    }

    /** A string whose opening quote was read. */
    private String string() {
      StringBuilder out = new StringBuilder();
      while (at < text.length()) {
        char c = text.charAt(at++);
        if (c == '"') {
          return out.toString();
        }
        if (c == '\\') {
          if (at >= text.length()) {
            break;
          }
          char e = text.charAt(at++);
          switch (e) {
            case 'n': out.append('\n'); break;
            case 't': out.append('\t'); break;
            case 'r': out.append('\r'); break;
            case 'b': out.append('\b'); break;
            case 'f': out.append('\f'); break;
            case 'u':
              if (at + 4 > text.length()) {
                throw error("a short \\u escape");
              }
              out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
              at += 4;
              break;
            default: out.append(e);
          }
        } else {
          out.append(c);
        }
      }
      throw error("an unterminated string");
    }
  }
}
