package delayed

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"time"
)

// A running worker's ids, the tasks it claimed under them, and how each is settled, through the same
// scripts and arguments as Python's (delayed/worker/holding.py, delayed/protocol/worker_ops.py).
//
// A worker owns twice as many ids as it may hold tasks at once, each its own field in
// <queue>_processing and its own keep-alive key, so any sweeper, Python or Go, requeues what a dead
// worker held. A task stays held until it is settled: released (batched into the next claim's round
// trip), rescheduled or buried (each one fenced script), or given back unstarted. A claim never uses an
// id whose release rides in the same round trip, and a claim whose reply was lost is sent again with
// the same ids: so a resent claim gets back what the lost one claimed (claim_batch returns what an id
// already holds) and never releases a task it had just claimed.

var (
	claimBatchScript = loadScript("claim_batch")
	dequeueScript    = loadScript("dequeue")
	giveBackScript   = loadScript("give_back")
	rescheduleScript = loadScript("reschedule")
	unlockScript     = loadScript("unlock")
	noteClaimsScript = loadScript("note_claims")
)

// noteAfter is how long a task is held before its worker notes, for people, when it claimed it (in its
// description: see noteClaims), so that nothing is written for the many tasks that end sooner.
const noteAfter = time.Second

// claim is a task held under one of the worker's ids: the exact blob claimed, when, and its place
// in claim order (given back in that order).
type claim struct {
	id      string
	blob    string
	claimed time.Time
	seq     uint64
}

// holding is what a worker holds on its queue. Its methods may be called from any goroutine; only
// the worker's claiming goroutine claims.
type holding struct {
	queue *Queue
	ids   []string
	about []any // the worker's description (workerDescription)

	mu        sync.Mutex
	held      map[string]*claim      // id -> its claim, not yet settled
	finished  []string               // ids whose task is done, released with the next claim
	results   map[string]*recordNews // those of them whose task is tracked: what their release writes
	noted     map[string]bool        // ids whose claim time is noted in the description
	unsure    []string               // the claim ids of a claim whose reply was lost: sent again as they were
	unlocks   []uniqueLock           // unique tasks that ended: their locks, freed after the next claim
	abandoned bool                   // tasks were left held at stop: the keep-alive keys must lapse
	paused    bool                   // as the last claim found the queue
	seq       uint64
}

func newHolding(q *Queue, idCount int) *holding {
	return &holding{queue: q, ids: q.keys.workerIDs(idCount), held: map[string]*claim{},
		results: map[string]*recordNews{}, noted: map[string]bool{}}
}

// mainID is the worker's main id: its description is named after it.
func (h *holding) mainID() string { return h.ids[0] }

