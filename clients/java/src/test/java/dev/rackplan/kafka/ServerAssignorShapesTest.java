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
 * switching from {@code uniform}), at full size. Before the flow ran on hubs with a work bound, three
 * of them took 5 s to 277 s of the coordinator's thread. Now each is solved inside the flow's work
 * bound (no fallback: the bound is counted in edge steps, so this holds on any machine), with no
 * cross-rack partition (every partition has a replica in a rack with subscribers), balanced by Kafka's
 * rule; past 63 racks Kafka's {@code uniform} assigns, balanced too.
 */
class ServerAssignorShapesTest {
  @Test
  void everyHardShapeIsSolvedInsideTheWorkBoundOrHandedToUniformBalanced() {
    for (ServerAssignorShapes.Shape s : ServerAssignorShapes.SHAPES) {
      ServerAssignorShapes.Group g = ServerAssignorShapes.group(s);
      GroupSpec spec = CoordinatorGroups.spec(g.members(), g.current());
      RackplanServerAssignor a = RackplanServerAssignor.forTest(new PlanStore(), g.topics().names());
      Map<String, Map<Uuid, Set<Integer>>> got = CoordinatorGroups.plain(a.assign(spec, g.topics()));
      assertEquals(null, CoordinatorGroups.violation(g.members(), g.topics(), got), s.name());
      if (s.racks() > RackStickyBalancer.MAX_RACKS) {
        assertEquals(1, a.safeFallbackCount.get(), s.name());
        assertEquals(CoordinatorGroups.plain(new UniformAssignor().assign(spec, g.topics())), got, s.name());
        continue;
      }
      assertEquals(0, a.safeFallbackCount.get(), s.name() + ": " + a.lastSafeReason);
      assertEquals(0, CoordinatorGroups.crossRack(g.members(), g.topics(), got), s.name());
    }
  }
}
