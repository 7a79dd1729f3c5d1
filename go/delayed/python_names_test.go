package delayed

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the worker writes that Python reads, or does as Python's worker does, is defined once in each
// language: these tests read the Python package's definitions and fail when the two differ (the
// wire's names, reasons and statuses among them, are the wire spec's: wire_test.go).

const pythonPackage = "../../delayed"

// pythonSource is a file of the Python package.
func pythonSource(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(pythonPackage, path))
	if err != nil {
		t.Fatalf("the Python package's %s: %v", path, err)
	}
	return string(data)
}

// pythonValue is the value a module-level (or class-level) NAME = ... line assigns, as text; a
// product of numbers ("7 * 24 * 3600", "10_000") is worked out.
func pythonValue(t *testing.T, path, name string) string {
	t.Helper()
	match := regexp.MustCompile(`(?m)^\s*` + name + `\s*(?::[^=\n]+)?=\s*(.+)$`).FindStringSubmatch(pythonSource(t, path))
	if match == nil {
		t.Fatalf("%s assigns no %s", path, name)
	}
	text := strings.TrimSpace(match[1])
	product := 1.0
	for _, factor := range strings.Split(text, "*") {
		number, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(factor), "_", ""), 64)
		if err != nil {
			return text
		}
		product *= number
	}
	return strconv.FormatFloat(product, 'g', -1, 64)
}

func number(value float64) string { return strconv.FormatFloat(value, 'g', -1, 64) }

func TestTheWorkersNamesAndBoundsArePythons(t *testing.T) {
	same := func(path, name, python, goValue string) {
		t.Helper()
		if python != goValue {
			t.Errorf("%s %s is %s in Python, %s in Go", path, name, python, goValue)
		}
	}
	// the reasons' and statuses' names are the wire spec's (wire_test.go); the status each reason ends in:
	for name, value := range map[string]string{"MALFORMED": ReasonMalformed, "PY_TASK": ReasonPyTask,
		"NOT_ALLOWED": ReasonNotAllowed, "BAD_ARGUMENTS": ReasonBadArguments, "FAILED": ReasonFailed,
		"TIMED_OUT": ReasonTimedOut, "TOO_LARGE": ReasonTooLarge, "CRASH_LOOP": ReasonCrashLoop, "EXPIRED": ReasonExpired} {
		status := regexp.MustCompile(`Reason\.` + name + `: Status\.(\w+),`).FindStringSubmatch(pythonSource(t, "wire/dead_letter.py"))
		if status == nil || strings.ToLower(status[1]) != statusOf(value) {
			t.Errorf("STATUS_OF[%s] is %v in Python, %s in Go", name, status, statusOf(value))
		}
	}
	same("wire/dead_letter.py", "MAX_ERROR", pythonValue(t, "wire/dead_letter.py", "MAX_ERROR"), strconv.Itoa(maxLetterError))
	same("wire/dead_letter.py", "MAX_TRACEBACK", pythonValue(t, "wire/dead_letter.py", "MAX_TRACEBACK"), strconv.Itoa(maxLetterTraceback))
	same("wire/dead_letter.py", "RECORD", pythonValue(t, "wire/dead_letter.py", "RECORD"), strconv.Quote(letterRecordField))
	same("wire/dead_letter.py", "TASK", pythonValue(t, "wire/dead_letter.py", "TASK"), strconv.Quote(letterTaskField))
	same("protocol/dead_letters.py", "DEFAULT_DEAD_MAX", pythonValue(t, "protocol/dead_letters.py", "DEFAULT_DEAD_MAX"), number(defaultDeadMax))
	same("protocol/dead_letters.py", "DEFAULT_DEAD_MAX_AGE", pythonValue(t, "protocol/dead_letters.py", "DEFAULT_DEAD_MAX_AGE"),
		number(defaultDeadMaxAge.Seconds()))
	same("worker/loop.py", "DEFAULT_BATCH", pythonValue(t, "worker/loop.py", "DEFAULT_BATCH"), number(defaultBatch))
	same("worker/loop.py", "BATCH_TIME", pythonValue(t, "worker/loop.py", "BATCH_TIME"), number(batchPatience.Seconds()))
	same("worker/loop.py", "DEFAULT_SWEEP_INTERVAL", pythonValue(t, "worker/loop.py", "DEFAULT_SWEEP_INTERVAL"), number(defaultSweepInterval.Seconds()))
	same("worker/loop.py", "POLL", pythonValue(t, "worker/loop.py", "POLL"), number(pollInterval.Seconds()))
	same("worker/batch.py", "SMOOTHING", pythonValue(t, "worker/batch.py", "SMOOTHING"), number(lookaheadSmoothing))
	same("worker/batch.py", "MARGIN", pythonValue(t, "worker/batch.py", "MARGIN"), number(lookaheadMargin))
	same("worker/holding.py", "NOTE_AFTER", pythonValue(t, "worker/holding.py", "NOTE_AFTER"), number(noteAfter.Seconds()))
	same("runtime/due.py", "MOVE_DUE_INTERVAL", pythonValue(t, "runtime/due.py", "MOVE_DUE_INTERVAL"), number(moveDueInterval.Seconds()))
	same("runtime/due.py", "MOVE_LIMIT", pythonValue(t, "runtime/due.py", "MOVE_LIMIT"), number(moveDueLimit))
	for name, value := range map[string]time.Duration{"initial": outageFirstWait, "maximum": outageMaxWait} {
		match := regexp.MustCompile(name + `: float = ([\d.]+)`).FindStringSubmatch(pythonSource(t, "runtime/backoff.py"))
		python, err := strconv.ParseFloat(match[1], 64)
		if err != nil || python != value.Seconds() {
			t.Errorf("runtime/backoff.py's OutageBackoff %s is %s in Python, %v in Go", name, match[1], value)
		}
	}
	same("protocol/worker_ops.py", "DEFAULT_KEEP_ALIVE_TIMEOUT", pythonValue(t, "protocol/worker_ops.py", "DEFAULT_KEEP_ALIVE_TIMEOUT"),
		number(defaultKeepAliveTimeout.Seconds()))
	same("worker/loop.py", "keep_alive_interval (a quarter of the timeout)", "keep_alive_timeout / 4",
		fmt.Sprintf("keep_alive_timeout / %d", defaultKeepAliveTimeout/defaultKeepAliveDuration))
	same("wire/keys.py", "SCHEDULED_KINDS", pythonValue(t, "wire/keys.py", "SCHEDULED_KINDS"),
		fmt.Sprintf(`{b"%c": "delayed", b"%c": "retry", b"%c": "limited"}`, scheduledDelayed, scheduledRetry, scheduledLimited))
	same("wire/worker_info.py", "FIELDS", pythonValue(t, "wire/worker_info.py", "FIELDS"), func() string {
		about := describeWorker("q", time.Now())
		var fields []string
		for i := 0; i < len(about); i += 2 {
			fields = append(fields, strconv.Quote(about[i].(string)))
		}
		return "(" + strings.Join(fields, ", ") + ")"
	}())
	if !strings.Contains(pythonSource(t, "worker/retry.py"), "return attempt ** 4 + 15 + random.random() * 10 * (attempt + 1)") {
		t.Error("worker/retry.py's exponential_with_jitter is not the curve backoffSeconds has")
	}
}

