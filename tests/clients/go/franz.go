package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzMember is a kgo group consumer: polls with rebalances blocked while it processes
// (BlockRebalanceOnPoll), commits what it polled with CommitOffsetsSync and CommitOffsets in
// turn, and commits synchronously in OnPartitionsRevoked.
type franzMember struct {
	*memberState
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func franzLibrary(lc *lifecycle, nextGen bool) library {
	groupType := "classic"
	if nextGen {
		groupType = "consumer"
	}
	return library{
		// franz-go's KIP-848 static leave (epoch -2) carries no InstanceID, which Kafka refuses
		// (INVALID_REQUEST "InstanceId can't be null."): the member then stays until its session
		// times out, and its next incarnation gets UNRELEASED_INSTANCE_ID meanwhile.
		static: !nextGen, ownedKnown: true, groupType: groupType,
		memberClient: func(name string) string { return name },
		start: func(name, instanceID string) (member, error) {
			return startFranz(lc, name, instanceID, nextGen)
		},
	}
}

func startFranz(lc *lifecycle, name, instanceID string, nextGen bool) (member, error) {
	m := &franzMember{memberState: newMemberState(name, lc.ledger), done: make(chan struct{})}
	topic := lc.topic
	onGone := func(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
		m.calls.Add(1)
		m.setOwned(nil, lost[topic], false)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers(lc.bootstrap)...), kgo.ClientID(name),
		kgo.ConsumerGroup(lc.group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			m.calls.Add(1)
			m.setOwned(assigned[topic], nil, false)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			m.commit(ctx, cl, true)
			onGone(ctx, cl, revoked)
		}),
		kgo.OnPartitionsLost(onGone),
	}
	if nextGen {
		// KIP-848: the broker assigns (the sticky balancer maps to its "uniform" assignor).
		opts = append(opts, kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.HeartbeatInterval(500*time.Millisecond), kgo.SessionTimeout(10*time.Second))
	}
	if instanceID != "" {
		opts = append(opts, kgo.InstanceID(instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.loop(ctx)
	return m, nil
}

func (m *franzMember) loop(ctx context.Context) {
	defer close(m.done)
	for polls := 0; ctx.Err() == nil; polls++ {
		fetches := m.cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "%s fetch %s/%d: %v\n", m.name, t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) { m.deliver(r.Partition, r.Offset) })
		if fetches.NumRecords() > 0 {
			m.commit(ctx, m.cl, polls%2 == 0)
		}
		m.cl.AllowRebalance()
	}
}

// commit commits every polled record (all processed), synchronously or not.
func (m *franzMember) commit(ctx context.Context, cl *kgo.Client, sync bool) {
	offsets := cl.UncommittedOffsets()
	if len(offsets) == 0 {
		return
	}
	onDone := func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s commit: %v\n", m.name, err)
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 {
					m.ledger.ack(p.Partition, offsets[t.Topic][p.Partition].Offset)
				} else {
					fmt.Fprintf(os.Stderr, "%s commit %s/%d: error %d\n", m.name, t.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	}
	if sync {
		cl.CommitOffsetsSync(ctx, offsets, onDone)
	} else {
		cl.CommitOffsets(ctx, offsets, onDone)
	}
}

func (m *franzMember) close() {
	m.cancel()
	<-m.done
	// What was polled last is processed: commit it before leaving.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m.commit(ctx, m.cl, true)
	m.cl.Close()
}
