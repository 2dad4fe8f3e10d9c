package kcoord.oracle;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Kafka's command-line tools, many invocations in one JVM: a JVM start per tool costs
 * seconds of CPU on the suite's two cores, a call of a warm class a few milliseconds.
 *
 * <p>Requests come one per line on stdin: {@code id TAB timeout-ms TAB main-class TAB arg...}
 * (the driver never sends a tab or newline inside an argument). Each answer is a header line
 * {@code @@result id exit-code stdout-bytes stderr-bytes} on the real stdout followed by the
 * tool's captured stdout and stderr bytes. Kafka's tools end through
 * {@link org.apache.kafka.common.utils.internals.Exit}; its exit and halt procedures are
 * replaced by one that throws, so a tool's exit ends the invocation, not the JVM. A tool still
 * running at its timeout is interrupted and answered with exit code -2.
 */
public final class ToolRunner {
    /** Thrown by the replaced exit procedure: an Error, so tools' catch (Exception) lets it by. */
    static final class ToolExit extends Error {
        final int code;

        ToolExit(int code) {
            super(MARKER, null, false, false);
            this.code = code;
        }

        @Override
        public String toString() {
            return MARKER;
        }
    }

    /** What a tool that catches Throwable prints of our exit: dropped from its stderr. */
    static final String MARKER = "@@tool-exit";

    /** The code of the invocation's first exit: a tool that catches our exit exits again. */
    static final AtomicInteger FIRST_EXIT = new AtomicInteger(Integer.MIN_VALUE);

