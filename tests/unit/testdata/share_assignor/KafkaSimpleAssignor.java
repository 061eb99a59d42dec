// Kafka 4.4's SimpleAssignor (share groups) as the oracle for tests/unit/test_share_assignor.py.
// Regenerate kafka_4_4.json from the repository root (needs a JDK and Kafka 4.4's libs):
//   CP=$(ls ~/.cache/raftka/kafka-4.4.0/libs/*.jar | tr '\n' ':')
//   javac -cp "$CP" -d /tmp/sa tests/unit/testdata/share_assignor/KafkaSimpleAssignor.java
//   java -cp "$CP:/tmp/sa" KafkaSimpleAssignor > tests/unit/testdata/share_assignor/kafka_4_4.json
// "fresh": for M members and P partitions of one topic (no current assignment), the sorted
// per-member partition counts and the sorted per-partition member counts. "steps": for P
// partitions, members m0..m6 join one by one, then leave from m0; each step gets the previous
// target as current assignment; per step the same two shapes and the (member, partition) pairs
// kept from the previous step.
import java.util.*;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.assignor.SimpleAssignor;
import org.apache.kafka.coordinator.group.api.assignor.*;
import org.apache.kafka.coordinator.group.modern.*;

public class KafkaSimpleAssignor { public static void main(String[] a) throws Exception {
  Uuid t = new Uuid(1L, 2L);
  StringBuilder out = new StringBuilder("{\"fresh\": {");
  for (int m = 1; m <= 7; m++) for (int p = 1; p <= 8; p++) {
    final int np = p;
    Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
    for (int i = 0; i < m; i++) members.put("m" + i, new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), Set.of(t), Assignment.EMPTY));
    GroupSpec spec = new GroupSpecImpl(members, SubscriptionType.HOMOGENEOUS, Map.of());
    SubscribedTopicDescriber d = new SubscribedTopicDescriber() {
      public int numPartitions(Uuid id) { return np; }
      public Set<String> racksForPartition(Uuid id, int part) { return Set.of(); } };
    GroupAssignment g = new SimpleAssignor().assign(spec, d);
    List<Integer> perMember = new ArrayList<>(); int[] holders = new int[p];
    for (MemberAssignment ma : g.members().values()) { Set<Integer> s = ma.partitions().getOrDefault(t, Set.of()); perMember.add(s.size()); for (int x : s) holders[x]++; }
    Collections.sort(perMember); List<Integer> h = new ArrayList<>(); for (int x : holders) h.add(x); Collections.sort(h);
    out.append(String.format("\"%d,%d\": [%s, %s],", m, p, perMember, h));
  }
  out.setLength(out.length() - 1); out.append("}, \"steps\": {");
  for (int p = 1; p <= 8; p++) {
    final int np = p;
    Map<String, Set<Integer>> prev = new HashMap<>();
    List<List<String>> steps = new ArrayList<>();
    for (int m = 1; m <= 7; m++) { List<String> s = new ArrayList<>(); for (int i = 0; i < m; i++) s.add("m" + i); steps.add(s); }
    for (int k = 1; k < 7; k++) { List<String> s = new ArrayList<>(); for (int i = k; i < 7; i++) s.add("m" + i); steps.add(s); }
    List<String> results = new ArrayList<>();
    for (List<String> ids : steps) {
      Map<String, MemberSubscriptionAndAssignmentImpl> members = new HashMap<>();
      for (String id : ids) members.put(id, new MemberSubscriptionAndAssignmentImpl(Optional.empty(), Optional.empty(), Set.of(t),
          new Assignment(prev.containsKey(id) ? Map.of(t, prev.get(id)) : Map.of())));
      GroupSpec spec = new GroupSpecImpl(members, SubscriptionType.HOMOGENEOUS, Map.of());
      SubscribedTopicDescriber d = new SubscribedTopicDescriber() {
        public int numPartitions(Uuid id) { return np; }
        public Set<String> racksForPartition(Uuid id, int part) { return Set.of(); } };
      GroupAssignment g = new SimpleAssignor().assign(spec, d);
      Map<String, Set<Integer>> next = new HashMap<>();
      List<Integer> perMember = new ArrayList<>(); int[] holders = new int[p]; int kept = 0;
      for (Map.Entry<String, MemberAssignment> e : g.members().entrySet()) {
        Set<Integer> s = new HashSet<>(e.getValue().partitions().getOrDefault(t, Set.of()));
        next.put(e.getKey(), s); perMember.add(s.size()); for (int x : s) { holders[x]++; if (prev.getOrDefault(e.getKey(), Set.of()).contains(x)) kept++; }
      }
      prev = next;
      Collections.sort(perMember); List<Integer> h = new ArrayList<>(); for (int x : holders) h.add(x); Collections.sort(h);
      results.add(String.format("[%s, %s, %d]", perMember, h, kept));
    }
    out.append(String.format("\"%d\": [%s],", p, String.join(", ", results)));
  }
  out.setLength(out.length() - 1); out.append("}}"); System.out.println(out);
}}
