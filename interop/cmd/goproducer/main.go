// Command goproducer enqueues tasks with go-delayed's own NewGoTask / NewPyTask and
// Queue.Enqueue, or measures go-delayed's enqueue rate.
package main

import (
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayed-py/delayed/interop/internal/common"
	"github.com/yizhisec/go-delayed/delayed"
)

// Kwargs is the struct -kwargs-struct sends as a PyTask's kwargs (go-delayed writes it as an array).
type Kwargs struct {
	Tag string
	N   int
}

func main() {
	address := flag.String("redis", "127.0.0.1:6379", "Redis address, host:port")
	queueName := flag.String("queue", "default", "queue name")
	kind := flag.String("kind", "go", "go (NewGoTask) or py (NewPyTask)")
	funcPath := flag.String("func", "main.Noop", "function path: main.Name for Go, module:func for Python")
	count := flag.Int("n", 1, "how many tasks to enqueue")
	argsJSON := flag.String("args", "", "JSON: a GoTask's arg (absent: NewGoTask(func) with no arg), or a PyTask's args (a list, or null)")
	kwargsJSON := flag.String("kwargs", "", "JSON: a PyTask's kwargs (an object, or null; absent: nil)")
	kwargsStruct := flag.Bool("kwargs-struct", false, `PyTask kwargs is the Go struct Kwargs{Tag: "struct", N: 1}`)
	ids := flag.String("ids", "", "give task i the id PREFIX<start+i> as its only argument (Count(id) for Go, [id] as args for Python)")
	start := flag.Int("start", 0, "first number of -ids")
	rate := flag.Duration("rate", 0, "rate mode: enqueue no-arg GoTasks of -func for this long, print {\"tasks_per_s\": ...}")
	concurrency := flag.Int("concurrency", 1, "rate mode: goroutines enqueueing at once")
	logLevel := flag.String("log-level", "info", "go-delayed's log level on stderr: debug, info, warn or error")
	flag.Parse()

	common.SetupLogger(*logLevel)
	queue := delayed.NewQueue(*queueName, common.Pool(*address))
	if *rate > 0 {
		measure(queue, *funcPath, *rate, *concurrency)
		return
	}

	args := parse("-args", *argsJSON)
	var kwargs interface{} = parse("-kwargs", *kwargsJSON)
	if *kwargsStruct {
		kwargs = Kwargs{Tag: "struct", N: 1}
	}
	for i := 0; i < *count; i++ {
		var task delayed.Task
		id := fmt.Sprintf("%s%d", *ids, *start+i)
		switch {
		case *kind == "go" && *ids != "":
			task = delayed.NewGoTask(*funcPath, id)
		case *kind == "go" && *argsJSON == "":
			task = delayed.NewGoTask(*funcPath)
		case *kind == "go":
			task = delayed.NewGoTask(*funcPath, args)
		case *kind == "py" && *ids != "":
			task = delayed.NewPyTask(*funcPath, []interface{}{id}, kwargs)
		case *kind == "py":
			task = delayed.NewPyTask(*funcPath, args, kwargs)
		default:
			common.Fatalf("-kind must be go or py, not %q", *kind)
		}
		if err := queue.Enqueue(task); err != nil {
			common.Fatalf("enqueue %d failed: %v", i, err)
		}
	}
	common.PrintJSON(map[string]interface{}{"enqueued": *count})
}

func parse(name, text string) interface{} {
	if text == "" {
		return nil
	}
	value, err := common.ParseJSON(text)
	if err != nil {
		common.Fatalf("%s is not JSON: %v", name, err)
	}
	return value
}

// measure enqueues NewGoTask(funcPath) from concurrency goroutines for duration d.
func measure(queue *delayed.Queue, funcPath string, d time.Duration, concurrency int) {
	var total int64
	var wg sync.WaitGroup
	began := time.Now()
	deadline := began.Add(d)
	for g := 0; g < concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := queue.Enqueue(delayed.NewGoTask(funcPath)); err != nil {
					common.Fatalf("enqueue failed: %v", err)
				}
				atomic.AddInt64(&total, 1)
			}
		}()
	}
	wg.Wait()
	seconds := time.Since(began).Seconds()
	common.PrintJSON(map[string]interface{}{"tasks_per_s": float64(total) / seconds, "tasks": total, "seconds": seconds})
}
