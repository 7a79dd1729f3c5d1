package delayed

import (
	"time"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
)

const (
	defaultDequeueTimeout   = time.Second
	defaultKeepAliveTimeout = 60 * time.Second
)

// Queue is a task queue on Redis: the keys named after it (see keys.go), go-delayed's and ours.
type Queue struct {
	name             string
	keys             *queueKeys
	conn             conn
	dequeueTimeout   time.Duration
	keepAliveTimeout time.Duration
	workerID         string // go-delayed's one id per queue, set by NewWorker: what Dequeue and Release hold tasks under

	enqueueMiddleware []EnqueueMiddleware // Use's
	enqueueChain      EnqueueNext         // them around enqueue, composed by Use (nil: none)
}

// QueueOption sets a queue's option.
type QueueOption func(*Queue)

// DequeueTimeout sets how long a worker waits for a task in one call to Redis.
// It must be larger than 1 ms (Redis BLPOP treats timeout equal or less than 0.001 second as forever);
// other values mean the default, 1 s.
func DequeueTimeout(d time.Duration) QueueOption {
	return func(q *Queue) {
		if d > time.Millisecond {
			q.dequeueTimeout = d
		} else {
			q.dequeueTimeout = defaultDequeueTimeout
		}
	}
}

// KeepAliveTimeout sets how long a worker's keep-alive keys live without a refresh (0: the default, 60 s):
// once they lapse, sweepers take the worker for dead and requeue what it holds.
func KeepAliveTimeout(d time.Duration) QueueOption {
	return func(q *Queue) {
		if d <= 0 {
			q.keepAliveTimeout = defaultKeepAliveTimeout
		} else {
			q.keepAliveTimeout = d
		}
	}
}

// NewQueue creates a new queue on a redigo pool (NewRedisPool), as go-delayed's NewQueue does.
func NewQueue(name string, redisPool *redigo.Pool, options ...QueueOption) *Queue {
	return newQueue(name, poolConn{redisPool}, options)
}

// NewQueueWithClient creates a new queue on a go-redis client: a single Redis, Sentinel's failover
// client or a Cluster client (Connect makes one from a URL). On a Cluster, the queue's name needs a
// hash tag ("{orders}") so that all its keys share one slot.
func NewQueueWithClient(name string, client goredis.UniversalClient, options ...QueueOption) *Queue {
	return newQueue(name, clientConn{client}, options)
}

func newQueue(name string, c conn, options []QueueOption) *Queue {
	q := &Queue{
		name:             name,
		keys:             keysOf(name),
		conn:             c,
		dequeueTimeout:   defaultDequeueTimeout,
		keepAliveTimeout: defaultKeepAliveTimeout,
	}
	for _, option := range options {
		option(q)
	}
	return q
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }
