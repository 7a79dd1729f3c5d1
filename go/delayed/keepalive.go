package delayed

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"time"
)

// A worker's keep-alive, as Python's workers keep theirs (keep_alive.lua): each of its ids has a key
// that lives the queue's KeepAliveTimeout and is refreshed every KeepAliveDuration, so that our Python
// sweeper and go-delayed's requeue what a worker held once its keys lapse (it died). The worker is
// listed in <queue>_workers and describes itself in <queue>_worker:<main id> (host, pid, started,
// queues: delayed/wire/worker_info.py), which lapses with its keys.

var keepAliveScript = loadScript("keep_alive")

const (
	keepAliveClaim   = "claim"   // going online: set each id's key unless one is taken
	keepAliveRefresh = "refresh" // set them whatever they hold
)

// describeWorker is this process's description as a worker of queue since started, as field, value,
// ... (the fields and forms of delayed/wire/worker_info.py's describe).
func describeWorker(queue string, started time.Time) []any {
	host, _ := os.Hostname()
	queues, _ := json.Marshal([]string{queue})
	return []any{"host", host, "pid", strconv.Itoa(os.Getpid()),
		"started", secondsArg(float64(started.UnixNano()) / 1e9), "queues", string(queues)}
}

// keepAlive sets (action keepAliveClaim or keepAliveRefresh) the ids' keep-alive keys and the
// worker's description; false when going online found an id taken (nothing set).
func (h *holding) keepAlive(ctx context.Context, action string, ttl time.Duration) (bool, error) {
	now := float64(time.Now().UnixNano()) / 1e9
	reply, err := keepAliveScript.run(ctx, h.queue.conn, h.queue.keys, args{
		"info": h.queue.keys.workerInfo(h.mainID()), "ids": spread(h.ids), "ttl_ms": max(1, ttl.Milliseconds()),
		"now": secondsArg(now), "lapse_at": secondsArg(now + ttl.Seconds()), "action": action, "about": h.about,
	})
	return reply == int64(1), err
}

// goOffline deletes the ids' keep-alive keys and the worker's description, and takes it off the
// workers set: it holds nothing and is leaving.
func (h *holding) goOffline(ctx context.Context) error {
	keys := make([]any, 0, len(h.ids)+2)
	keys = append(keys, "DEL")
	for _, id := range h.ids {
		keys = append(keys, id)
	}
	if _, err := h.queue.conn.do(ctx, append(keys, h.queue.keys.workerInfo(h.mainID()))...); err != nil {
		return err
	}
	_, err := h.queue.conn.do(ctx, "ZREM", h.queue.keys.key("workers"), h.mainID())
	return err
}

// goOnline takes the worker's ids (their keep-alive keys) and writes its description, riding out
// Redis errors until it is online; false if it was stopped first.
func (w *Worker) goOnline() bool {
	w.hold.about = describeWorker(w.queue.name, time.Now())
	wait := newBackoff(w.outage)
	for {
		select {
		case <-w.stop:
			return false
		default:
		}
		ok, err := w.hold.keepAlive(context.Background(), keepAliveClaim, w.queue.keepAliveTimeout)
		if err != nil {
			wait.failed(err, w.stop)
			continue
		}
		wait.succeeded()
		if ok {
			return true
		}
		w.renewIDs() // a live worker had one of them: take fresh ones
	}
}

// renewIDs gives the worker fresh ids (before it holds anything).
func (w *Worker) renewIDs() {
	about := w.hold.about
	w.hold = newHolding(w.queue, len(w.hold.ids))
	w.hold.about = about
	w.id = w.hold.mainID()
	w.queue.workerID = w.id
	w.outage.worker = w.id
}

// KeepAlive puts the worker online (its keep-alive keys and description) and refreshes them every
// KeepAliveDuration until Die (go-delayed's). Run does both itself; call them around your own
// Queue.Dequeue and Queue.Release.
func (w *Worker) KeepAlive() {
	w.life.Lock()
	defer w.life.Unlock()
	if !w.online {
		if w.hold.about == nil {
			w.hold.about = describeWorker(w.queue.name, time.Now())
		}
		if _, err := w.hold.keepAlive(context.Background(), keepAliveClaim, w.queue.keepAliveTimeout); err != nil {
			w.logger.Error("could not go online; the refreshes go on trying", "worker", w.id, "error", err)
		}
	}
	w.startKeepAliveLocked()
}

func (w *Worker) startKeepAlive() {
	w.life.Lock()
	defer w.life.Unlock()
	w.startKeepAliveLocked()
}

func (w *Worker) startKeepAliveLocked() {
	w.online = true
	if w.refresh != nil {
		return // refreshing already (KeepAlive was called before Run)
	}
	refresh, done := make(chan struct{}), make(chan struct{})
	w.refresh, w.done = refresh, done
	go func() {
		defer close(done)
		wait := newBackoff(w.outage)
		ticker := time.NewTicker(w.keepAliveDuration)
		defer ticker.Stop()
		for {
			select {
			case <-refresh:
				return
			case <-ticker.C:
			}
			if _, err := w.hold.keepAlive(context.Background(), keepAliveRefresh, w.queue.keepAliveTimeout); err != nil {
				wait.failed(err, refresh)
			} else {
				wait.succeeded()
			}
		}
	}()
}

// Die takes the worker offline (go-delayed's): its keep-alive refreshes end, and its keys and description
// are deleted, unless it still holds tasks: then they lapse, and a sweeper requeues what it held.
func (w *Worker) Die() {
	w.life.Lock()
	refresh, done, online := w.refresh, w.done, w.online
	w.refresh, w.done, w.online = nil, nil, false
	w.life.Unlock()
	if refresh != nil {
		close(refresh)
		<-done
	}
	if !online {
		return
	}
	if held, abandoned := w.hold.leftHeld(); held > 0 || abandoned {
		w.logger.Warn("worker offline, leaving tasks held: a sweeper requeues them once its keep-alive lapses",
			"worker", w.id, "held", held, "lapses_in", w.queue.keepAliveTimeout)
		return
	}
	if err := w.hold.goOffline(context.Background()); err != nil {
		w.logger.Warn("could not go offline; its keep-alive keys lapse by themselves", "worker", w.id, "error", err)
		return
	}
	w.logger.Info("worker offline", "worker", w.id)
}
