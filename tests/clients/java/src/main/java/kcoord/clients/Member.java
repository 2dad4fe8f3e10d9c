package kcoord.clients;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * One KafkaConsumer group member on its own thread, as an application runs it: poll, process,
 * commit what was processed (commitSync and commitAsync in turn), and on revocation commit
 * synchronously before the partitions go (ConsumerRebalanceListener's contract).
 */
final class Member {
    final String name;
    private final KafkaConsumer<String, String> consumer;
    private final Ledger ledger;
    private final Main.Result result;
    private final Thread thread;
    private volatile boolean stop;
    /** Partitions owned after the latest poll. */
    volatile Set<Integer> owned = Set.of();
    /** Rebalance listener calls: a rebalance that reaches this member moves it. */
    final AtomicInteger callbacks = new AtomicInteger();
    /** The first offset delivered per partition (resume checks). */
    final Map<Integer, Long> firstOffsets = new TreeMap<>();
    /** The offset after the last record processed, per partition: what a commit may cover. */
    private final Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
    /** close() with a LeaveGroup even for a static member (KIP-1092's CloseOptions). */
    private volatile boolean leave;

    Member(String name, Properties props, String topic, Ledger ledger, Main.Result result) {
        this.name = name;
        this.ledger = ledger;
        this.result = result;
        Properties p = new Properties();
        p.putAll(props);
        p.put("client.id", name);
        this.consumer = new KafkaConsumer<>(p);
        this.thread = new Thread(() -> loop(topic), name);
        this.thread.setDaemon(true);
        this.thread.start();
    }

    private void loop(String topic) {
        try {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    callbacks.incrementAndGet();
                    commitProcessed(partitions);
                    forget(partitions);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    callbacks.incrementAndGet();
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> partitions) {
                    callbacks.incrementAndGet();
                    forget(partitions);
                }
            });
            long polls = 0;
            while (!stop) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    ledger.delivered(name, r.partition(), r.offset());
                    synchronized (firstOffsets) {
                        firstOffsets.putIfAbsent(r.partition(), r.offset());
                    }
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                processed.putAll(next);
                owned = consumer.assignment().stream().map(TopicPartition::partition)
                        .collect(Collectors.toCollection(TreeSet::new));
                if (next.isEmpty()) {
                    continue;
                }
                if (polls++ % 2 == 0) {
                    try {
                        consumer.commitSync(next);
                        ledger.acked(next);
                    } catch (RuntimeException e) {
                        // A rebalance or the coordinator going away: these records are not
                        // covered and may come again; the revocation commit covers them if
                        // this member still processes them.
                        System.err.println(name + " commitSync: " + e);
                    }
                } else {
                    consumer.commitAsync(next, (offsets, e) -> {
                        if (e == null) ledger.acked(offsets);
                        else System.err.println(name + " commitAsync: " + e);
                    });
                }
            }
            commitProcessed(consumer.assignment());
        } catch (RuntimeException e) {
            e.printStackTrace();
            result.fail(name + ": " + e);
        } finally {
            consumer.close(leave
                    ? CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    : CloseOptions.timeout(Duration.ofSeconds(30)));
        }
    }

    /**
     * Commits what was processed of these partitions. Not position(): the consumer protocol's
     * client cannot find the position of a partition it is revoking before it fetched from it.
     */
    private void commitProcessed(Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : partitions) {
            OffsetAndMetadata om = processed.get(tp);
            if (om != null) offsets.put(tp, om);
        }
        if (offsets.isEmpty()) {
            return;
        }
        try {
            consumer.commitSync(offsets);
            ledger.acked(offsets);
        } catch (RuntimeException e) {
            System.err.println(name + " commit of positions: " + e);
        }
    }

    /**
     * What was processed of partitions this member no longer owns is not its to commit: if they
     * come back, another member may have moved them on meanwhile, and committing the old
     * positions would take the group's offsets backwards.
     */
    private void forget(Collection<TopicPartition> partitions) {
        partitions.forEach(processed::remove);
    }

    /** close(): a dynamic member leaves the group; a static one stays for its session unless told. */
    void close(boolean leaveGroup) throws InterruptedException {
        leave = leaveGroup;
        stop = true;
        thread.join(60_000);
        if (thread.isAlive()) {
            result.fail(name + " did not close within 60 s");
        }
    }

    Map<Integer, Long> firstOffsets() {
        synchronized (firstOffsets) {
            return new TreeMap<>(firstOffsets);
        }
    }
}
