package kcoord.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * KafkaProducer on transactions v2 (KIP-890 part 2, chosen by the client when the broker
 * finalizes transaction.version 2; with 1 it stays on v1 and its epoch does not move): 20 transactions, every fourth aborted, each with
 * sendOffsetsToTransaction; after each, the producer epoch DescribeProducers reports for an
 * output partition (the epoch its markers carry: one more per transaction). A read_committed
 * reader sees exactly the committed records and the group's offset is the last committed
 * transaction's. A zombie instance is fenced by the epoch its successor bumped.
 */
final class TransactionsV2Scenario {
    static final int PARTITIONS = 3;
    static final int TRANSACTIONS = 20;
    static final int PER_TRANSACTION = 5;

    private final String bootstrap;
    private final Main.Result result;
    private final int transactionVersion; // the broker's finalized transaction.version

    TransactionsV2Scenario(String bootstrap, Main.Result result, int transactionVersion) {
        this.bootstrap = bootstrap;
        this.result = result;
        this.transactionVersion = transactionVersion;
    }

    private Map<String, Object> producerProps(String transactionalId) {
        Map<String, Object> p = new HashMap<>();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("transactional.id", transactionalId);
        p.put("linger.ms", "0");
        return p;
    }

    void run() throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic("v2-in", 1, (short) 1),
                    new NewTopic("v2-out", PARTITIONS, (short) 1),
                    new NewTopic("v2-zombie", 1, (short) 1))).all().get();
            transactions(admin);
            zombie();
        }
    }

    private void transactions(Admin admin) throws Exception {
        TopicPartition in = new TopicPartition("v2-in", 0);
        TopicPartition out0 = new TopicPartition("v2-out", 0);
        List<Integer> epochs = new ArrayList<>();
        Map<Integer, List<String>> expected = new TreeMap<>();
        long committedOffset = -1;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps("java-v2"))) {
            producer.initTransactions();
            long producerId = -1;
            for (int t = 0; t < TRANSACTIONS; t++) {
                boolean commit = t % 4 != 3;
                producer.beginTransaction();
                for (int j = 0; j < PER_TRANSACTION; j++) {
                    int p = j % PARTITIONS;
                    producer.send(new ProducerRecord<>("v2-out", p, "k", "t" + t + "-" + j)).get();
                    if (commit) expected.computeIfAbsent(p, k -> new ArrayList<>()).add("t" + t + "-" + j);
                }
                long offset = (t + 1L) * PER_TRANSACTION;
                producer.sendOffsetsToTransaction(Map.of(in, new OffsetAndMetadata(offset)),
                        new ConsumerGroupMetadata("v2-group"));
                if (commit) {
                    producer.commitTransaction();
                    committedOffset = offset;
                } else {
                    producer.abortTransaction();
                }
                if (producerId < 0) producerId = onlyProducer(admin, out0).producerId();
                // The markers follow the EndTxn answer: wait for this transaction's epoch to show
                // (under transactions v1 the epoch stays).
                int want = transactionVersion >= 2 ? t + 1 : 0;
                long pid = producerId;
                Main.await(() -> epochOf(admin, out0, pid) == want, 10_000);
                epochs.add(epochOf(admin, out0, pid));
            }
        }
        result.put("epochs", epochs);
        Map<Integer, List<String>> read = readCommitted("v2-out", PARTITIONS);
        result.check("read_committed sees exactly the committed records", read.equals(expected),
                "read " + read + " expected " + expected);
        result.put("committed records", read.values().stream().mapToInt(List::size).sum());
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets("v2-group").partitionsToOffsetAndMetadata().get();
        result.put("group offset", offsets.containsKey(in) ? offsets.get(in).offset() : -1);
        result.put("expected group offset", committedOffset);
    }

    private void zombie() throws Exception {
        try (KafkaProducer<String, String> first = new KafkaProducer<>(producerProps("java-v2-zombie"))) {
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>("v2-zombie", 0, "k", "first")).get();
            first.commitTransaction();
            try (KafkaProducer<String, String> second = new KafkaProducer<>(producerProps("java-v2-zombie"))) {
                second.initTransactions();
                String fenced = "not fenced";
                try {
                    first.beginTransaction();
                    first.send(new ProducerRecord<>("v2-zombie", 0, "k", "zombie")).get();
                    first.commitTransaction();
                } catch (Exception e) {
                    fenced = fencing(e);
                }
                result.put("zombie", fenced);
                second.beginTransaction();
                second.send(new ProducerRecord<>("v2-zombie", 0, "k", "second")).get();
                second.commitTransaction();
            }
        }
        result.put("zombie topic", readCommitted("v2-zombie", 1).getOrDefault(0, List.of()));
    }

    /** The fencing error's name if `e` is or wraps one, else what it was. */
    private static String fencing(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof ProducerFencedException || c instanceof InvalidProducerEpochException) {
                return c.getClass().getSimpleName();
            }
        }
        return e instanceof KafkaException ? "other: " + e : "unexpected: " + e;
    }

    private static ProducerState onlyProducer(Admin admin, TopicPartition tp) throws Exception {
        List<ProducerState> states = admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
        if (states.size() != 1) throw new IllegalStateException("producers of " + tp + ": " + states);
        return states.get(0);
    }

    private static int epochOf(Admin admin, TopicPartition tp, long producerId) {
        try {
            for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                if (s.producerId() == producerId) return s.producerEpoch();
            }
            return -1;
        } catch (Exception e) {
            return -2;
        }
    }

    private Map<Integer, List<String>> readCommitted(String topic, int partitions) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("isolation.level", "read_committed");
        Map<Integer, List<String>> out = new TreeMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    out.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
                }
                boolean done = true;
                for (TopicPartition tp : tps) done &= c.position(tp) >= ends.get(tp);
                if (done) break;
            }
        }
        return out;
    }
}
