package delayed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The middleware around a worker's calls (WithMiddleware) and a queue's enqueues (Use): their order,
// the ctx they pass on, CallFrom, errors and panics, and headers from a Python producer.

// recorder keeps what middleware and handlers saw, in order.
type recorder struct {
	mu      sync.Mutex
	entries []string
}

func (r *recorder) add(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(r.entries, fmt.Sprintf(format, a...))
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.entries)
}

// seen is what this file's handlers and middleware record; doneCalls counts their handlers' returns.
var (
	seen      recorder
	doneCalls counter
	// childQueue is where enqueueChild enqueues, with its own ctx.
	childQueue *Queue
)

// passedKey is the context key of the value a middleware passes on to the handler.
type passedKey struct{}

// doubled records what its ctx carries (a middleware's value, the Call), and returns n*2.
func doubled(ctx context.Context, n int) (int, error) {
	call, ok := CallFrom(ctx)
	seen.add("handler %v %v ok=%v attempt=%d", ctx.Value(passedKey{}), n, ok, call.Attempt)
	doneCalls.add("doubled")
	return n * 2, nil
}

// failing fails.
func failing(n int) error {
	doneCalls.add("failing")
	return fmt.Errorf("failing %d", n)
}

// headersOf records the headers of its call, sorted.
func headersOf(ctx context.Context, n int) {
	call, _ := CallFrom(ctx)
	keys := make([]string, 0, len(call.Headers))
	for key, value := range call.Headers {
		keys = append(keys, key+"="+value)
	}
	slices.Sort(keys)
	seen.add("headers %d %s", n, strings.Join(keys, ","))
	doneCalls.add("headersOf")
}

// enqueueChild enqueues headersOf(n+1) with its own ctx, so the queue's middleware can read its Call.
func enqueueChild(ctx context.Context, n int) error {
	_, err := childQueue.EnqueueContext(ctx, NewGoTaskOfFunc(headersOf, n+1))
	return err
}

// named records "NAME before FUNC" and "NAME after VALUE ERROR" around the rest of the call, passing
// on a ctx with its name as passedKey's value when mark is true.
func named(name string, mark bool) Middleware {
	return func(next Next) Next {
		return func(ctx context.Context, call *Call) (any, error) {
			seen.add("%s before %s", name, call.FuncPath[strings.LastIndex(call.FuncPath, ".")+1:])
			if mark {
				ctx = context.WithValue(ctx, passedKey{}, "from "+name)
			}
			value, err := next(ctx, call)
			seen.add("%s after %v %v", name, value, err)
			return value, err
		}
	}
}

func resetMiddlewareTest() {
	seen = recorder{}
	doneCalls = counter{}
}

func TestMiddlewareWrapsEachCallTheFirstOutermostAndPassesItsCtxToTheHandler(t *testing.T) {
	resetMiddlewareTest()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	var calls []*Call
	var mu sync.Mutex
	keep := func(next Next) Next {
		return func(ctx context.Context, call *Call) (any, error) {
			mu.Lock()
			calls = append(calls, call)
			mu.Unlock()
			if got, _ := CallFrom(ctx); got != call {
				t.Error("CallFrom(ctx) in the middleware is not the Call it got")
			}
			return next(ctx, call)
		}
	}
	w := newTestWorker(t, q, WithMiddleware(named("A", true), named("B", false)), WithMiddleware(keep))
	w.RegisterHandlers(doubled)
	handle := enqueueTracked(t, q, NewGoTaskOfFunc(doubled, 21), ResultTTL(time.Minute), MaxRetries(1), Header("tenant", "t1"))
	runWorker(t, w)
	if _, err := handle.Result(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"A before doubled", "B before doubled", "handler from A 21 ok=true attempt=0", "B after 42 <nil>",
		"A after 42 <nil>"}
	if got := seen.seen(); !slices.Equal(got, want) {
		t.Errorf("seen %q, want %q", got, want)
	}
	call := calls[0]
	if call.FuncPath != FuncPath(doubled) || call.ID != handle.ID() || call.Queue != "jobs" || call.Attempt != 0 ||
		call.Headers["tenant"] != "t1" || call.Task == nil || string(call.Task.Payload()) != "\x15" /* msgpack's 21 */ ||
		!slices.Contains(w.hold.ids, call.WorkerID) {
		t.Errorf("the call: %+v (worker ids %v)", call, w.hold.ids)
	}
}

func TestAMiddlewareThatReturnsAnErrorWithoutNextFailsTheTaskAndTheHandlerDoesNotRun(t *testing.T) {
	resetMiddlewareTest()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	refuse := func(next Next) Next {
		return func(ctx context.Context, call *Call) (any, error) {
			return nil, errors.New("refused by middleware")
		}
	}
	w := newTestWorker(t, q, WithMiddleware(named("A", false), refuse))
	w.RegisterHandlers(doubled, failing)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(doubled, 1)))
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 1)
	if records[0].Reason != ReasonFailed || records[0].Error != "refused by middleware" || doneCalls.total() != 0 {
		t.Errorf("letter %+v, handler calls %v", records[0], doneCalls.calls)
	}
	if got := seen.seen(); !slices.Equal(got, []string{"A before doubled", "A after <nil> refused by middleware"}) {
		t.Errorf("seen %q", got)
	}
}

func TestAMiddlewareSeesTheHandlersErrorAndTheTaskIsRetriedAsItsOptionsSay(t *testing.T) {
	resetMiddlewareTest()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q, WithMiddleware(named("A", false)))
	w.RegisterHandlers(failing)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(failing, 7).With(MaxRetries(1), Backoff(0))))
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 1)
	if records[0].Error != "failing 7" || doneCalls.get("failing") != 2 {
		t.Errorf("letter %+v, calls %v", records[0], doneCalls.calls)
	}
	want := []string{"A before failing", "A after <nil> failing 7", "A before failing", "A after <nil> failing 7"}
	if got := seen.seen(); !slices.Equal(got, want) {
		t.Errorf("seen %q, want %q", got, want)
	}
}

