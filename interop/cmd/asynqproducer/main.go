// Command asynqproducer enqueues the bench's Asynq tasks with asynq.Client, one Enqueue per task:
// N no-op tasks as fast as it can (the drain's prefill), no-op tasks for a while (the enqueue
// rate), or one latency task per line of stdin (each line the Unix time it was sent at).
package main

import (
	"bufio"
	"flag"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayed-py/delayed/interop/internal/asynqtasks"
	"github.com/delayed-py/delayed/interop/internal/common"
	"github.com/hibiken/asynq"
)

func main() {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port")
	queueName := flag.String("queue", "default", "the Asynq queue to enqueue into")
	count := flag.Int("n", 0, "enqueue this many no-op tasks, print {\"enqueued\": n}")
	rate := flag.Duration("rate", 0, "rate mode: enqueue no-op tasks for this long, print {\"tasks_per_s\": ...}")
	concurrency := flag.Int("concurrency", 1, "-n and -rate: goroutines enqueueing at once")
	latencyKey := flag.String("latency-key", "", "latency mode: for each line of stdin (a Unix time), enqueue an elapsed task pushing to this list")
	flag.Parse()

	client := asynq.NewClient(asynq.RedisClientOpt{Addr: *address})
	defer client.Close()
	queue := asynq.Queue(*queueName)
	enqueue := func(kind string, payload []byte) {
		if _, err := client.Enqueue(asynq.NewTask(kind, payload), queue); err != nil {
			common.Fatalf("enqueue failed: %v", err)
		}
	}
	switch {
	case *latencyKey != "":
		sent := 0
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() {
			since, err := strconv.ParseFloat(lines.Text(), 64)
			if err != nil {
				common.Fatalf("line %d of stdin is not a Unix time: %q", sent+1, lines.Text())
			}
			enqueue(asynqtasks.Elapsed, asynqtasks.ElapsedPayload{Key: *latencyKey, Since: since}.Encode())
			sent++
		}
		common.PrintJSON(map[string]interface{}{"enqueued": sent})
	case *rate > 0:
		began := time.Now()
		total := inParallel(*concurrency, func(int64) bool { return time.Since(began) < *rate },
			func() { enqueue(asynqtasks.Noop, nil) })
		seconds := time.Since(began).Seconds()
		common.PrintJSON(map[string]interface{}{"tasks_per_s": float64(total) / seconds, "tasks": total, "seconds": seconds})
	default:
		total := inParallel(*concurrency, func(done int64) bool { return done < int64(*count) },
			func() { enqueue(asynqtasks.Noop, nil) })
		common.PrintJSON(map[string]interface{}{"enqueued": total})
	}
}

// inParallel calls enqueue from goroutines while more(tasks taken so far) says so; how many it called.
func inParallel(goroutines int, more func(taken int64) bool, enqueue func()) int64 {
	var taken, done int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for more(atomic.AddInt64(&taken, 1) - 1) {
				enqueue()
				atomic.AddInt64(&done, 1)
			}
		}()
	}
	wg.Wait()
	return done
}
