package io.sparkmlt;

/**
 * Lookup tables that turn the codec's matrix products into a few table reads and additions,
 * for codecs whose p is small enough (p &lt;= 4096): the same idea as the native engine's
 * lane-packed tables (spark_mlt.codec.tables), compiled.
 *
 * <p>Encoding: the id's base-p digits, K at a time (a chunk value v &lt; p^K), index one table
 * per chunk; an entry holds what those digits add to every token, reduced mod p, in lanes of
 * a few bits side by side in longs. Summing one entry per chunk sums every lane at once; each
 * lane is then reduced mod p once. Decoding is the same map from tokens to digits (K tokens'
 * low bits form the index), followed by the digits' base-p value. For p = 2 lanes are single
 * bits and sums are XORs: the encoded lanes are the packed tokens, the decoded ones the id.
 */
final class MltTables {
  /** The interpreted path's tables: up to 4,096 entries each (12 index bits), 1 MiB per direction. */
  static final int MAX_ENTRIES = 4096;
  static final int MAX_INDEX_BITS = 12;
  static final long MAX_BYTES = 1L << 20;
  /** The generated kernels' tables: p up to 4,096, byte-sized chunks (256 entries and 8 index bits,
   * or one digit and one token of a larger p), 128 KiB per direction. */
  static final int KERNEL_P = 4096;
  static final int KERNEL_ENTRIES = 256;
  static final int KERNEL_INDEX_BITS = 8;
  static final long KERNEL_BYTES = 1L << 17;

  final boolean xor;
  // encoding: chunks of digits
  final int encChunks;
  final int digitsPerChunk;
  final long chunkBase;
  final int chunkShift; // p = 2: chunkBase = 2^chunkShift
  final double chunkInverse;
  final Lanes encLanes;
  final long[] encTable;
  // decoding: chunks of tokens
  final int decChunks;
  final int tokensPerChunk;
  final int indexBits;
  final Lanes decLanes;
  final long[] decTable;
  /** lane value (a sum of reduced values) to itself mod p */
  final int[] reduce;

  private MltTables(boolean xor, int encChunks, int digitsPerChunk, long chunkBase, int chunkShift, Lanes encLanes,
      long[] encTable, int decChunks, int tokensPerChunk, int indexBits, Lanes decLanes, long[] decTable, int[] reduce) {
    this.xor = xor;
    this.encChunks = encChunks;
    this.digitsPerChunk = digitsPerChunk;
    this.chunkBase = chunkBase;
    this.chunkShift = chunkShift;
    this.chunkInverse = 1.0 / chunkBase;
    this.encLanes = encLanes;
    this.encTable = encTable;
    this.decChunks = decChunks;
    this.tokensPerChunk = tokensPerChunk;
    this.indexBits = indexBits;
    this.decLanes = decLanes;
    this.decTable = decTable;
    this.reduce = reduce;
  }

  /** n lanes of {@code width} bits, as many per long as fit. */
  static final class Lanes {
    final int width;
    final int perLong;
    final int longs;
    final long mask;
    /** the long and the bit each lane starts at */
    final int[] words;
    final int[] shifts;

    Lanes(int count, int width) {
      this.width = width;
      this.perLong = 64 / width;
      this.longs = (count + perLong - 1) / perLong;
      this.mask = width == 64 ? -1L : (1L << width) - 1;
      this.words = new int[count];
      this.shifts = new int[count];
      for (int lane = 0; lane < count; lane++) {
        words[lane] = lane / perLong;
        shifts[lane] = (lane % perLong) * width;
      }
    }

    int word(int lane) {
      return words[lane];
    }

    int shift(int lane) {
      return shifts[lane];
    }
  }

  /** 2^52: below it a quotient through a double is off by one at most. */
  static final long EXACT = 1L << 52;

  /**
   * floor(x / base) for 0 &lt;= x, without a division instruction where x &lt; 2^52 or the
   * base is 2^12 or more (the double's error is then below one, corrected once).
   */
  static long quotient(long x, long base, double inverse) {
    long q = (long) (x * inverse);
    long r = x - q * base;
    if (r < 0) {
      q--;
    } else if (r >= base) {
      q++;
    }
    return q;
  }

  private static int bitLength(long value) {
    return 64 - Long.numberOfLeadingZeros(value);
  }

