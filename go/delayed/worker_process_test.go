package delayed

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Workers run as processes of their own, stopped by real signals and SIGKILLed: the example worker
// (go/examples/worker) and testdata/sigworker, whose Block handler runs until the test releases it.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// command builds (once per test run) the example worker and sigworker, and returns the path of one.
func command(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "delayed-workers-"); buildErr != nil {
			return
		}
		for name, pkg := range map[string]string{"worker": "../examples/worker", "sigworker": "./testdata/sigworker"} {
			build := exec.Command("go", "build", "-o", filepath.Join(buildDir, name), pkg)
			if out, err := build.CombinedOutput(); err != nil {
				buildErr = errors.New(string(out))
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return filepath.Join(buildDir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// process is a worker process whose stderr (its log) a test can wait for.
type process struct {
	cmd    *exec.Cmd
	log    logLines
	exited chan error
}

func startProcess(t testing.TB, path string, arguments ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(path, arguments...), exited: make(chan error, 1)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			p.log.Write([]byte(scanner.Text() + "\n"))
		}
		p.exited <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("the worker's log:\n%s", p.log.String())
		}
	})
	p.log.waitLog(t, `msg="worker online"`)
	return p
}

// wait waits for the process to exit: its error (nil: status 0).
func (p *process) wait(t testing.TB) error {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // for the cleanup
		return err
	case <-time.After(waitDeadline):
		t.Fatalf("the worker did not exit within %v", waitDeadline)
		return nil
	}
}

func TestSIGTERMFinishesTheRunningTaskGivesBackTheRestAndGoesOffline(t *testing.T) {
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	tasks := [][]byte{blob(t, NewGoTask("main.Block", "first")), blob(t, NewGoTask("main.Record", "second")),
		blob(t, NewGoTask("main.Record", "third"))}
	enqueue(t, q, tasks...)
	p := startProcess(t, command(t, "sigworker"), "-redis", server.Addr)
	waitFor(t, "the first task to be held", func() bool {
		return len(server.Client.HGetAll(ctx, q.keys.key("processing")).Val()) > 0
	})
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.log.waitLog(t, `msg="worker stopping`)
	waitFor(t, "the tasks not started to be back in the queue", func() bool {
		return server.Client.LLen(ctx, q.keys.name).Val() == 2
	})
	server.Client.RPush(ctx, "release:first", "first")
	if err := p.wait(t); err != nil {
		t.Fatalf("the worker exited with %v, want status 0", err)
	}
	if done := server.Client.LRange(ctx, "done", 0, -1).Val(); len(done) != 1 || done[0] != "first" {
		t.Errorf("ran %v, want the running task alone", done)
	}
	if queued := server.Client.LRange(ctx, q.keys.name, 0, -1).Val(); len(queued) != 2 || queued[0] != string(tasks[1]) ||
		queued[1] != string(tasks[2]) {
		t.Errorf("the queue holds %q, want the two tasks not started, in order", queued)
	}
	if held := server.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 0 {
		t.Errorf("%d tasks held after a clean stop: they would run again", held)
	}
	if counts := server.Client.HGet(ctx, q.keys.key("counts"), "done").Val(); counts != "1" {
		t.Errorf("counts done %q, want 1: the running task released", counts)
	}
	if online := server.Client.Keys(ctx, workerIDPrefix+"*").Val(); len(online) != 0 {
		t.Errorf("keep-alive keys %v left after a clean stop", online)
	}
	if !strings.Contains(p.log.String(), `msg="worker offline"`) {
		t.Error("no line saying the worker went offline")
	}
}

func TestASecondSignalLeavesTheRunningTaskHeld(t *testing.T) {
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	enqueue(t, q, blob(t, NewGoTask("main.Block", "stuck")))
	p := startProcess(t, command(t, "sigworker"), "-redis", server.Addr)
	waitFor(t, "the task to be held", func() bool { return server.Client.HLen(ctx, q.keys.key("processing")).Val() == 1 })
	p.cmd.Process.Signal(syscall.SIGINT)
	p.log.waitLog(t, `msg="worker stopping`)
	p.cmd.Process.Signal(syscall.SIGHUP)
	if err := p.wait(t); err != nil {
		t.Fatalf("the worker exited with %v", err)
	}
	if held := server.Client.HLen(ctx, q.keys.key("processing")).Val(); held != 1 {
		t.Errorf("%d tasks held, want the running one left for a sweeper", held)
	}
	if online := server.Client.Keys(ctx, workerIDPrefix+"*").Val(); len(online) == 0 {
		t.Error("the worker deleted its keep-alive keys while it held a task")
	}
	p.log.waitLog(t, `msg="worker offline, leaving tasks held`)
}

