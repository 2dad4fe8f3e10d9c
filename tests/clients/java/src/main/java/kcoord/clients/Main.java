package kcoord.clients;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;

/**
 * The Java reference clients' scenarios, one per run: {@code java kcoord.clients.Main SCENARIO
 * BOOTSTRAP ARGS...}. Each prints one JSON result line on stdout, {"result": {...}}, with
 * {"ok": true|false, "failures": [...]} and the figures the pytest driver checks itself.
 * Where the driver must act (restart the server; against a cluster: move a coordinator or a
 * leader, stop a broker), the scenario prints {"event": NAME, "target": GROUP_OR_TOPIC} and
 * waits for one line on stdin. Client logs go to stderr.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Main SCENARIO BOOTSTRAP [ARGS...]");
            System.exit(2);
        }
        String bootstrap = args[1];
        Result result = new Result(args[0]);
        try {
            switch (args[0]) {
                case "consumer" -> new ConsumerLifecycle(bootstrap, args[2], result, false).run();
                case "consumer-cluster" -> new ConsumerLifecycle(bootstrap, args[2], result, true).run();
                case "producer-cluster" -> new ProducerScenario(bootstrap, result).runLeaderMove();
                case "producer" -> new ProducerScenario(bootstrap, result).run();
                case "admin" -> new AdminScenario(bootstrap, result).run();
                case "streams" -> new StreamsWordCount(bootstrap, result).run();
                case "streams-protocol" -> new StreamsProtocolWordCount(bootstrap, result, false).run();
                case "streams-protocol-cluster" -> new StreamsProtocolWordCount(bootstrap, result, true).run();
                case "share" -> new ShareScenario(bootstrap, result).run();
                case "share-cluster" -> new ShareScenario(bootstrap, result).runCluster();
                case "join-timing" -> new JoinTiming(bootstrap, args[2], Integer.parseInt(args[3]), result).run();
                case "txn-v2" -> new TransactionsV2Scenario(bootstrap, result, Integer.parseInt(args[2])).run();
                default -> {
                    System.err.println("unknown scenario " + args[0]);
                    System.exit(2);
                }
            }
        } catch (Throwable t) {
            t.printStackTrace();
            result.fail("exception: " + t);
        }
        System.out.println(Json.write(Map.of("result", result.fields())));
        System.out.flush();
        // Client threads (Streams, network) must not keep the JVM up once the result is out.
        System.exit(0);
    }

    private static final BufferedReader STDIN =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    /** Tells the driver to act and waits until it says it has. */
    static void event(String name) throws IOException {
        event(name, null);
    }

    /** An event about one group or topic: {"event": NAME, "target": TARGET}. */
    static void event(String name, String target) throws IOException {
        Map<String, Object> message = new LinkedHashMap<>();
        message.put("event", name);
        if (target != null) message.put("target", target);
        System.out.println(Json.write(message));
        System.out.flush();
        if (STDIN.readLine() == null) {
            throw new IOException("driver closed stdin during " + name);
        }
    }

    /** Polls a condition (no blind sleeps); false when it did not hold within the time. */
    static boolean await(BooleanSupplier condition, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                return false;
            }
            Thread.sleep(50);
        }
        return true;
    }

    /** A scenario's outcome: named checks, figures and failures. */
    static final class Result {
        private final Map<String, Object> fields = new LinkedHashMap<>();
        private final List<String> failures = new ArrayList<>();

        Result(String scenario) {
            fields.put("scenario", scenario);
        }

        synchronized void put(String key, Object value) {
            fields.put(key, value);
        }

        synchronized void fail(String what) {
            failures.add(what);
        }

        /** Records a check; a failed one is listed with its detail. */
        synchronized boolean check(String name, boolean ok, Object detail) {
            if (!ok) {
                failures.add(name + ": " + detail);
            }
            return ok;
        }

        synchronized Map<String, Object> fields() {
            Map<String, Object> out = new LinkedHashMap<>(fields);
            out.put("ok", failures.isEmpty());
            out.put("failures", new ArrayList<>(failures));
            return out;
        }
    }

    /** Just enough JSON for the result lines. */
    static final class Json {
        private Json() {}

        static String write(Object value) {
            StringBuilder sb = new StringBuilder();
            write(sb, value);
            return sb.toString();
        }

        private static void write(StringBuilder sb, Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Number || v instanceof Boolean) {
                sb.append(v);
            } else if (v instanceof Map<?, ?> m) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    string(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            } else if (v instanceof Collection<?> c) {
                sb.append('[');
                boolean first = true;
                for (Object o : c) {
                    if (!first) sb.append(',');
                    first = false;
                    write(sb, o);
                }
                sb.append(']');
            } else {
                string(sb, v.toString());
            }
        }

        private static void string(StringBuilder sb, String s) {
            sb.append('"');
            for (char ch : s.toCharArray()) {
                switch (ch) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
                        else sb.append(ch);
                    }
                }
            }
            sb.append('"');
        }
    }
}
