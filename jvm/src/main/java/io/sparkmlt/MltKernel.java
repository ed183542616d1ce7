package io.sparkmlt;

import java.math.BigInteger;

/**
 * The Java source of one codec's kernels, for Spark's code generator: the codec's p, n, chunk
 * bases, masks, shifts and matrix entries are literals, so HotSpot turns every division and
 * reduction by a constant into multiplications, and the kernel is straight-line code.
 *
 * <p>Each kernel is one private method of the generated class. It reads the fields
 * {@link #fields} names (the codec's lookup tables or matrices, shared arrays set once when the
 * class is built) and never allocates but for an array result. The caller checks what a
 * kernel assumes (an id within the codec's domain) and takes invalid rows through a cold call
 * of {@link MltCalls}, which gives the interpreted path's null or error.
 *
 * <p>How the arithmetic goes, per codec:
 * <ul>
 *   <li>p &lt;= 4096 with tables of at most 128 KiB: digits come out a byte-sized chunk (or
 *       one digit) at a time (a tree of divisions by literal powers of the chunk base), each
 *       chunk reads one table entry that holds what its
 *       digits add to every token, as lanes of a few bits side by side in longs; one sum
 *       adds all lanes, and a few shifts and subtractions reduce all lanes of a long mod p at
 *       once (each lane has a guard bit). p = 2: chunks are bits, sums are XORs, and the lanes
 *       are the packed tokens.
 *   <li>larger p: digits by division by the literal p, tokens as sums of products with the
 *       literal matrix entries, reduced mod p where a long could overflow; no tables. For
 *       p = 2^31 - 1 a reduction is a Mersenne fold (two shifts and adds), not a division.
 *   <li>more products than {@link #MAX_UNROLLED}: a loop over the tokens (or digits) whose
 *       body is written out, reading the matrix from a field.
 * </ul>
 * Decoding is the same map from tokens to digits, then the id from literal powers of p; a
 * codec with p^n above 2^63 checks the top digits against literal bounds, without a division.
 *
 * <pre>{@code
 * MltKernel kernel = MltKernel.of(MltCodec.of(json));   // null: n above 64, the call path runs
 * String method = kernel.encodePacked("enc0", "f0");    // private long enc0(long id) { ... }
 * }</pre>
 */
public final class MltKernel {
  /** Tokens a kernel takes at most: n above it runs the call path. */
  public static final int MAX_TOKENS = 64;
  /** Products written out one by one at most; beyond, a loop (HotSpot's 8,000-byte method limit). */
  static final int MAX_UNROLLED = 320;
  private static final long MAX = Long.MAX_VALUE;

  private final MltCodec c;
  private final MltTables t;
  private final int p;
  private final int n;
  private final String bigP;

  private MltKernel(MltCodec codec) {
    this.c = codec;
    this.t = codec.kernelTables;
    this.p = codec.p;
    this.n = codec.n;
    this.bigP = p + "L";
  }

  /** The kernels of a codec, or null when n is above {@link #MAX_TOKENS}. */
  public static MltKernel of(MltCodec codec) {
    return codec.n <= MAX_TOKENS ? new MltKernel(codec) : null;
  }

  /** How the kernels compute, for plans and benchmarks: "xor tables", "tables", "arithmetic" or "arithmetic loop". */
  public String strategy() {
    if (t != null) {
      return t.xor ? "xor tables" : "tables";
    }
    return unrolledEncode() && unrolledDecode() ? "arithmetic" : "arithmetic loop";
  }

  private boolean unrolledEncode() {
    return (long) c.places * n <= MAX_UNROLLED;
  }

  private boolean unrolledDecode() {
    return (long) n * n <= MAX_UNROLLED;
  }

  /**
   * The fields the kernels read, as {type, name, accessor}: the generated class declares
   * {@code type name = codec.accessor();} once. Names are {@code prefix} plus a suffix.
   */
  public String[][] fields(String prefix) {
    if (t != null) {
      return new String[][] {
        {"long[]", prefix + "Enc", "kernelEncodeTable"},
        {"long[]", prefix + "Dec", "kernelDecodeTable"},
      };
    }
    return new String[][] {
      {"long[]", prefix + "M", "kernelMatrix"},
      {"long[]", prefix + "Inv", "kernelInverse"},
    };
  }

  // --- encoding -----------------------------------------------------------------------------

