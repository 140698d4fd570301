package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.reflect.Constructor;
import java.lang.reflect.Proxy;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeStreamsGroupsResult;
import org.apache.kafka.clients.admin.DescribeTopicsResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsResult;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.internals.KafkaFutureImpl;
import org.junit.jupiter.api.Test;

/**
 * A catalog round on groups that do not all answer (found by a hunt): one group whose describe fails
 * (deleted between the listing and the describe, its coordinator moving or down during a broker restart)
 * failed {@code describeStreamsGroups(...).all()} and with it the whole round on every broker, so groups
 * that joined or changed members meanwhile were assigned by Kafka's sticky ({@code unknown-group}).
 */
class StreamsCatalogReaderRoundTest {

  static StreamsGroupDescription group(String id, String member, String process) {
    var sub = new StreamsGroupSubtopologyDescription("0", List.of(id + "-in"), List.of(), Map.of(), Map.of());
    var empty = new StreamsGroupMemberAssignment(List.of(), List.of(), List.of());
    var m = new StreamsGroupMemberDescription(member, 1, Optional.empty(), Optional.of("az-a"), "c", "h", 1, process,
        Optional.empty(), Map.of(), List.of(), List.of(), empty, empty, false);
    return new StreamsGroupDescription(id, 1, 1, 1, List.of(sub), List.of(m), GroupState.STABLE, new Node(1, "h", 9092), Set.of());
  }

  /** An Admin answering the three calls the reader makes; every other call fails. */
  static Admin admin(Map<String, KafkaFuture<StreamsGroupDescription>> groups) throws Exception {
    Constructor<ListGroupsResult> c = ListGroupsResult.class.getDeclaredConstructor(KafkaFuture.class);
    c.setAccessible(true);
    KafkaFutureImpl<Collection<Object>> listed = new KafkaFutureImpl<>();
    listed.complete(groups.keySet().stream().map(g -> (Object) new GroupListing(g, Optional.of(GroupType.STREAMS), "streams",
        Optional.of(GroupState.STABLE))).toList());
    ListGroupsResult list = c.newInstance(listed);
    java.lang.reflect.Method noTopics = DescribeTopicsResult.class.getDeclaredMethod("ofTopicNames", Map.class);
    noTopics.setAccessible(true);
    return (Admin) Proxy.newProxyInstance(Admin.class.getClassLoader(), new Class<?>[] {Admin.class}, (proxy, method, args) -> {
      switch (method.getName()) {
        case "listGroups": return list;
        case "describeStreamsGroups": return new DescribeStreamsGroupsResult(groups);
        case "describeTopics": return noTopics.invoke(null, Map.of());
        default: throw new UnsupportedOperationException(method.getName());
      }
    });
  }

  /** The fake Admin itself: with every group answering, the round describes them (passes today). */
  @Test
  void everyGroupAnsweringIsDescribed() throws Exception {
    KafkaFutureImpl<StreamsGroupDescription> ok = new KafkaFutureImpl<>();
    ok.complete(group("app", "m1", "p1"));
    assertEquals(List.of("app"), StreamsCatalogReader.describe(admin(Map.of("app", ok)), null).stream().map(GroupTopology::groupId).toList());
  }

  @Test
  void oneGroupThatCannotBeDescribedLeavesTheOthersDescribed() throws Exception {
    KafkaFutureImpl<StreamsGroupDescription> ok = new KafkaFutureImpl<>();
    ok.complete(group("app", "m1", "p1"));
    KafkaFutureImpl<StreamsGroupDescription> gone = new KafkaFutureImpl<>();
    gone.completeExceptionally(new GroupIdNotFoundException("Group other not found."));
    Admin admin = admin(Map.of("app", ok, "other", gone));
    List<GroupTopology> got = StreamsCatalogReader.describe(admin, null);
    assertEquals(List.of("app"), got.stream().map(GroupTopology::groupId).toList());
  }

  /** A group that cannot be described this round keeps the description of the last one; a group no longer listed goes. */
  @Test
  void aGroupThatCannotBeDescribedKeepsItsLastDescription() throws Exception {
    KafkaFutureImpl<StreamsGroupDescription> ok = new KafkaFutureImpl<>();
    ok.complete(group("app", "m1", "p1"));
    KafkaFutureImpl<StreamsGroupDescription> moving = new KafkaFutureImpl<>();
    moving.completeExceptionally(new GroupIdNotFoundException("Group other not found."));
    KafkaFutureImpl<StreamsGroupDescription> before = new KafkaFutureImpl<>();
    before.complete(group("other", "m2", "p2"));
    KafkaFutureImpl<StreamsGroupDescription> gone = new KafkaFutureImpl<>();
    gone.complete(group("gone", "m3", "p3"));
    List<GroupTopology> last = StreamsCatalogReader.describe(admin(Map.of("other", before, "gone", gone)), null);
    List<GroupTopology> got = StreamsCatalogReader.describe(admin(Map.of("app", ok, "other", moving)), null, last);
    assertEquals(List.of("app", "other"), got.stream().map(GroupTopology::groupId).sorted().toList());
    GroupTopology other = got.stream().filter(g -> g.groupId().equals("other")).findFirst().orElseThrow();
    assertEquals(last.stream().filter(g -> g.groupId().equals("other")).findFirst().orElseThrow(), other);
  }
}
