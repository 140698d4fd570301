package dev.rackplan.kafka;

import static dev.rackplan.kafka.Fixtures.tp;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

class PlansTest {
  static Map<String, List<Plans.PartitionRacks>> sample() {
    Map<String, List<Plans.PartitionRacks>> m = new TreeMap<>();
    m.put("orders", List.of(
        new Plans.PartitionRacks(List.of("az-b", "az-a"), "az-a", true),
        new Plans.PartitionRacks(List.of("az-c", "az-b", "az-c"), null, true),
        new Plans.PartitionRacks(List.of(), null, false)));
    m.put("pay\u00e9\"x", List.of(new Plans.PartitionRacks(List.of("az-a"), "az-a", true)));
    return m;
  }

  @Test
  void fingerprintIsTheAgentsScopeFingerprint() {
    // Expected values: agent.plans.fingerprint of the same documents (python, see the commit message).
    assertEquals("166621576e51748b745b3937ef5f515c5826b75e9ba3a627460309a7afd38fd9",
        Plans.fingerprint(sample(), "nearest-replica"));
    assertEquals("a871022b01b7abf58f723e5c42f211858fcd62ed74da3f00654f1c77c66c8f29",
        Plans.fingerprint(sample(), "leader"));
  }

  static ConsumerPlan plan(Map<String, List<org.apache.kafka.common.TopicPartition>> a, String state) throws Exception {
    return ConsumerPlan.decode("consumer/g", Fixtures.plan("g", 3, Fixtures.FP, a, state));
  }

  @Test
  void mismatchNamesWhatDiffers() throws Exception {
    Map<String, Set<String>> members = Map.of("a", Set.of("t"), "b", Set.of("t"));
    Map<String, Integer> counts = Map.of("t", 3);
    ConsumerPlan ok = plan(Map.of("a", List.of(tp("t", 0), tp("t", 2)), "b", List.of(tp("t", 1))), "proposed");
    assertNull(Plans.mismatch(ok, members, counts, Fixtures.FP));
    assertNull(Plans.mismatch(ok, members, counts, null));
    assertTrue(Plans.mismatch(ok, members, counts, "1".repeat(64)).contains("cluster fingerprint differs"));
    assertTrue(Plans.mismatch(ok, members, Map.of("t", 4), null).contains("the live subscription has 4"));
    assertTrue(Plans.mismatch(ok, members, Map.of("t", 2), null).contains("does not have"));
    assertTrue(Plans.mismatch(ok, Map.of("a", Set.of("t"), "c", Set.of("t")), counts, null).contains("differ from the live members"));
    assertTrue(Plans.mismatch(ok, Map.of("a", Set.of("t"), "b", Set.of("u")), counts, null).contains("not subscribed"));
    // The decoder refuses a partition given twice; the fit check still names one, should a plan reach it.
    ConsumerPlan twice = new ConsumerPlan("consumer/g", "g", 3, "proposed", Fixtures.FP, "nearest-replica",
        Map.of("a", List.of(tp("t", 0), tp("t", 1)), "b", List.of(tp("t", 1))));
    assertTrue(Plans.mismatch(twice, members, counts, null).contains("twice"));
    assertTrue(Plans.mismatch(plan(Map.of("a", List.of(tp("t", 0)), "b", List.of(tp("t", 1))), "revoking"), members, counts, null).contains("revoking"));
    assertTrue(Plans.mismatch(null, members, counts, null).contains("no plan"));
  }

  @Test
  void cooperativeWithholdsWhatAnotherMemberOwns() {
    var target = Map.of("a", List.of(tp("t", 0), tp("t", 1)), "b", List.of(tp("t", 2), tp("t", 3)));
    var owned = Map.of("a", List.of(tp("t", 0), tp("t", 2)), "b", List.of(tp("t", 1), tp("t", 2)));
    var now = Plans.cooperative(target, owned);
    // t-1 owned by b moves to a: withheld; t-2 claimed by both: withheld; t-3 free; t-0 kept.
    assertEquals(List.of(tp("t", 0)), now.get("a"));
    assertEquals(List.of(tp("t", 3)), now.get("b"));
  }
}
