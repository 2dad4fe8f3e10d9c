package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"
)

// saramaMember is IBM/sarama's ConsumerGroup with a ConsumerGroupHandler: Setup sees the
// session's claims, ConsumeClaim marks and commits each message (Commit is synchronous, its
// failures are not returned).
type saramaMember struct {
	*memberState
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan struct{}
}

func saramaLibrary(lc *lifecycle) library {
	return library{
		// Commit() reports failures only on the Errors() channel, if at all.
		static: true, ownedKnown: true, groupType: "classic", commitUnknown: true,
		memberClient: func(name string) string { return name },
		start: func(name, instanceID string) (member, error) {
			cfg := sarama.NewConfig()
			cfg.ClientID = name
			cfg.Version = sarama.V3_6_0_0
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			cfg.Consumer.Offsets.AutoCommit.Enable = false
			cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
			cfg.Consumer.Group.Session.Timeout = 10 * time.Second
			cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
			cfg.Consumer.Group.InstanceId = instanceID
			group, err := sarama.NewConsumerGroup(brokers(lc.bootstrap), lc.group, cfg)
			if err != nil {
				return nil, err
			}
			m := &saramaMember{memberState: newMemberState(name, lc.ledger), group: group, done: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			m.cancel = cancel
			go m.loop(ctx, lc.topic)
			return m, nil
		},
	}
}

func (m *saramaMember) loop(ctx context.Context, topic string) {
	defer close(m.done)
	for ctx.Err() == nil {
		// Consume returns at each rebalance; the loop joins the next generation.
		if err := m.group.Consume(ctx, []string{topic}, (*saramaHandler)(m)); err != nil &&
			!errors.Is(err, sarama.ErrClosedConsumerGroup) && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "%s consume: %v\n", m.name, err)
			time.Sleep(100 * time.Millisecond) // sarama's own backoff sets the pace
		}
	}
}

type saramaHandler saramaMember

func (h *saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.calls.Add(1)
	var owned []int32
	for _, ps := range s.Claims() {
		owned = append(owned, ps...)
	}
	h.setOwned(owned, nil, true)
	return nil
}

func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error {
	h.setOwned(nil, nil, true)
	return nil
}

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-c.Messages():
			if !ok {
				return nil
			}
			h.deliver(msg.Partition, msg.Offset)
			s.MarkMessage(msg, "")
			if len(c.Messages()) == 0 {
				s.Commit()
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (m *saramaMember) close() {
	m.cancel()
	<-m.done
	m.group.Close() // leaves the group, unless static (KIP-345)
}
