package delayed

import (
	"time"

	redigo "github.com/gomodule/redigo/redis"
)

// NewRedisPool creates a new redis pool (redigo's, as go-delayed's NewRedisPool does): for NewQueue.
// Connect makes a go-redis client instead, from a URL, for a single Redis, Sentinel or Cluster.
func NewRedisPool(address string, options ...redigo.DialOption) *redigo.Pool {
	return &redigo.Pool{
		MaxIdle:     1,
		MaxActive:   10,
		IdleTimeout: 60 * time.Second,
		Dial: func() (redigo.Conn, error) {
			return redigo.Dial("tcp", address, options...)
		},
	}
}
