package dev.rackplan.kafka;

import java.util.Collection;
import java.util.Optional;
import java.util.Set;
import java.util.function.Predicate;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.PartitionAssignorException;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;

/**
 * The KIP-848 plugin's last resort: Kafka's own {@code uniform} assignor, from the broker's classpath
 * (loaded by name: it is the coordinator's class, not an API), on the group with its plan topics and
 * unnamed topics taken out of every subscription. Used when {@link RackStickyBalancer} declines a group
 * (a flow network past its size or work bound) or fails a postcondition: balanced by Kafka's own
 * rule and as fast as the default, rack-blind.
 */
final class KafkaUniformFallback {
  private KafkaUniformFallback() {}

  static final String KAFKA_UNIFORM = "org.apache.kafka.coordinator.group.assignor.UniformAssignor";

  private static final ConsumerGroupPartitionAssignor UNIFORM = load();

  private static ConsumerGroupPartitionAssignor load() {
    try {
      return (ConsumerGroupPartitionAssignor) Class.forName(KAFKA_UNIFORM).getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException | LinkageError | ClassCastException e) {
      return null;
    }
  }

  /**
   * Kafka's {@code uniform} on {@code spec} restricted to the topics {@code allowed} accepts.
   *
   * @throws PartitionAssignorException when the broker has no {@code uniform} (never on a broker)
   */
  static GroupAssignment assign(GroupSpec spec, SubscribedTopicDescriber describer, Predicate<Uuid> allowed) {
    if (UNIFORM == null) throw new PartitionAssignorException("rackplan: Kafka's " + KAFKA_UNIFORM + " is not on the classpath");
    return UNIFORM.assign(new AllowedTopics(spec, describer, allowed), describer);
  }

  /**
   * The group with every subscription cut to the allowed topics that exist (Kafka's uniform refuses
   * unknown ones); each distinct subscription is cut once.
   */
  private static final class AllowedTopics implements GroupSpec {
    private final GroupSpec spec;
    private final SubscribedTopicDescriber describer;
    private final Predicate<Uuid> allowed;
    private final java.util.Map<Set<Uuid>, Set<Uuid>> cut = new java.util.HashMap<>();

    AllowedTopics(GroupSpec spec, SubscribedTopicDescriber describer, Predicate<Uuid> allowed) {
      this.spec = spec;
      this.describer = describer;
      this.allowed = allowed;
    }

    @Override public Collection<String> memberIds() {
      return spec.memberIds();
    }

    @Override public SubscriptionType subscriptionType() {
      return spec.subscriptionType();
    }

    @Override public boolean isPartitionAssigned(Uuid topic, int partition) {
      return spec.isPartitionAssigned(topic, partition);
    }

    @Override public boolean isPartitionAssignable(Uuid topic, int partition) {
      return spec.isPartitionAssignable(topic, partition);
    }

    @Override public MemberSubscription memberSubscription(String member) {
      MemberSubscription s = spec.memberSubscription(member);
      Set<Uuid> kept = cut.computeIfAbsent(s.subscribedTopicIds(), ids -> {
        Set<Uuid> out = new java.util.HashSet<>();
        for (Uuid id : ids) if (describer.numPartitions(id) >= 0 && allowed.test(id)) out.add(id);
        return out;
      });
      return new MemberSubscription() {
        @Override public Optional<String> rackId() {
          return s.rackId();
        }

        @Override public Optional<String> instanceId() {
          return s.instanceId();
        }

        @Override public Set<Uuid> subscribedTopicIds() {
          return kept;
        }
      };
    }

    @Override public MemberAssignment memberAssignment(String member) {
      return spec.memberAssignment(member);
    }
  }
}