func TestAPanickingMiddlewareIsRecoveredAsAPanickingHandlerAndTheWorkerGoesOn(t *testing.T) {
	resetMiddlewareTest()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	panicky := func(next Next) Next {
		return func(ctx context.Context, call *Call) (any, error) {
			if call.Task.Payload()[0] == 1 { // the task of 1 panics; the others run
				panic("middleware broke")
			}
			return next(ctx, call)
		}
	}
	w := newTestWorker(t, q, WithMiddleware(panicky))
	w.RegisterHandlers(doubled)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(doubled, 1)), blob(t, NewGoTaskOfFunc(doubled, 2)))
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 1)
	if records[0].Reason != ReasonFailed || records[0].Error != "panic: middleware broke" || records[0].Traceback == nil ||
		!strings.Contains(*records[0].Traceback, "middleware_test.go") {
		t.Errorf("letter %+v", records[0])
	}
	waitFor(t, "the next task to run", func() bool { return doneCalls.get("doubled") == 1 })
}

func TestAMiddlewarePassingNextACallOfItsOwnGetsAnError(t *testing.T) {
	resetMiddlewareTest()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	foreign := func(next Next) Next {
		return func(ctx context.Context, call *Call) (any, error) {
			return next(ctx, &Call{FuncPath: call.FuncPath})
		}
	}
	w := newTestWorker(t, q, WithMiddleware(foreign))
	w.RegisterHandlers(doubled)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(doubled, 1)))
	runWorker(t, w)
	records, _ := waitLetters(t, server, q, 1)
	if records[0].Error != errForeignCall.Error() || doneCalls.total() != 0 {
		t.Errorf("letter %+v", records[0])
	}
}

func TestEnqueueMiddlewareWrapsEachEnqueueAndAHandlersEnqueueCarriesItsCall(t *testing.T) {
	resetMiddlewareTest()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	childQueue = q
	enqueueNamed := func(name string) EnqueueMiddleware {
		return func(next EnqueueNext) EnqueueNext {
			return func(ctx context.Context, task Task, options []TaskOption) (*TaskHandle, error) {
				seen.add("%s before", name)
				handle, err := next(ctx, task, options)
				seen.add("%s after tracked=%v %v", name, handle != nil, err)
				return handle, err
			}
		}
	}
	// the running task's id, if the enqueue is a handler's, as a header of the task it enqueues
	parent := func(next EnqueueNext) EnqueueNext {
		return func(ctx context.Context, task Task, options []TaskOption) (*TaskHandle, error) {
			options = append(options, Header("x-from", "producer"))
			if call, ok := CallFrom(ctx); ok {
				options = append(options, Header("parent", call.ID))
			}
			return next(ctx, task, options)
		}
	}
	q.Use(enqueueNamed("A"))
	q.Use(enqueueNamed("B"), parent)
	handle := enqueueTracked(t, q, NewGoTaskOfFunc(enqueueChild, 1).With(Header("tenant", "t1")), ResultTTL(time.Minute))
	if got, want := seen.seen(), []string{"A before", "B before", "B after tracked=true <nil>", "A after tracked=true <nil>"}; !slices.Equal(got, want) {
		t.Errorf("seen %q, want %q", got, want)
	}
	w := newTestWorker(t, q)
	w.RegisterHandlers(enqueueChild, headersOf)
	runWorker(t, w)
	waitFor(t, "the child task to run", func() bool { return doneCalls.get("headersOf") == 1 })
	if got := seen.seen(); got[len(got)-1] != "headers 2 parent="+handle.ID()+",x-from=producer" {
		t.Errorf("seen %q", got)
	}
	if err := q.Enqueue(NewGoTaskOfFunc(headersOf, 5)); err != nil { // Enqueue goes through them too
		t.Fatal(err)
	}
	waitFor(t, "the third task to run", func() bool { return doneCalls.get("headersOf") == 2 })
	if got := seen.seen(); got[len(got)-1] != "headers 5 x-from=producer" {
		t.Errorf("seen %q", got)
	}
}

// python is the project's Python (its virtualenv, which make test sets up), or "" without one.
func python(t *testing.T) string {
	path, err := filepath.Abs(filepath.Join("..", "..", ".venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

func TestHeadersFromAPythonProducerReachTheCall(t *testing.T) {
	py := python(t)
	if py == "" {
		t.Skip("no ../../.venv/bin/python (make .venv/.installed makes it): the Python producer cannot run")
	}
	resetMiddlewareTest()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	script := "import sys, redis; from delayed import GoTask, Queue\n" +
		"Queue('jobs', redis.Redis.from_url(sys.argv[1])).enqueue(GoTask(sys.argv[2], 3, headers={'traceparent': '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'tenant': 't1'}))"
	if output, err := exec.Command(py, "-c", script, "redis://"+server.Addr, FuncPath(headersOf)).CombinedOutput(); err != nil {
		t.Fatalf("the Python producer: %v\n%s", err, output)
	}
	w := newTestWorker(t, q)
	w.RegisterHandlers(headersOf)
	runWorker(t, w)
	waitFor(t, "the task to run", func() bool { return doneCalls.get("headersOf") == 1 })
	want := "headers 3 tenant=t1,traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if got := seen.seen(); !slices.Equal(got, []string{want}) {
		t.Errorf("seen %q, want %q", got, want)
	}
}
