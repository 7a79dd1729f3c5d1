package common

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/keakon/golog/log"
	"github.com/yizhisec/go-delayed/delayed"
)

var (
	workerPool *redis.Pool
	resultsKey string
)

// RunWorker is the main of a recording go-delayed worker (NewQueue, NewWorker, RegisterHandlers,
// Run): it parses the worker flags, prints the starting, online and stopped lines as JSON, and
// returns once SIGHUP, go-delayed's only stop signal, stopped the worker.
func RunWorker(handlers []interface{}) {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port")
	queueName := flag.String("queue", "default", "queue name")
	dequeueTimeout := flag.Duration("dequeue-timeout", time.Second, "how long one BLPOP waits for a notification")
	keepAliveTimeout := flag.Duration("keep-alive-timeout", 0, "lifetime of the worker's keep-alive key; 0: go-delayed's default, 60 s (see interop/README.md: most values break SETEX)")
	keepAliveDuration := flag.Duration("keep-alive-duration", 15*time.Second, "how often the keep-alive key is refreshed")
	flag.StringVar(&resultsKey, "results", "go_results", "Redis list the handlers append their records to")
	logLevel := flag.String("log-level", "info", "go-delayed's log level on stderr: debug, info, warn or error")
	flag.Parse()

	SetupLogger(*logLevel)
	workerPool = Pool(*address)
	queue := delayed.NewQueue(*queueName, workerPool,
		delayed.DequeueTimeout(*dequeueTimeout), delayed.KeepAliveTimeout(*keepAliveTimeout))
	worker := delayed.NewWorker(queue, delayed.KeepAliveDuration(*keepAliveDuration))
	worker.RegisterHandlers(handlers...)

	// go-delayed keeps the worker id unexported; reflect reads a string field without exporting it.
	id := reflect.ValueOf(queue).Elem().FieldByName("workerID").String()
	PrintJSON(map[string]interface{}{"event": "starting", "id": id, "queue": *queueName, "pid": os.Getpid()})
	go announce(id, *queueName)
	worker.Run()
	PrintJSON(map[string]interface{}{"event": "stopped", "id": id})
}

// announce prints the online line once the worker's keep-alive key exists.
func announce(id, queueName string) {
	conn := workerPool.Get()
	defer conn.Close()
	for {
		exists, err := conn.Do("EXISTS", id)
		if err == nil && exists.(int64) == 1 {
			PrintJSON(map[string]interface{}{"event": "online", "id": id, "queue": queueName, "pid": os.Getpid()})
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Record appends what a handler received (each argument's %T, %#v and JSON) to the results list.
func Record(name string, args ...interface{}) {
	described := make([]map[string]interface{}, len(args))
	for i, arg := range args {
		entry := map[string]interface{}{"type": fmt.Sprintf("%T", arg), "go": fmt.Sprintf("%#v", arg)}
		if encoded, err := json.Marshal(arg); err == nil {
			entry["json"] = json.RawMessage(encoded)
		} else {
			entry["json_error"] = err.Error()
		}
		described[i] = entry
	}
	line, _ := json.Marshal(map[string]interface{}{"func": name, "pid": strconv.Itoa(os.Getpid()), "args": described})
	Do("RPUSH", resultsKey, line)
}

// Do sends one command on the worker's pool, logging a failure (a handler has no error to return).
func Do(command string, args ...interface{}) {
	conn := workerPool.Get()
	defer conn.Close()
	if _, err := conn.Do(command, args...); err != nil {
		log.Errorf("%s failed: %v", command, err)
	}
}
