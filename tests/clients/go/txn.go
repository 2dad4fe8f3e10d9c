package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	txnRecords    = 200
	txnPartitions = 3
)

// runFranzTxn runs consume-transform-produce with kgo's GroupTransactSession (KIP-447: the
// group's offsets committed in the producer's transaction) across a server restart, after a
// transaction aborted by another transactional producer. A read_committed reader must see the
// transformed input exactly once and none of the aborted records.
func runFranzTxn(bootstrap string, res *result) error {
	ctx := context.Background()
	plain, err := kgo.NewClient(kgo.SeedBrokers(brokers(bootstrap)...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer plain.Close()
	admin := kadm.NewClient(plain)
	if _, err := admin.CreateTopics(ctx, txnPartitions, 1, nil, "franz-txn-in", "franz-txn-out"); err != nil {
		return err
	}
	var input []*kgo.Record
	for i := 0; i < txnRecords; i++ {
		input = append(input, &kgo.Record{Topic: "franz-txn-in", Partition: int32(i % txnPartitions),
			Value: []byte(fmt.Sprintf("in%d", i))})
	}
	if err := plain.ProduceSync(ctx, input...).FirstErr(); err != nil {
		return err
	}

	// A transaction that aborts: its records stay in the log, invisible to read_committed.
	aborter, err := kgo.NewClient(kgo.SeedBrokers(brokers(bootstrap)...), kgo.TransactionalID("franz-abort"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	if err := aborter.BeginTransaction(); err != nil {
		return err
	}
	for i := 0; i < 10; i++ {
		aborter.ProduceSync(ctx, &kgo.Record{Topic: "franz-txn-out", Partition: int32(i % txnPartitions),
			Value: []byte(fmt.Sprintf("aborted%d", i))})
	}
	if err := aborter.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return err
	}
	aborter.Close()

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(brokers(bootstrap)...), kgo.ClientID("franz-txn"),
		kgo.TransactionalID("franz-txn"), kgo.ConsumerGroup("franz-txn-group"), kgo.ConsumeTopics("franz-txn-in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.SessionTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer sess.Close()
	done := map[string]bool{} // input records whose transaction committed
	restarted, transactions := false, 0
	deadline := time.Now().Add(120 * time.Second)
	for len(done) < txnRecords && time.Now().Before(deadline) {
		if !restarted && len(done) >= txnRecords/2 {
			if err := event("restart-server"); err != nil {
				return err
			}
			restarted = true
		}
		pollCtx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := sess.PollRecords(pollCtx, 25)
		cancel()
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return err
		}
		for _, r := range records {
			out := &kgo.Record{Topic: "franz-txn-out", Partition: r.Partition, Value: []byte("out" + string(r.Value[2:]))}
			sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Fprintln(os.Stderr, "txn produce:", err)
				}
			})
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			// Not retryable (see End's documentation): the records come again to a new session.
			fmt.Fprintln(os.Stderr, "txn end:", err)
		}
		if committed {
			transactions++
			for _, r := range records {
				done[key(r.Partition, r.Offset)] = true
			}
		}
	}
	res.put("transactions", transactions)
	res.check("every input record in a committed transaction", len(done) == txnRecords, len(done))

	committedOut := readTopic(bootstrap, "franz-txn-out", kgo.ReadCommitted(), txnRecords)
	want := []string{}
	for i := 0; i < txnRecords; i++ {
		want = append(want, fmt.Sprintf("out%d", i))
	}
	sort.Strings(want)
	res.check("read_committed sees the output exactly once", fmt.Sprint(committedOut) == fmt.Sprint(want),
		fmt.Sprintf("%d records", len(committedOut)))
	all := readTopic(bootstrap, "franz-txn-out", kgo.ReadUncommitted(), txnRecords+10)
	res.check("read_uncommitted sees the aborted records too", len(all) >= txnRecords+10, len(all))

	// A client of its own: the first one's connections died with the server restart.
	check, err := kgo.NewClient(kgo.SeedBrokers(brokers(bootstrap)...))
	if err != nil {
		return err
	}
	defer check.Close()
	admin = kadm.NewClient(check)
	offsets, err := admin.FetchOffsets(ctx, "franz-txn-group")
	if err != nil {
		return err
	}
	ends, err := admin.ListEndOffsets(ctx, "franz-txn-in")
	if err != nil {
		return err
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, _ := offsets.Lookup("franz-txn-in", o.Partition)
		res.check(fmt.Sprintf("group offset of partition %d", o.Partition), c.At == o.Offset,
			fmt.Sprintf("committed %d, end %d", c.At, o.Offset))
	})
	return nil
}

// readTopic reads every value of a topic from the start with this isolation level, sorted.
func readTopic(bootstrap, topic string, level kgo.IsolationLevel, expected int) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(bootstrap)...), kgo.FetchIsolationLevel(level),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil
	}
	defer cl.Close()
	values := []string{}
	idle := time.Now()
	for time.Since(idle) < 2*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
		if fetches.NumRecords() > 0 {
			idle = time.Now()
		}
		if len(values) >= expected+50 {
			break
		}
	}
	sort.Strings(values)
	return values
}