  /** {@code private long name(long id)}: the packed tokens of an id in [0, maxId]. Needs packedBits &gt; 0. */
  public String encodePacked(String name, String prefix) {
    if (c.packedBits == 0) {
      throw new IllegalArgumentException(c + " has no packed layout");
    }
    StringBuilder out = new StringBuilder("private long ").append(name).append("(long id) {\n");
    if (t != null && t.xor && t.encLanes.longs == 1) {
      encodeLanes(out, prefix); // p = 2: lane j is token j's bit
      return out.append("  return l0;\n}\n").toString();
    }
    out.append("  long packed = 0L;\n");
    encodeTokens(out, prefix, (j, value) -> "packed |= ((long) (" + value + ")) << " + shift(j) + ";");
    return out.append("  return packed;\n}\n").toString();
  }

  /**
   * {@code private ArrayData name(long id)}: the tokens of an id in [0, maxId] as an
   * UnsafeArrayData of n ints (no nulls), written once into its own buffer.
   */
  public String encodeArray(String name, String prefix) {
    int header = 8 + ((n + 63) / 64) * 8; // UnsafeArrayData: the element count, then null bits
    int words = (header + 4 * n + 7) / 8;
    String platform = "org.apache.spark.unsafe.Platform";
    StringBuilder out = new StringBuilder("private org.apache.spark.sql.catalyst.util.ArrayData ").append(name)
        .append("(long id) {\n")
        .append("  long[] buffer = new long[").append(words).append("];\n")
        .append("  buffer[0] = ").append(n).append("L;\n")
        .append("  final long at = ").append(platform).append(".LONG_ARRAY_OFFSET + ").append(header).append(";\n");
    encodeTokens(out, prefix, (j, value) -> platform + ".putInt(buffer, at + 4L * (" + j + "), " + value + ");");
    return out.append("  org.apache.spark.sql.catalyst.expressions.UnsafeArrayData array = ")
        .append("new org.apache.spark.sql.catalyst.expressions.UnsafeArrayData();\n")
        .append("  array.pointTo(buffer, ").append(platform).append(".LONG_ARRAY_OFFSET, ").append(words * 8)
        .append(");\n  return array;\n}\n").toString();
  }

  /**
   * {@code private InternalRow name(long id)}: the tokens of an id in [0, maxId] as an
   * UnsafeRow of n int fields t0 .. (no nulls), written once into its own buffer.
   */
  public String encodeStruct(String name, String prefix) {
    int bitset = ((n + 63) / 64) * 8; // UnsafeRow: null bits, then one 8-byte slot per field
    int words = bitset / 8 + n;
    String platform = "org.apache.spark.unsafe.Platform";
    StringBuilder out = new StringBuilder("private org.apache.spark.sql.catalyst.InternalRow ").append(name)
        .append("(long id) {\n")
        .append("  long[] buffer = new long[").append(words).append("];\n")
        .append("  final long at = ").append(platform).append(".LONG_ARRAY_OFFSET + ").append(bitset).append(";\n");
    encodeTokens(out, prefix, (j, value) -> platform + ".putInt(buffer, at + 8L * (" + j + "), " + value + ");");
    return out.append("  org.apache.spark.sql.catalyst.expressions.UnsafeRow row = ")
        .append("new org.apache.spark.sql.catalyst.expressions.UnsafeRow(").append(n).append(");\n")
        .append("  row.pointTo(buffer, ").append(platform).append(".LONG_ARRAY_OFFSET, ").append(words * 8)
        .append(");\n  return row;\n}\n").toString();
  }

  /** How a kernel stores token j (a literal, or a loop's variable) of value (an int expression). */
  private interface Sink {
    String put(String j, String value);
  }

  private String shift(String j) {
    return "(" + c.packedBits + " * (" + j + "))";
  }

  private String shift(int j) {
    return Integer.toString(c.packedBits * j);
  }

