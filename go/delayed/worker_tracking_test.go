package delayed

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/shamaton/msgpack/v2"
)

func goredisMember(score float64, member string) goredis.Z {
	return goredis.Z{Score: score, Member: member}
}

// A result a Python caller reads: msgpack of a struct is a map of its field names.
type area struct {
	Name   string
	Width  int
	Height int
	Area   float64
	Tags   []string
}

func measure(ctx context.Context, name string, width, height int) (area, error) {
	return area{Name: name, Width: width, Height: height, Area: float64(width * height), Tags: []string{"go"}}, nil
}

func TestATrackedTaskRecordsItsResultAsPythonReadsIt(t *testing.T) {
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(measure, failAlways)
	done := enqueueTracked(t, q, NewGoTaskOfFunc(measure, "room", 3, 4), ResultTTL(time.Minute))
	failed := enqueueTracked(t, q, NewGoTaskOfFunc(failAlways, "tracked"), ResultTTL(time.Minute))
	id, failedID := done.ID(), failed.ID()
	runWorker(t, w)
	ctx := context.Background()
	var record map[string]string
	waitFor(t, "the record to say done", func() bool {
		record = server.Client.HGetAll(ctx, q.keys.task(id)).Val()
		return record["status"] == outcomeDone
	})
	want, _ := msgpack.Marshal(area{Name: "room", Width: 3, Height: 4, Area: 12, Tags: []string{"go"}})
	if record["result"] != string(want) {
		t.Errorf("result %q, want the msgpack of the value %q", record["result"], want)
	}
	var decoded map[string]any
	if err := msgpack.Unmarshal([]byte(record["result"]), &decoded); err != nil || decoded["Name"] != "room" || decoded["Area"] != 12.0 {
		t.Errorf("the result reads as %v (%v): a map of the struct's field names", decoded, err)
	}
	if _, err := strconv.ParseFloat(record["seconds"], 64); err != nil || record["note"] != "" || record["finished"] == "" {
		t.Errorf("record %v: want seconds, finished and no note", record)
	}
	if ttl := server.Client.TTL(ctx, q.keys.task(id)).Val(); ttl <= 0 || ttl > 60*time.Second {
		t.Errorf("the done record expires in %v, want its ttl of 60 s", ttl)
	}
	// the Go client reads it as Python's TaskHandle.result() does
	result, err := done.Result(ctx)
	var got area
	if err != nil || result.Decode(&got) != nil || got.Area != 12 || got.Name != "room" {
		t.Errorf("the handle's result: %+v, %v", got, err)
	}
	waitFor(t, "the failed record", func() bool {
		record = server.Client.HGetAll(ctx, q.keys.task(failedID)).Val()
		return record["status"] == string(TaskFailed)
	})
	letters, _ := deadLetters(t, server, q)
	ids := server.Client.XRange(ctx, q.keys.key("dead_letters"), "-", "+").Val()
	if record["error"] != "tracked broke: badly" || len(letters) != 1 || record["letter"] != ids[0].ID {
		t.Errorf("failed record %v, want its error and its letter's id %v", record, ids)
	}
}

func TestAResultMsgpackCannotTakeIsStoredAsItsText(t *testing.T) {
	data, note := packResult(make(chan int))
	var text string
	if err := msgpack.Unmarshal(data, &text); err != nil || !strings.HasPrefix(text, "0x") ||
		!strings.HasPrefix(note, "not serialisable with msgpack") {
		t.Errorf("a channel is stored as %q (%v), note %q", text, err, note)
	}
	data, note = packResult(strings.Repeat("x", maxTaskSize))
	if string(data) != "\xc0" || !strings.Contains(note, "over the queue's max_task_size of 1048576: not stored") {
		t.Errorf("a result over 1 MiB is stored as %d bytes, note %q", len(data), note)
	}
	if data, note = packResult(nil); string(data) != "\xc0" || note != "" {
		t.Errorf("no value is stored as %q, note %q; want msgpack nil", data, note)
	}
}

