package delayed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shamaton/msgpack/v2"
)

// Workflows whose steps are GoTasks, run by our Go worker. The Go module has no workflow API: Python
// enqueues workflows (delayed/protocol/workflows.py), and the worker only runs their steps, which the
// scripts that settle each step (claim_batch, bury: flow.lua) move on. These tests enqueue workflows
// as Python's flow_call does, through the same enqueue_flow script, and check that our worker, sweeper
// and client do their part.

// flowInfix names a workflow's hash, <queue>_flow:<id> (Python's keys.FLOW_INFIX; wire_test.go checks the two).
const flowInfix = "_flow:"

var enqueueFlowScript = loadScript("enqueue_flow")

// When a successor takes its input from a step (flow.lua's `next` entries; Python's flow.When).
const (
	onSuccess = "s"
	onFailure = "f"
	always    = "a"
)

// flowStep is one step of a test's workflow: its task, how it takes the results of the steps it waits
// on (inputs: "" for not at all, "one", "list"), and those steps (after, by index) with when each passes on.
type flowStep struct {
	task   *GoTask
	inputs string
	after  []int
	when   string // for every edge of after; default onSuccess
	id     string // its task id; default a random one
}

// testFlow is an enqueued workflow: its hash, and a handle per step.
type testFlow struct {
	key   string
	steps []*TaskHandle
}

// enqueueFlow enqueues steps on q as one workflow through enqueue_flow.lua, with the arguments Python's
// flow_call gives it: final lists the steps whose results are the workflow's.
func enqueueFlow(t *testing.T, q *Queue, final []int, steps ...flowStep) *testFlow {
	t.Helper()
	flow := &testFlow{key: q.name + flowInfix + randomHex(16)}
	records := make([]any, len(steps))
	for i, step := range steps {
		id := step.id
		if id == "" {
			id = randomHex(16)
		}
		flow.steps = append(flow.steps, q.Handle(id))
		records[i] = q.keys.task(flow.steps[i].ID())
	}
	edges := make([]string, len(steps))
	for i, step := range steps {
		when := step.when
		if when == "" {
			when = onSuccess
		}
		for slot, before := range step.after {
			edges[before] += fmt.Sprintf("%s|%s|%d;", when, records[i], slot+1)
		}
	}
	var argv []any
	for i, step := range steps {
		o := step.task.Options()
		o.ID = flow.steps[i].ID()
		blob, err := step.task.withState(o).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		waits := len(step.after)
		argv = append(argv, q.name, step.task.FuncPath(), blob, "", "", waits, step.inputs, waits, edges[i])
	}
	var tails []string
	for _, i := range final {
		tails = append(tails, records[i].(string))
	}
	shape := "one"
	if len(final) > 1 {
		shape = "list"
	}
	reply, err := enqueueFlowScript.run(context.Background(), q.conn, q.keys, args{
		"flow": flow.key, "records": records, "ttl": 600, "final": strings.Join(tails, "\n"), "shape": shape,
		"step_count": len(steps), "steps": argv, "dependencies": []any{},
	})
	if items, _ := reply.([]any); err != nil || len(items) != 1 || items[0] != int64(1) {
		t.Fatalf("enqueue_flow: %v, %v", reply, err)
	}
	return flow
}

// state is the workflow hash's field.
func (f *testFlow) state(t *testing.T, q *Queue, field string) string {
	t.Helper()
	value, _ := q.conn.do(context.Background(), "HGET", f.key, field)
	text, _ := value.(string)
	return text
}

// result waits for step i to end and decodes its result into out.
func (f *testFlow) result(t *testing.T, i int, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	result, err := f.steps[i].Result(ctx)
	if err != nil {
		t.Fatalf("step %d: %v", i, err)
	}
	if err := result.Decode(out); err != nil {
		t.Fatalf("step %d's result %x: %v", i, result.Raw(), err)
	}
}

// Step handlers: each takes, as its last parameter, what the step before it returned.

func flowAddTo(ctx context.Context, base, previous int) (int, error) {
	return base + previous, ctx.Err()
}

