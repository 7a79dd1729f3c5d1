package delayed

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"time"

	"github.com/shamaton/msgpack/v2"
)

// How a worker settles each task it ran or refused, as delayed/worker/decide.py does for Python's:
//
//	cancelled (its cancel was heard)  release, whatever it returned: the script ends its record cancelled
//	returned                          release (a tracked task's record gets the value)
//	failed (error, panic, time limit),
//	  max_retries left                reschedule after the task's backoff, attempt+1 in its blob
//	  none left                       dead letter, reason failed (timed_out past its time limit)
//	refused before its call           dead letter, for its reason (malformed, py_task, expired, not_allowed, bad_arguments)
//	held back by its limits           nothing more: admit.lua moved it out of processing (limits.go)
//
// A retry's blob no longer carries the task's ExpiresAt: a task that started once is not expired by its
// retries. A task that ended (released or dead-lettered) releases its unique lock.

// Outcomes of a settlement: the metrics' outcome label, one each (Python's Outcome). All but retried
// are the status a tracked task's record ends in.
const (
	outcomeDone      = string(TaskDone)
	outcomeRetried   = "retried"
	outcomeFailed    = string(TaskFailed)
	outcomeDead      = string(TaskDead)
	outcomeHeld      = "held" // not run: its limits held it back at its start (it runs later), or it was fenced off
	outcomeCancelled = string(TaskCancelled)
)

// nilResult is msgpack's nil: the result a record holds for a handler that returned no value, or one not stored.
var nilResult = []byte{0xc0}

type settleKind int

const (
	settleRelease    settleKind = iota // done: released with the next claim's round trip
	settleReschedule                   // a retry later: blob waits in the scheduled set until due
	settleBury                         // a dead letter
	settleHeld                         // held back by its limits: admit.lua moved it, nothing left to send
)

// settlement is how a held task leaves the worker.
type settlement struct {
	kind    settleKind
	outcome string
	blob    string  // reschedule: the next attempt's blob
	due     float64 // reschedule, held for its rate: unix seconds
	reason  string  // bury
	letter  []any   // bury: its stream fields
	track   *recordNews
	lock    *uniqueLock
}

// recordNews is what a tracked task's settlement writes into its record (tracking.py's Tracked): on
// release its result (msgpack) and a note, on a retry the error, on a dead letter the status and error.
type recordNews struct {
	id      string
	seconds float64
	result  []byte
	note    string
	err     string
	status  string
}

// uniqueLock is a unique task's lock: its key and the task's token (unlock.lua frees it only if it
// still holds that token).
type uniqueLock struct{ key, token string }

// run is one claimed task on its way through the worker: its blob, then its decoded task and
// handler, then what happened (returned value, failed err, or refused before its call).
type run struct {
	queue     *Queue
	blob      string
	workerID  string      // the id the task is held under ("" under Execute)
	task      *GoTask     // nil if the blob is no GoTask this worker runs
	options   TaskOptions // the decoded task's (a PyTask's too)
	funcPath  string      // where known
	handler   *Handler
	args      []reflect.Value // the handler's, its payload decoded
	refusal   *refusal
	held      *heldBack // its limits held it back before its call
	value     any
	err       error
	stack     string  // a panic's goroutine stack
	timedOut  bool    // ran past its time limit
	limit     float64 // seconds: its time limit (0: none)
	seconds   float64 // how long its call ran
	cancelled bool    // its cancel was heard before or during its call
}

// refusal is why a task is not called: its dead letter's reason and error.
type refusal struct{ reason, message string }

func (r *run) refuse(reason, message string) { r.refusal = &refusal{reason, message} }

// decide settles a run (pure but for the clock and the backoff's jitter): worker is the worker's id,
// written into dead letters.
func decide(r *run, worker string, now time.Time) settlement {
	var s settlement
	switch {
	case r.held != nil:
		return settlement{kind: settleHeld, outcome: outcomeHeld, due: r.held.due}
	case r.refusal != nil:
		s = r.letter(r.refusal.reason, r.refusal.message, "", worker, now)
	case r.cancelled: // its record ends cancelled (tracking.lua), its result not kept
		s = settlement{kind: settleRelease, outcome: outcomeCancelled,
			track: &recordNews{id: r.options.ID, seconds: r.seconds, result: nilResult}}
	case r.err == nil:
		s = settlement{kind: settleRelease, outcome: outcomeDone}
		if r.options.ID != "" {
			result, note := packResult(r.value)
			s.track = &recordNews{id: r.options.ID, seconds: r.seconds, result: result, note: note}
		}
	default:
		s = r.failed(worker, now)
	}
	if r.options.UniqueKey != "" && s.kind != settleReschedule {
		s.lock = &uniqueLock{r.options.UniqueKey, r.options.UniqueToken}
	}
	return s
}