func TestACancelledTaskDoesNotRun(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	handle := enqueueTracked(t, q, NewGoTaskOfFunc(addNumbers, 1, 2), ResultTTL(time.Minute))
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 3, 4)))
	if cancelled, err := handle.Cancel(context.Background()); err != nil || !cancelled.Cancelled {
		t.Fatalf("cancel: %+v, %v", cancelled, err)
	}
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers)
	stop := runWorker(t, w)
	waitFor(t, "the task after the cancelled one", func() bool { return added.get("3+4") == 1 })
	stop()
	if added.get("1+2") != 0 {
		t.Error("the cancelled task ran")
	}
	if status, err := handle.Status(context.Background()); status != TaskCancelled {
		t.Errorf("its record says %q (%v)", status, err)
	}
}

func TestAPausedQueueGivesNoTaskUntilResumed(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	ctx := context.Background()
	q := testQueue(t, server, "jobs", DequeueTimeout(20*time.Millisecond))
	server.Client.Set(ctx, q.keys.key("paused"), "1", 0)
	logs := &logLines{}
	w := newTestWorker(t, q, Logger(logs.logger()))
	w.RegisterHandlers(addNumbers)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 5, 5)))
	runWorker(t, w)
	logs.waitLog(t, `msg="queue is paused: no new task from it until it is resumed"`)
	if n := server.Client.LLen(ctx, q.keys.name).Val(); n != 1 || added.total() != 0 {
		t.Fatalf("a paused queue gave a task (left %d, ran %d)", n, added.total())
	}
	if n := server.Client.LLen(ctx, q.keys.key("noti")).Val(); n != 1 {
		t.Fatalf("%d notifications left for 1 task in a paused queue", n)
	}
	server.Client.Del(ctx, q.keys.key("paused"))
	waitFor(t, "the task once resumed", func() bool { return added.get("5+5") == 1 })
	logs.waitLog(t, `msg="queue resumed: its tasks are taken again"`)
}

func TestAUniqueTaskFreesItsLockWhenItEnds(t *testing.T) {
	resetHandlers()
	failures = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	locks := map[string]*GoTask{
		"done":    NewGoTaskOfFunc(addNumbers, 7, 7),
		"dead":    NewGoTaskOfFunc(failAlways, "unique"),
		"retried": NewGoTaskOfFunc(failAlways, "again").With(MaxRetries(1), Backoff(time.Hour)),
	}
	for key, task := range locks {
		if _, err := q.EnqueueContext(ctx, task, UniqueFor(time.Hour), UniqueKey(key)); err != nil {
			t.Fatal(err)
		}
	}
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers, failAlways)
	runWorker(t, w)
	waitFor(t, "the locks of the tasks that ended to be freed", func() bool {
		return server.Client.Exists(ctx, q.keys.unique("done"), q.keys.unique("dead")).Val() == 0
	})
	waitFor(t, "the retry to be scheduled", func() bool { return len(scheduled(t, server, q)) == 1 })
	if server.Client.Exists(ctx, q.keys.unique("retried")).Val() != 1 {
		t.Error("the lock of a task that retries was freed")
	}
}

func TestADueScheduledTaskIsMovedIntoTheQueueAndRun(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	due := scheduledMember(scheduledDelayed, string(blob(t, NewGoTaskOfFunc(addNumbers, 8, 9))))
	later := scheduledMember(scheduledDelayed, string(blob(t, NewGoTaskOfFunc(addNumbers, 0, 0))))
	server.Client.ZAdd(ctx, q.keys.key("scheduled"), goredisMember(float64(time.Now().Unix()-1), due),
		goredisMember(float64(time.Now().Add(time.Hour).Unix()), later))
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers)
	runWorker(t, w)
	waitFor(t, "the due task to run", func() bool { return added.get("8+9") == 1 })
	if left := scheduled(t, server, q); len(left) != 1 || left[0].member != later {
		t.Errorf("scheduled set %v: want the later task alone", left)
	}
}

