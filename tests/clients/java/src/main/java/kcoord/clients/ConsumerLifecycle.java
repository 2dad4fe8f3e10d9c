package kcoord.clients;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;

/**
 * A consumer group's whole life cycle with KafkaConsumer, in one of three modes: the classic
 * protocol with the eager RangeAssignor ("eager-range") or the CooperativeStickyAssignor
 * ("cooperative-sticky"), or the KIP-848 consumer protocol ("consumer"). Members join, one
 * leaves, one joins, a static member restarts within its session, the server restarts, and
 * a new member resumes from the committed offsets; after each step the group's describe must
 * match what the members own, and every record must have been delivered.
 */
final class ConsumerLifecycle {
    static final int PARTITIONS = 6;
    static final int BATCH = 60;
    static final long WAIT_MS = 60_000;

    private final String bootstrap;
    private final String mode;
    private final Main.Result result;
    private final String topic;
    private final String group;
    private final Ledger ledger = new Ledger();
    private final Map<String, Member> members = new LinkedHashMap<>();
    private int produced;

    private final boolean cluster;

    ConsumerLifecycle(String bootstrap, String mode, Main.Result result, boolean cluster) {
        this.bootstrap = bootstrap;
        this.mode = mode;
        this.result = result;
        this.cluster = cluster;
        this.topic = (cluster ? "java-cluster-" : "java-") + mode;
        this.group = this.topic;
        result.put("mode", mode);
        result.put("group", group);
        result.put("topic", topic);
    }

