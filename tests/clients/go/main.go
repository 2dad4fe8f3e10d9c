// Command kclients runs the Go reference clients' scenarios against a Kafka-protocol server:
//
//	kclients SCENARIO BOOTSTRAP
//
// with SCENARIO one of franz-cooperative, franz-consumer (KIP-848), franz-txn, kafka-go-group,
// kafka-go-reader, sarama, and franz-cluster (against several brokers). Each prints one JSON line {"result": {...}} on stdout with "ok" and
// "failures"; where the driver (tests/test_go_clients.py) must act, it prints {"event": NAME}
// and waits for one line on stdin. Client logs go to stderr.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: kclients SCENARIO BOOTSTRAP")
		os.Exit(2)
	}
	scenario, bootstrap := os.Args[1], os.Args[2]
	res := newResult(scenario)
	var err error
	switch scenario {
	case "franz-cooperative", "franz-consumer", "kafka-go-group", "kafka-go-reader", "sarama", "franz-cluster":
		err = runLifecycle(scenario, bootstrap, res)
	case "franz-txn":
		err = runFranzTxn(bootstrap, res)
	default:
		fmt.Fprintln(os.Stderr, "unknown scenario", scenario)
		os.Exit(2)
	}
	if err != nil {
		res.fail("error: " + err.Error())
	}
	out, _ := json.Marshal(map[string]any{"result": res.fields()})
	fmt.Println(string(out))
	os.Exit(0)
}

var stdin = bufio.NewReader(os.Stdin)

// event tells the driver to act and waits until it says it has.
func event(name string) error { return eventOn(name, "") }

// eventOn is an event about one group or topic: {"event": NAME, "target": TARGET}.
func eventOn(name, target string) error {
	message := map[string]string{"event": name}
	if target != "" {
		message["target"] = target
	}
	out, _ := json.Marshal(message)
	fmt.Println(string(out))
	if _, err := stdin.ReadString('\n'); err != nil {
		return fmt.Errorf("driver closed stdin during %s", name)
	}
	return nil
}

// await polls a condition (no blind sleeps); false when it did not hold in time.
func await(cond func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// result is a scenario's outcome: figures, and failed checks with their detail.
type result struct {
	mu       sync.Mutex
	fieldMap map[string]any
	failures []string
}

func newResult(scenario string) *result {
	return &result{fieldMap: map[string]any{"scenario": scenario}, failures: []string{}}
}

func (r *result) put(k string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fieldMap[k] = v
}

func (r *result) fail(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, what)
}

func (r *result) check(name string, ok bool, detail any) bool {
	if !ok {
		r.fail(fmt.Sprintf("%s: %v", name, detail))
	}
	return ok
}

func (r *result) fields() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]any{}
	for k, v := range r.fieldMap {
		out[k] = v
	}
	out["ok"] = len(r.failures) == 0
	out["failures"] = r.failures
	return out
}

// ledger holds what was produced, delivered and acknowledged as committed: every produced
// record must be delivered, and none again once a commit the broker acknowledged covered it
// (a redelivery past the last acknowledged commit is at-least-once: allowed, counted).
type ledger struct {
	mu          sync.Mutex
	produced    map[string]bool
	delivered   map[string]int
	acked       map[int32]int64
	redelivered int
	violations  map[string]string
}

func newLedger() *ledger {
	return &ledger{produced: map[string]bool{}, delivered: map[string]int{}, acked: map[int32]int64{},
		violations: map[string]string{}}
}

func key(p int32, o int64) string { return fmt.Sprintf("%d:%d", p, o) }

func (l *ledger) addProduced(p int32, o int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.produced[key(p, o)] = true
}

func (l *ledger) deliver(member string, p int32, o int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := key(p, o)
	l.delivered[k]++
	if l.delivered[k] > 1 {
		l.redelivered++
		if o < l.acked[p] {
			l.violations[k] = fmt.Sprintf("%s got it again after a commit at %d", member, l.acked[p])
		}
	}
}

// ack records offsets (the next offset to read) the broker acknowledged as committed.
func (l *ledger) ack(p int32, next int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if next > l.acked[p] {
		l.acked[p] = next
	}
}

func (l *ledger) missing() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []string{}
	for k := range l.produced {
		if l.delivered[k] == 0 {
			out = append(out, k)
		}
	}
	return out
}

func (l *ledger) allDelivered() bool { return len(l.missing()) == 0 }

// brokers splits a bootstrap list (HOST:PORT,HOST:PORT,...).
func brokers(bootstrap string) []string { return strings.Split(bootstrap, ",") }
