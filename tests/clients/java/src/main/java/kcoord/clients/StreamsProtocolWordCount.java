package kcoord.clients;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count on the streams rebalance protocol (KIP-1071, group.protocol=streams),
 * exactly-once (exactly_once_v2): the group coordinator validates the topology, creates the
 * repartition and changelog topics and assigns the tasks. Two instances, then a third joining,
 * then one stopped and started again with an empty state directory; after every step each
 * word's output, read with read_committed, must be exactly 1, 2, ..., n.
 */
final class StreamsProtocolWordCount {
    static final String APP = "java-streams-protocol";
    static final String INPUT = "sp-input";
    static final String OUTPUT = "sp-output";
    static final int PARTITIONS = 4;
    static final String[] VOCABULARY = {"kafka", "group", "stream", "count", "word", "table", "store", "topic"};

    private final String bootstrap;
    private final Main.Result result;
    private final boolean cluster; // three brokers: the group's coordinator moves mid-run
    private final Map<String, Integer> expected = new TreeMap<>();
    private final Map<String, List<Long>> output = new TreeMap<>();
    private int lines;

    StreamsProtocolWordCount(String bootstrap, Main.Result result, boolean cluster) {
        this.bootstrap = bootstrap;
        this.result = result;
        this.cluster = cluster;
    }

