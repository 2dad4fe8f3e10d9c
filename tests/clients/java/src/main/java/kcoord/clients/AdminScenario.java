package kcoord.clients;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownMemberIdException;

/**
 * AdminClient against three groups at once: a classic group with a member ("adm-classic"), a
 * consumer-protocol group with a member ("adm-consumer") and a group holding only offsets
 * ("adm-empty"): listConsumerGroups with type and state filters, describeConsumerGroups,
 * list/alter/deleteConsumerGroupOffsets, deleteConsumerGroups, createTopics, describeConfigs
 * and incrementalAlterConfigs, each with the errors Kafka gives where an operation is refused.
 */
final class AdminScenario {
    static final String TOPIC = "adm-a";
    static final int PARTITIONS = 3;

    private final String bootstrap;
    private final Main.Result result;

    AdminScenario(String bootstrap, Main.Result result) {
        this.bootstrap = bootstrap;
        this.result = result;
    }

    private Properties memberProps(String group, boolean consumerProtocol) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        if (consumerProtocol) {
            p.put("group.protocol", "consumer");
        } else {
            p.put("heartbeat.interval.ms", "500");
            p.put("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RangeAssignor");
        }
        return p;
    }

    /** The cause of a failed admin future, or null if it succeeded. */
    private static Throwable failure(org.apache.kafka.common.KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    @SuppressWarnings("deprecation") // listConsumerGroups: what the issue names; listGroups is its 4.1 successor
    void run() throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(TOPIC, PARTITIONS, (short) 1),
                    new NewTopic("adm-b", 2, (short) 1).configs(Map.of("cleanup.policy", "compact",
                            "retention.ms", "3600000")))).all().get();
            Throwable dup = failure(admin.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 1))).all());
            result.check("createTopics of an existing topic", dup instanceof TopicExistsException, dup);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap,
                    "key.serializer", "org.apache.kafka.common.serialization.StringSerializer",
                    "value.serializer", "org.apache.kafka.common.serialization.StringSerializer"))) {
                for (int i = 0; i < 30; i++) producer.send(new ProducerRecord<>(TOPIC, i % PARTITIONS, "k" + i, "v" + i));
                producer.flush();
            }
            Ledger classicLedger = new Ledger();
            Ledger consumerLedger = new Ledger();
            Member classic = new Member("classic-1", memberProps("adm-classic", false), TOPIC, classicLedger, result);
            Member consumer = new Member("consumer-1", memberProps("adm-consumer", true), TOPIC, consumerLedger, result);
            try {
                groups(admin, classic, consumer);
            } finally {
                classic.close(true);
                consumer.close(true);
            }
            configs(admin);
        }
    }

    @SuppressWarnings("deprecation")
    private void groups(Admin admin, Member classic, Member consumer) throws Exception {
        TopicPartition p0 = new TopicPartition(TOPIC, 0);
        TopicPartition p1 = new TopicPartition(TOPIC, 1);
        Map<TopicPartition, OffsetAndMetadata> emptyOffsets = Map.of(p0, new OffsetAndMetadata(5), p1, new OffsetAndMetadata(7));
        // Offsets for a group nobody joined: Kafka creates it, Empty.
        admin.alterConsumerGroupOffsets("adm-empty", emptyOffsets).all().get();

        Map<Integer, Long> ends = new TreeMap<>();
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) specs.put(new TopicPartition(TOPIC, p), OffsetSpec.latest());
        admin.listOffsets(specs).all().get().forEach((tp, info) -> ends.put(tp.partition(), info.offset()));
        boolean caughtUp = Main.await(() -> committed(admin, "adm-classic").equals(ends)
                && committed(admin, "adm-consumer").equals(ends), 60_000);
        result.check("both groups consumed and committed everything", caughtUp,
                committed(admin, "adm-classic") + " " + committed(admin, "adm-consumer") + " end " + ends);
        boolean stable = Main.await(() -> states(admin, new ListConsumerGroupsOptions().inGroupStates(Set.of(GroupState.STABLE)))
                .keySet().containsAll(Set.of("adm-classic", "adm-consumer")), 60_000);
        result.check("both groups Stable", stable, states(admin, new ListConsumerGroupsOptions()));

        Map<String, String> all = states(admin, new ListConsumerGroupsOptions());
        result.put("listConsumerGroups", all);
        result.check("list: every group with its type and state", all.equals(Map.of(
                "adm-classic", "Classic/Stable", "adm-consumer", "Consumer/Stable", "adm-empty", "Classic/Empty")), all);
        Set<String> classicType = states(admin, new ListConsumerGroupsOptions().withTypes(Set.of(GroupType.CLASSIC))).keySet();
        result.check("list: type classic", classicType.equals(Set.of("adm-classic", "adm-empty")), classicType);
        Set<String> consumerType = states(admin, new ListConsumerGroupsOptions().withTypes(Set.of(GroupType.CONSUMER))).keySet();
        result.check("list: type consumer", consumerType.equals(Set.of("adm-consumer")), consumerType);
        Set<String> empty = states(admin, new ListConsumerGroupsOptions().inGroupStates(Set.of(GroupState.EMPTY))).keySet();
        result.check("list: state Empty", empty.equals(Set.of("adm-empty")), empty);
        Set<String> both = states(admin, new ListConsumerGroupsOptions().withTypes(Set.of(GroupType.CLASSIC))
                .inGroupStates(Set.of(GroupState.STABLE))).keySet();
        result.check("list: type classic and state Stable", both.equals(Set.of("adm-classic")), both);

        Map<String, ConsumerGroupDescription> described =
                admin.describeConsumerGroups(List.of("adm-classic", "adm-consumer", "adm-empty")).all().get();
        Map<String, Object> summary = new TreeMap<>();
        described.forEach((id, d) -> summary.put(id, d.type() + "/" + d.groupState() + "/" + d.partitionAssignor()
                + "/" + d.members().stream().map(m -> m.clientId() + "=" + m.assignment().topicPartitions().stream()
                        .map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new)))
                        .collect(Collectors.toList())));
        result.put("describeConsumerGroups", summary);
        result.check("describe", summary.equals(Map.of(
                "adm-classic", "Classic/Stable/range/[classic-1=[0, 1, 2]]",
                "adm-consumer", "Consumer/Stable/uniform/[consumer-1=[0, 1, 2]]",
                "adm-empty", "Classic/Empty//[]")), summary);

        Map<Integer, Long> emptyCommitted = committed(admin, "adm-empty");
        result.check("listConsumerGroupOffsets of the Empty group", emptyCommitted.equals(Map.of(0, 5L, 1, 7L)), emptyCommitted);
        Throwable active = failure(admin.alterConsumerGroupOffsets("adm-classic", emptyOffsets).all());
        result.check("alterConsumerGroupOffsets of a group with members", active instanceof UnknownMemberIdException, active);
        Throwable subscribed = failure(admin.deleteConsumerGroupOffsets("adm-consumer", Set.of(p0)).all());
        result.check("deleteConsumerGroupOffsets of a subscribed topic",
                subscribed instanceof GroupSubscribedToTopicException, subscribed);
        admin.deleteConsumerGroupOffsets("adm-empty", Set.of(p0)).all().get();
        emptyCommitted = committed(admin, "adm-empty");
        result.check("deleteConsumerGroupOffsets", emptyCommitted.equals(Map.of(1, 7L)), emptyCommitted);
        Throwable notEmpty = failure(admin.deleteConsumerGroups(List.of("adm-classic")).all());
        result.check("deleteConsumerGroups of a group with members", notEmpty instanceof GroupNotEmptyException, notEmpty);

        classic.close(true);
        result.check("the classic group Empty once its member left", Main.await(() -> states(admin,
                new ListConsumerGroupsOptions().inGroupStates(Set.of(GroupState.EMPTY))).containsKey("adm-classic"), 30_000),
                states(admin, new ListConsumerGroupsOptions()));
        admin.alterConsumerGroupOffsets("adm-classic", Map.of(p0, new OffsetAndMetadata(1))).all().get();
        result.check("alterConsumerGroupOffsets of the Empty group", committed(admin, "adm-classic").get(0) == 1L,
                committed(admin, "adm-classic"));
        admin.deleteConsumerGroups(List.of("adm-classic", "adm-empty")).all().get();
        Set<String> left = states(admin, new ListConsumerGroupsOptions()).keySet();
        result.check("deleteConsumerGroups", left.equals(Set.of("adm-consumer")), left);
        Throwable gone = failure(admin.describeConsumerGroups(List.of("adm-classic")).all());
        result.check("describe of a deleted group", gone instanceof GroupIdNotFoundException, gone);
    }

    private void configs(Admin admin) throws Exception {
        ConfigResource b = new ConfigResource(ConfigResource.Type.TOPIC, "adm-b");
        Config config = admin.describeConfigs(List.of(b)).all().get().get(b);
        result.check("describeConfigs: a config set at creation", entry(config, "cleanup.policy").equals("compact/DYNAMIC_TOPIC_CONFIG"),
                entry(config, "cleanup.policy"));
        result.check("describeConfigs: a default", entry(config, "segment.bytes").equals("1073741824/DEFAULT_CONFIG"),
                entry(config, "segment.bytes"));
        String node = admin.describeCluster().nodes().get().iterator().next().idString();
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, node);
        Config brokerConfig = admin.describeConfigs(List.of(broker)).all().get().get(broker);
        result.check("describeConfigs of the broker", brokerConfig.get("log.retention.hours") != null
                || brokerConfig.get("log.retention.ms") != null, brokerConfig.entries().size() + " entries");

        ConfigResource a = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
        admin.incrementalAlterConfigs(Map.of(a, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)))).all().get();
        Config altered = admin.describeConfigs(List.of(a)).all().get().get(a);
        result.check("incrementalAlterConfigs SET", entry(altered, "retention.ms").equals("7200000/DYNAMIC_TOPIC_CONFIG"),
                entry(altered, "retention.ms"));
        result.check("incrementalAlterConfigs APPEND", entry(altered, "cleanup.policy").equals("delete,compact/DYNAMIC_TOPIC_CONFIG"),
                entry(altered, "cleanup.policy"));
        admin.incrementalAlterConfigs(Map.of(a, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
        Config reset = admin.describeConfigs(List.of(a)).all().get().get(a);
        result.check("incrementalAlterConfigs DELETE", entry(reset, "retention.ms").equals("604800000/DEFAULT_CONFIG"),
                entry(reset, "retention.ms"));
        Throwable bad = failure(admin.incrementalAlterConfigs(Map.of(a, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all());
        result.check("incrementalAlterConfigs of a bad value", bad instanceof InvalidConfigurationException, bad);
    }

    private static String entry(Config config, String name) {
        ConfigEntry e = config.get(name);
        return e == null ? "missing" : e.value() + "/" + e.source();
    }

    @SuppressWarnings("deprecation")
    private static Map<String, String> states(Admin admin, ListConsumerGroupsOptions options) {
        try {
            Collection<ConsumerGroupListing> listed = admin.listConsumerGroups(options).all().get();
            Map<String, String> out = new TreeMap<>();
            for (ConsumerGroupListing l : listed) {
                out.put(l.groupId(), l.type().map(GroupType::toString).orElse("?") + "/"
                        + l.groupState().map(GroupState::toString).orElse("?"));
            }
            return out;
        } catch (Exception e) {
            return Map.of("error", e.toString());
        }
    }

    private static Map<Integer, Long> committed(Admin admin, String group) {
        try {
            Map<Integer, Long> out = new TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .forEach((tp, om) -> { if (om != null) out.put(tp.partition(), om.offset()); });
            return out;
        } catch (Exception e) {
            return Map.of(-1, -1L);
        }
    }
}
