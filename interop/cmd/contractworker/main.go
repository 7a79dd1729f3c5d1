// Command contractworker is a go-delayed worker with one handler per parameter kind of the contract
// format; each records what it received (%T, %#v and JSON) in a Redis list, for the contract tests.
package main

import (
	"flag"
	"os"
	"reflect"
	"time"

	"github.com/delayed-py/delayed/interop/internal/common"
	"github.com/yizhisec/go-delayed/delayed"
)

func main() {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port")
	queueName := flag.String("queue", "default", "queue name")
	dequeueTimeout := flag.Duration("dequeue-timeout", time.Second, "how long one BLPOP waits for a notification")
	keepAliveTimeout := flag.Duration("keep-alive-timeout", 0, "lifetime of the worker's keep-alive key; 0: go-delayed's default, 60 s (see interop/README.md: most values break SETEX)")
	keepAliveDuration := flag.Duration("keep-alive-duration", 15*time.Second, "how often the keep-alive key is refreshed")
	flag.StringVar(&resultsKey, "results", "go_results", "Redis list the handlers append their records to")
	logLevel := flag.String("log-level", "info", "go-delayed's log level on stderr: debug, info, warn or error")
	flag.Parse()

	common.SetupLogger(*logLevel)
	pool = common.Pool(*address)
	queue := delayed.NewQueue(*queueName, pool,
		delayed.DequeueTimeout(*dequeueTimeout), delayed.KeepAliveTimeout(*keepAliveTimeout))
	worker := delayed.NewWorker(queue, delayed.KeepAliveDuration(*keepAliveDuration))
	worker.RegisterHandlers(handlers...)

	// go-delayed keeps the worker id unexported; reflect reads a string field without exporting it.
	id := reflect.ValueOf(queue).Elem().FieldByName("workerID").String()
	common.PrintJSON(map[string]interface{}{"event": "starting", "id": id, "queue": *queueName, "pid": os.Getpid()})
	go announce(id, *queueName)
	worker.Run() // returns after SIGHUP, go-delayed's only stop signal
	common.PrintJSON(map[string]interface{}{"event": "stopped", "id": id})
}

// announce prints the online line once the worker's keep-alive key exists.
func announce(id, queueName string) {
	conn := pool.Get()
	defer conn.Close()
	for {
		exists, err := conn.Do("EXISTS", id)
		if err == nil && exists.(int64) == 1 {
			common.PrintJSON(map[string]interface{}{"event": "online", "id": id, "queue": queueName, "pid": os.Getpid()})
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
