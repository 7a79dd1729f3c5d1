// Command clusterproducer enqueues PyTasks built by go-delayed's own NewPyTask into a queue on a
// Redis Cluster, through a cluster-aware client (go-redis's ClusterClient): the one way a Go
// producer can feed a queue our Python workers serve on a cluster, since go-delayed's redigo
// pool speaks to one node only.
//
// Each task is what go-delayed's Queue.Enqueue writes: RPUSH <queue> <blob> and RPUSH
// <queue>_noti 1, here in one MULTI/EXEC sent to the node serving the queue's slot (the queue's
// name must carry a hash tag, "{q}", so both keys share that slot).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/delayed-py/delayed/interop/internal/common"
	goredis "github.com/redis/go-redis/v9"
	"github.com/yizhisec/go-delayed/delayed"
)

func main() {
	nodes := flag.String("nodes", "127.0.0.1:7000", "cluster nodes to discover it from, host:port[,host:port...]")
	queueName := flag.String("queue", "{default}", "queue name, with a hash tag")
	funcPath := flag.String("func", "tests.tasks:count", "the Python function, module:func")
	count := flag.Int("n", 1, "how many tasks to enqueue")
	ids := flag.String("ids", "id", "task i gets [PREFIX<start+i>] as its args")
	start := flag.Int("start", 0, "first number of -ids")
	logLevel := flag.String("log-level", "info", "go-delayed's log level on stderr: debug, info, warn or error")
	flag.Parse()

	common.SetupLogger(*logLevel)
	if !strings.Contains(*queueName, "{") || !strings.Contains(*queueName, "}") {
		common.Fatalf("-queue %q has no hash tag: its keys would not share one slot", *queueName)
	}
	ctx := context.Background()
	client := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(*nodes, ",")})
	defer client.Close()
	if err := client.Ping(ctx).Err(); err != nil {
		common.Fatalf("cannot reach the cluster at %s: %v", *nodes, err)
	}
	notiKey := *queueName + "_noti" // go-delayed's Queue.notiKey
	for i := 0; i < *count; i++ {
		task := delayed.NewPyTask(*funcPath, []interface{}{fmt.Sprintf("%s%d", *ids, *start+i)}, nil)
		blob, err := task.Serialize()
		if err != nil {
			common.Fatalf("serialize %d failed: %v", i, err)
		}
		_, err = client.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			pipe.RPush(ctx, *queueName, blob)
			pipe.RPush(ctx, notiKey, 1)
			return nil
		})
		if err != nil {
			common.Fatalf("enqueue %d failed: %v", i, err)
		}
	}
	slot, err := client.ClusterKeySlot(ctx, *queueName).Result()
	if err != nil {
		fmt.Fprintf(os.Stderr, "CLUSTER KEYSLOT failed: %v\n", err)
	}
	common.PrintJSON(map[string]interface{}{"enqueued": *count, "slot": slot})
}
