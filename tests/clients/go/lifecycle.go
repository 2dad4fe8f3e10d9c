package main

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions = 6
	batch      = 60
	waitFor    = 60 * time.Second
)

// member is one group member of some client library, consuming on its own goroutine.
type member interface {
	// owned is what the member owns now; nil when the library does not tell.
	owned() []int32
	// callbacks counts rebalance callbacks: a rebalance that reaches the member moves it.
	callbacks() int64
	// firstOffsets is the first offset delivered per partition.
	firstOffsets() map[int32]int64
	close()
}

// memberState is the bookkeeping every member implementation shares.
type memberState struct {
	mu     sync.Mutex
	own    map[int32]bool
	first  map[int32]int64
	calls  atomic.Int64
	name   string
	ledger *ledger
}

func newMemberState(name string, l *ledger) *memberState {
	return &memberState{own: map[int32]bool{}, first: map[int32]int64{}, name: name, ledger: l}
}

func (m *memberState) deliver(p int32, o int64) {
	m.ledger.deliver(m.name, p, o)
	m.mu.Lock()
	if _, ok := m.first[p]; !ok {
		m.first[p] = o
	}
	m.mu.Unlock()
}

func (m *memberState) setOwned(add []int32, remove []int32, replace bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if replace {
		m.own = map[int32]bool{}
	}
	for _, p := range remove {
		delete(m.own, p)
	}
	for _, p := range add {
		m.own[p] = true
	}
}

func (m *memberState) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []int32{}
	for p := range m.own {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *memberState) callbacks() int64 { return m.calls.Load() }

func (m *memberState) firstOffsets() map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]int64{}
	for p, o := range m.first {
		out[p] = o
	}
	return out
}

// library says how a scenario's client makes members and what it supports.
type library struct {
	start      func(name, instanceID string) (member, error)
	static     bool // group.instance.id (KIP-345)
	ownedKnown bool // the member can say what it owns
	groupType  string
	// commitUnknown: the library does not say whether a commit succeeded, so commits count
	// as covering records only once read back from the broker after a step.
	commitUnknown bool
	memberClient  func(name string) string // the client id a describe shows for a member
}

type lifecycle struct {
	bootstrap string
	topic     string
	group     string
	res       *result
	ledger    *ledger
	lib       library
	members   map[string]member
	producer  *kgo.Client
	admin     *kadm.Client
	n         int
}

// runLifecycle runs a group's whole life cycle: two members join, a static one joins, one
// leaves, the static one restarts within its session, the server restarts, all leave, and a
// new member resumes from the committed offsets; after each step every record is delivered
// and the group's describe matches what the members own.
func runLifecycle(scenario, bootstrap string, res *result) error {
	lc := &lifecycle{bootstrap: bootstrap, topic: "go-" + scenario, group: "go-" + scenario, res: res,
		ledger: newLedger(), members: map[string]member{}}
	res.put("group", lc.group)
	res.put("topic", lc.topic)
	switch scenario {
	case "franz-cooperative", "franz-cluster":
		lc.lib = franzLibrary(lc, false)
	case "franz-consumer":
		lc.lib = franzLibrary(lc, true)
	case "kafka-go-group":
		lc.lib = kafkaGoGroupLibrary(lc)
	case "kafka-go-reader":
		lc.lib = kafkaGoReaderLibrary(lc)
	case "sarama":
		lc.lib = saramaLibrary(lc)
	}
	var err error
	if lc.producer, err = kgo.NewClient(kgo.SeedBrokers(brokers(bootstrap)...), kgo.DefaultProduceTopic(lc.topic)); err != nil {
		return err
	}
	defer lc.producer.Close()
	lc.admin = kadm.NewClient(lc.producer)
	defer func() {
		for _, m := range lc.members {
			m.close()
		}
		res.put("produced", len(lc.ledger.produced))
		res.put("missing", lc.ledger.missing())
		res.put("redelivered", lc.ledger.redelivered)
		res.put("violations", lc.ledger.violations)
	}()
	if scenario == "franz-cluster" {
		return lc.runCluster()
	}
	return lc.run()
}