// claimIDs are the ids to claim count tasks with: those of a claim whose reply was lost, as they
// were, then free ones (an id whose claim note is still in the description is not free).
func (h *holding) claimIDs(count int) []string {
	ids := append([]string(nil), h.unsure...)
	busy := map[string]bool{}
	for _, id := range h.finished {
		busy[id] = true
	}
	for _, id := range h.unsure {
		busy[id] = true
	}
	for _, id := range h.ids {
		if len(ids) >= count {
			break
		}
		if h.held[id] == nil && !busy[id] && !h.noted[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// claim releases the finished tasks and claims up to count more in one round trip (none if there is
// nothing to send; count 0 only releases); whether the queue is paused.
func (h *holding) claim(ctx context.Context, count int) ([]*claim, bool, error) {
	h.mu.Lock()
	var claimIDs []string
	if count > 0 {
		claimIDs = h.claimIDs(count)
	}
	var unnoted []string
	for id := range h.noted {
		if h.held[id] == nil {
			unnoted = append(unnoted, id)
		}
	}
	released, results := h.finished, h.results
	if len(claimIDs) == 0 && len(released) == 0 && len(unnoted) == 0 {
		paused := h.paused
		h.mu.Unlock()
		return nil, paused, nil
	}
	h.finished, h.results = nil, map[string]*recordNews{}
	h.mu.Unlock()

	untracked := make([]any, 0, len(released))
	records, perTracked := []any{}, []any{}
	for _, id := range released {
		if done := results[id]; done != nil {
			records = append(records, h.queue.keys.task(done.id))
			perTracked = append(perTracked, id, string(done.result), done.note, secondsArg(done.seconds))
		} else {
			untracked = append(untracked, id)
		}
	}
	reply, err := claimBatchScript.run(ctx, h.queue.conn, h.queue.keys, args{
		"info": h.queue.keys.workerInfo(h.mainID()), "records": records, "released_count": len(untracked),
		"tracked_count": len(records), "unnoted_count": len(unnoted), "released": untracked,
		"results": perTracked, "unnoted": spread(unnoted), "claim_ids": spread(claimIDs),
	})

	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.finished = append(released, h.finished...) // sent again with the next claim: a release twice is harmless
		for id, done := range results {
			h.results[id] = done
		}
		h.unsure = claimIDs
		return nil, h.paused, err
	}
	for _, id := range unnoted {
		delete(h.noted, id)
	}
	items, ok := reply.([]any)
	if !ok || len(items)%2 != 1 {
		return nil, h.paused, InvalidRedisReplyError
	}
	h.paused = items[0] == int64(1)
	pairs := make([]string, 0, len(items)-1)
	for _, item := range items[1:] {
		text, _ := item.(string)
		pairs = append(pairs, text)
	}
	return h.took(pairs), h.paused, nil
}

// claimNotified holds the task at the head of the queue under one free id, once a notification was
// taken (dequeue.lua, go-delayed's dequeue: a paused queue gets its notification back).
func (h *holding) claimNotified(ctx context.Context) ([]*claim, error) {
	h.mu.Lock()
	ids := h.claimIDs(1)
	h.mu.Unlock()
	if len(ids) == 0 {
		return nil, nil
	}
	reply, err := dequeueScript.run(ctx, h.queue.conn, h.queue.keys, args{"worker_id": ids[0]})
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.unsure = ids
		return nil, err
	}
	blob, ok := reply.(string)
	if !ok {
		h.unsure = nil
		return nil, nil
	}
	return h.took([]string{ids[0], blob}), nil
}

// took holds the claimed (id, blob) pairs (h.mu held).
func (h *holding) took(pairs []string) []*claim {
	h.unsure = nil
	now := time.Now()
	claims := make([]*claim, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		h.seq++
		c := &claim{id: pairs[i], blob: pairs[i+1], claimed: now, seq: h.seq}
		h.held[c.id] = c
		claims = append(claims, c)
	}
	return claims
}

// release marks a claim done: it is released with the next claim's round trip (track: what a
// tracked task's release writes into its record).
func (h *holding) release(c *claim, track *recordNews, lock *uniqueLock) {
	h.mu.Lock()
	delete(h.held, c.id)
	h.finished = append(h.finished, c.id)
	if track != nil {
		h.results[c.id] = track
	}
	if lock != nil {
		h.unlocks = append(h.unlocks, *lock)
	}
	h.mu.Unlock()
}

// apply settles a claim that is not released: rescheduled or buried, one fenced script (held back by its
// limits: nothing, admit.lua moved it). False when
// the claim's id no longer holds its blob (a sweeper requeued it after the keep-alive lapsed).
func (h *holding) apply(ctx context.Context, c *claim, s settlement) (bool, error) {
	var (
		applied bool
		err     error
	)
	switch s.kind {
	case settleReschedule:
		applied, err = h.reschedule(ctx, c, s)
	case settleBury:
		applied, err = bury(ctx, h.queue, c.id, c.blob, s.letter, s.track)
	case settleHeld:
		applied = true // admit.lua moved it: nothing left to send
	}
	if err != nil {
		return false, err
	}
	h.mu.Lock()
	delete(h.held, c.id)
	if s.lock != nil {
		h.unlocks = append(h.unlocks, *s.lock)
	}
	h.mu.Unlock()
	return applied, nil
}

func (h *holding) reschedule(ctx context.Context, c *claim, s settlement) (bool, error) {
	record, message := []any{}, []any{}
	if s.track != nil {
		record, message = []any{h.queue.keys.task(s.track.id)}, []any{s.track.err}
	}
	reply, err := rescheduleScript.run(ctx, h.queue.conn, h.queue.keys, args{
		"record": record, "worker_id": c.id, "claimed": c.blob, "due": secondsArg(s.due),
		"member": scheduledMember(scheduledRetry, s.blob), "error": message,
	})
	return reply == int64(1), err
}

// giveBack returns claimed tasks not started to the head of the queue, in claim order, with their
// notifications (give_back.lua, fenced on id and blob); a tracked task's record says pending again.
func (h *holding) giveBack(ctx context.Context, claims []*claim) error {
	if len(claims) == 0 {
		return nil
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].seq < claims[j].seq })
	fixed := len(giveBackScript.keys) - 1 // its keys before the records: ARGV points at a record by its index in KEYS
	records, held := []any{}, make([]any, 0, 3*len(claims))
	for _, c := range claims {
		index := 0
		if id := trackedID(c.blob); id != "" {
			records = append(records, h.queue.keys.task(id))
			index = fixed + len(records)
		}
		held = append(held, c.id, c.blob, index)
	}
	if _, err := giveBackScript.run(ctx, h.queue.conn, h.queue.keys, args{"records": records, "held": held}); err != nil {
		return err
	}
	h.mu.Lock()
	for _, c := range claims {
		delete(h.held, c.id)
	}
	h.mu.Unlock()
	return nil
}

