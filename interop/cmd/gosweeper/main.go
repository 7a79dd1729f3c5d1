// Command gosweeper runs go-delayed's Sweeper (Queue.RequeueLost on each queue, every interval).
package main

import (
	"flag"
	"strings"
	"time"

	"github.com/delayed-py/delayed/interop/internal/common"
	"github.com/yizhisec/go-delayed/delayed"
)

func main() {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port")
	queueNames := flag.String("queues", "default", "comma-separated queue names")
	interval := flag.Duration("interval", time.Minute, "time between sweeps")
	once := flag.Bool("once", false, "sweep each queue once, print {\"queue\": ..., \"requeued\": n} per queue, exit")
	logLevel := flag.String("log-level", "info", "go-delayed's log level on stderr: debug, info, warn or error")
	flag.Parse()

	common.SetupLogger(*logLevel)
	pool := common.Pool(*address)
	names := strings.Split(*queueNames, ",")
	var queues []*delayed.Queue
	for _, name := range names {
		queues = append(queues, delayed.NewQueue(name, pool))
	}
	if *once {
		for i, queue := range queues {
			count, err := queue.RequeueLost()
			if err != nil {
				common.Fatalf("RequeueLost on %s failed: %v", names[i], err)
			}
			common.PrintJSON(map[string]interface{}{"queue": names[i], "requeued": count})
		}
		return
	}
	sweeper := delayed.NewSweeper(queues...)
	sweeper.SetInterval(*interval)
	common.PrintJSON(map[string]interface{}{"event": "sweeping", "queues": *queueNames, "interval": interval.String()})
	sweeper.Run() // until killed: go-delayed's Sweeper has no signal handling
}