// runCluster runs against three brokers: the group's coordinator moves (NOT_COORDINATOR, then
// the new one loads the group from its __consumer_offsets partition), then the broker now
// coordinating it stops (its partitions' leadership moves too); the members carry on.
func (lc *lifecycle) runCluster() error {
	ctx := context.Background()
	if _, err := lc.admin.CreateTopic(ctx, partitions, 3, nil, lc.topic); err != nil {
		return err
	}
	if err := lc.produce(); err != nil {
		return err
	}
	for _, name := range []string{"c1", "c2"} {
		if err := lc.start(name, ""); err != nil {
			return err
		}
	}
	lc.step("join", 2)
	for _, ev := range []struct{ event, step string }{
		{"move-coordinator", "coordinator-move"}, {"stop-coordinator", "broker-stop"},
	} {
		if err := eventOn(ev.event, lc.group); err != nil {
			return err
		}
		if err := lc.produce(); err != nil {
			return err
		}
		lc.step(ev.step, 2)
	}
	for name := range lc.members {
		lc.stop(name)
	}
	committed, ends := lc.offsets()
	lc.res.check("committed = log end after close", reflect.DeepEqual(committed, ends),
		fmt.Sprintf("committed %v end %v", committed, ends))
	return nil
}

func (lc *lifecycle) run() error {
	ctx := context.Background()
	if _, err := lc.admin.CreateTopic(ctx, partitions, 1, nil, lc.topic); err != nil {
		return err
	}
	if err := lc.produce(); err != nil {
		return err
	}
	for _, name := range []string{"c1", "c2"} {
		if err := lc.start(name, ""); err != nil {
			return err
		}
	}
	lc.step("join", 2)

	staticID := ""
	if lc.lib.static {
		staticID = "static-3"
	}
	if err := lc.start("c3", staticID); err != nil {
		return err
	}
	if err := lc.produce(); err != nil {
		return err
	}
	lc.step("member-joins", 3)

	lc.stop("c1")
	if err := lc.produce(); err != nil {
		return err
	}
	lc.step("member-leaves", 2)

	if lc.lib.static {
		// KIP-345: the next incarnation takes the static member's place and partitions
		// without a rebalance, so the other member is not called back.
		before := lc.members["c3"].owned()
		otherCalls := lc.members["c2"].callbacks()
		lc.stop("c3")
		if err := lc.start("c3", staticID); err != nil {
			return err
		}
		if err := lc.produce(); err != nil {
			return err
		}
		lc.step("static-restart", 2)
		if lc.lib.ownedKnown {
			after := lc.members["c3"].owned()
			lc.res.check("static-restart keeps partitions", reflect.DeepEqual(before, after),
				fmt.Sprintf("%v then %v", before, after))
		}
		lc.res.check("static-restart without rebalance", lc.members["c2"].callbacks() == otherCalls,
			fmt.Sprintf("c2 called back %d times", lc.members["c2"].callbacks()-otherCalls))
	}

	if err := event("restart-server"); err != nil {
		return err
	}
	if err := lc.produce(); err != nil {
		return err
	}
	lc.step("server-restart", 2)

	for name := range lc.members {
		lc.stop(name)
	}
	if staticID != "" {
		// A static member does not leave when it closes; an admin's LeaveGroup naming its
		// instance id removes it (what kafka-consumer-groups --delete-members... does).
		resp, err := lc.admin.LeaveGroup(ctx, kadm.LeaveGroup(lc.group).InstanceIDs(staticID))
		lc.res.check("admin leave of the static member", err == nil && resp.Error() == nil,
			fmt.Sprint(err, resp.Error()))
	}
	committed, ends := lc.offsets()
	lc.res.check("committed = log end after close", reflect.DeepEqual(committed, ends),
		fmt.Sprintf("committed %v end %v", committed, ends))

	// A new member resumes where the group committed: it sees only the new batch.
	if err := lc.produce(); err != nil {
		return err
	}
	if err := lc.start("c4", ""); err != nil {
		return err
	}
	lc.step("resume", 1)
	for p, o := range lc.members["c4"].firstOffsets() {
		lc.res.check(fmt.Sprintf("resume p%d", p), o == committed[p],
			fmt.Sprintf("first offset %d, committed %d", o, committed[p]))
	}
	lc.stop("c4")
	committed, ends = lc.offsets()
	lc.res.check("committed = log end at the end", reflect.DeepEqual(committed, ends),
		fmt.Sprintf("committed %v end %v", committed, ends))
	out := map[string]int64{}
	for p, o := range committed {
		out[fmt.Sprint(p)] = o
	}
	lc.res.put("committed", out)
	return nil
}

func (lc *lifecycle) start(name, instanceID string) error {
	m, err := lc.lib.start(name, instanceID)
	if err != nil {
		return err
	}
	lc.members[name] = m
	return nil
}