func TestTheWorkersMetricsArePythons(t *testing.T) {
	source := pythonSource(t, "worker/metrics.py")
	literal := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	series := func(variable string) (name, kind string, labels []string, help string) {
		start := strings.Index(source, variable+" = Series(")
		if start < 0 {
			t.Fatalf("worker/metrics.py has no %s = Series(...)", variable)
		}
		call := source[start:]
		call = call[:strings.Index(call, "\")\n")+2]
		tuple := regexp.MustCompile(`\(("[^()]*")\)`).FindStringSubmatch(call)
		for _, label := range literal.FindAllStringSubmatch(tuple[1], -1) {
			labels = append(labels, label[1])
		}
		all := literal.FindAllStringSubmatch(call, -1)
		for _, piece := range literal.FindAllStringSubmatch(call[strings.Index(call, tuple[0])+len(tuple[0]):], -1) {
			help += strings.ReplaceAll(piece[1], `\"`, `"`)
		}
		return all[0][1], all[1][1], labels, help
	}
	name, kind, labels, help := series("TASKS")
	if name != tasksMetricName || kind != "counter" || strings.Join(labels, ",") != "queue,function,outcome" || help != tasksMetricHelp {
		t.Errorf("Python's tasks counter: %s %s %v %q", name, kind, labels, help)
	}
	name, kind, labels, help = series("DURATION")
	if name != durationMetricName || kind != "histogram" || strings.Join(labels, ",") != "queue,function" || help != durationMetricHelp {
		t.Errorf("Python's duration histogram: %s %s %v %q", name, kind, labels, help)
	}
	buckets := regexp.MustCompile(`(?s)BUCKETS = \(([^)]*)\)`).FindStringSubmatch(source)
	python := strings.Fields(strings.ReplaceAll(buckets[1], ",", " "))
	if len(python) != len(durationBuckets) {
		t.Fatalf("Python has %d buckets, Go %d", len(python), len(durationBuckets))
	}
	for i, text := range python {
		if bucket, err := strconv.ParseFloat(text, 64); err != nil || bucket != durationBuckets[i] {
			t.Errorf("bucket %d is %s in Python, %v in Go", i, text, durationBuckets[i])
		}
	}
	for _, outcome := range []string{outcomeDone, outcomeRetried, outcomeFailed, outcomeDead, outcomeHeld} {
		if !strings.Contains(pythonSource(t, "worker/holding.py"), `"`+outcome+`"`) &&
			!strings.Contains(pythonSource(t, "worker/holding.py"), "Status."+strings.ToUpper(outcome)+".value") {
			t.Errorf("Python's Outcome has no %s", outcome)
		}
	}
}
