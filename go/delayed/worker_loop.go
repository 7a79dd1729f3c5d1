package delayed

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The worker's loop: one goroutine claims (the dispatcher), Concurrency goroutines run tasks (the
// slots). Claimed tasks wait in the ready channel, in claim order, for a free slot; the dispatcher
// keeps a few more ready than there are free slots (see lookahead), so a slot that frees starts one
// without a round trip, and gives them back to the queue once none started for batchPatience (a slow
// task holds the slots), where another worker may take them. Every slot tells the dispatcher when it
// finished a task: its release rides on the next claim. (Python's worker: loop.py, batch.py.)

const (
	// batchPatience is how long claimed tasks may wait, none of them starting, before they go back
	// to the queue (Python's BATCH_TIME).
	batchPatience = 20 * time.Millisecond
	// pollInterval is how long a claim waits for a task on an empty queue while tasks run, so that
	// their releases are not held up by a long wait (Python's POLL).
	pollInterval = 50 * time.Millisecond
)

type dispatcher struct {
	w     *Worker
	hold  *holding
	ready chan *claim   // claimed, not started: the slots take them in order
	wake  chan struct{} // a slot finished a task

	base      time.Time
	lastStart atomic.Int64 // ns since base: when a task last started (or was claimed into an empty ready)
	running   atomic.Int64 // slots running a task
	unsettled atomic.Int64 // tasks started and not yet settled
	stopping  atomic.Bool  // no slot starts a task any more
	closed    atomic.Bool  // the worker is gone: settlements are dropped
	look      lookahead
	wait      *backoff
	paused    bool // as the last claim found the queue

	mu        sync.Mutex
	unstarted []*claim // taken by a slot after the stop: given back
	slots     sync.WaitGroup
	ctx       context.Context // the handlers' context, cancelled once the grace period ends
	cancel    context.CancelFunc
}

func newDispatcher(w *Worker) *dispatcher {
	d := &dispatcher{w: w, hold: w.hold, ready: make(chan *claim, len(w.hold.ids)), wake: make(chan struct{}, 1),
		base: time.Now(), look: lookahead{slots: w.concurrency, most: w.batch}, wait: newBackoff(w.outage)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d
}

// run claims and runs tasks until the worker stops, then drains: the tasks left running when the
// grace period ended.
func (d *dispatcher) run() int {
	for range d.w.concurrency {
		d.slots.Add(1)
		go d.slot()
	}
	for d.round() {
	}
	return d.drain()
}

func (d *dispatcher) now() int64 { return int64(time.Since(d.base)) }

func (d *dispatcher) stopped() bool {
	select {
	case <-d.w.stop:
		return true
	default:
		return false
	}
}

// round is one turn of the dispatcher: give back what waited too long, claim what the slots will
// want soon (releasing what finished), or wait; false once the worker stops.
func (d *dispatcher) round() bool {
	if d.stopped() {
		return false
	}
	waiting := len(d.ready)
	if waiting > 0 && time.Duration(d.now()-d.lastStart.Load()) >= batchPatience {
		late := d.takeReady()
		d.w.logger.Debug("gave back claimed tasks none of which started within the patience: the slots are busy",
			"worker", d.w.id, "tasks", len(late), "patience", batchPatience)
		d.giveBack(late)
		d.look.gaveBack()
		return true
	}
	free := d.w.concurrency - int(d.running.Load())
	ahead := d.look.ahead()
	want := min(d.w.batch, free+ahead-waiting)
	if want <= 0 || (free <= waiting && 2*waiting > ahead) {
		d.await(waiting > 0) // the slots have enough to do until one finishes
		return true
	}
	claims, paused, err := d.hold.claim(context.Background(), want)
	if err == nil {
		err = d.hold.unlock(context.Background())
	}
	if err != nil {
		d.wait.failed(err, d.w.stop)
		return true
	}
	d.wait.succeeded()
	d.notePaused(paused)
	if len(claims) > 0 {
		d.load(claims)
		return true
	}
	if waiting > 0 || free <= 0 {
		d.await(waiting > 0)
		return true
	}
	if d.hold.releasing() {
		return true // a task finished during the claim: its release goes now, not after a long wait
	}
	timeout := d.w.queue.dequeueTimeout
	if d.running.Load() > 0 {
		timeout = min(timeout, pollInterval)
	}
	if paused { // waiting on its notifications would take them from the workers of a resumed queue
		d.sleep(timeout)
		return true
	}
	_, notified, err := d.w.queue.conn.blpop(context.Background(), timeout, d.w.queue.keys.key("noti"))
	if err == nil && notified {
		claims, err = d.hold.claimNotified(context.Background())
	}
	if err != nil {
		d.wait.failed(err, d.w.stop)
		return true
	}
	d.wait.succeeded()
	d.load(claims)
	return true
}

// notePaused says when the queue turns paused or resumed (`delayed pause` / `resume`).
func (d *dispatcher) notePaused(paused bool) {
	if paused == d.paused {
		return
	}
	d.paused = paused
	if paused {
		d.w.logger.Info("queue is paused: no new task from it until it is resumed", "queue", d.w.queue.name, "worker", d.w.id)
	} else {
		d.w.logger.Info("queue resumed: its tasks are taken again", "queue", d.w.queue.name, "worker", d.w.id)
	}
}

// load hands claimed tasks to the slots, in order.
func (d *dispatcher) load(claims []*claim) {
	if len(d.ready) == 0 {
		d.lastStart.Store(d.now()) // their wait starts now
	}
	for _, c := range claims {
		d.ready <- c // never blocks: the channel holds as many as the worker has ids
	}
}

// await waits until a slot finishes a task or the worker stops; with tasks ready, at most until they
// have waited batchPatience.
func (d *dispatcher) await(ready bool) {
	var timeout <-chan time.Time
	if ready {
		timer := time.NewTimer(batchPatience - time.Duration(d.now()-d.lastStart.Load()))
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case <-d.wake:
	case <-d.w.stop:
	case <-timeout:
	}
}

// sleep waits d or until a slot finishes a task or the worker stops.
func (d *dispatcher) sleep(timeout time.Duration) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-d.wake:
	case <-d.w.stop:
	case <-timer.C:
	}
}

