package delayed

import (
	"context"
	"fmt"

	redigo "github.com/gomodule/redigo/redis"
	goredis "github.com/redis/go-redis/v9"
)

// transaction runs commands in one MULTI ... EXEC on one connection of c, so that they apply all
// together (Python's producer writes a delayed task and its count so); on a Cluster their keys share
// a slot. The first command's error is returned.
func transaction(ctx context.Context, c conn, commands ...[]any) error {
	switch c := c.(type) {
	case poolConn:
		rc, err := c.pool.GetContext(ctx)
		if err != nil {
			return err
		}
		defer rc.Close()
		if err := rc.Send("MULTI"); err != nil {
			return err
		}
		for _, command := range commands {
			if err := rc.Send(command[0].(string), command[1:]...); err != nil {
				return err
			}
		}
		replies, err := redigo.Values(redigo.DoContext(rc, ctx, "EXEC"))
		if err != nil {
			return err
		}
		for _, reply := range replies {
			if err, failed := reply.(redigo.Error); failed {
				return err
			}
		}
		return nil
	case clientConn:
		_, err := c.client.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			for _, command := range commands {
				pipe.Do(ctx, command...)
			}
			return nil
		})
		return err
	}
	return fmt.Errorf("delayed: no transactions on a %T", c)
}
