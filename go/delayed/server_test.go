package delayed

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// testRedis is a redis-server the test started on a free loopback port, stopped when the test ends.
type testRedis struct {
	Addr   string
	Client *goredis.Client
	cmd    *exec.Cmd
}

// freePort is a loopback TCP port no one listened on a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}

// startRedis starts a throwaway redis-server (no persistence) for one test, with extra
// redis-server arguments ("--maxmemory", "1mb", ...).
func startRedis(t testing.TB, extra ...string) *testRedis {
	t.Helper()
	port := freePort(t)
	// --dir: a primary writes an RDB file to sync a replica, and the replica keeps it
	cmd, err := launchRedis(port, append([]string{"--dir", t.TempDir()}, extra...))
	if err != nil {
		t.Skipf("redis-server did not start (is it installed?): %v", err)
	}
	server := &testRedis{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd}
	server.Client = goredis.NewClient(&goredis.Options{Addr: server.Addr, Protocol: 2})
	t.Cleanup(func() {
		server.Client.Close()
		server.cmd.Process.Kill()
		server.cmd.Wait()
	})
	if err := server.Client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return server
}

// launchRedis runs redis-server on a loopback port, without persistence, and returns once it
// accepts connections (killed, with an error, if it does not within 30 s).
func launchRedis(port int, extra []string) (*exec.Cmd, error) {
	argv := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, extra...)
	cmd := exec.Command("redis-server", argv...)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan bool, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if strings.Contains(scanner.Text(), "Ready to accept connections") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
		return cmd, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("redis-server on port %d did not become ready in 30 s", port)
	}
}