// takeReady takes the tasks waiting in ready (each is taken either by a slot or here, never both).
func (d *dispatcher) takeReady() []*claim {
	var taken []*claim
	for {
		select {
		case c := <-d.ready:
			taken = append(taken, c)
		default:
			return taken
		}
	}
}

// giveBack returns claims not started to the head of the queue, riding out Redis errors until the
// worker stops (then they stay held, and a sweeper requeues them once the keep-alive lapses).
func (d *dispatcher) giveBack(claims []*claim) {
	wait := newBackoff(d.w.outage)
	for len(claims) > 0 {
		err := d.hold.giveBack(context.Background(), claims)
		if err == nil {
			wait.succeeded()
			return
		}
		if d.stopped() {
			d.w.logger.Error("could not give back the tasks it claimed before stopping; a sweeper will requeue them",
				"worker", d.w.id, "tasks", len(claims), "error", err)
			d.hold.abandon()
			return
		}
		wait.failed(err, d.w.stop)
	}
}

// slot runs the tasks it takes from ready until the worker stops.
func (d *dispatcher) slot() {
	defer d.slots.Done()
	for c := range d.ready {
		if d.stopping.Load() {
			d.mu.Lock()
			d.unstarted = append(d.unstarted, c)
			d.mu.Unlock()
			continue
		}
		d.lastStart.Store(d.now())
		d.running.Add(1)
		d.unsettled.Add(1)
		started := time.Now()
		d.w.process(d.ctx, d.hold, c, d.settle)
		d.look.finished(time.Since(started).Seconds())
		d.running.Add(-1)
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// settle settles a task a slot ran: a release waits for the next claim; anything else is its own
// fenced script, retried through Redis outages until it lands or the worker stops. False once the
// worker is gone (the task stays held for a sweeper).
func (d *dispatcher) settle(c *claim, s settlement) bool {
	if d.closed.Load() {
		d.hold.abandon()
		d.w.logger.Warn("a task ended after its worker stopped: left held for a sweeper", "worker", d.w.id, "held_by", c.id)
		return false
	}
	defer d.unsettled.Add(-1)
	if s.kind == settleRelease {
		d.hold.release(c, s.track, s.lock)
		return true
	}
	wait := newBackoff(d.w.outage)
	for {
		applied, err := d.hold.apply(context.Background(), c, s)
		if err == nil {
			wait.succeeded()
			if !applied {
				d.w.logger.Warn("could not settle a task: its id no longer holds it (a sweeper requeued it after the "+
					"worker's keep-alive lapsed)", "worker", d.w.id, "held_by", c.id)
			}
			return true
		}
		if d.stopping.Load() {
			d.w.logger.Error("could not settle a task before stopping; a sweeper will requeue it", "worker", d.w.id,
				"held_by", c.id, "error", err)
			d.hold.abandon()
			return true
		}
		wait.failed(err, d.w.stop)
	}
}

// drain stops the worker's claims: the tasks claimed and not started go back to the queue, the
// running ones finish within the grace period, the finished ones are released. The number of tasks
// left running.
func (d *dispatcher) drain() int {
	d.stopping.Store(true)
	rest := d.takeReady()
	close(d.ready)
	d.giveBack(rest)
	finished := make(chan struct{})
	go func() {
		d.slots.Wait()
		close(finished)
	}()
	var grace <-chan time.Time
	if d.w.grace > 0 {
		timer := time.NewTimer(d.w.grace)
		defer timer.Stop()
		grace = timer.C
	}
	left := 0
	select {
	case <-finished:
	case <-grace:
	case <-d.w.force:
	}
	select {
	case <-finished:
	default:
		d.closed.Store(true) // from now on a task that ends is not settled: it stays held
		if left = int(d.unsettled.Load()); left == 0 {
			<-finished // every task was settled meanwhile: the slots are leaving
			break
		}
		d.cancel()
		d.hold.abandon()
		d.w.logger.Warn("tasks still run as the grace period ends: left held, their contexts cancelled; a sweeper "+
			"requeues them once the worker's keep-alive lapses", "worker", d.w.id, "running", left,
			"lapses_in", d.w.queue.keepAliveTimeout)
	}
	d.mu.Lock()
	rest, d.unstarted = d.unstarted, nil
	d.mu.Unlock()
	d.giveBack(rest)
	d.flush()
	d.cancel()
	return left
}

// flush sends the releases and unlocks that wait for a round trip, once: at stop a Redis error
// leaves the finished tasks held for a sweeper.
func (d *dispatcher) flush() {
	if _, _, err := d.hold.claim(context.Background(), 0); err != nil {
		d.w.logger.Error("could not release the finished tasks before stopping; a sweeper will requeue them",
			"worker", d.w.id, "error", err)
		d.hold.abandon()
		return
	}
	if err := d.hold.unlock(context.Background()); err != nil {
		d.w.logger.Warn("could not free the locks of unique tasks that ended; they expire by themselves",
			"worker", d.w.id, "error", err)
	}
}

// lookahead is how many claimed tasks the worker keeps ready beyond its free slots: as many as should
// start within 0.8 of batchPatience (slots free at concurrency / mean run time), at most Batch; none
// until a first task has finished, and none after tasks were given back (the guess was wrong) until
// another one finishes (Python's Lookahead).
type lookahead struct {
	slots, most int
	mu          sync.Mutex
	mean        float64 // seconds a task runs, smoothed; 0 until one has finished
	heldOff     bool
}

const (
	lookaheadSmoothing = 0.1 // weight of the latest run time in the mean
	lookaheadMargin    = 0.8
)

func (l *lookahead) finished(seconds float64) {
	l.mu.Lock()
	if l.mean == 0 {
		l.mean = max(seconds, 1e-9)
	} else {
		l.mean += lookaheadSmoothing * (seconds - l.mean)
	}
	l.heldOff = false
	l.mu.Unlock()
}

func (l *lookahead) gaveBack() {
	l.mu.Lock()
	l.heldOff = true
	l.mu.Unlock()
}

func (l *lookahead) ahead() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heldOff || l.mean == 0 {
		return 0
	}
	n := lookaheadMargin * batchPatience.Seconds() * float64(l.slots) / max(l.mean, 1e-6)
	return int(min(n, float64(l.most)))
}