  /**
   * The tables of a codec, or null where they would not pay: p above {@code maxP}, or
   * tables beyond {@code maxBytes}. With {@code guard}, each lane has a spare top bit (see
   * {@link MltKernel}: the generated kernels reduce all lanes of a long at once). {@code digits}: how many base-p digits an id below 2^63 can
   * have (n at most); a table indexes chunks of digits below {@code maxEntries} (one digit where
   * p is larger) and {@code maxIndexBits} bits of tokens (one token where it has more).
   */
  static MltTables build(int p, int n, int[] m, int[] inverse, int digits, int tokenBits, int maxP, int maxEntries,
      int maxIndexBits, long maxBytes, boolean guard) {
    int spare = guard && p != 2 ? 1 : 0; // a guard bit atop each lane: lanes reduce mod p side by side
    if (p > maxP) {
      return null;
    }
    boolean xor = p == 2;
    // encoding: K digits per chunk, p^K <= MAX_ENTRIES
    int perChunk = 1;
    long base = p;
    while (base * p <= maxEntries) {
      base *= p;
      perChunk++;
    }
    int encChunks = (digits + perChunk - 1) / perChunk;
    Lanes encLanes = new Lanes(n, xor ? 1 : bitLength((long) encChunks * (p - 1)) + spare);
    // decoding: K tokens per chunk, indexed by their low bits
    int tokensPerChunk = Math.max(1, Math.min(n, maxIndexBits / tokenBits));
    int indexBits = tokensPerChunk * tokenBits;
    int decChunks = (n + tokensPerChunk - 1) / tokensPerChunk;
    Lanes decLanes = new Lanes(n, xor ? 1 : bitLength((long) decChunks * (p - 1)) + spare);
    long encBytes = (long) encChunks * base * encLanes.longs * 8;
    long decBytes = ((long) decChunks << indexBits) * decLanes.longs * 8;
    if (encBytes > maxBytes || decBytes > maxBytes || encLanes.width > 31 || decLanes.width > 31) {
      return null;
    }
    long[] encTable = new long[(int) (encChunks * base * encLanes.longs)];
    int[] digit = new int[perChunk];
    for (int k = 0; k < encChunks; k++) {
      for (int v = 0; v < base; v++) {
        int rest = v;
        for (int e = 0; e < perChunk; e++) {
          digit[e] = rest % p;
          rest /= p;
        }
        int at = (int) ((k * base + v) * encLanes.longs);
        for (int j = 0; j < n; j++) {
          long sum = 0;
          for (int e = 0; e < perChunk; e++) {
            int lsd = k * perChunk + e; // the digit's place, least significant first
            if (lsd < n && digit[e] != 0) {
              sum = (sum + (long) digit[e] * m[(n - 1 - lsd) * n + j]) % p;
            }
          }
          encTable[at + encLanes.word(j)] |= sum << encLanes.shift(j);
        }
      }
    }
    // decoding lanes: lane e holds the digit of place e (least significant first)
    long[] decTable = new long[(decChunks << indexBits) * decLanes.longs];
    int tokenMask = (1 << tokenBits) - 1;
    int[] token = new int[tokensPerChunk];
    for (int k = 0; k < decChunks; k++) {
      for (int index = 0; index < (1 << indexBits); index++) {
        boolean inRange = true;
        for (int t = 0; t < tokensPerChunk; t++) {
          token[t] = (index >>> (t * tokenBits)) & tokenMask;
          inRange &= token[t] < p;
        }
        if (!inRange) {
          continue; // never read for valid tokens: the caller checks them first
        }
        int at = ((k << indexBits) + index) * decLanes.longs;
        for (int e = 0; e < n; e++) {
          int i = n - 1 - e; // the digit's index, most significant first
          long sum = 0;
          for (int t = 0; t < tokensPerChunk; t++) {
            int j = k * tokensPerChunk + t;
            if (j < n && token[t] != 0) {
              sum = (sum + (long) token[t] * inverse[j * n + i]) % p;
            }
          }
          decTable[at + decLanes.word(e)] |= sum << decLanes.shift(e);
        }
      }
    }
    int largest = (int) Math.max(encLanes.mask, decLanes.mask);
    int[] reduce = new int[largest + 1];
    for (int v = 0; v <= largest; v++) {
      reduce[v] = v % p;
    }
    int shift = xor ? perChunk : 0;
    return new MltTables(xor, encChunks, perChunk, base, shift, encLanes, encTable, decChunks, tokensPerChunk,
        indexBits, decLanes, decTable, reduce);
  }

  /** The lanes of a valid id's tokens (each lane a sum of reduced values; for p = 2 the token). */
  void encodeLanes(long id, long[] lanes) {
    int words = encLanes.longs;
    long x = id;
    for (int k = 0; k < encChunks && x != 0; k++) {
      int v;
      if (xor) {
        v = (int) (x & (chunkBase - 1));
        x >>>= chunkShift;
      } else {
        long q = x < EXACT ? quotient(x, chunkBase, chunkInverse) : x / chunkBase;
        v = (int) (x - q * chunkBase);
        x = q;
      }
      int at = (k * (int) chunkBase + v) * words;
      if (xor) {
        for (int w = 0; w < words; w++) {
          lanes[w] ^= encTable[at + w];
        }
      } else {
        for (int w = 0; w < words; w++) {
          lanes[w] += encTable[at + w];
        }
      }
    }
  }

  /** Lanes of one long: the same, without an array. */
  long encodeLane(long id) {
    long lanes = 0;
    long x = id;
    for (int k = 0; k < encChunks && x != 0; k++) {
      int v;
      if (xor) {
        v = (int) (x & (chunkBase - 1));
        x >>>= chunkShift;
        lanes ^= encTable[k * (int) chunkBase + v];
      } else {
        long q = x < EXACT ? quotient(x, chunkBase, chunkInverse) : x / chunkBase;
        v = (int) (x - q * chunkBase);
        x = q;
        lanes += encTable[k * (int) chunkBase + v];
      }
    }
    return lanes;
  }

  int token(long[] lanes, int j) {
    long lane = (lanes[encLanes.words[j]] >>> encLanes.shifts[j]) & encLanes.mask;
    return reduce[(int) lane];
  }

  int token(long lanes, int j) {
    return reduce[(int) ((lanes >>> (j * encLanes.width)) & encLanes.mask)];
  }
}