func TestMetricsCountEachOutcomeAsPythonsWorkerDoes(t *testing.T) {
	resetHandlers()
	failures = counter{}
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	registry := prometheus.NewRegistry()
	w := newTestWorker(t, q, Metrics(registry))
	newTestWorker(t, q, Metrics(registry)) // a second worker of the process shares the metrics
	w.RegisterHandlers(addNumbers, failAlways)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 1, 1)), blob(t, NewGoTaskOfFunc(addNumbers, 2, 2)),
		blob(t, NewGoTaskOfFunc(failAlways, "counted").With(MaxRetries(1), Backoff(0))), blob(t, NewGoTask("main.Nobody")))
	runWorker(t, w)
	waitLetters(t, server, q, 2)
	waitFor(t, "the outcomes to be counted", func() bool { return counted(t, registry)["dead"] == 1 })
	got := counted(t, registry)
	want := map[string]float64{"done|" + FuncPath(addNumbers): 2, "retried|" + FuncPath(failAlways): 1,
		"failed|" + FuncPath(failAlways): 1, "dead|": 1, "dead": 1, "runs": 4}
	for key, value := range want {
		if got[key] != value {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], value, got)
		}
	}
}

// counted reads the worker's metrics: delayed_tasks_total by "outcome|function", the dead ones also
// as "dead", and the runs timed as "runs".
func counted(t testing.TB, registry *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, family := range families {
		for _, metric := range family.GetMetric() {
			labels := map[string]string{}
			for _, label := range metric.GetLabel() {
				labels[label.GetName()] = label.GetValue()
			}
			switch family.GetName() {
			case tasksMetricName:
				if labels["queue"] != "jobs" {
					t.Errorf("label queue %q", labels["queue"])
				}
				out[labels["outcome"]+"|"+labels["function"]] += metric.GetCounter().GetValue()
				if labels["outcome"] == "dead" {
					out["dead"] += metric.GetCounter().GetValue()
				}
			case durationMetricName:
				out["runs"] += float64(metric.GetHistogram().GetSampleCount())
				if !reflect.DeepEqual(len(metric.GetHistogram().GetBucket()), len(durationBuckets)) {
					t.Errorf("%d buckets", len(metric.GetHistogram().GetBucket()))
				}
			}
		}
	}
	return out
}

func TestDequeueAndReleaseAsGoDelayed(t *testing.T) {
	server := startRedis(t)
	q := testQueue(t, server, "jobs", DequeueTimeout(10*time.Millisecond))
	w := newTestWorker(t, q)
	w.KeepAlive()
	defer w.Die()
	ctx := context.Background()
	if server.Client.Exists(ctx, w.ID()).Val() != 1 {
		t.Fatal("KeepAlive did not put the worker online")
	}
	if task, err := q.Dequeue(); task != nil || err != nil {
		t.Fatalf("Dequeue of an empty queue: %v, %v", task, err)
	}
	task := NewGoTaskOfFunc(addNumbers, 1, 2)
	enqueue(t, q, blob(t, task))
	got, err := q.Dequeue()
	if err != nil || !got.Equal(task) {
		t.Fatalf("Dequeue: %v, %v", got, err)
	}
	if held := server.Client.HGet(ctx, q.keys.key("processing"), w.ID()).Val(); held != string(blob(t, task)) {
		t.Errorf("held %q under the worker's id", held)
	}
	if err := q.Release(); err != nil {
		t.Fatal(err)
	}
	if server.Client.HLen(ctx, q.keys.key("processing")).Val() != 0 ||
		server.Client.HGet(ctx, q.keys.key("counts"), "done").Val() != "1" {
		t.Error("Release did not release and count the task")
	}
	w.Die()
	if server.Client.Exists(ctx, w.ID()).Val() != 0 {
		t.Error("Die left the keep-alive key")
	}
}

func TestATrackedTaskRunningSaysSoInItsRecord(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(blockUntilReleased)
	id := enqueueTracked(t, q, NewGoTaskOfFunc(blockUntilReleased, "tracked"), ResultTTL(time.Minute)).ID()
	runWorker(t, w)
	<-entered
	ctx := context.Background()
	record := server.Client.HGetAll(ctx, q.keys.task(id)).Val()
	if record["status"] != "running" || record["attempts"] != "1" || !strings.HasPrefix(record["worker"], w.ID()) {
		t.Errorf("the record of a running task: %v", record)
	}
	close(release)
	waitFor(t, "the record to say done", func() bool { return server.Client.HGet(ctx, q.keys.task(id), "status").Val() == "done" })
	want, _ := msgpack.Marshal("tracked")
	if result := server.Client.HGet(ctx, q.keys.task(id), "result").Val(); result != string(want) {
		t.Errorf("result %q, want %q", result, want)
	}
}
