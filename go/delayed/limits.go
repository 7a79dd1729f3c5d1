package delayed

import (
	"context"
	"fmt"
	"strconv"
)

// Limits per key: a task's RateLimit, ConcurrencyLimit and LimitKey, enforced in Redis for every worker
// of the queue, Python's and ours alike (delayed/wire/limits.py, delayed/protocol/lua/admit.lua): the
// worker that claimed a task admits it just before its call, once its handler is found and its payload
// fits, or the task is held back (out of the queue: waiting for a slot of its key, or in the scheduled
// set until a start is free for it) and runs later. Every script that ends a hold (claim_batch's
// releases, reschedule, bury, give_back, requeue_lost) frees the slot in the same call.

var admitScript = loadScript("admit")

// What admit.lua did with a claimed task (delayed/wire/limits.py's Admission).
const (
	admitted       = "admitted"  // it starts now
	admitWaiting   = "waiting"   // held back for a slot of its key
	admitScheduled = "scheduled" // held back for its rate, in the scheduled set until due
	admitFenced    = "fenced"    // its id no longer held it (a sweeper took it back): not run
)

// taskLimit is what a task's limits ask (delayed/wire/limits.py's Limit): its key, its rate (count per
// periodMS, 0 for none) and its concurrency (0 for none).
type taskLimit struct {
	key       string
	rate      string
	rateCount int
	periodMS  int64
	slots     int
}

// limitOf is the limits of a task with these options, nil for one without any; the key defaults to the
// task's function name (a GoTask's Go name, as Python's defaults to a PyTask's "module:func").
func limitOf(options TaskOptions, funcPath string) *taskLimit {
	if options.RateLimit == "" && options.ConcurrencyLimit == nil {
		return nil
	}
	l := &taskLimit{key: options.LimitKey, rate: options.RateLimit}
	if l.key == "" {
		l.key = funcPath
	}
	if options.RateLimit != "" {
		if count, period, err := RateOf(options.RateLimit); err == nil {
			l.rateCount, l.periodMS = count, period.Milliseconds()
		}
	}
	if options.ConcurrencyLimit != nil {
		l.slots = *options.ConcurrencyLimit
	}
	return l
}

// admit admits the run's task under its limits (none: at once), retrying through Redis outages, or
// holds it back: false when it is not to be called (r.held says why). A stop during an outage leaves
// the task held: the worker's keep-alive lapses and a sweeper requeues it.
func (w *Worker) admit(ctx context.Context, h *holding, c *claim, r *run) bool {
	l := limitOf(r.options, r.funcPath)
	if l == nil {
		return true
	}
	wait := newBackoff(w.outage)
	for {
		admission, due, err := h.admit(ctx, c, l, r.options.ID)
		if err == nil {
			wait.succeeded()
			switch admission {
			case admitted:
				return true
			case admitFenced:
				w.logger.Warn("did not start a task: its id no longer holds it (a sweeper requeued it after the worker's "+
					"keep-alive lapsed)", "func", r.funcPath, "worker", w.id, "held_by", c.id)
			default:
				w.logger.Debug("task held back by its limits", "func", r.funcPath, "limit_key", l.key, "held", admission)
			}
			r.held = &heldBack{admission, due}
			return false
		}
		select {
		case <-w.stop:
			w.logger.Error("could not admit a task before stopping; a sweeper will requeue it", "worker", w.id,
				"held_by", c.id, "error", err)
			h.abandon()
			r.held = &heldBack{}
			return false
		default:
		}
		wait.failed(err, w.stop)
	}
}

// heldBack is how a run's limits held its task back: what admit.lua did ("" if it was not reached),
// and when a task held for its rate is due (unix seconds).
type heldBack struct {
	admission string
	due       float64
}

// admit runs admit.lua for a held task: what it did, and when a task held for its rate is due (unix
// seconds).
func (h *holding) admit(ctx context.Context, c *claim, l *taskLimit, taskID string) (string, float64, error) {
	record := []any{}
	if taskID != "" {
		record = []any{h.queue.keys.task(taskID)}
	}
	keys := h.queue.keys.limitKeys(l.key)
	reply, err := admitScript.run(ctx, h.queue.conn, h.queue.keys, args{
		"running": keys[0], "waiting": keys[1], "starts": keys[2], "reserved": keys[3], "record": record,
		"worker_id": c.id, "blob": c.blob, "limit_key": l.key, "rate_limit": l.rate, "rate_count": l.rateCount,
		"period_ms": l.periodMS, "concurrency": l.slots, "nonce": scheduledMember(scheduledLimited, "")})
	if err != nil {
		return "", 0, err
	}
	items, ok := reply.([]any)
	if !ok || len(items) == 0 {
		return "", 0, InvalidRedisReplyError
	}
	admission, _ := items[0].(string)
	var due float64
	if len(items) > 1 {
		text, _ := items[1].(string)
		if due, err = strconv.ParseFloat(text, 64); err != nil {
			return "", 0, fmt.Errorf("delayed: admit.lua's due time %q: %w", text, err)
		}
	}
	return admission, due, nil
}
