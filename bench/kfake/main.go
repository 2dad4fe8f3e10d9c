// kfake (franz-go's in-memory fake Kafka) on one port, as a peer for bench/bench_kfake.py:
// one broker, no logging, optionally persisting to a data dir with or without an fsync per
// write. It prints "ready 127.0.0.1:PORT" once it listens, as this project's server does, and
// stops on SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "port on 127.0.0.1 (0: any free one)")
	dataDir := flag.String("data-dir", "", "persist to this directory (empty: memory only)")
	sync := flag.Bool("sync", false, "fsync every write (with -data-dir)")
	flag.Parse()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(*port)}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	if *sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("ready %s\n", c.ListenAddrs()[0])
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	c.Close()
}
