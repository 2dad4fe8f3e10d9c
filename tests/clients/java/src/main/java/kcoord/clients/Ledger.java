package kcoord.clients;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * What was produced, delivered and committed, for the exact-delivery checks: every produced
 * record delivered, and none delivered again once a commit the broker acknowledged covered it
 * (a redelivery past the last acknowledged commit is at-least-once, allowed and counted).
 */
final class Ledger {
    private final Set<String> produced = new HashSet<>();
    private final Map<String, Integer> delivered = new HashMap<>();
    private final Map<Integer, Long> acked = new TreeMap<>();
    private int redelivered;
    private final Map<String, Object> violations = new TreeMap<>();

    private static String key(int partition, long offset) {
        return partition + ":" + offset;
    }

    synchronized void produced(int partition, long offset) {
        produced.add(key(partition, offset));
    }

    synchronized void delivered(String member, int partition, long offset) {
        String k = key(partition, offset);
        int times = delivered.merge(k, 1, Integer::sum);
        if (times > 1) {
            redelivered++;
            if (offset < acked.getOrDefault(partition, 0L)) {
                violations.put(k, member + " got it again after a commit at " + acked.get(partition));
            }
        }
    }

    /** Offsets the broker acknowledged (commitSync returned, or commitAsync's callback). */
    synchronized void acked(Map<TopicPartition, OffsetAndMetadata> offsets) {
        offsets.forEach((tp, om) -> acked.merge(tp.partition(), om.offset(), Math::max));
    }

    synchronized boolean allDelivered() {
        return delivered.keySet().containsAll(produced);
    }

    synchronized int producedCount() {
        return produced.size();
    }

    synchronized Set<String> missing() {
        Set<String> m = new HashSet<>(produced);
        m.removeAll(delivered.keySet());
        return m;
    }

    synchronized int redelivered() {
        return redelivered;
    }

    synchronized Map<String, Object> violations() {
        return new TreeMap<>(violations);
    }

    synchronized Set<String> deliveredKeys() {
        return new HashSet<>(delivered.keySet());
    }
}
