package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.junit.jupiter.api.Test;

/**
 * The hard shapes of {@link ServerAssignorShapes} (a hunt's: many subscriptions, many racks, a group
 * switching from {@code uniform}; and a scale-out from one member), at full size. Before the flow ran
 * on hubs with a work bound, three of them took 5 s to 277 s of the coordinator's thread, and the
 * scale-out 2.7 s in the count repair. Now each is solved inside the flow's work bound (no fallback:
 * the bound is counted in edge steps, so this holds on any machine), balanced by Kafka's rule, with no
 * cross-rack partition beyond those no subscriber can read in-rack (Kafka's {@code uniform} leaves
 * more; the two-topic scale-out: under a tenth of uniform's), 70 and 500 racks included (more than a
 * long's bits: the balancer declined such groups before {@link RackMasks}).
 */
class ServerAssignorShapesTest {
  @Test
  void everyHardShapeIsSolvedInsideTheWorkBoundAtTheCrossRackFloor() {
    for (ServerAssignorShapes.Shape s : ServerAssignorShapes.SHAPES) {
      ServerAssignorShapes.Group g = ServerAssignorShapes.group(s);
      GroupSpec spec = CoordinatorGroups.spec(g.members(), g.current());
      RackplanServerAssignor a = RackplanServerAssignor.forTest(new PlanStore(), g.topics().names());
      Map<String, Map<Uuid, Set<Integer>>> got = CoordinatorGroups.plain(a.assign(spec, g.topics()));
      assertEquals(null, CoordinatorGroups.violation(g.members(), g.topics(), got), s.name());
      assertEquals(0, a.safeFallbackCount.get(), s.name() + ": " + a.lastSafeReason);
      int floor = mustCross(g);
      int cross = CoordinatorGroups.crossRack(g.members(), g.topics(), got);
      int uniform = CoordinatorGroups.crossRack(g.members(), g.topics(), CoordinatorGroups.plain(new UniformAssignor().assign(spec, g.topics())));
      assertTrue(uniform > floor, s.name());
      if (s.topics() > 2) assertEquals(floor, cross, s.name());
      // Two topics, a scale-out from one member: the members' counts come first (rack-blind, the
      // heterogeneous path's documented near-exactness), 1,646 of 50,000 cross where the floor is 0
      else assertTrue(cross * 10 < uniform, s.name() + ": " + cross + " cross-rack, uniform " + uniform);
    }
  }

  /** Partitions no subscriber reads in-rack (none in a rack of its replicas): a floor no assignment beats. */
  static int mustCross(ServerAssignorShapes.Group g) {
    int n = 0;
    for (Uuid t : g.topics().ids()) {
      Set<String> racks = new java.util.HashSet<>();
      for (CoordinatorGroups.Member m : g.members().values()) if (m.topics().contains(t)) racks.add(m.rack());
      for (int p = 0; p < g.topics().numPartitions(t); p++)
        if (java.util.Collections.disjoint(racks, g.topics().racksForPartition(t, p))) n++;
    }
    return n;
  }
}
