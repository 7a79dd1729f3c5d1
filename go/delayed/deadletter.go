package delayed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Reasons a task is dead-lettered, as delayed/wire/dead_letter.py names them (its REASONS say what
// each means; ReasonMalformed and ReasonPyTask are in task.go). A letter's record says its reason, so
// `delayed dead list --reason` and the dashboard pick letters of Go workers and Python ones alike.
const (
	ReasonNotAllowed   = "not_allowed"   // no handler is registered for its function
	ReasonBadArguments = "bad_arguments" // its payload does not decode into the handler's parameters: not called
	ReasonFailed       = "failed"        // its handler returned an error or panicked, with no retries left
	ReasonTimedOut     = "timed_out"     // its handler ran past its time limit, with no retries left
	ReasonTooLarge     = "too_large"     // its blob is over maxTaskSize: not even decoded
	ReasonCrashLoop    = "crash_loop"    // workers died holding it more often than a sweeper's max crashes
	ReasonExpired      = "expired"       // its expiry passed before a worker came to start it: not called
)

// statusOf is the status a tracked task's record ends in, by its letter's reason (dead_letter.py's
// STATUS_OF): failed once a worker chose its function (it failed, timed out, or did not take the
// arguments), dead if it never got that far.
func statusOf(reason string) string {
	switch reason {
	case ReasonBadArguments, ReasonFailed, ReasonTimedOut:
		return string(TaskFailed)
	}
	return string(TaskDead)
}

// expiredError is the error of an expired task's letter (dead_letter.py's expired_error): when it
// expired, and how long before a worker came to start it.
func expiredError(expiresAt float64, now time.Time) string {
	moment := time.Unix(0, int64(expiresAt*1e9)).UTC().Format("2006-01-02T15:04:05.000+00:00")
	return fmt.Sprintf("it expired at %s, %.3f s before a worker came to start it", moment, float64(now.UnixNano())/1e9-expiresAt)
}

// Bounds of a letter's record, as dead_letter.py's MAX_ERROR and MAX_TRACEBACK: characters of its
// error (one line) and of its func path, and of its traceback (its end).
const (
	maxLetterError     = 1000
	maxLetterTraceback = 8192
)

// How many letters are kept: dead_letters.py's DeadLetters defaults (a queue of ours keeps 10,000
// letters, each at most 7 days; writing one trims the rest); the stream fields of a letter.
const (
	defaultDeadMax    = 10_000
	defaultDeadMaxAge = 7 * 24 * time.Hour
	letterRecordField = "record"
	letterTaskField   = "task"
)

// letter is a dead letter's record (dead_letter.py's record()), its JSON keys in the same order.
type letter struct {
	Reason    string  `json:"reason"`
	Error     string  `json:"error"`
	Func      *string `json:"func"`
	Queue     string  `json:"queue"`
	Worker    *string `json:"worker"`
	FailedAt  string  `json:"failed_at"`
	Traceback string  `json:"traceback,omitempty"`
}

// letterFields are the stream fields of one letter: its record (JSON) and the raw blob. funcPath and
// worker "" are null; traceback "" is left out.
func letterFields(reason, message, funcPath, queue, worker, traceback, blob string, at time.Time) []any {
	record := letter{
		Reason:   reason,
		Error:    oneLine(message, maxLetterError),
		Queue:    queue,
		FailedAt: at.UTC().Format("2006-01-02T15:04:05.000+00:00"),
	}
	if funcPath != "" {
		line := oneLine(funcPath, maxLetterError)
		record.Func = &line
	}
	if worker != "" {
		record.Worker = &worker
	}
	if traceback != "" {
		record.Traceback = lastRunes(traceback, maxLetterTraceback)
	}
	var out bytes.Buffer
	encoder := json.NewEncoder(&out)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(record); err != nil {
		panic("delayed: a letter's record did not encode: " + err.Error()) // strings only: it cannot fail
	}
	return []any{letterRecordField, strings.TrimSuffix(out.String(), "\n"), letterTaskField, blob}
}

// oneLine is text with its runs of whitespace (newlines included) made one space, cut to limit
// characters with "..." (errors.py's one_line).
func oneLine(text string, limit int) string {
	if utf8.RuneCountInString(text) > 4*limit {
		text = string([]rune(text)[:4*limit])
	}
	text = strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(text) <= limit {
		return text
	}
	return string([]rune(text)[:limit-3]) + "..."
}

func lastRunes(text string, limit int) string {
	runes := []rune(text)
	if len(runes) <= limit {
		return text
	}
	return string(runes[len(runes)-limit:])
}

var buryScript = loadScript("bury")

// bury writes a dead letter (letterFields) and releases the task workerID holds, atomically, trimming
// the letters to the queue's bounds; a tracked task's record ends as its reason's status, with the
// error and the letter's id. Fenced: false, and nothing done, if workerID no longer holds claimed
// (a sweeper took it).
func bury(ctx context.Context, q *Queue, workerID, claimed string, fields []any, track *recordNews) (bool, error) {
	status, message, record := "", "", []any{}
	if track != nil {
		status, message, record = track.status, track.err, []any{q.keys.task(track.id)}
	}
	reply, err := buryScript.run(ctx, q.conn, q.keys, args{
		"record": record, "worker_id": workerID, "claimed": claimed, "dead_max": defaultDeadMax,
		"dead_max_age_ms": defaultDeadMaxAge.Milliseconds(), "status": status, "error": message, "letter": fields,
	})
	return reply == int64(1), err
}
