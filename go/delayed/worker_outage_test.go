package delayed

import (
	"strconv"
	"strings"
	"testing"
)

// restart kills the test's redis-server and starts a fresh one (empty) on the same port.
func (s *testRedis) restart(t *testing.T) {
	t.Helper()
	s.cmd.Process.Kill()
	s.cmd.Wait()
	port, _ := strconv.Atoi(s.Addr[strings.LastIndex(s.Addr, ":")+1:])
	cmd, err := launchRedis(port, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
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