// failed settles a run whose handler failed: a retry if its task has one left, else its dead letter.
func (r *run) failed(worker string, now time.Time) settlement {
	message := r.errorText()
	if retries := r.options.MaxRetries; retries != nil && r.options.Attempt < *retries {
		next := r.options
		next.Attempt++
		next.ExpiresAt = nil // it started once: its retries do not expire
		blob, err := r.task.withState(next).Serialize()
		if err == nil {
			due := float64(now.UnixNano())/1e9 + backoffSeconds(r.options, next.Attempt)
			s := settlement{kind: settleReschedule, outcome: outcomeRetried, blob: string(blob), due: due}
			if r.options.ID != "" {
				s.track = &recordNews{id: r.options.ID, seconds: r.seconds, err: message}
			}
			return s
		}
		message = fmt.Sprintf("%s (and its retry's blob could not be written: %v)", message, err)
	}
	reason := ReasonFailed
	if r.timedOut {
		reason = ReasonTimedOut
	}
	return r.letter(reason, message, r.traceback(), worker, now)
}

// letter is the run's dead letter, for reason.
func (r *run) letter(reason, message, traceback, worker string, now time.Time) settlement {
	s := settlement{kind: settleBury, outcome: statusOf(reason), reason: reason,
		letter: letterFields(reason, message, r.funcPath, r.queue.name, worker, traceback, r.blob, now)}
	if r.options.ID != "" {
		s.track = &recordNews{id: r.options.ID, status: statusOf(reason), err: oneLine(message, maxLetterError)}
	}
	return s
}

// errorText is what a failed run's letter and record say: the error, "panic: ..." for a panic, or
// the time limit it ran past (worded as Python's TimeLimitExceeded).
func (r *run) errorText() string {
	switch {
	case r.timedOut:
		return "TimeLimitExceeded: ran longer than its time limit of " + strconv.FormatFloat(r.limit, 'g', -1, 64) + " s"
	}
	return errorString(r.err)
}

// traceback is a failed run's panic stack, or an error's own detail where "%+v" gives more than its
// message (errors that carry their stack do).
func (r *run) traceback() string {
	if r.stack != "" {
		return r.err.Error() + "\n\n" + r.stack
	}
	if r.err == nil || r.timedOut {
		return ""
	}
	if detail := fmt.Sprintf("%+v", r.err); detail != errorString(r.err) {
		return detail
	}
	return ""
}

// errorString is err's message; it never panics, even for an error whose Error() does.
func errorString(err error) (text string) {
	defer func() {
		if p := recover(); p != nil {
			text = fmt.Sprintf("<%T whose Error() panicked: %v>", err, p)
		}
	}()
	return err.Error()
}

// backoffSeconds is how long a failed task waits before its attempt number attempt+1: its Backoff
// option, else Sidekiq's curve as Python's exponential_with_jitter has it: attempt**4 + 15 s plus up
// to 10 * (attempt + 1) s of jitter (16-35 s after the first failure, about 5 minutes after the fourth).
func backoffSeconds(options TaskOptions, attempt int) float64 {
	if options.Backoff != nil {
		return *options.Backoff
	}
	a := float64(attempt)
	return a*a*a*a + 15 + rand.Float64()*10*(a+1)
}

// packResult is a handler's value as a record keeps it: msgpack (shamaton's Marshal: a struct as a
// map of its field names, so Python reads them by name), with a note when it could not be: a value
// msgpack cannot take is stored as its %v text, one over maxTaskSize bytes (a task's bound) not at all
// (tracking.py's pack_result).
func packResult(value any) (data []byte, note string) {
	data, err := marshalResult(value)
	if err != nil {
		note = fmt.Sprintf("not serialisable with msgpack (%v): stored as its %%v text", err)
		if data, err = marshalResult(fmt.Sprintf("%v", value)); err != nil {
			data, note = nilResult, fmt.Sprintf("not serialisable with msgpack, nor its text (%v): not stored", err)
		}
	}
	if len(data) > maxTaskSize {
		return nilResult, fmt.Sprintf("%d bytes, over the queue's max_task_size of %d: not stored", len(data), maxTaskSize)
	}
	return data, note
}

// marshalResult is msgpack.Marshal, a panic of the encoder (or of a value's method) made an error.
func marshalResult(value any) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			data, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	return msgpack.Marshal(value)
}