  private void encodeTokens(StringBuilder out, String prefix, Sink sink) {
    if (t != null) {
      encodeLanes(out, prefix);
      MltTables.Lanes lanes = t.encLanes;
      if (!t.xor) {
        reduceLanes(out, lanes, n, (long) t.encChunks * (p - 1));
      }
      long mask = t.xor ? 1L : lanes.mask >>> 1; // reduced: the guard bit is clear
      for (int j = 0; j < n; j++) {
        String value = "(int) ((l" + lanes.words[j] + " >>> " + lanes.shifts[j] + ") & " + mask + "L)";
        out.append("  ").append(sink.put(Integer.toString(j), value)).append('\n');
      }
      return;
    }
    // digits, least significant first: d0 .. d{places-1}
    int places = c.places;
    split(out, "id", c.maxId, "d", 0, places, BigInteger.valueOf(p), true);
    int[] m = c.matrix();
    if (unrolledEncode()) {
      for (int j = 0; j < n; j++) {
        StringBuilder sum = new StringBuilder();
        int terms = 0;
        for (int e = 0; e < places; e++) {
          int entry = m[(n - 1 - e) * n + j];
          if (entry == 0) {
            continue;
          }
          terms = addTerm(sum, terms, "d" + e + " * " + entry + "L");
        }
        out.append("  long s").append(j).append(" = ").append(sum.length() == 0 ? "0L" : sum).append(";\n");
        out.append("  ").append(sink.put(Integer.toString(j), "(int) " + mod("s" + j))).append('\n');
      }
      return;
    }
    // a loop over the tokens: M row-major in a field, row i = n - 1 - e
    out.append("  final long[] mm = ").append(prefix).append("M;\n")
        .append("  for (int j = 0; j < ").append(n).append("; j++) {\n");
    StringBuilder sum = new StringBuilder();
    int terms = 0;
    for (int e = 0; e < places; e++) {
      terms = addTerm(sum, terms, "d" + e + " * mm[" + ((n - 1 - e) * n) + " + j]");
    }
    out.append("    long s = ").append(sum).append(";\n")
        .append("    ").append(sink.put("j", "(int) " + mod("s"))).append("\n  }\n");
  }

  /** Adds a product to a sum expression, reducing it mod p where one more term could overflow. */
  private int addTerm(StringBuilder sum, int terms, String term) {
    if (terms == c.termsPerReduction() && sum.length() > 0) {
      String reduced = mod(sum.toString());
      sum.setLength(0);
      sum.append(reduced);
      terms = 0;
    }
    sum.append(sum.length() == 0 ? "" : " + ").append(term);
    return terms + 1;
  }

  /** {@code final long[] table = field;} and lanes l0 .. l{words - 1}, zero. */
  private static void declareLanes(StringBuilder out, String table, String field, int words) {
    out.append("  final long[] ").append(table).append(" = ").append(field).append(";\n");
    for (int w = 0; w < words; w++) {
      out.append("  long l").append(w).append(" = 0L;\n");
    }
  }

  /** Adds (p = 2: XORs) the table's entry at {@code at} (its words side by side) to the lanes. */
  private void addEntry(StringBuilder out, String table, String at, int words) {
    for (int w = 0; w < words; w++) {
      out.append("  l").append(w).append(t.xor ? " ^= " : " += ").append(table).append('[').append(at)
          .append(w == 0 ? "" : " + " + w).append("];\n");
    }
  }

  /** Lanes l0 .. of the table sums of an id's digit chunks. */
  private void encodeLanes(StringBuilder out, String prefix) {
    MltTables.Lanes lanes = t.encLanes;
    int words = lanes.longs;
    long base = t.chunkBase;
    declareLanes(out, "enc", prefix + "Enc", words);
    if (t.xor) {
      for (int k = 0; k < t.encChunks; k++) {
        out.append("  int v").append(k).append(" = (int) ((id >>> ").append(k * t.chunkShift).append(") & ")
            .append(base - 1).append("L);\n");
      }
    } else {
      split(out, "id", c.maxId, "v", 0, t.encChunks, BigInteger.valueOf(base), false);
    }
    for (int k = 0; k < t.encChunks; k++) {
      String v = "v" + k;
      addEntry(out, "enc", (k * base * words) + " + " + v + (words == 1 ? "" : " * " + words), words);
    }
  }

