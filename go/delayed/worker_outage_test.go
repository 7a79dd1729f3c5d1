package delayed

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// restart kills the test's redis-server and starts a fresh one (empty) on the same port.
func (s *testRedis) restart(t *testing.T) {
	t.Helper()
	s.cmd.Process.Kill()
	s.cmd.Wait()
	port := s.Addr[strings.LastIndex(s.Addr, ":")+1:]
	s.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	stdout, _ := s.cmd.StdoutPipe()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
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
	case <-time.After(waitDeadline):
		t.Fatal("redis-server did not start again")
	}
}

func TestTheWorkerRidesOutARedisOutage(t *testing.T) {
	resetHandlers()
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	logs := &logLines{}
	w := newTestWorker(t, q, Logger(logs.logger()))
	w.RegisterHandlers(addNumbers)
	runWorker(t, w)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 1, 0)))
	waitFor(t, "the first task", func() bool { return added.total() == 1 })
	server.cmd.Process.Kill()
	logs.waitLog(t, `msg="Redis error; retrying until it is back"`)
	server.restart(t)
	enqueue(t, q, blob(t, NewGoTaskOfFunc(addNumbers, 2, 0)))
	waitFor(t, "the task enqueued once Redis was back", func() bool { return added.get("2+0") == 1 })
	logs.waitLog(t, `msg="Redis is back"`)
}
