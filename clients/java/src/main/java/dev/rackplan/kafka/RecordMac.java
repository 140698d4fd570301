package dev.rackplan.kafka;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The agent's record MAC on the plan and lease topics (docs/security.md; the Python side is
 * rackplan.agent.protocol.mac): header {@value #HEADER} = "hmac-sha256:" and the lowercase hex
 * HMAC-SHA256, with the registrations secret, of "rackplan-mac-v1", the topic, the key and the value,
 * each as a 4-byte big-endian length and its bytes (a tombstone's value: the length 0xFFFFFFFF alone).
 * Headers that name the writer can be copied by anyone with Write on the topic; this cannot without the
 * secret, so a follower holding it refuses every record the agent did not write.
 */
public final class RecordMac {
  /** The Kafka header that carries a record's MAC. */
  public static final String HEADER = "rackplan-mac";

  private static final byte[] DOMAIN = "rackplan-mac-v1".getBytes(StandardCharsets.UTF_8);

  private RecordMac() {}

  static byte[] input(String topic, byte[] key, byte[] value) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    field(out, DOMAIN);
    field(out, topic.getBytes(StandardCharsets.UTF_8));
    field(out, key == null ? new byte[0] : key);
    if (value == null) out.writeBytes(ByteBuffer.allocate(4).putInt(0xFFFFFFFF).array());
    else field(out, value);
    return out.toByteArray();
  }

  private static void field(ByteArrayOutputStream out, byte[] data) {
    out.writeBytes(ByteBuffer.allocate(4).putInt(data.length).array());
    out.writeBytes(data);
  }

  /** The header value of a record, as the agent writes it. */
  public static byte[] of(byte[] secret, String topic, byte[] key, byte[] value) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(secret, "HmacSHA256"));
      byte[] d = mac.doFinal(input(topic, key, value));
      StringBuilder b = new StringBuilder("hmac-sha256:");
      for (byte x : d) b.append(String.format("%02x", x & 0xff));
      return b.toString().getBytes(StandardCharsets.US_ASCII);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Null when the record is the agent's (or {@code secret} is null: records are unauthenticated), else
   * why not: "unsigned" (no MAC header) or "bad_signature".
   */
  public static String refusal(byte[] secret, String topic, byte[] key, byte[] value, byte[] header) {
    if (secret == null) return null;
    if (header == null || header.length == 0) return "unsigned";
    return MessageDigest.isEqual(header, of(secret, topic, key, value)) ? null : "bad_signature";
  }
}