  /**
   * Declares the base-{@code base} chunks {@code name}{first} .. of {@code value} (below
   * {@code bound} + 1), least significant first, as a tree of divisions by literal powers of
   * the base: the halves are independent, so the chain is log2(count) divisions long, and
   * int arithmetic where the value fits in an int. {@code longs}: declare the chunks as longs.
   */
  private void split(StringBuilder out, String value, long bound, String name, int first, int count, BigInteger base,
      boolean longs) {
    String type = longs ? "long" : "int";
    if (count == 1) {
      out.append("  ").append(type).append(' ').append(name).append(first).append(" = (").append(type).append(") ")
          .append(value).append(";\n");
      return;
    }
    int low = count / 2;
    BigInteger divisor = base.pow(low);
    String q = "q" + name + first + "_" + count;
    String r = "r" + name + first + "_" + count;
    if (bound <= Integer.MAX_VALUE) {
      out.append("  int ").append(q).append(" = ((int) ").append(value).append(") / ").append(divisor).append(";\n")
          .append("  int ").append(r).append(" = ((int) ").append(value).append(") - ").append(q).append(" * ")
          .append(divisor).append(";\n");
    } else {
      out.append("  long ").append(q).append(" = ").append(value).append(" / ").append(divisor).append("L;\n")
          .append("  long ").append(r).append(" = ").append(value).append(" - ").append(q).append(" * ")
          .append(divisor).append("L;\n");
    }
    long below = divisor.subtract(BigInteger.ONE).min(BigInteger.valueOf(bound)).longValueExact();
    split(out, r, below, name, first, low, base, longs);
    split(out, q, bound / divisor.longValueExact(), name, first + low, count - low, base, longs);
  }

  /**
   * Reduces every lane of l0 .. mod p at once, lanes of {@code count} values up to
   * {@code largest} each with a guard bit on top: for c = p * 2^k, k falling, subtract c from
   * the lanes that hold c or more (the guard bit of (l | guards) - c in each lane says which).
   */
  private void reduceLanes(StringBuilder out, MltTables.Lanes lanes, int count, long largest) {
    int width = lanes.width;
    int steps = 0;
    while (((long) p << steps) <= largest) {
      steps++;
    }
    for (int w = 0; w < lanes.longs; w++) {
      int inWord = Math.min(lanes.perLong, count - w * lanes.perLong);
      long ones = 0;
      for (int lane = 0; lane < inWord; lane++) {
        ones |= 1L << (lane * width);
      }
      long guards = ones << (width - 1);
      String l = "l" + w;
      for (int k = steps - 1; k >= 0; k--) {
        long c = (long) p << k;
        out.append("  ").append(l).append(" -= ((((").append(l).append(" | ").append(hex(guards)).append(") - ")
            .append(hex(ones * c)).append(") & ").append(hex(guards)).append(") >>> ").append(width - 1).append(") * ")
            .append(c).append("L;\n");
      }
    }
  }

  /** {@code (value) mod p} of a non-negative long expression: by the literal p, or by the Mersenne fold for 2^31 - 1. */
  private String mod(String value) {
    return p == Integer.MAX_VALUE ? "io.sparkmlt.MltKernel.mersenne(" + value + ")" : "((" + value + ") % " + bigP + ")";
  }

  /** x mod 2^31 - 1 for 0 &lt;= x &lt; 2^63, without a division: 2^31 is 1 mod p, so fold the high bits onto the low. */
  public static long mersenne(long x) {
    long r = (x & 0x7fffffffL) + (x >>> 31); // below 2^32 + 2^31
    r = (r & 0x7fffffffL) + (r >>> 31); // at most p + 2
    return r >= 0x7fffffffL ? r - 0x7fffffffL : r;
  }

  /** A long literal in hex: bit 63 set stays a plain literal. */
  private static String hex(long value) {
    return "0x" + Long.toHexString(value) + "L";
  }

  // --- decoding -----------------------------------------------------------------------------

  /** {@code private long name(long packed)}: the id of packed tokens, or -1 when they are no valid code. */
  public String decodePacked(String name, String prefix) {
    if (c.packedBits == 0) {
      throw new IllegalArgumentException(c + " has no packed layout");
    }
    int bits = c.packedBits;
    int top = bits * n;
    long mask = bits == 64 ? -1L : (1L << bits) - 1;
    StringBuilder out = new StringBuilder("private long ").append(name).append("(long v) {\n");
    if (top < 64) {
      out.append("  if ((v >>> ").append(top).append(") != 0L) {\n    return -1L;\n  }\n");
    }
    boolean check = p != (1L << bits); // p = 2^bits only for p = 2: every field is a token
    if (check) {
      out.append("  long bad = 0L;\n");
    }
    for (int j = 0; j < n; j++) {
      out.append("  long t").append(j).append(" = (v >>> ").append(bits * j).append(") & ").append(mask).append("L;\n");
      if (check) {
        out.append("  bad |= ").append(p - 1).append("L - t").append(j).append(";\n");
      }
    }
    if (check) {
      out.append("  if (bad < 0L) {\n    return -1L;\n  }\n");
    }
    decodeTokens(out, prefix, true);
    return out.append("}\n").toString();
  }