    private KafkaStreams instance(String name, Path stateDir) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(INPUT, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("counts"))
                .toStream()
                .to(OUTPUT, Produced.with(Serdes.String(), Serdes.Long()));
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, APP);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, name);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0); // one output per input word
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println(name + " stream thread died: " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        return streams;
    }

    private static boolean running(KafkaStreams... all) {
        for (KafkaStreams s : all) if (s.state() != KafkaStreams.State.RUNNING) return false;
        return true;
    }

    void run() throws Exception {
        Path base = Files.createTempDirectory("kcoord-streams-protocol");
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap));
             KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap,
                     "enable.idempotence", "true", "acks", "all",
                     "key.serializer", "org.apache.kafka.common.serialization.StringSerializer",
                     "value.serializer", "org.apache.kafka.common.serialization.StringSerializer"));
             KafkaConsumer<String, Long> reader = new KafkaConsumer<>(Map.of("bootstrap.servers", bootstrap,
                     "isolation.level", "read_committed", "auto.offset.reset", "earliest",
                     "key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer",
                     "value.deserializer", "org.apache.kafka.common.serialization.LongDeserializer"))) {
            admin.createTopics(List.of(new NewTopic(INPUT, PARTITIONS, (short) 1),
                    new NewTopic(OUTPUT, PARTITIONS, (short) 1))).all().get();
            List<TopicPartition> outputs = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) outputs.add(new TopicPartition(OUTPUT, p));
            reader.assign(outputs);
            reader.seekToBeginning(outputs);

            KafkaStreams a = instance("sp-a", base.resolve("a"));
            KafkaStreams b = instance("sp-b", base.resolve("b"));
            KafkaStreams c = null;
            try {
                result.check("two instances running", Main.await(() -> running(a, b), 90_000),
                        a.state() + " " + b.state());
                batch(producer, reader, "two instances");
                members(admin, "two instances", 2);

                c = instance("sp-c", base.resolve("c"));
                KafkaStreams third = c;
                result.check("three instances running", Main.await(() -> running(a, b, third), 90_000),
                        a.state() + " " + b.state() + " " + third.state());
                batch(producer, reader, "a third instance joined");
                members(admin, "three instances", 3);
                if (cluster) {
                    // The group's __consumer_offsets partition moves to another broker: the new
                    // coordinator loads the group from its records and the members find it.
                    Main.event("move-coordinator", APP);
                    batch(producer, reader, "after a coordinator move");
                    members(admin, "after the coordinator move", 3);
                }

                // b stops and starts again from an empty state directory: its stores are
                // restored from the changelog topics the coordinator created.
                b.close(Duration.ofSeconds(30));
                batch(producer, reader, "one instance stopped");
                KafkaStreams b2 = instance("sp-b", base.resolve("b-empty"));
                try {
                    result.check("restarted instance running", Main.await(() -> running(a, b2, third), 90_000),
                            a.state() + " " + b2.state() + " " + third.state());
                    batch(producer, reader, "restarted with an empty state dir");
                    members(admin, "three again", 3);
                } finally {
                    b2.close(Duration.ofSeconds(30));
                }
            } finally {
                if (c != null) c.close(Duration.ofSeconds(30));
                a.close(Duration.ofSeconds(30));
            }

            Set<String> topics = admin.listTopics().names().get();
            String changelog = APP + "-counts-changelog";
            String repartition = APP + "-words-repartition";
            result.check("internal topics created by the coordinator",
                    topics.contains(changelog) && topics.contains(repartition), topics);
            ConfigResource cr = new ConfigResource(ConfigResource.Type.TOPIC, changelog);
            Config config = admin.describeConfigs(List.of(cr)).all().get().get(cr);
            result.check("the changelog is compacted", "compact".equals(config.get("cleanup.policy").value()),
                    config.get("cleanup.policy"));
        }
        result.put("lines", lines);
        result.put("expected", expected);
        Map<String, Object> last = new TreeMap<>();
        output.forEach((w, counts) -> last.put(w, counts.isEmpty() ? 0 : counts.get(counts.size() - 1)));
        result.put("final counts", last);
    }

    /** The group as Admin.describeStreamsGroups sees it: Stable with `n` members, each with tasks. */
    private void members(Admin admin, String name, int n) throws Exception {
        String[] seen = {""};
        boolean ok = Main.await(() -> {
            try {
                StreamsGroupDescription d = admin.describeStreamsGroups(List.of(APP)).all().get().get(APP);
                seen[0] = d.groupState() + " " + d.members().size() + " members";
                if (d.members().size() != n || d.groupState() != GroupState.STABLE) return false;
                int standbys = 0;
                for (var m : d.members()) {
                    Collection<?> active = m.assignment().activeTasks();
                    if (active.isEmpty()) return false;
                    standbys += m.assignment().standbyTasks().size();
                }
                seen[0] += ", " + standbys + " subtopologies with standby tasks";
                result.put(name + ": members with standby tasks", standbys);
                return true;
            } catch (Exception e) {
                seen[0] = e.toString();
                return false;
            }
        }, 60_000);
        result.check(name + ": group stable, every member with active tasks", ok, seen[0]);
    }

    /** Produces 60 lines and waits until the output is exact for everything produced so far. */
    private void batch(KafkaProducer<String, String> producer, KafkaConsumer<String, Long> reader, String name)
            throws Exception {
        for (int i = 0; i < 60; i++) {
            int n = lines++;
            List<String> words = new ArrayList<>();
            for (int j = 0; j <= n % 4; j++) {
                String w = VOCABULARY[(n * 7 + j * 3) % VOCABULARY.length];
                words.add(w);
                expected.merge(w, 1, Integer::sum);
            }
            producer.send(new ProducerRecord<>(INPUT, "line" + n, String.join(" ", words)));
        }
        producer.flush();
        String[] mismatch = {""};
        boolean exact = Main.await(() -> {
            for (ConsumerRecord<String, Long> r : reader.poll(Duration.ofMillis(100))) {
                output.computeIfAbsent(r.key(), k -> new ArrayList<>()).add(r.value());
            }
            mismatch[0] = mismatch();
            return mismatch[0].isEmpty();
        }, 120_000);
        result.check(name + ": output exact", exact, mismatch[0]);
    }

    /** Empty when each word's output is exactly 1..n, n its count in the input so far. */
    private String mismatch() {
        Map<String, Object> wrong = new TreeMap<>();
        for (Map.Entry<String, Integer> e : expected.entrySet()) {
            List<Long> want = new ArrayList<>();
            for (long c = 1; c <= e.getValue(); c++) want.add(c);
            List<Long> got = output.getOrDefault(e.getKey(), List.of());
            if (!got.equals(want)) wrong.put(e.getKey(), got.size() > 12 ? "..." + got.subList(got.size() - 12, got.size()) + " of " + got.size() + ", want " + e.getValue() : got);
        }
        for (String w : output.keySet()) if (!expected.containsKey(w)) wrong.put(w, "not in the input");
        return wrong.isEmpty() ? "" : wrong.toString();
    }
}
