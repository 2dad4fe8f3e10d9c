package kcoord.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * KafkaProducer, idempotent and transactional. The idempotent producer writes across a server
 * restart and every record is in the log once, in order. The transactional one runs
 * consume-transform-produce: it reads the input with a read_committed group consumer, writes
 * each record transformed in a transaction with sendOffsetsToTransaction, aborts one
 * transaction of its own, and is fenced by a second instance with its transactional.id; a
 * read_committed reader sees exactly the committed output, once.
 */
final class ProducerScenario {
    static final int PARTITIONS = 3;
    static final int RECORDS = 200;

    private final String bootstrap;
    private final Main.Result result;

    ProducerScenario(String bootstrap, Main.Result result) {
        this.bootstrap = bootstrap;
        this.result = result;
    }

    private Map<String, Object> producerProps(String transactionalId) {
        Map<String, Object> p = new HashMap<>();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        if (transactionalId != null) p.put("transactional.id", transactionalId);
        return p;
    }

    private Properties consumerProps(String group, String isolation) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("isolation.level", isolation);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        if (group != null) p.put("group.id", group);
        p.put("max.poll.records", "25"); // several transactions, not one
        return p;
    }

    void run() throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic("idem", PARTITIONS, (short) 1),
                    new NewTopic("txn-in", PARTITIONS, (short) 1),
                    new NewTopic("txn-out", PARTITIONS, (short) 1))).all().get();
            idempotent(admin);
            transactional(admin);
        }
    }

    /**
     * Against three brokers: an idempotent producer writes while the leader of partition 0
     * moves to another broker (NOT_LEADER_OR_FOLLOWER, new metadata, the same producer id and
     * sequences to the new leader); every record is in the log once, in order.
     */
    void runLeaderMove() throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic("moving", PARTITIONS, (short) 3))).all().get();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(null))) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < RECORDS; i++) {
                    if (i == RECORDS / 2) {
                        for (Future<RecordMetadata> f : sent) f.get();
                        Main.event("move-leader", "moving");
                    }
                    sent.add(producer.send(new ProducerRecord<>("moving", i % PARTITIONS, "k" + i, "v" + i)));
                }
                producer.flush();
                for (Future<RecordMetadata> f : sent) f.get();
            }
            checkInOrder("moving", "leader move");
        }
    }

    /** Half the records before a server restart, half after; each in the log once, in order. */
    private void idempotent(Admin admin) throws Exception {
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(null))) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                if (i == RECORDS / 2) {
                    for (Future<RecordMetadata> f : sent) f.get();
                    Main.event("restart-server");
                }
                sent.add(producer.send(new ProducerRecord<>("idem", i % PARTITIONS, "k" + i, "v" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) f.get();
        }
        checkInOrder("idem", "idempotent");
    }

    private void checkInOrder(String topic, String name) {
        Map<Integer, List<String>> read = readAll(topic, "read_uncommitted", RECORDS);
        boolean inOrder = true;
        int count = 0;
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = p; i < RECORDS; i += PARTITIONS) expected.add("v" + i);
            List<String> got = read.getOrDefault(p, List.of());
            count += got.size();
            inOrder &= got.equals(expected);
        }
        result.put(name + " records", count);
        result.check(name + ": every record once, in order", inOrder && count == RECORDS, read);
    }

    private void transactional(Admin admin) throws Exception {
        try (KafkaProducer<String, String> input = new KafkaProducer<>(producerProps(null))) {
            for (int i = 0; i < RECORDS; i++) {
                input.send(new ProducerRecord<>("txn-in", i % PARTITIONS, "k" + i, "in" + i));
            }
            input.flush();
        }
        int transactions = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps("java-txn"));
             KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps("java-txn-group", "read_committed"))) {
            producer.initTransactions();
            // One aborted transaction first: its records must never reach a read_committed reader.
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>("txn-out", i % PARTITIONS, "aborted", "aborted" + i));
            }
            producer.flush();
            producer.abortTransaction();

            consumer.subscribe(List.of("txn-in"));
            int processed = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (processed < RECORDS && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    producer.send(new ProducerRecord<>("txn-out", r.partition(), r.key(), r.value().replace("in", "out")));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    processed++;
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                transactions++;
            }
            result.put("transactions", transactions);

            // KIP-98 fencing: a new instance with the same transactional.id fences this one.
            try (KafkaProducer<String, String> second = new KafkaProducer<>(producerProps("java-txn"))) {
                second.initTransactions();
                boolean fenced = false;
                try {
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>("txn-out", 0, "fenced", "fenced")).get();
                    producer.commitTransaction();
                } catch (Exception e) {
                    // Under transactions v2 the old epoch's first write is refused by its leader
                    // with INVALID_PRODUCER_EPOCH (as Kafka's AddPartitionsToTxnManager maps the
                    // coordinator's PRODUCER_FENCED); under v1 the coordinator's PRODUCER_FENCED.
                    for (Throwable c = e; c != null && !fenced; c = c.getCause()) {
                        fenced = c instanceof ProducerFencedException
                                || c instanceof org.apache.kafka.common.errors.InvalidProducerEpochException;
                    }
                }
                result.check("fenced by a new instance", fenced, "the first producer committed after being fenced");
            }
        }
        Map<Integer, List<String>> committed = readAll("txn-out", "read_committed", RECORDS);
        boolean exact = true;
        int count = 0;
        for (int p = 0; p < PARTITIONS; p++) {
            List<String> expected = new ArrayList<>();
            for (int i = p; i < RECORDS; i += PARTITIONS) expected.add("out" + i);
            List<String> got = committed.getOrDefault(p, List.of());
            count += got.size();
            exact &= got.equals(expected);
        }
        result.put("read_committed records", count);
        result.check("read_committed sees the committed output exactly", exact && count == RECORDS, committed);
        Map<Integer, List<String>> all = readAll("txn-out", "read_uncommitted", RECORDS + 10);
        int uncommitted = all.values().stream().mapToInt(List::size).sum();
        result.check("read_uncommitted sees the aborted records too", uncommitted >= RECORDS + 10, uncommitted);

        Map<TopicPartition, OffsetAndMetadata> groupOffsets =
                admin.listConsumerGroupOffsets("java-txn-group").partitionsToOffsetAndMetadata().get();
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) specs.put(new TopicPartition("txn-in", p), OffsetSpec.latest());
        Map<Integer, Long> ends = new TreeMap<>();
        admin.listOffsets(specs).all().get().forEach((tp, info) -> ends.put(tp.partition(), info.offset()));
        Map<Integer, Long> got = new TreeMap<>();
        groupOffsets.forEach((tp, om) -> got.put(tp.partition(), om.offset()));
        result.check("offsets committed with the transactions", got.equals(ends), "committed " + got + " end " + ends);
    }

    /** Every value by partition, read from the start without a group until `expected` or idle. */
    private Map<Integer, List<String>> readAll(String topic, String isolation, int expected) {
        Map<Integer, List<String>> out = new TreeMap<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(null, isolation))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
            c.assign(tps);
            c.seekToBeginning(tps);
            int n = 0;
            long idleSince = System.currentTimeMillis();
            while (System.currentTimeMillis() - idleSince < 2_000 && n < expected + 100) {
                ConsumerRecords<String, String> records = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    out.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r.value());
                    n++;
                }
                if (!records.isEmpty()) idleSince = System.currentTimeMillis();
                if (n >= expected && positionsAtEnd(c, tps)) break;
            }
        }
        return out;
    }

    private static boolean positionsAtEnd(KafkaConsumer<String, String> c, List<TopicPartition> tps) {
        Map<TopicPartition, Long> ends = c.endOffsets(tps);
        for (TopicPartition tp : tps) {
            if (c.position(tp) < ends.get(tp)) return false;
        }
        return true;
    }
}