  /**
   * {@code private long name(ArrayData tokens)}: the id of an array of n tokens (ints, or longs
   * when {@code longs}), or -1 when its length, a null or a token makes it no valid code.
   */
  public String decodeArray(String name, String prefix, boolean longs) {
    StringBuilder out = new StringBuilder("private long ").append(name)
        .append("(org.apache.spark.sql.catalyst.util.ArrayData a) {\n")
        .append("  if (a.numElements() != ").append(n).append(") {\n    return -1L;\n  }\n")
        .append("  for (int j = 0; j < ").append(n).append("; j++) {\n")
        .append("    if (a.isNullAt(j)) {\n      return -1L;\n    }\n  }\n")
        .append("  long bad = 0L;\n");
    for (int j = 0; j < n; j++) {
      readToken(out, j, "a." + (longs ? "getLong(" : "getInt(") + j + ")");
    }
    out.append("  if (bad < 0L) {\n    return -1L;\n  }\n");
    decodeTokens(out, prefix, false);
    return out.append("}\n").toString();
  }

  /**
   * {@code private long name(InternalRow r)}: the id of a struct's n token fields, read in
   * place (field {@code ordinals[j]} is token j, of {@code widths[j]} bytes: 1, 2, 4 or 8), or -1
   * when a null or a token makes them no valid code.
   */
  public String decodeRow(String name, String prefix, int[] ordinals, int[] widths) {
    StringBuilder out = new StringBuilder("private long ").append(name)
        .append("(org.apache.spark.sql.catalyst.InternalRow r) {\n");
    StringBuilder nulls = new StringBuilder();
    for (int j = 0; j < n; j++) {
      nulls.append(j == 0 ? "" : " || ").append("r.isNullAt(").append(ordinals[j]).append(")");
    }
    out.append("  if (").append(nulls).append(") {\n    return -1L;\n  }\n  long bad = 0L;\n");
    for (int j = 0; j < n; j++) {
      String getter = widths[j] == 1 ? "getByte" : widths[j] == 2 ? "getShort" : widths[j] == 4 ? "getInt" : "getLong";
      readToken(out, j, "r." + getter + "(" + ordinals[j] + ")");
    }
    out.append("  if (bad < 0L) {\n    return -1L;\n  }\n");
    decodeTokens(out, prefix, false);
    return out.append("}\n").toString();
  }

  /** {@code long t<j> = value;} and its range check: {@code bad} turns negative for a token outside [0, p). */
  private void readToken(StringBuilder out, int j, String value) {
    out.append("  long t").append(j).append(" = ").append(value).append(";\n")
        .append("  bad |= t").append(j).append(" | (").append(p - 1).append("L - t").append(j).append(");\n");
  }

  /** From tokens t0 .. t{n-1} in [0, p) (and, packed, the value v) to {@code return id;} or -1. */
  private void decodeTokens(StringBuilder out, String prefix, boolean packed) {
    if (t != null) {
      decodeLanes(out, prefix, packed);
      return;
    }
    int[] inverse = c.inverseColumns(); // [i * n + j]: what token j gives digit i
    if (unrolledDecode()) {
      for (int e = 0; e < n; e++) {
        int i = n - 1 - e;
        StringBuilder sum = new StringBuilder();
        int terms = 0;
        for (int j = 0; j < n; j++) {
          int entry = inverse[i * n + j];
          if (entry != 0) {
            terms = addTerm(sum, terms, "t" + j + " * " + entry + "L");
          }
        }
        out.append("  long d").append(e).append(" = ").append(sum.length() == 0 ? "0L" : mod(sum.toString()))
            .append(";\n");
      }
      assemble(out);
      return;
    }
    // a loop over the digits: M^-1 in a field, entry [i * n + j]; digits by place e = n - 1 - i
    int places = c.places;
    out.append("  final long[] inv = ").append(prefix).append("Inv;\n")
        .append("  long lo = 0L;\n  long top = 0L;\n  long extra = 0L;\n  long power = 1L;\n")
        .append("  for (int e = 0; e < ").append(n).append("; e++) {\n")
        .append("    final int row = ").append(n * (n - 1)).append(" - ").append(n).append(" * e;\n");
    StringBuilder sum = new StringBuilder();
    int terms = 0;
    for (int j = 0; j < n; j++) {
      terms = addTerm(sum, terms, "t" + j + " * inv[row + " + j + "]");
    }
    out.append("    long d = ").append(mod(sum.toString())).append(";\n")
        .append("    if (e < ").append(places - 1).append(") {\n      lo += d * power;\n      power *= ").append(bigP)
        .append(";\n    } else if (e == ").append(places - 1).append(") {\n      top = d;\n")
        .append("    } else {\n      extra |= d;\n    }\n  }\n");
    finish(out, "lo", "top", "extra");
  }