func flowSumWith(a, b, previous int) int { return a + b + previous }

func flowDouble(previous int) int { return 2 * previous }

func flowScale(factors []int, previous int) []int {
	scaled := make([]int, len(factors))
	for i, factor := range factors {
		scaled[i] = factor * previous
	}
	return scaled
}

func flowFail(message string) error { return errors.New(message) }

// flowCollect is a group's callback in "pass" mode: each member's result, or how it failed.
func flowCollect(results []any) []string {
	described := make([]string, len(results))
	for i, result := range results {
		if failed, ok := result.(StepFailed); ok {
			described[i] = "failed " + failed.Func + ": " + failed.Error
		} else {
			described[i] = fmt.Sprint(result)
		}
	}
	return described
}

// flowReport is an on_failure step that takes the failed step.
func flowReport(order string, failed *StepFailed) string {
	return order + ": " + failed.String()
}

func TestAGoChainPassesEachStepsResultToTheNextAsItsLastArgument(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers, flowAddTo, flowSumWith, flowDouble, flowScale)
	// addNumbers(1, 2) = 3; its result grows each payload by one argument, whatever the payload was:
	flow := enqueueFlow(t, q, []int{4},
		flowStep{task: NewGoTaskOfFunc(addNumbers, 1, 2)},
		flowStep{task: NewGoTaskOfFunc(flowAddTo, 10), inputs: "one", after: []int{0}},         // one value: [10, 3]
		flowStep{task: NewGoTaskOfFunc(flowSumWith, 100, 200), inputs: "one", after: []int{1}}, // an array: [100, 200, 13]
		flowStep{task: NewGoTaskOfFunc(flowDouble), inputs: "one", after: []int{2}},            // none: 313 itself
		flowStep{task: NewGoTaskOfFunc(flowScale, []any{[]int{1, 2}}), inputs: "one", after: []int{3}})
	if status, err := flow.steps[1].Status(context.Background()); status != TaskWaiting || err != nil {
		t.Fatalf("the second step is %q (%v) before the first ran, want waiting", status, err)
	}
	runWorker(t, w)
	var scaled []int
	flow.result(t, 4, &scaled)
	if fmt.Sprint(scaled) != "[626 1252]" {
		t.Errorf("the chain's last step returned %v, want [626 1252]", scaled)
	}
	var doubled int
	if flow.result(t, 3, &doubled); doubled != 626 {
		t.Errorf("the step without an argument returned %d, want 2*313", doubled)
	}
	waitFor(t, "the workflow to end", func() bool { return flow.state(t, q, "status") == "done" })
	if left := flow.state(t, q, "left"); left != "0" || added.get("1+2") != 1 {
		t.Errorf("%s steps left; the first step ran %d times", left, added.get("1+2"))
	}
	if letters, _ := deadLetters(t, server, q); len(letters) != 0 {
		t.Errorf("dead letters %+v", letters)
	}
}

func TestAGroupCallbackInPassModeTellsResultsFromFailures(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(flowDouble, flowFail, flowCollect)
	// the callback's id ends in f: its edges ("a|jobs_task:...f|2;") name no on_failure step all the same
	flow := enqueueFlow(t, q, []int{3},
		flowStep{task: NewGoTaskOfFunc(flowDouble, 1)},
		flowStep{task: NewGoTaskOfFunc(flowFail, "no luck")},
		flowStep{task: NewGoTaskOfFunc(flowDouble, 3)},
		flowStep{task: NewGoTaskOfFunc(flowCollect), inputs: "list", after: []int{0, 1, 2}, when: always,
			id: "0123456789abcdef0123456789abcdef"})
	runWorker(t, w)
	var described []string
	flow.result(t, 3, &described)
	want := []string{"2", "failed " + FuncPath(flowFail) + ": no luck", "6"}
	if fmt.Sprint(described) != fmt.Sprint(want) {
		t.Errorf("the callback saw %q, want %q", described, want)
	}
	if status, _ := flow.steps[1].Status(context.Background()); status != TaskFailed {
		t.Errorf("the failing member is %q", status)
	}
	waitFor(t, "the workflow to end", func() bool { return flow.state(t, q, "status") != "running" })
	if status := flow.state(t, q, "status"); status != "done" {
		t.Errorf("a workflow whose failure was passed on ended %q, want done", status)
	}
}

