package io.sparkmlt;

import java.io.Serializable;
import java.util.Objects;

/**
 * One function call's constants: the codec, whether an invalid row fails the query (else it
 * becomes null), and the input's name for messages. The expressions hand it to generated
 * code as a reference object, read once when the generated class is built.
 */
public final class MltCall implements Serializable {
  private static final long serialVersionUID = 1L;

  public final MltCodec codec;
  public final boolean errors;
  public final String name;

  public MltCall(MltCodec codec, boolean errors, String name) {
    this.codec = codec;
    this.errors = errors;
    this.name = name;
  }

  /** Null, or (errors) the query's failure: {@code spark-mlt: <name>: <subject><problem>; use handle_invalid='null' ...}. */
  <T> T invalid(String subject, String problem, String things) {
    if (!errors) {
      return null;
    }
    throw MltErrors.invalid("spark-mlt: " + name + ": " + subject + problem
        + "; use handle_invalid='null' to turn such " + things + " into nulls");
  }

  @Override
  public boolean equals(Object other) {
    if (!(other instanceof MltCall)) {
      return false;
    }
    MltCall that = (MltCall) other;
    return codec.json().equals(that.codec.json()) && errors == that.errors && name.equals(that.name);
  }

  @Override
  public int hashCode() {
    return Objects.hash(codec.fingerprint, errors, name);
  }

  @Override
  public String toString() {
    return codec + (errors ? "" : " or null");
  }
}