func TestASIGKILLedWorkersTaskIsRequeuedOnceItsKeepAliveLapses(t *testing.T) {
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	sleeper := blob(t, NewGoTask("main.Sleep", 3600.0))
	enqueue(t, q, sleeper)
	p := startProcess(t, command(t, "worker"), "-redis", server.Addr, "-queue", "jobs", "-keep-alive-timeout", "1s")
	var holder string
	waitFor(t, "the task to be held", func() bool {
		for id, held := range server.Client.HGetAll(ctx, q.keys.key("processing")).Val() {
			holder = id
			return held == string(sleeper)
		}
		return false
	})
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t)
	if server.Client.Exists(ctx, holder).Val() != 1 {
		t.Fatal("the holder's keep-alive key was gone before it lapsed")
	}
	sweep := func(counting string) []any {
		reply, err := requeueLostScript.run(ctx, q.conn, q.keys, args{"holders": []any{holder}, "counting": counting,
			"worker_id_prefix": workerIDPrefix, "worker_id_suffix": "", "rewrites": []any{}})
		if err != nil {
			t.Fatal(err)
		}
		return reply.([]any)
	}
	if reply := sweep("1"); reply[0] != int64(0) || len(reply) != 1 {
		t.Fatalf("a sweep before the keep-alive lapsed: %v", reply)
	}
	waitFor(t, "the keep-alive key to lapse", func() bool { return server.Client.Exists(ctx, holder).Val() == 0 })
	// our Python sweeper counts it as our worker's crash (then requeues it, its crashes counted)...
	if reply := sweep("1"); len(reply) != 3 || reply[1] != holder || reply[2] != string(sleeper) {
		t.Fatalf("a counting sweep: %v, want the task returned as one our dead worker held", reply)
	}
	// ... and go-delayed's sweeper (the same test: the holder's GET is nil) requeues it as it is
	if reply := sweep("0"); reply[0] != int64(1) {
		t.Fatalf("a sweep: %v, want the task requeued", reply)
	}
	if queued := server.Client.LRange(ctx, q.keys.name, 0, -1).Val(); len(queued) != 1 || queued[0] != string(sleeper) {
		t.Errorf("the queue holds %q, want the lost task", queued)
	}
	if n := server.Client.LLen(ctx, q.keys.key("noti")).Val(); n != 1 {
		t.Errorf("%d notifications for the requeued task", n)
	}
	if server.Client.Exists(ctx, q.keys.workerInfo(strings.SplitN(holder, "-", 4)[0])).Val() != 0 {
		t.Error("the dead worker's description outlived its keys")
	}
}

func TestTheExampleWorkerRunsTasksAndServesItsMetrics(t *testing.T) {
	server := startRedis(t)
	q := testQueue(t, server, "jobs")
	ctx := context.Background()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	listener.Close()
	startProcess(t, command(t, "worker"), "-redis", "redis://"+server.Addr+"/0", "-queue", "jobs", "-metrics-addr", addr)
	handle := enqueueTracked(t, q, NewGoTask("main.Add", 1, 2), ResultTTL(time.Minute))
	result, err := handle.Result(ctx)
	var sum int
	if err != nil || result.Decode(&sum) != nil || sum != 3 {
		t.Fatalf("main.Add(1, 2) = %d (%v)", sum, err)
	}
	want := `delayed_tasks_total{function="main.Add",outcome="done",queue="jobs"} 1`
	var page string
	waitFor(t, "the metrics to count the task", func() bool {
		response, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		defer response.Body.Close()
		body, _ := io.ReadAll(response.Body)
		page = string(body)
		return strings.Contains(page, want)
	})
	if !strings.Contains(page, `delayed_task_duration_seconds_count{function="main.Add",queue="jobs"} 1`) {
		t.Errorf("no run time counted in\n%s", page)
	}
}
