package kcoord.oracle;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.AssignmentConfigsImpl;
import org.apache.kafka.coordinator.group.streams.assignor.GroupSpecImpl;
import org.apache.kafka.coordinator.group.streams.assignor.MemberMetadataAndStateImpl;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

/**
 * Kafka 4.4's own StickyTaskAssignor on groups described in a file, for the differential suite
 * to compare this server's assignor with (tests/test_kafka_oracle.py). Run through ToolRunner:
 * {@code StickyTaskAssignorCheck <cases file>}. Each case, one token per word:
 * <pre>
 * case NAME STANDBYS
 * sub ID TASKS STATEFUL(0|1)
 * member ID PROCESS A=s:p,... S=s:p,... O=s:p:offset,...   (in the group's order)
 * end
 * </pre>
 * The members go into a HashMap in the order given, as TargetAssignmentBuilder puts the group's
 * members in one. Answers, per case: {@code case NAME} then {@code member ID A=... S=...} with
 * each member's tasks sorted.
 */
public final class StickyTaskAssignorCheck {
    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8);
        StringBuilder out = new StringBuilder();
        String name = null;
        int standbys = 0;
        Map<String, int[]> subtopologies = new TreeMap<>();
        List<String> subtopologyOrder = new ArrayList<>();
        Map<String, MemberMetadataAndStateImpl> members = new HashMap<>();
        List<String> memberOrder = new ArrayList<>();
        for (String line : lines) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case":
                    name = f[1];
                    standbys = Integer.parseInt(f[2]);
                    subtopologies = new TreeMap<>();
                    subtopologyOrder = new ArrayList<>();
                    members = new HashMap<>();
                    memberOrder = new ArrayList<>();
                    break;
                case "sub":
                    subtopologies.put(f[1], new int[] {Integer.parseInt(f[2]), Integer.parseInt(f[3])});
                    subtopologyOrder.add(f[1]);
                    break;
                case "member":
                    Map<String, Set<Integer>> active = tasks(f, "A=");
                    Map<String, Set<Integer>> standby = tasks(f, "S=");
                    Map<String, Map<Integer, Long>> offsets = new HashMap<>();
                    for (String word : f) {
                        if (word.startsWith("O=") && word.length() > 2) {
                            for (String t : word.substring(2).split(",")) {
                                String[] x = t.split(":");
                                offsets.computeIfAbsent(x[0], k -> new HashMap<>())
                                        .put(Integer.parseInt(x[1]), Long.parseLong(x[2]));
                            }
                        }
                    }
                    members.put(f[1], new MemberMetadataAndStateImpl(Optional.empty(), Optional.empty(), f[2],
                            Map.of(), active, standby, Map.of(), offsets, Map.of()));
                    memberOrder.add(f[1]);
                    break;
                case "end":
                    Map<String, int[]> subs = subtopologies;
                    List<String> order = subtopologyOrder;
                    TopologyDescriber topology = new TopologyDescriber() {
                        @Override
                        public List<String> subtopologies() {
                            return order;
                        }

                        @Override
                        public int maxNumInputPartitions(String subtopologyId) {
                            return subs.get(subtopologyId)[0];
                        }

                        @Override
                        public boolean isStateful(String subtopologyId) {
                            return subs.get(subtopologyId)[1] == 1;
                        }
                    };
                    GroupAssignment assignment = new StickyTaskAssignor().assign(
                            new GroupSpecImpl(members, new AssignmentConfigsImpl(standbys, List.of())), topology);
                    out.append("case ").append(name).append('\n');
                    for (String member : memberOrder) {
                        MemberAssignment a = assignment.members().get(member);
                        out.append("member ").append(member)
                                .append(" A=").append(flat(a.activeTasks()))
                                .append(" S=").append(flat(a.standbyTasks())).append('\n');
                    }
                    break;
                default:
                    break;
            }
        }
        System.out.print(out);
    }

    private static Map<String, Set<Integer>> tasks(String[] f, String prefix) {
        Map<String, Set<Integer>> tasks = new HashMap<>();
        for (String word : f) {
            if (word.startsWith(prefix) && word.length() > prefix.length()) {
                for (String t : word.substring(prefix.length()).split(",")) {
                    String[] x = t.split(":");
                    tasks.computeIfAbsent(x[0], k -> new HashSet<>()).add(Integer.parseInt(x[1]));
                }
            }
        }
        return tasks;
    }

    private static String flat(Map<String, Set<Integer>> tasks) {
        List<String> words = new ArrayList<>();
        for (Map.Entry<String, Set<Integer>> e : new TreeMap<>(tasks).entrySet()) {
            for (int p : new TreeSet<>(e.getValue())) {
                words.add(e.getKey() + ":" + p);
            }
        }
        return String.join(",", words);
    }
}
