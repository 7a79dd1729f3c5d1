package delayed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// waitDeadline bounds every wait for an event in these tests: only a failing test waits it out.
const waitDeadline = 60 * time.Second

// waitFor polls condition until it holds, failing the test after waitDeadline.
func waitFor(t testing.TB, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", waitDeadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testCluster is a Redis Cluster of three primaries the test started, as Python's
// delayed.testing.RedisCluster makes one (without replicas): redis-cli --cluster create.
type testCluster struct {
	nodes []*testRedis
}

// URL is a redis+cluster:// URL naming every node.
func (c *testCluster) URL() string {
	addresses := make([]string, len(c.nodes))
	for i, node := range c.nodes {
		addresses[i] = node.Addr
	}
	return schemeCluster + strings.Join(addresses, ",")
}

// primaryFor is the node serving key's slot.
func (c *testCluster) primaryFor(t testing.TB, key string) *testRedis {
	t.Helper()
	slot, err := c.nodes[0].Client.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range c.nodes {
		shards, err := node.Client.ClusterSlots(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, shard := range shards {
			if int64(shard.Start) <= slot && slot <= int64(shard.End) && shard.Nodes[0].Addr == node.Addr {
				return node
			}
		}
	}
	t.Fatalf("no node serves slot %d", slot)
	return nil
}

func startCluster(t testing.TB) *testCluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli is not on PATH")
	}
	dir := t.TempDir()
	cluster := &testCluster{}
	create := []string{"--cluster", "create"}
	for i := 0; i < 3; i++ {
		node := startRedis(t, "--cluster-enabled", "yes", "--cluster-port", fmt.Sprint(freePort(t)),
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)), "--cluster-node-timeout", "1000")
		cluster.nodes = append(cluster.nodes, node)
		create = append(create, node.Addr)
	}
	if output, err := exec.Command("redis-cli", append(create, "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, output)
	}
	waitFor(t, "cluster_state:ok on every node", func() bool {
		for _, node := range cluster.nodes {
			info, err := node.Client.ClusterInfo(context.Background()).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	return cluster
}

// testSentinel is one sentinel the test started, monitoring a primary as masterName.
type testSentinel struct {
	Addr   string
	Client *goredis.SentinelClient
}

const masterName = "mymaster"

// startSentinel starts a sentinel (redis-server FILE --sentinel, as Python's delayed.testing.SentinelSet
// does) that monitors the primary at primaryAddr with a quorum of one, and waits until it names it.
func startSentinel(t testing.TB, primaryAddr string) *testSentinel {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	host, primaryPort, _ := strings.Cut(primaryAddr, ":")
	config := filepath.Join(dir, "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\n"+
		"sentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\n",
		port, dir, masterName, host, primaryPort, masterName, masterName)
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", config, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Skipf("redis-server did not start (is it installed?): %v", err)
	}
	sentinel := &testSentinel{Addr: fmt.Sprintf("127.0.0.1:%d", port)}
	sentinel.Client = goredis.NewSentinelClient(&goredis.Options{Addr: sentinel.Addr, Protocol: 2})
	t.Cleanup(func() {
		sentinel.Client.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	waitFor(t, "the sentinel to name the primary", func() bool { return sentinel.primary() == primaryAddr })
	return sentinel
}

// primary is the address the sentinel names for masterName ("" if none).
func (s *testSentinel) primary() string {
	address, err := s.Client.GetMasterAddrByName(context.Background(), masterName).Result()
	if err != nil || len(address) != 2 {
		return ""
	}
	return address[0] + ":" + address[1]
}
