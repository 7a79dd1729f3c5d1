package delayed

import (
	"context"
	"errors"
	"strconv"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
)

// conn is how a Queue talks to Redis, whichever client it was given: go-delayed's redigo pool
// (NewRedisPool, for programs moved from go-delayed) or a go-redis UniversalClient (Connect: a
// single Redis, Sentinel or Cluster). Replies come back in one shape from both: bulk and status
// strings as string, integers as int64, arrays as []any, a nil reply as nil with no error.
type conn interface {
	do(ctx context.Context, command ...any) (any, error)
	// blpop waits up to timeout for an item of one of keys: the key it came from, and ok false on timeout.
	blpop(ctx context.Context, timeout time.Duration, keys ...string) (key string, ok bool, err error)
	// subscribe listens on channel, on a connection of its own, until ctx is done or Redis fails (the
	// error, or ctx's): subscribed is called once the subscription is in place, message with each
	// message's payload.
	subscribe(ctx context.Context, channel string, subscribed func(), message func(string)) error
}

// poolConn runs commands on connections of a redigo pool.
type poolConn struct{ pool *redigo.Pool }

func (p poolConn) do(ctx context.Context, command ...any) (any, error) {
	c, err := p.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	reply, err := redigo.DoContext(c, ctx, command[0].(string), command[1:]...)
	return fromRedigo(reply), err
}

func (p poolConn) blpop(ctx context.Context, timeout time.Duration, keys ...string) (string, bool, error) {
	c, err := p.pool.GetContext(ctx)
	if err != nil {
		return "", false, err
	}
	defer c.Close()
	command := make([]any, 0, len(keys)+1)
	for _, key := range keys {
		command = append(command, key)
	}
	command = append(command, timeout.Seconds())
	// The read waits for the BLPOP's own timeout, and a second more for the reply to arrive.
	reply, err := redigo.Values(redigo.DoWithTimeout(c, timeout+time.Second, "BLPOP", command...))
	if errors.Is(err, redigo.ErrNil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if len(reply) != 2 {
		return "", false, InvalidRedisReplyError
	}
	key, _ := fromRedigo(reply[0]).(string)
	return key, true, nil
}

func (p poolConn) subscribe(ctx context.Context, channel string, subscribed func(), message func(string)) error {
	c, err := p.pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	listener := redigo.PubSubConn{Conn: c}
	if err := listener.Subscribe(channel); err != nil {
		return err
	}
	for {
		switch received := listener.ReceiveContext(ctx).(type) { // ctx done: the connection is closed
		case redigo.Message:
			message(string(received.Data))
		case redigo.Subscription:
			if received.Kind == "subscribe" {
				subscribed()
			}
		case error:
			return received
		}
	}
}

func fromRedigo(reply any) any {
	switch value := reply.(type) {
	case []byte:
		return string(value)
	case []any:
		for i, item := range value {
			value[i] = fromRedigo(item)
		}
		return value
	default:
		return value
	}
}

// clientConn runs commands on a go-redis client (single, Sentinel's failover client, or Cluster).
type clientConn struct{ client goredis.UniversalClient }

func (c clientConn) do(ctx context.Context, command ...any) (any, error) {
	reply, err := c.client.Do(ctx, command...).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	return fromGoRedis(reply), err
}

func (c clientConn) blpop(ctx context.Context, timeout time.Duration, keys ...string) (string, bool, error) {
	if timeout < time.Second {
		// go-redis's BLPop rounds a wait under a second up to one (and logs it); a worker with
		// tasks running waits a few ms at a time, so send the seconds as Redis takes them (a float),
		// well within the client's read timeout.
		command := make([]any, 0, len(keys)+2)
		command = append(command, "BLPOP")
		for _, key := range keys {
			command = append(command, key)
		}
		reply, err := c.do(ctx, append(command, strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))...)
		if err != nil || reply == nil {
			return "", false, err
		}
		popped, ok := reply.([]any)
		if !ok || len(popped) != 2 {
			return "", false, InvalidRedisReplyError
		}
		key, _ := popped[0].(string)
		return key, true, nil
	}
	reply, err := c.client.BLPop(ctx, timeout, keys...).Result()
	if errors.Is(err, goredis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return reply[0], true, nil
}

func (c clientConn) subscribe(ctx context.Context, channel string, subscribed func(), message func(string)) error {
	listener := c.client.Subscribe(ctx, channel)
	defer listener.Close()
	closed := context.AfterFunc(ctx, func() { listener.Close() }) // ends a Receive that waits
	defer closed()
	for {
		received, err := listener.Receive(ctx)
		if err != nil {
			return err
		}
		switch received := received.(type) {
		case *goredis.Message:
			message(received.Payload)
		case *goredis.Subscription:
			if received.Kind == "subscribe" {
				subscribed()
			}
		}
	}
}

// fromGoRedis flattens a RESP3 map (a client on protocol 3 replies so to HGETALL) as RESP2 would.
func fromGoRedis(reply any) any {
	switch value := reply.(type) {
	case []any:
		for i, item := range value {
			value[i] = fromGoRedis(item)
		}
		return value
	case map[any]any:
		flat := make([]any, 0, 2*len(value))
		for key, item := range value {
			flat = append(flat, fromGoRedis(key), fromGoRedis(item))
		}
		return flat
	default:
		return value
	}
}