func TestAnOnFailureGoStepTakesTheFailedStep(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	w := newTestWorker(t, q)
	w.RegisterHandlers(flowFail, flowReport)
	flow := enqueueFlow(t, q, []int{0},
		flowStep{task: NewGoTaskOfFunc(flowFail, "out of stock")},
		flowStep{task: NewGoTaskOfFunc(flowReport, "order-7"), inputs: "one", after: []int{0}, when: onFailure})
	runWorker(t, w)
	var report string
	flow.result(t, 1, &report)
	want := fmt.Sprintf("order-7: step %s (%s) failed: out of stock", flow.steps[0].ID(), FuncPath(flowFail))
	if report != want {
		t.Errorf("the on_failure step reported %q, want %q", report, want)
	}
}

func TestStepFailedIsMsgpackExt68HoldingItsFieldsByName(t *testing.T) {
	failed := StepFailed{ID: fixedID, Func: "main.Resize", Status: TaskDead, Error: "crash loop"}
	data, err := msgpack.Marshal(failed)
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != 0xc7 || int(data[1]) != len(data)-3 || int8(data[2]) != failedStepExt {
		t.Fatalf("a StepFailed marshals as %x, want ext 8 of type %d", data, failedStepExt)
	}
	var fields map[string]string
	if err := msgpack.Unmarshal(data[3:], &fields); err != nil || len(fields) != 4 || fields["id"] != fixedID ||
		fields["func"] != "main.Resize" || fields["status"] != "dead" || fields["error"] != "crash loop" {
		t.Fatalf("its data reads %v (%v), want the map flow.lua writes", fields, err)
	}
	long := StepFailed{Error: strings.Repeat("x", 70000)}
	for _, value := range []StepFailed{failed, long} {
		var again StepFailed
		var pointer *StepFailed
		var anything []any
		encoded, _ := msgpack.Marshal(value)
		list, _ := msgpack.Marshal([]any{1, value})
		if msgpack.Unmarshal(encoded, &again) != nil || again != value || msgpack.Unmarshal(encoded, &pointer) != nil ||
			*pointer != value || msgpack.Unmarshal(list, &anything) != nil || anything[1] != value {
			t.Errorf("%d bytes of error: decoded %+v, %+v, %v", len(value.Error), again, pointer, anything)
		}
	}
	var number int
	if err := msgpack.Unmarshal(data, &number); err == nil {
		t.Error("a StepFailed decoded into an int")
	}
}

func TestAWaitingStepIsOnlyCancelledAndTheGoClientSaysSo(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	flow := enqueueFlow(t, q, []int{2},
		flowStep{task: NewGoTaskOfFunc(addNumbers, 1, 2)},
		flowStep{task: NewGoTaskOfFunc(flowDouble), inputs: "one", after: []int{0}},
		flowStep{task: NewGoTaskOfFunc(flowDouble), inputs: "one", after: []int{1}})
	ctx := context.Background()
	info, err := flow.steps[1].Info(ctx)
	if err != nil || info.Status != TaskWaiting || info.EnqueuedAt.IsZero() || info.Status.Ended() {
		t.Fatalf("the second step reads %+v (%v): want waiting, since its enqueue", info, err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := flow.steps[1].Result(short); !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "still waiting") {
		t.Fatalf("Result of a waiting step: %v, want the deadline, saying it still waits", err)
	}
	cancelled, err := flow.steps[1].Cancel(ctx)
	if err != nil || !cancelled.Cancelled || cancelled.Status != TaskWaiting {
		t.Fatalf("cancelling the waiting step: %+v, %v", cancelled, err)
	}
	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers, flowDouble)
	runWorker(t, w)
	waitFor(t, "the workflow to end", func() bool { return flow.state(t, q, "left") == "0" })
	for _, step := range flow.steps[1:] { // the step cancelled, and the one that needed it
		if status, _ := step.Status(ctx); status != TaskCancelled || added.get("1+2") != 1 {
			t.Errorf("a step is %q after the first ran %d times, want cancelled", status, added.get("1+2"))
		}
	}
	if n := server.Client.LLen(ctx, q.name).Val(); n != 0 {
		t.Errorf("%d tasks left in the queue: the cancelled step was released", n)
	}
}

