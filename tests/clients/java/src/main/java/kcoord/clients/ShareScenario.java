package kcoord.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;

/**
 * KafkaShareConsumer (KIP-932 share groups), the checks the suite makes with confluent-kafka's
 * ShareConsumer: three consumers share one partition and each record goes to one of them;
 * explicit acknowledgement, where a released record comes back with its delivery count one
 * more and a rejected one never; a consumer that holds records without acknowledging them
 * loses them when their acquisition lock expires; acknowledged records stay so across a
 * server restart.
 */
final class ShareScenario {
    private final String bootstrap;
    private final Main.Result result;

    ShareScenario(String bootstrap, Main.Result result) {
        this.bootstrap = bootstrap;
        this.result = result;
    }

    /** The topic, the group's configs (earliest: records produced before it started are its), v0..v{n-1}. */
    private void setup(Admin admin, String topic, String group, int records, Map<String, String> configs)
            throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        List<AlterConfigOp> ops = new ArrayList<>();
        ops.add(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET));
        configs.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops)).all().get();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap,
                "key.serializer", "org.apache.kafka.common.serialization.StringSerializer",
                "value.serializer", "org.apache.kafka.common.serialization.StringSerializer"))) {
            for (int i = 0; i < records; i++) producer.send(new ProducerRecord<>(topic, "v" + i));
            producer.flush();
        }
    }

    private KafkaShareConsumer<String, String> consumer(String group, String topic, boolean explicit) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        if (explicit) p.put("share.acknowledgement.mode", "explicit");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    void run() throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            threeConsumers(admin);
            releaseAndReject(admin);
            lockExpiry(admin);
            acknowledgedSurviveRestart(admin);
        }
    }

    private void threeConsumers(Admin admin) throws Exception {
        setup(admin, "jobs", "workers", 300, Map.of());
        ConcurrentLinkedQueue<Long> offsets = new ConcurrentLinkedQueue<>();
        AtomicBoolean done = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer("workers", "jobs", false)) {
                    while (!done.get()) {
                        // Implicit acknowledgement: a poll accepts what the previous one returned.
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) offsets.add(r.offset());
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        boolean all = Main.await(() -> offsets.size() >= 300, 60_000);
        done.set(true);
        for (Thread t : threads) t.join(60_000);
        List<Long> sorted = new ArrayList<>(offsets);
        sorted.sort(null);
        List<Long> want = new ArrayList<>();
        for (long o = 0; o < 300; o++) want.add(o);
        result.check("three consumers: every record to one consumer, once", all && sorted.equals(want),
                sorted.size() + " deliveries");
    }

    private void releaseAndReject(Admin admin) throws Exception {
        setup(admin, "t", "g", 10, Map.of());
        Map<Long, List<Short>> seen = new TreeMap<>();
        try (KafkaShareConsumer<String, String> c = consumer("g", "t", true)) {
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline && !(seen.size() == 10 && seen.get(5L).size() >= 2)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    short count = r.deliveryCount().orElse((short) -1);
                    seen.computeIfAbsent(r.offset(), k -> new ArrayList<>()).add(count);
                    if (r.offset() == 3) c.acknowledge(r, AcknowledgeType.REJECT);
                    else if (r.offset() == 5 && count == 1) c.acknowledge(r, AcknowledgeType.RELEASE);
                    else c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
            result.put("explicit deliveries", seen);
            boolean ok = seen.keySet().equals(range(10)) && seen.get(5L).equals(List.of((short) 1, (short) 2))
                    && seen.get(3L).equals(List.of((short) 1));
            for (long o = 0; o < 10; o++) {
                if (o != 5 && !List.of((short) 1).equals(seen.get(o))) ok = false;
            }
            result.check("release comes back with delivery count 2, reject never", ok, seen);
            int more = c.poll(Duration.ofSeconds(1)).count();
            result.check("nothing left after every record was acknowledged", more == 0, more + " more");
        }
    }

    private void lockExpiry(Admin admin) throws Exception {
        setup(admin, "locks", "lockers", 20, Map.of("share.record.lock.duration.ms", "1000"));
        Set<Long> held = new TreeSet<>();
        try (KafkaShareConsumer<String, String> holder = consumer("lockers", "locks", true)) {
            Main.await(() -> {
                for (ConsumerRecord<String, String> r : holder.poll(Duration.ofMillis(200))) held.add(r.offset());
                return !held.isEmpty();
            }, 30_000);
            // The holder stays in the group, never acknowledging: its locks expire.
            Map<Long, Short> counts = new TreeMap<>();
            try (KafkaShareConsumer<String, String> other = consumer("lockers", "locks", false)) {
                Main.await(() -> {
                    for (ConsumerRecord<String, String> r : other.poll(Duration.ofMillis(200))) {
                        counts.putIfAbsent(r.offset(), r.deliveryCount().orElse((short) -1));
                    }
                    return counts.size() == 20;
                }, 60_000);
            }
            boolean ok = counts.keySet().equals(range(20));
            for (Map.Entry<Long, Short> e : counts.entrySet()) {
                if (e.getValue() != (held.contains(e.getKey()) ? 2 : 1)) ok = false;
            }
            result.check("records held past their lock come back with delivery count 2", ok,
                    "held " + held + " then " + counts);
        }
    }

    private void acknowledgedSurviveRestart(Admin admin) throws Exception {
        setup(admin, "durable", "durables", 20, Map.of());
        Set<Long> accepted = new TreeSet<>();
        try (KafkaShareConsumer<String, String> c = consumer("durables", "durable", true)) {
            Main.await(() -> {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    if (r.offset() < 10) {
                        c.acknowledge(r, AcknowledgeType.ACCEPT);
                        accepted.add(r.offset());
                    } else {
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                    }
                }
                c.commitSync();
                return accepted.size() == 10;
            }, 30_000);
        }
        Main.event("restart-server");
        Set<Long> after = new TreeSet<>();
        try (KafkaShareConsumer<String, String> c = consumer("durables", "durable", false)) {
            Main.await(() -> {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) after.add(r.offset());
                return after.size() >= 10;
            }, 60_000);
            c.poll(Duration.ofMillis(500)).forEach(r -> after.add(r.offset()));
        }
        Set<Long> want = new TreeSet<>();
        for (long o = 10; o < 20; o++) want.add(o);
        result.check("accepted records stay accepted across a server restart", after.equals(want), after);
    }

    /**
     * Three brokers, a partition led by each (the cluster's placement): three consumers get
     * every record once, and with explicit acknowledgement a released record comes back once
     * more, the others never. A consumer holds a share session with every broker it fetches from.
     */
    void runCluster() throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic("spread", 3, (short) 3))).all().get();
            for (String group : List.of("spreaders", "spread-explicit")) {
                admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), List.of(
                        new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                                AlterConfigOp.OpType.SET)))).all().get();
            }
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(Map.of("bootstrap.servers", bootstrap,
                "key.serializer", "org.apache.kafka.common.serialization.StringSerializer",
                "value.serializer", "org.apache.kafka.common.serialization.StringSerializer"))) {
            for (int i = 0; i < 90; i++) producer.send(new ProducerRecord<>("spread", i % 3, null, "v" + i));
            producer.flush();
        }
        ConcurrentLinkedQueue<String> got = new ConcurrentLinkedQueue<>();
        AtomicBoolean done = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (int n = 0; n < 3; n++) {
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer("spreaders", "spread", false)) {
                    while (!done.get()) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            got.add(r.partition() + ":" + r.offset());
                        }
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        boolean all = Main.await(() -> got.size() >= 90, 60_000);
        done.set(true);
        for (Thread t : threads) t.join(60_000);
        Set<String> distinct = new TreeSet<>(got);
        result.check("three brokers, three consumers: every record to one consumer, once",
                all && got.size() == 90 && distinct.size() == 90, got.size() + " deliveries, " + distinct.size() + " distinct");

        Map<String, List<Short>> seen = new TreeMap<>();
        try (KafkaShareConsumer<String, String> c = consumer("spread-explicit", "spread", true)) {
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline && !(seen.size() == 90
                    && seen.get("0:0") != null && seen.get("0:0").size() >= 2
                    && seen.get("1:0") != null && seen.get("1:0").size() >= 2
                    && seen.get("2:0") != null && seen.get("2:0").size() >= 2)) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                    String key = r.partition() + ":" + r.offset();
                    short count = r.deliveryCount().orElse((short) -1);
                    seen.computeIfAbsent(key, k -> new ArrayList<>()).add(count);
                    c.acknowledge(r, r.offset() == 0 && count == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                }
                c.commitSync();
            }
            int more = c.poll(Duration.ofSeconds(1)).count();
            boolean ok = seen.size() == 90 && more == 0;
            for (Map.Entry<String, List<Short>> e : seen.entrySet()) {
                List<Short> want = e.getKey().endsWith(":0") ? List.of((short) 1, (short) 2) : List.of((short) 1);
                if (!want.equals(e.getValue())) ok = false;
            }
            result.check("three brokers: a released record comes back once, acknowledgements kept", ok,
                    seen + " then " + more + " more");
        }
    }

    private static Set<Long> range(int n) {
        Set<Long> s = new TreeSet<>();
        for (long o = 0; o < n; o++) s.add(o);
        return s;
    }
}
