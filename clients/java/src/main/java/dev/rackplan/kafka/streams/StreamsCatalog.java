package dev.rackplan.kafka.streams;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The Streams groups the plugin knows (an immutable snapshot, swapped whole by the reader thread),
 * and how an assignment finds its group. The coordinator tells an assignor neither the group's id
 * nor its topics, only members and sub-topology ids with partition counts: the group is the one
 * whose described members or processes overlap the assignment's most, among those with the same
 * sub-topologies and partition counts. Member ids are random UUIDs per member and process ids per
 * KafkaStreams instance, so two groups never share one; a group that matches nothing yet (new, or
 * described before its members joined) is not guessed.
 */
public final class StreamsCatalog {
  /** The found group, or why none was found. */
  public record Match(GroupTopology topology, String reason) {}

  private volatile List<GroupTopology> groups = List.of();

  public void replace(Collection<GroupTopology> all) {
    groups = List.copyOf(all);
  }

  public List<GroupTopology> groups() {
    return groups;
  }

  /** The group of an assignment with these members, processes and sub-topology partition counts. */
  public Match match(Set<String> memberIds, Set<String> processIds, Map<String, Integer> partitions) {
    List<GroupTopology> all = groups;
    if (all.isEmpty()) return new Match(null, "no Streams group described yet");
    GroupTopology best = null;
    int bestScore = 0;
    List<String> tied = new ArrayList<>();
    List<String> shapeless = new ArrayList<>();
    for (GroupTopology g : all) {
      int score = 0;
      for (String m : memberIds) if (g.memberIds().contains(m)) score++;
      for (String p : processIds) if (g.processIds().contains(p)) score++;
      if (score == 0) continue;
      if (!sameShape(g, partitions)) {
        shapeless.add(g.groupId());
        continue;
      }
      if (score > bestScore) {
        best = g;
        bestScore = score;
        tied.clear();
        tied.add(g.groupId());
      } else if (score == bestScore) tied.add(g.groupId());
    }
    if (tied.size() > 1) return new Match(null, "members match several groups equally: " + new TreeSet<>(tied));
    if (best != null) return new Match(best, null);
    if (!shapeless.isEmpty())
      return new Match(null, "group " + shapeless + " has these members but other sub-topologies or partition counts (topology changed since described)");
    return new Match(null, "no described Streams group has these members (new group, or not described yet)");
  }

  private static boolean sameShape(GroupTopology g, Map<String, Integer> partitions) {
    if (!g.subtopologies().keySet().equals(partitions.keySet())) return false;
    for (Map.Entry<String, Integer> e : partitions.entrySet()) if (g.partitions(e.getKey()) != e.getValue()) return false;
    return true;
  }
}