func TestTheGoSweeperRequeuesALostStepAndDeadLettersOneInACrashLoop(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	// a step our workers keep dying with: dead-lettered past DefaultMaxCrashes, and the workflow stops
	looping := enqueueFlow(t, q, []int{1},
		flowStep{task: NewGoTaskOfFunc(addNumbers, 5, 5)},
		flowStep{task: NewGoTaskOfFunc(flowDouble), inputs: "one", after: []int{0}})
	for crash := 0; crash <= DefaultMaxCrashes; crash++ {
		claimAs(t, q, ourDeadWorker)
		if _, err := q.RequeueLost(); err != nil {
			t.Fatal(err)
		}
	}
	if status, _ := looping.steps[0].Status(ctx); status != TaskDead {
		t.Fatalf("the step in a crash loop is %q, want dead", status)
	}
	if status, failed := looping.state(t, q, "status"), looping.state(t, q, "failed"); status != "failed" ||
		failed != q.keys.task(looping.steps[0].ID()) || !strings.HasPrefix(looping.state(t, q, "error"), "dead: ") {
		t.Errorf("the workflow is %q, failed at %q (%q)", status, failed, looping.state(t, q, "error"))
	}
	// a step whose worker died once: requeued, and the step after it still waits for it
	lost := enqueueFlow(t, q, []int{1},
		flowStep{task: NewGoTaskOfFunc(addNumbers, 1, 2)},
		flowStep{task: NewGoTaskOfFunc(flowDouble), inputs: "one", after: []int{0}})
	claimAs(t, q, ourDeadWorker)
	if count, err := q.RequeueLost(); count != 1 || err != nil {
		t.Fatalf("RequeueLost %d, %v", count, err)
	}
	if first, _ := lost.steps[0].Status(ctx); first != TaskPending {
		t.Fatalf("the lost step is %q once requeued, want pending", first)
	}
	if second, _ := lost.steps[1].Status(ctx); second != TaskWaiting {
		t.Fatalf("the step after it is %q, want still waiting", second)
	}

	w := newTestWorker(t, q)
	w.RegisterHandlers(addNumbers, flowDouble)
	runWorker(t, w)
	var doubled int
	if lost.result(t, 1, &doubled); doubled != 6 || added.get("1+2") != 1 || added.get("5+5") != 0 {
		t.Errorf("the chain ended with %d; its first step ran %d times, the dead one %d", doubled,
			added.get("1+2"), added.get("5+5"))
	}
	waitFor(t, "the workflow to end", func() bool { return lost.state(t, q, "status") == "done" })
	if status, _ := looping.steps[1].Status(ctx); status != TaskWaiting {
		t.Errorf("the step after the dead one is %q, want waiting", status)
	}
	counts := server.Client.HGetAll(ctx, q.keys.key("counts")).Val()
	if counts["workflows_started"] != "2" || counts["workflows_done"] != "1" || counts["workflows_failed"] != "1" {
		t.Errorf("counts %v", counts)
	}
	if crashes := strconv.Itoa(DefaultMaxCrashes + 1); !strings.Contains(lastLetterError(t, server, q), crashes) {
		t.Errorf("the crash loop's letter says %q", lastLetterError(t, server, q))
	}
}

// lastLetterError is the error of q's newest dead letter.
func lastLetterError(t *testing.T, server *testRedis, q *Queue) string {
	t.Helper()
	letters, _ := deadLetters(t, server, q)
	if len(letters) == 0 {
		return ""
	}
	return letters[len(letters)-1].Error
}