func (lc *lifecycle) stop(name string) {
	lc.members[name].close()
	delete(lc.members, name)
}

func (lc *lifecycle) produce() error {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	var records []*kgo.Record
	for i := 0; i < batch; i++ {
		records = append(records, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", lc.n)), Value: []byte(fmt.Sprintf("v%d", lc.n))})
		lc.n++
	}
	results := lc.producer.ProduceSync(ctx, records...)
	if err := results.FirstErr(); err != nil {
		return err
	}
	for _, r := range results {
		lc.ledger.addProduced(r.Record.Partition, r.Record.Offset)
	}
	return nil
}

// step waits until everything produced is delivered and the describe matches the members.
func (lc *lifecycle) step(name string, expected int) {
	lc.res.check(name+" delivered", await(lc.ledger.allDelivered, waitFor), fmt.Sprint("missing ", lc.ledger.missing()))
	last := ""
	ok := await(func() bool {
		last = lc.describeMismatch(expected)
		return last == ""
	}, waitFor)
	lc.res.check(name+" describe", ok, last)
	if lc.lib.commitUnknown {
		committed, _ := lc.offsets()
		for p, o := range committed {
			lc.ledger.ack(p, o)
		}
	}
	owned := map[string]any{}
	for n, m := range lc.members {
		owned[n] = m.owned()
	}
	lc.res.put("assignment "+name, owned)
}

// describeMismatch is empty when the group is Stable with the expected members, each
// described with what it owns, and every partition assigned once.
func (lc *lifecycle) describeMismatch(expected int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	described := map[string][]int32{} // client id -> partitions
	if lc.lib.groupType == "consumer" {
		groups, err := lc.admin.DescribeConsumerGroups(ctx, lc.group)
		if err != nil {
			return err.Error()
		}
		g := groups[lc.group]
		if g.Err != nil {
			return g.Err.Error()
		}
		if g.State != "Stable" {
			return "state " + g.State
		}
		for _, m := range g.Members {
			ps := []int32{}
			for p := range m.Assignment[lc.topic] {
				ps = append(ps, p)
			}
			described[m.ClientID] = ps
		}
		if len(g.Members) != expected {
			return fmt.Sprintf("%d members", len(g.Members))
		}
	} else {
		groups, err := lc.admin.DescribeGroups(ctx, lc.group)
		if err != nil {
			return err.Error()
		}
		g := groups[lc.group]
		if g.Err != nil {
			return g.Err.Error()
		}
		if g.State != "Stable" {
			return "state " + g.State
		}
		if len(g.Members) != expected {
			return fmt.Sprintf("%d members", len(g.Members))
		}
		for _, m := range g.Members {
			a, ok := m.Assigned.AsConsumer()
			if !ok {
				return "member " + m.ClientID + " without a consumer assignment"
			}
			ps := []int32{}
			for _, t := range a.Topics {
				if t.Topic == lc.topic {
					ps = append(ps, t.Partitions...)
				}
			}
			described[m.ClientID] = ps
		}
	}
	all := map[int32]bool{}
	for client, ps := range described {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			if all[p] {
				return fmt.Sprintf("partition %d assigned twice", p)
			}
			all[p] = true
		}
		if !lc.lib.ownedKnown {
			continue
		}
		var m member
		for n, mm := range lc.members {
			if lc.lib.memberClient(n) == client {
				m = mm
			}
		}
		if m == nil {
			return "unknown member " + client
		}
		if own := m.owned(); !reflect.DeepEqual(own, ps) && !(len(own) == 0 && len(ps) == 0) {
			return fmt.Sprintf("%s described %v owns %v", client, ps, own)
		}
	}
	if len(all) != partitions {
		return fmt.Sprintf("assigned %v", all)
	}
	return ""
}

// offsets are the group's committed offsets and the topic's log end offsets.
func (lc *lifecycle) offsets() (map[int32]int64, map[int32]int64) {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	committed, ends := map[int32]int64{}, map[int32]int64{}
	fetched, err := lc.admin.FetchOffsets(ctx, lc.group)
	if err != nil {
		lc.res.fail("fetch offsets: " + err.Error())
	}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == lc.topic && o.Err == nil {
			committed[o.Partition] = o.At
		}
	})
	listed, err := lc.admin.ListEndOffsets(ctx, lc.topic)
	if err != nil {
		lc.res.fail("list end offsets: " + err.Error())
	}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return committed, ends
}