  /** The digits' lanes from the decoding table, then the id. */
  private void decodeLanes(StringBuilder out, String prefix, boolean packed) {
    MltTables.Lanes lanes = t.decLanes;
    int words = lanes.longs;
    int indexBits = t.indexBits;
    declareLanes(out, "dec", prefix + "Dec", words);
    int bits = c.tokenBits;
    for (int k = 0; k < t.decChunks; k++) {
      String index;
      if (packed) {
        index = "(int) ((v >>> " + (k * indexBits) + ") & " + ((1L << indexBits) - 1) + "L)";
      } else {
        StringBuilder joined = new StringBuilder();
        for (int s = 0; s < t.tokensPerChunk && k * t.tokensPerChunk + s < n; s++) {
          joined.append(s == 0 ? "" : " | ").append("(t").append(k * t.tokensPerChunk + s).append(" << ")
              .append(s * bits).append(")");
        }
        index = "(int) (" + joined + ")";
      }
      out.append("  int i").append(k).append(" = ").append(index).append(";\n");
      addEntry(out, "dec", ((long) k << indexBits) * words + " + i" + k + (words == 1 ? "" : " * " + words), words);
    }
    if (t.xor && words == 1) {
      // lane e is the id's bit e; with n = 64 bit 63 set means 2^63 or more
      out.append(n == 64 ? "  return l0 < 0L ? -1L : l0;\n" : "  return l0;\n");
      return;
    }
    if (!t.xor) {
      reduceLanes(out, lanes, n, (long) t.decChunks * (p - 1));
    }
    long mask = t.xor ? 1L : lanes.mask >>> 1;
    for (int e = 0; e < n; e++) {
      out.append("  long d").append(e).append(" = (l").append(lanes.words[e]).append(" >>> ").append(lanes.shifts[e])
          .append(") & ").append(mask).append("L;\n");
    }
    assemble(out);
  }

  /** From digits d0 .. d{n-1} (place e = d{e}) to {@code return id;} or -1. */
  private void assemble(StringBuilder out) {
    int places = c.places;
    StringBuilder lo = new StringBuilder("0L");
    BigInteger power = BigInteger.ONE;
    for (int e = 0; e < places - 1; e++) {
      lo.append(" + d").append(e).append(e == 0 ? "" : " * " + power + "L");
      power = power.multiply(BigInteger.valueOf(p));
    }
    StringBuilder extra = new StringBuilder("0L");
    for (int e = places; e < n; e++) {
      extra.append(" | d").append(e);
    }
    out.append("  long lo = ").append(lo).append(";\n")
        .append("  long top = d").append(places - 1).append(";\n")
        .append("  long extra = ").append(extra).append(";\n");
    finish(out, "lo", "top", "extra");
  }

  /**
   * {@code return lo + top * p^(places-1)}, or -1 where that is 2^63 or more (only for codecs
   * with p^n above 2^63): a digit above the top place, or a top digit beyond the literal bound.
   */
  private void finish(StringBuilder out, String lo, String top, String extra) {
    BigInteger power = BigInteger.valueOf(p).pow(c.places - 1);
    if (c.wide()) {
      BigInteger max = BigInteger.valueOf(MAX);
      BigInteger[] qr = max.divideAndRemainder(power);
      long q = qr[0].longValueExact();
      long r = qr[1].longValueExact(); // MAX - q * power
      out.append("  if (").append(extra).append(" != 0L || ").append(top).append(" > ").append(q).append("L || (")
          .append(top).append(" == ").append(q).append("L && ").append(lo).append(" > ").append(r)
          .append("L)) {\n    return -1L;\n  }\n");
    }
    out.append("  return ").append(lo).append(" + ").append(top).append(" * ").append(power).append("L;\n");
  }
}
