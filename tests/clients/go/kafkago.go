package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaGoGroupMember is segmentio/kafka-go's ConsumerGroup: each generation hands out
// partitions with their committed offsets; a goroutine per partition reads with a Reader and
// commits each message through the generation (synchronous: kafka-go has no async commit).
// kafka-go has no static membership (group.instance.id).
type kafkaGoGroupMember struct {
	*memberState
	cg     *kafka.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
}

func kafkaGoGroupLibrary(lc *lifecycle) library {
	return library{
		ownedKnown: true, groupType: "classic",
		memberClient: func(name string) string { return name },
		start: func(name, _ string) (member, error) {
			cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
				ID: lc.group, Brokers: brokers(lc.bootstrap), Topics: []string{lc.topic},
				Dialer:            &kafka.Dialer{ClientID: name, Timeout: 10 * time.Second},
				HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second,
				RebalanceTimeout: 10 * time.Second, StartOffset: kafka.FirstOffset,
				// (rejoining after the server restart: kafka-go waits 5 s by default)
				JoinGroupBackoff: 250 * time.Millisecond,
			})
			if err != nil {
				return nil, err
			}
			m := &kafkaGoGroupMember{memberState: newMemberState(name, lc.ledger), cg: cg, done: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			m.cancel = cancel
			go m.loop(ctx, lc)
			return m, nil
		},
	}
}

func (m *kafkaGoGroupMember) loop(ctx context.Context, lc *lifecycle) {
	defer close(m.done)
	for ctx.Err() == nil {
		gen, err := m.cg.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, kafka.ErrGroupClosed) {
				fmt.Fprintf(os.Stderr, "%s next generation: %v\n", m.name, err)
				time.Sleep(100 * time.Millisecond) // kafka-go's own retry is what sets the pace
			}
			continue
		}
		m.calls.Add(1)
		var owned []int32
		for _, a := range gen.Assignments[lc.topic] {
			owned = append(owned, int32(a.ID))
		}
		m.setOwned(owned, nil, true)
		for _, a := range gen.Assignments[lc.topic] {
			partition, offset := a.ID, a.Offset
			gen.Start(func(ctx context.Context) {
				r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers(lc.bootstrap), Topic: lc.topic,
					Partition: partition, MaxWait: 200 * time.Millisecond})
				defer r.Close()
				if offset >= 0 {
					r.SetOffset(offset)
				} else {
					r.SetOffset(kafka.FirstOffset)
				}
				for {
					msg, err := r.ReadMessage(ctx)
					if err != nil {
						return // the generation ended (rebalance or close)
					}
					m.deliver(int32(msg.Partition), msg.Offset)
					if err := gen.CommitOffsets(map[string]map[int]int64{lc.topic: {msg.Partition: msg.Offset + 1}}); err == nil {
						m.ledger.ack(int32(msg.Partition), msg.Offset+1)
					} else {
						fmt.Fprintf(os.Stderr, "%s commit: %v\n", m.name, err)
					}
				}
			})
		}
	}
}

func (m *kafkaGoGroupMember) close() {
	m.cancel()
	m.cg.Close() // leaves the group
	<-m.done
}

// kafkaGoReaderMember is kafka-go's Reader with a GroupID: FetchMessage, then CommitMessages
// (synchronous with CommitInterval 0). The Reader does not tell which partitions it owns.
type kafkaGoReaderMember struct {
	*memberState
	r      *kafka.Reader
	cancel context.CancelFunc
	done   chan struct{}
}

func kafkaGoReaderLibrary(lc *lifecycle) library {
	return library{
		// The Reader commits through whichever generation is current when the commit is
		// sent, so a record read in one generation can be committed in the next by a member
		// that no longer owns its partition, after the new owner read it (the classic
		// protocol, as Kafka's, checks only member and generation): its commits count once
		// read back after a step.
		groupType: "classic", commitUnknown: true, memberClient: func(name string) string { return name },
		start: func(name, _ string) (member, error) {
			r := kafka.NewReader(kafka.ReaderConfig{
				Brokers: brokers(lc.bootstrap), GroupID: lc.group, Topic: lc.topic,
				Dialer:            &kafka.Dialer{ClientID: name, Timeout: 10 * time.Second},
				HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second,
				RebalanceTimeout: 10 * time.Second, StartOffset: kafka.FirstOffset,
				// (rejoining after the server restart: kafka-go waits 5 s by default)
				JoinGroupBackoff: 250 * time.Millisecond,
				MaxWait:          200 * time.Millisecond,
			})
			m := &kafkaGoReaderMember{memberState: newMemberState(name, lc.ledger), r: r, done: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			m.cancel = cancel
			go m.loop(ctx)
			return m, nil
		},
	}
}

func (m *kafkaGoReaderMember) loop(ctx context.Context) {
	defer close(m.done)
	for {
		msg, err := m.r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(os.Stderr, "%s fetch: %v\n", m.name, err)
			continue
		}
		m.deliver(int32(msg.Partition), msg.Offset)
		if err := m.r.CommitMessages(ctx, msg); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "%s commit: %v\n", m.name, err)
		}
	}
}

func (m *kafkaGoReaderMember) close() {
	m.cancel()
	<-m.done
	m.r.Close() // leaves the group
}