    public static void main(String[] argv) throws Exception {
        PrintStream realOut = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false);
        Exit.setExitProcedure((code, message) -> {
            FIRST_EXIT.compareAndSet(Integer.MIN_VALUE, code);
            throw new ToolExit(code);
        });
        Exit.setHaltProcedure((code, message) -> {
            FIRST_EXIT.compareAndSet(Integer.MIN_VALUE, code);
            throw new ToolExit(code);
        });
        // A tool that calls System.exit itself (argparse4j's help screens do) would end this JVM:
        // refused, and ended like a call of Exit. (Deprecated, but Java 17 still honours it.)
        installExitGuard();
        // Shutdown hooks (VerifiableProducer's closes its producer, and so prints its last
        // events) run when their invocation ends, as they would when its own JVM ends.
        Exit.setShutdownHookAdder((name, runnable) -> HOOKS.add(runnable));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        realOut.print("@@ready\n");
        realOut.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("quit")) {
                break;
            }
            String[] fields = line.split("\t", -1);
            String id = fields[0];
            long timeoutMs = Long.parseLong(fields[1]);
            String mainClass = fields[2];
            String[] args = Arrays.copyOfRange(fields, 3, fields.length);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            int code = run(mainClass, args, timeoutMs, out, err);
            byte[] o = out.toByteArray();
            String errText = err.toString(StandardCharsets.UTF_8);
            StringBuilder kept = new StringBuilder();
            for (String l : errText.split("\n", -1)) {
                if (!l.equals(MARKER)) {
                    kept.append(l).append('\n');
                }
            }
            byte[] e = kept.toString().isBlank() ? new byte[0]
                    : kept.substring(0, kept.length() - 1).getBytes(StandardCharsets.UTF_8);
            realOut.print("@@result " + id + " " + code + " " + o.length + " " + e.length + "\n");
            realOut.write(o);
            realOut.write(e);
            realOut.flush();
        }
        realOut.flush();
        quitting = true;
        Runtime.getRuntime().halt(0);
    }

    static volatile boolean quitting;

    /** The JVM's registered shutdown hooks (java.lang.ApplicationShutdownHooks, opened to us). */
    @SuppressWarnings("unchecked")
    static java.util.Set<Thread> jvmHooks() {
        try {
            Class<?> c = Class.forName("java.lang.ApplicationShutdownHooks");
            java.lang.reflect.Field f = c.getDeclaredField("hooks");
            f.setAccessible(true);
            synchronized (c) {
                java.util.Map<Thread, Thread> hooks = (java.util.Map<Thread, Thread>) f.get(null);
                return hooks == null ? java.util.Set.of() : new java.util.HashSet<>(hooks.keySet());
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            return java.util.Set.of();
        }
    }

    /** The shutdown hooks the running invocation registered. */
    static final java.util.List<Runnable> HOOKS = new java.util.concurrent.CopyOnWriteArrayList<>();

    @SuppressWarnings("removal")
    static void installExitGuard() {
        System.setSecurityManager(new SecurityManager() {
            @Override
            public void checkExit(int status) {
                if (!quitting) {
                    FIRST_EXIT.compareAndSet(Integer.MIN_VALUE, status);
                    throw new ToolExit(status);
                }
            }

            @Override
            public void checkPermission(java.security.Permission perm) {
                // everything else allowed
            }

            @Override
            public void checkPermission(java.security.Permission perm, Object context) {
                // everything else allowed
            }
        });
    }

    static int run(String mainClass, String[] args, long timeoutMs, OutputStream out, OutputStream err)
            throws InterruptedException {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        java.io.InputStream oldIn = System.in;
        PrintStream capturedOut = new PrintStream(out, true, StandardCharsets.UTF_8);
        PrintStream capturedErr = new PrintStream(err, true, StandardCharsets.UTF_8);
        AtomicInteger code = new AtomicInteger(0);
        FIRST_EXIT.set(Integer.MIN_VALUE);
        HOOKS.clear();
        java.util.Set<Thread> jvmHooksBefore = jvmHooks();
        System.setOut(capturedOut);
        System.setErr(capturedErr);
        System.setIn(new ByteArrayInputStream(new byte[0]));
        Thread t = new Thread(() -> {
            try {
                Method main = Class.forName(mainClass).getMethod("main", String[].class);
                main.invoke(null, (Object) args);
            } catch (InvocationTargetException ex) {
                Throwable cause = ex.getCause();
                while (cause != null && !(cause instanceof ToolExit) && cause.getCause() != null
                        && cause.getCause() != cause) {
                    if (cause instanceof InvocationTargetException) {
                        cause = cause.getCause();
                    } else {
                        break;
                    }
                }
                if (cause instanceof ToolExit) {
                    code.set(((ToolExit) cause).code);
                } else {
                    code.set(-1);
                    capturedErr.println("uncaught: " + cause);
                }
            } catch (ToolExit ex) {
                code.set(ex.code);
            } catch (Throwable ex) {
                code.set(-1);
                capturedErr.println("launcher: " + ex);
            }
        }, "tool-" + mainClass);
        t.setDaemon(true);
        t.start();
        t.join(timeoutMs);
        if (t.isAlive()) {
            t.interrupt();
            t.join(2000);
            code.set(-2);
        }
        for (Runnable hook : HOOKS) {
            Thread h = new Thread(() -> {
                try {
                    hook.run();
                } catch (Throwable ex) {
                    // a hook's failure is the tool's business, as at a JVM's end
                }
            }, "tool-hook");
            h.setDaemon(true);
            h.start();
            h.join(30_000);
        }
        HOOKS.clear();
        // Hooks a tool gave the Runtime itself (VerifiableProducer closes its producer in one):
        // run now, with the invocation's output still captured, as its own JVM's end would.
        for (Thread hook : jvmHooks()) {
            if (!jvmHooksBefore.contains(hook) && Runtime.getRuntime().removeShutdownHook(hook)) {
                hook.setDaemon(true);
                hook.start();
                hook.join(30_000);
            }
        }
        capturedOut.flush();
        capturedErr.flush();
        System.setOut(oldOut);
        System.setErr(oldErr);
        System.setIn(oldIn);
        int first = FIRST_EXIT.get();
        return first != Integer.MIN_VALUE && code.get() != -2 ? first : code.get();
    }
}
