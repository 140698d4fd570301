package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

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
}
