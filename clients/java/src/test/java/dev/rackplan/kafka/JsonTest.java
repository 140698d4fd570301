package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JsonTest {
  @Test
  void parsesAndWritesCanonically() throws Exception {
    Object v = Json.parse(" {\"b\": [1, -2.5e1, true, null, \"x\\u00e9\\n\"], \"a\": {\"z\": 0, \"y\": \"\\\"\"}} ");
    assertEquals("{\"a\":{\"y\":\"\\\"\",\"z\":0},\"b\":[1,-25.0,true,null,\"x\u00e9\\n\"]}", Json.canonical(v));
    assertEquals(1L, ((List<?>) ((Map<?, ?>) v).get("b")).get(0));
  }

  @Test
  void refusesWhatIsNotJson() {
    for (String bad : new String[] {"{", "{\"a\":}", "[1,]", "tru", "\"abc", "{} x", "{\"a\" 1}", "[01x]"})
      assertThrows(Json.ParseException.class, () -> Json.parse(bad), bad);
  }

  /** A plan record whose {@code stats} carry {@code number}. */
  static byte[] planWithStat(String number) {
    return new String(Fixtures.plan("g", 3, Fixtures.FP, Map.of()), StandardCharsets.UTF_8)
        .replace("\"stats\":{}", "\"stats\":{\"x\":" + number + "}").getBytes(StandardCharsets.UTF_8);
  }

  /** JSON numbers have no leading zeros (Python's parser refuses "07"): a record with one is not JSON. */
  @Test
  void numbersWithLeadingZerosOrNoDigitsAreNotJson() throws Exception {
    for (String bad : new String[] {"07", "-01", "00", "1.", ".5", "-", "1e", "1e+", "-.5", "01.5"})
      assertThrows(Json.ParseException.class, () -> Json.parse(bad), bad);
    assertEquals(0L, Json.parse("-0"));
    assertEquals(0.5, Json.parse("0.5"));
    assertEquals(1e5, Json.parse("1E+5"));
    assertEquals(PlanStore.Outcome.MALFORMED, new PlanStore().apply("consumer/g", planWithStat("07")));
  }

  /** No JSON reader after the agent has NaN or Infinity: 1e999 (Python's inf) is refused, not read as Infinity. */
  @Test
  void numbersBeyondADoubleAreRefused() throws Exception {
    for (String bad : new String[] {"1e999", "-1e999", "2.5E+400"})
      assertThrows(Json.ParseException.class, () -> Json.parse(bad), bad);
    assertEquals(0.0, Json.parse("1e-999"));
    assertEquals(PlanStore.Outcome.MALFORMED, new PlanStore().apply("consumer/g", planWithStat("1e999")));
    assertEquals(PlanStore.Outcome.APPLIED, new PlanStore().apply("consumer/g", planWithStat("1e300")));
  }

  /** Python's json.dumps(..., ensure_ascii=True) escapes DEL (0x7f) as well as non-ASCII; ensure_ascii=False keeps it. */
  @Test
  void canonicalAsciiEscapesDelAsPythonDoes() {
    assertEquals("\"a\\u007fb\"", Json.canonicalAscii("a\u007fb"));
    assertEquals("\"a\u007fb\"", Json.canonical("a\u007fb"));
  }
}
