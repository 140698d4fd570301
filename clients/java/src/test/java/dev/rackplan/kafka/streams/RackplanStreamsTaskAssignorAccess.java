package dev.rackplan.kafka.streams;

import java.util.Map;

/** Package-private parts of {@link RackplanStreamsTaskAssignor}, for tests in other packages. */
public final class RackplanStreamsTaskAssignorAccess {
  private RackplanStreamsTaskAssignorAccess() {}

  public static RackplanStreamsTaskAssignor configured(Map<String, ?> props) {
    RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor();
    a.configure(props);
    return a;
  }

  public static Object catalogOf(RackplanStreamsTaskAssignor a) {
    return a.catalog;
  }

  public static Object trafficOf(RackplanStreamsTaskAssignor a) {
    return a.traffic;
  }

  public static int sharedSize() {
    return RackplanStreamsTaskAssignor.SHARED.size();
  }
}
