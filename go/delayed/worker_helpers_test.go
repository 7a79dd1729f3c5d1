package delayed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers of the worker's tests: queues on a test's redis-server, tasks put in as our producers put
// them (the enqueue scripts), a worker run in the background, and waits for events.

// newTestWorker is a worker of q that logs through t.Log (shown for a failing test, or with -v), but
// for a Logger among options.
func newTestWorker(t testing.TB, q *Queue, options ...WorkerOption) *Worker {
	lines := &testLog{t: t}
	t.Cleanup(lines.close) // after the worker's stop: cleanups run last first
	return NewWorker(q, append([]WorkerOption{Logger(slog.New(slog.NewTextHandler(lines, nil)))}, options...)...)
}

// testLog writes to t.Log until the test's cleanup closes it (a goroutine may outlive the test).
type testLog struct {
	t      testing.TB
	mu     sync.Mutex
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

func testQueue(t testing.TB, server *testRedis, name string, options ...QueueOption) *Queue {
	return NewQueueWithClient(name, server.Client, options...)
}

// enqueue puts blobs into q as enqueue.lua does for our producers.
func enqueue(t testing.TB, q *Queue, blobs ...[]byte) {
	t.Helper()
	if _, err := enqueueScript.run(context.Background(), q.conn, q.keys, args{"blobs": spread(blobs)}); err != nil {
		t.Fatal(err)
	}
}

// enqueueTracked enqueues a task with options (ResultTTL: tracked) through the client: its handle.
func enqueueTracked(t testing.TB, q *Queue, task Task, options ...TaskOption) *TaskHandle {
	t.Helper()
	handle, err := q.EnqueueContext(context.Background(), task, options...)
	if err != nil || handle == nil {
		t.Fatalf("enqueue: %v, %v", handle, err)
	}
	return handle
}

// runWorker runs w in the background until the test ends (or the returned stop is called, which
// waits for RunContext to return and gives its error).
func runWorker(t testing.TB, w *Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- w.RunContext(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-result:
			case <-time.After(waitDeadline):
				t.Errorf("the worker did not stop within %v", waitDeadline)
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	waitFor(t, "the worker to go online", func() bool {
		n, _ := w.queue.conn.do(context.Background(), "EXISTS", w.ID())
		return n == int64(1)
	})
	return stop
}

// letterRecord is a dead letter's record as Python reads it (dead_letter.py's record()).
type letterRecord struct {
	Reason    string  `json:"reason"`
	Error     string  `json:"error"`
	Func      *string `json:"func"`
	Queue     string  `json:"queue"`
	Worker    *string `json:"worker"`
	FailedAt  string  `json:"failed_at"`
	Traceback *string `json:"traceback"`
}

// deadLetters reads q's dead letters: each one's record and task blob.
func deadLetters(t testing.TB, server *testRedis, q *Queue) ([]letterRecord, [][]byte) {
	t.Helper()
	entries, err := server.Client.XRange(context.Background(), q.keys.key("dead_letters"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var records []letterRecord
	var blobs [][]byte
	for _, entry := range entries {
		if len(entry.Values) != 2 {
			t.Errorf("letter %s has fields %v, want record and task", entry.ID, entry.Values)
		}
		var record letterRecord
		decoder := json.NewDecoder(strings.NewReader(entry.Values[letterRecordField].(string)))
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(&record); err != nil {
			t.Fatalf("letter %s: its record %q: %v", entry.ID, entry.Values[letterRecordField], err)
		}
		records = append(records, record)
		blobs = append(blobs, []byte(entry.Values[letterTaskField].(string)))
	}
	return records, blobs
}

// waitLetters waits until q has n dead letters, and reads them.
func waitLetters(t testing.TB, server *testRedis, q *Queue, n int) ([]letterRecord, [][]byte) {
	t.Helper()
	waitFor(t, "dead letters", func() bool {
		return server.Client.XLen(context.Background(), q.keys.key("dead_letters")).Val() >= int64(n)
	})
	return deadLetters(t, server, q)
}

// logLines is a logger whose lines a test can wait for.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitLog waits until the log has a line containing text.
func (l *logLines) waitLog(t testing.TB, text string) {
	t.Helper()
	waitFor(t, "a log line with "+text, func() bool { return strings.Contains(l.String(), text) })
}

// counter counts calls by key, and lets a test wait for a count.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *counter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[key]++
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, calls := range c.calls {
		n += calls
	}
	return n
}

var errBoom = errors.New("boom")
