package kcoord.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * How long a KafkaConsumer on the consumer protocol (KIP-848) takes from subscribe to its first
 * non-empty assignment, several times in one JVM, each in a new group: the first join also pays
 * the JVM's loading and interpreting of the join path (the consumer's own cost, the same against
 * any broker), the later ones only the wire exchange and the group protocol's waits. Result:
 * {"joins": [seconds, ...]}, the first one cold.
 */
final class JoinTiming {
    private final String bootstrap;
    private final String topic;
    private final int joins;
    private final Main.Result result;

    JoinTiming(String bootstrap, String topic, int joins, Main.Result result) {
        this.bootstrap = bootstrap;
        this.topic = topic;
        this.joins = joins;
        this.result = result;
    }

    void run() {
        List<Double> seconds = new ArrayList<>();
        for (int i = 0; i < joins; i++) {
            Double s = joinOnce("jt-" + UUID.randomUUID());
            if (s == null) {
                result.fail("join " + i + ": no assignment within 60 s");
                break;
            }
            seconds.add(s);
        }
        result.put("joins", seconds);
    }

    private Double joinOnce(String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            long[] assignedAt = {0};
            long started = System.nanoTime();
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty() && assignedAt[0] == 0) assignedAt[0] = System.nanoTime();
                }
            });
            long deadline = started + Duration.ofSeconds(60).toNanos();
            while (assignedAt[0] == 0 && System.nanoTime() < deadline) {
                consumer.poll(Duration.ofMillis(10));
            }
            return assignedAt[0] == 0 ? null : (assignedAt[0] - started) / 1e9;
        }
    }
}
