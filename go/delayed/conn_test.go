package delayed

import (
	"context"
	"testing"
	"time"
)

// TestBlpopWaitsUnderASecondOnAGoRedisClient: a worker with tasks running waits 50 ms at a time for
// a new one; go-redis's own BLPop would send 1 s instead (and log that it rounded it up).
func TestBlpopWaitsUnderASecondOnAGoRedisClient(t *testing.T) {
	server := startRedis(t, "--slowlog-log-slower-than", "0")
	ctx := context.Background()
	for _, c := range []conn{clientConn{server.Client}, poolConn{NewRedisPool(server.Addr)}} {
		if err := server.Client.SlowLogReset(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := c.blpop(ctx, 50*time.Millisecond, "empty"); ok || err != nil {
			t.Fatalf("%T: blpop of an empty list: %v, %v", c, ok, err)
		}
		server.Client.RPush(ctx, "full", "1")
		if key, ok, err := c.blpop(ctx, 50*time.Millisecond, "empty", "full"); key != "full" || !ok || err != nil {
			t.Fatalf("%T: blpop of a list with an item: %q, %v, %v", c, key, ok, err)
		}
		entries, err := server.Client.SlowLogGet(ctx, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		for _, entry := range entries {
			if len(entry.Args) > 0 && (entry.Args[0] == "BLPOP" || entry.Args[0] == "blpop") {
				sent++
				if timeout := entry.Args[len(entry.Args)-1]; timeout != "0.05" {
					t.Errorf("%T sent BLPOP %v: a timeout of %s s, want 0.05", c, entry.Args, timeout)
				}
			}
		}
		if sent != 1 { // the one that popped: one that timed out is not logged
			t.Errorf("%T: %d BLPOPs in the slow log, want 1", c, sent)
		}
	}
}
