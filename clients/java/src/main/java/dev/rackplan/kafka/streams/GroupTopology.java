package dev.rackplan.kafka.streams;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * One Streams group as the cluster describes it (Admin {@code describeStreamsGroups} and {@code
 * describeTopics}): what the broker's {@code TopologyDescriber} leaves out. Its members and
 * processes (to recognise the group in an assignment, which names neither group nor topics), each
 * sub-topology's source and changelog topics, and every partition's replica racks.
 */
public record GroupTopology(
    String groupId,
    Set<String> memberIds,
    Set<String> processIds,
    Map<String, Subtopology> subtopologies,
    Map<String, List<Set<String>>> topicRacks)
    implements TaskRacks {

  /** A sub-topology's input topics (user and repartition sources) and state changelog topics. */
  public record Subtopology(List<String> sources, List<String> changelogs) {}

  /** The partition count of a sub-topology as the coordinator counts it (its largest source), or -1 unknown. */
  int partitions(String subtopology) {
    Subtopology s = subtopologies.get(subtopology);
    if (s == null) return -1;
    int max = -1;
    for (String t : s.sources()) {
      List<Set<String>> r = topicRacks.get(t);
      if (r == null) return -1;
      max = Math.max(max, r.size());
    }
    return max;
  }

  @Override
  public int activeCross(Task task, String rack) {
    Subtopology s = subtopologies.get(task.subtopology());
    return s == null ? 0 : cross(s.sources(), task.partition(), rack) + cross(s.changelogs(), task.partition(), rack);
  }

  @Override
  public int standbyCross(Task task, String rack) {
    Subtopology s = subtopologies.get(task.subtopology());
    return s == null ? 0 : cross(s.changelogs(), task.partition(), rack);
  }

  private int cross(List<String> topics, int partition, String rack) {
    if (rack == null) return 0;
    int n = 0;
    for (String t : topics) {
      List<Set<String>> parts = topicRacks.get(t);
      if (parts == null || partition >= parts.size()) continue;
      Set<String> racks = parts.get(partition);
      if (!racks.isEmpty() && !racks.contains(rack)) n++;
    }
    return n;
  }
}