// trackedID is the id of a tracked task's blob, "" for any other blob.
func trackedID(blob string) string {
	task, err := decodeTask([]byte(blob))
	if err != nil {
		return ""
	}
	switch t := task.(type) {
	case *GoTask:
		return t.options.ID
	case *PyTask:
		return t.options.ID
	}
	return ""
}

// unlock frees the locks of the unique tasks that ended.
func (h *holding) unlock(ctx context.Context) error {
	h.mu.Lock()
	locks := h.unlocks
	h.unlocks = nil
	h.mu.Unlock()
	if len(locks) == 0 {
		return nil
	}
	keys, tokens := make([]any, len(locks)), make([]any, len(locks))
	for i, lock := range locks {
		keys[i], tokens[i] = h.queue.keys.unique(lock.key), lock.token
	}
	if _, err := unlockScript.run(ctx, h.queue.conn, h.queue.keys, args{"locks": keys, "tokens": tokens}); err != nil {
		h.mu.Lock()
		h.unlocks = append(locks, h.unlocks...)
		h.mu.Unlock()
		return err
	}
	return nil
}

// noteClaims notes, in the worker's description, when each task held for noteAfter or more was
// claimed, once. The ids count as noted before the note is sent: one whose reply was lost may have
// landed, and its note must be deleted before its id claims again.
func (h *holding) noteClaims(ctx context.Context) error {
	now := time.Now()
	h.mu.Lock()
	var claims []any
	for id, c := range h.held {
		if age := now.Sub(c.claimed); age >= noteAfter && !h.noted[id] {
			h.noted[id] = true
			claims = append(claims, id, age.Milliseconds())
		}
	}
	h.mu.Unlock()
	if len(claims) == 0 {
		return nil
	}
	_, err := noteClaimsScript.run(ctx, h.queue.conn, h.queue.keys, args{
		"info": h.queue.keys.workerInfo(h.mainID()), "claims": claims})
	return err
}

// releasing says whether finished tasks wait for their release.
func (h *holding) releasing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.finished) > 0
}

// abandon says tasks were left held at stop (their settlement failed, or they still run): the
// worker must not go offline, so that its keep-alive keys lapse and a sweeper requeues them.
func (h *holding) abandon() {
	h.mu.Lock()
	h.abandoned = true
	h.mu.Unlock()
}

// leftHeld is how many tasks the worker still holds (claimed and not settled, or released but not yet
// sent), and whether it left tasks held it no longer counts (abandon).
func (h *holding) leftHeld() (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held) + len(h.finished), h.abandoned
}

// secondsArg is a number of seconds as the scripts take it (a unix time, a run time).
func secondsArg(value float64) string { return strconv.FormatFloat(value, 'f', -1, 64) }