    private Properties consumerProps(String instanceId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        if (instanceId != null) {
            p.put("group.instance.id", instanceId);
        }
        switch (mode) {
            case "eager-range" -> p.put("partition.assignment.strategy",
                    "org.apache.kafka.clients.consumer.RangeAssignor");
            case "cooperative-sticky" -> p.put("partition.assignment.strategy",
                    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
            case "consumer" -> p.put("group.protocol", "consumer");
            default -> throw new IllegalArgumentException("mode " + mode);
        }
        if (!mode.equals("consumer")) {
            // The consumer protocol takes these from the broker; the classic one from the client.
            p.put("heartbeat.interval.ms", "500");
            p.put("session.timeout.ms", "10000");
        }
        return p;
    }

    void run() throws Exception {
        if (cluster) {
            withClients((short) 3, this::clusterSteps);
        } else {
            withClients((short) 1, this::lifeCycleSteps);
        }
    }

    /** What a scenario's steps use: an admin client and an idempotent producer. */
    private interface Steps {
        void run(Admin admin, KafkaProducer<String, String> producer) throws Exception;
    }

    /**
     * Creates the topic and runs the steps; whatever happens, closes the members that are left
     * and reports the ledger.
     */
    private void withClients(short replicationFactor, Steps steps) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap));
             KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of(
                     "bootstrap.servers", bootstrap, "enable.idempotence", "true", "acks", "all",
                     "key.serializer", "org.apache.kafka.common.serialization.StringSerializer",
                     "value.serializer", "org.apache.kafka.common.serialization.StringSerializer"))) {
            admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, replicationFactor))).all().get();
            steps.run(admin, producer);
        } finally {
            for (Member m : members.values()) {
                m.close(true);
            }
            result.put("produced", ledger.producedCount());
            result.put("missing", new TreeSet<>(ledger.missing()));
            result.put("redelivered", ledger.redelivered());
            result.put("violations", ledger.violations());
        }
    }

    private void lifeCycleSteps(Admin admin, KafkaProducer<String, String> producer) throws Exception {
        produce(producer);
        start("c1", null);
        start("c2", null);
        step(admin, "join", 2);

        start("c3", "static-3");
        produce(producer);
        step(admin, "member-joins", 3);

        stop("c1");
        produce(producer);
        step(admin, "member-leaves", 2);

        // KIP-345: the static member's next incarnation takes its place and its partitions
        // without a rebalance, so the other member is not called back.
        Set<Integer> before = members.get("c3").owned;
        int otherCallbacks = members.get("c2").callbacks.get();
        stop("c3");
        start("c3", "static-3");
        produce(producer);
        step(admin, "static-restart", 2);
        result.check("static-restart keeps partitions", members.get("c3").owned.equals(before),
                before + " then " + members.get("c3").owned);
        result.check("static-restart without rebalance",
                members.get("c2").callbacks.get() == otherCallbacks,
                "c2 called back " + (members.get("c2").callbacks.get() - otherCallbacks) + " times");

        Main.event("restart-server");
        produce(producer);
        step(admin, "server-restart", 2);

        leaveAll(); // the group is Empty
        Map<Integer, Long> committed = committedAtLogEnd(admin, "after close");

        // A new member resumes where the group committed: it sees only the new batch.
        produce(producer);
        Member resumed = start("c4", null);
        step(admin, "resume", 1);
        Map<Integer, Long> first = resumed.firstOffsets();
        for (Map.Entry<Integer, Long> e : first.entrySet()) {
            result.check("resume p" + e.getKey(), e.getValue().equals(committed.get(e.getKey())),
                    "first offset " + e.getValue() + ", committed " + committed.get(e.getKey()));
        }
        stop("c4");
        result.put("committed", committedAtLogEnd(admin, "at the end"));
    }

    /**
     * Against three brokers: the group's coordinator moves (NOT_COORDINATOR, then the new one
     * loads the group from its __consumer_offsets partition), then the broker now coordinating
     * it stops (its partitions' leadership moves too); the members carry on through both.
     */
    private void clusterSteps(Admin admin, KafkaProducer<String, String> producer) throws Exception {
        produce(producer);
        start("c1", null);
        start("c2", null);
        step(admin, "join", 2);
        Main.event("move-coordinator", group);
        produce(producer);
        step(admin, "coordinator-move", 2);
        Main.event("stop-coordinator", group);
        produce(producer);
        step(admin, "broker-stop", 2);
        leaveAll();
        Map<Integer, Long> committed = committedAtLogEnd(admin, "after close");
        result.put("committed", committed);
    }

    /** Every member left leaves the group, a static one too (KIP-1092's LEAVE_GROUP). */
    private void leaveAll() throws InterruptedException {
        for (String name : List.copyOf(members.keySet())) {
            stop(name, true);
        }
    }

    /** The group's committed offsets, checked to be the log end (`when` names the check). */
    private Map<Integer, Long> committedAtLogEnd(Admin admin, String when)
            throws ExecutionException, InterruptedException {
        Map<Integer, Long> committed = committed(admin);
        Map<Integer, Long> ends = endOffsets(admin);
        result.check("committed = log end " + when, committed.equals(ends),
                "committed " + committed + " end " + ends);
        return committed;
    }

    private Member start(String name, String instanceId) {
        Member m = new Member(name, consumerProps(instanceId), topic, ledger, result);
        members.put(name, m);
        return m;
    }

    private void stop(String name) throws InterruptedException {
        stop(name, false);
    }

    private void stop(String name, boolean leave) throws InterruptedException {
        members.remove(name).close(leave);
    }

    private void produce(KafkaProducer<String, String> producer) throws Exception {
        List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < BATCH; i++) {
            int n = produced++;
            sent.add(producer.send(new ProducerRecord<>(topic, "k" + n, "v" + n)));
        }
        producer.flush();
        for (var f : sent) {
            RecordMetadata md = f.get();
            ledger.produced(md.partition(), md.offset());
        }
    }

    /** Everything produced so far delivered, and the group's describe matching its members. */
    private void step(Admin admin, String name, int expectedMembers) throws Exception {
        boolean delivered = Main.await(ledger::allDelivered, WAIT_MS);
        result.check(name + " delivered", delivered, "missing " + ledger.missing());
        String[] last = {""};
        boolean stable = Main.await(() -> {
            try {
                last[0] = describeMismatch(admin, expectedMembers);
            } catch (Exception e) {
                last[0] = e.toString();
            }
            return last[0].isEmpty();
        }, WAIT_MS);
        result.check(name + " describe", stable, last[0]);
        Map<String, Object> owned = new TreeMap<>();
        members.forEach((n, m) -> owned.put(n, m.owned));
        result.put("assignment " + name, owned);
    }

    /** Empty when the group is Stable, of the expected type, and members own what it says. */
    private String describeMismatch(Admin admin, int expectedMembers) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        GroupType type = mode.equals("consumer") ? GroupType.CONSUMER : GroupType.CLASSIC;
        if (d.type() != type) return "type " + d.type();
        if (d.groupState() != GroupState.STABLE) return "state " + d.groupState();
        if (d.members().size() != expectedMembers) return d.members().size() + " members";
        Set<Integer> all = new TreeSet<>();
        for (MemberDescription md : d.members()) {
            Member m = members.get(md.clientId());
            if (m == null) return "unknown member " + md.clientId();
            Set<Integer> described = md.assignment().topicPartitions().stream()
                    .map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
            if (!described.equals(m.owned)) return md.clientId() + " described " + described + " owns " + m.owned;
            for (int p : described) {
                if (!all.add(p)) return "partition " + p + " assigned twice";
            }
        }
        if (all.size() != PARTITIONS) return "assigned " + all;
        return "";
    }

    private Map<Integer, Long> committed(Admin admin) throws ExecutionException, InterruptedException {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Map<Integer, Long> out = new TreeMap<>();
        offsets.forEach((tp, om) -> out.put(tp.partition(), om.offset()));
        return out;
    }

    private Map<Integer, Long> endOffsets(Admin admin) throws ExecutionException, InterruptedException {
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) {
            specs.put(new TopicPartition(topic, p), OffsetSpec.latest());
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = admin.listOffsets(specs).all().get();
        Map<Integer, Long> out = new TreeMap<>();
        ends.forEach((tp, info) -> out.put(tp.partition(), info.offset()));
        return out;
    }
}
