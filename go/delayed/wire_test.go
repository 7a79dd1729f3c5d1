package delayed

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/shamaton/msgpack/v2"
)

// The wire, checked across languages; tests/test_go_module.py is the Python half, and runs both tests:
//   - TestWireSpec writes Go's wire constants, and the blobs Go's tasks serialize to, into the file
//     DELAYED_WIRE_SPEC names: Python compares each constant with its own, and each blob with the one
//     Python makes for the same call.
//   - TestPythonBlobsDecode decodes the blobs Python wrote (testdata/python/, which the Python test
//     keeps current), as a Go worker decodes what it claims, and refuses those Python refuses.

// wireSpecFile is the environment variable naming the file TestWireSpec writes.
const wireSpecFile = "DELAYED_WIRE_SPEC"

// fixedID is the cases' tracked id, so that their bytes are fixed.
const fixedID = "0123456789abcdef0123456789abcdef"

// wireConstants are Go's constants of the wire by the name Python gives each (module.NAME, as
// delayed.wire's modules and the protocol's producer and sweeper_ops define them): strings and numbers
// as they are, bytes as {"hex": ...}.
func wireConstants() map[string]any {
	bytesOf := func(data string) map[string]string { return map[string]string{"hex": hex.EncodeToString([]byte(data))} }
	return map[string]any{
		"keys.NOTI_SUFFIX":                 notiKeySuffix,
		"keys.PROCESSING_SUFFIX":           processingKeySuffix,
		"keys.DEAD_SUFFIX":                 deadSuffix,
		"keys.DEAD_LETTERS_SUFFIX":         deadLettersSuffix,
		"keys.SCHEDULED_SUFFIX":            scheduledSuffix,
		"keys.UNIQUE_INFIX":                uniqueInfix,
		"keys.WORKERS_SUFFIX":              workersSuffix,
		"keys.UNNOTIFIED_SUFFIX":           unnotifiedSuffix,
		"keys.COUNTS_SUFFIX":               countsSuffix,
		"keys.TRACKED_SUFFIX":              trackedSuffix,
		"keys.TASK_INFIX":                  taskInfix,
		"keys.FLOW_INFIX":                  flowInfix,
		"keys.WORKER_INFIX":                workerInfix,
		"keys.PAUSED_SUFFIX":               pausedSuffix,
		"keys.SAMPLES_SUFFIX":              samplesSuffix,
		"keys.HEAD_SINCE_SUFFIX":           headSinceSuffix,
		"keys.SWEPT_SUFFIX":                sweptSuffix,
		"keys.PERIODIC_SUFFIX":             periodicSuffix,
		"keys.LIMITS_SUFFIX":               limitsSuffix,
		"keys.LIMIT_HOLDERS_SUFFIX":        limitHoldersSuffix,
		"keys.LIMIT_RUNNING_INFIX":         limitRunningInfix,
		"keys.LIMIT_WAITING_INFIX":         limitWaitingInfix,
		"keys.LIMIT_STARTS_INFIX":          limitStartsInfix,
		"keys.LIMIT_RESERVED_INFIX":        limitReservedInfix,
		"keys.CANCELS_SUFFIX":              cancelsSuffix,
		"keys.WORKER_ID_PREFIX":            workerIDPrefix,
		"options.MAX_SECONDS":              MaxSeconds,
		"options.MAX_COUNT":                MaxCount,
		"options.ID_OPTION":                optID,
		"options.CRASHES_OPTION":           optCrashes,
		"task.TRACKED_TAIL":                bytesOf(trackedTail),
		"task.WITH_OPTIONS":                bytesOf(string([]byte{pyWithOptions})),
		"task.GO_WITH_OPTIONS":             bytesOf(string([]byte{goWithOptions})),
		"task._GO_NO_ARGUMENT":             bytesOf(string(noArgument)),
		"keys.SCHEDULED_PREFIX_BYTES":      scheduledPrefixBytes,
		"dead_letter.Reason.MALFORMED":     ReasonMalformed,
		"dead_letter.Reason.PY_TASK":       ReasonPyTask,
		"dead_letter.Reason.CRASH_LOOP":    ReasonCrashLoop,
		"dead_letter.Reason.EXPIRED":       ReasonExpired,
		"dead_letter.Reason.NOT_ALLOWED":   ReasonNotAllowed,
		"dead_letter.Reason.BAD_ARGUMENTS": ReasonBadArguments,
		"dead_letter.Reason.FAILED":        ReasonFailed,
		"dead_letter.Reason.TIMED_OUT":     ReasonTimedOut,
		"dead_letter.Reason.TOO_LARGE":     ReasonTooLarge,
		"tracking.Status.SCHEDULED":        string(TaskScheduled),
		"tracking.Status.PENDING":          string(TaskPending),
		"tracking.Status.RUNNING":          string(TaskRunning),
		"tracking.Status.RETRYING":         string(TaskRetrying),
		"tracking.Status.DONE":             string(TaskDone),
		"tracking.Status.FAILED":           string(TaskFailed),
		"tracking.Status.DEAD":             string(TaskDead),
		"tracking.Status.CANCELLED":        string(TaskCancelled),
		"tracking.Status.WAITING":          string(TaskWaiting),
		"producer.DEFAULT_MAX_TASK_SIZE":   maxTaskSize,
		"sweeper_ops.DEFAULT_MAX_CRASHES":  DefaultMaxCrashes,
		"ext.FAILED_STEP_EXT":              failedStepExt,
	}
}

// scheduledKinds are the first bytes of a scheduled-set member's nonce, by the kind of wait Python's
// SCHEDULED_KINDS names.
var scheduledKinds = map[string]string{"delayed": string(rune(scheduledDelayed)), "retry": string(rune(scheduledRetry)),
	"limited": string(rune(scheduledLimited))}

// mapOptions are the options map's keys Go reads and writes: Python's TaskOptions fields placed in the map.
var mapOptions = []string{optMaxRetries, optBackoff, optTimeLimit, optUniqueKey, optRateLimit, optConcurrency,
	optLimitKey, optHeaders, optExpiresAt, optAttempt, optCrashes, optUniqueToken, optID}

// wireCase is a task Go serializes and the Python call that makes the same task; compare says how
// the blobs compare: "identical" bytes, or "decoded" to the same call (where go-delayed's NewPyTask
// writes nil and three elements, Python an empty array or map and as few elements as it can).
type wireCase struct {
	Name    string `json:"name"`
	Python  string `json:"python"`
	Compare string `json:"compare"`
	Blob    string `json:"blob"`   // hex
	Digest  string `json:"digest"` // the unique lock's key without a UniqueKey (uniqueDigest)
	task    Task
}

// tracked is t with state options set as a worker or producer sets them.
func tracked(t *GoTask, set func(*TaskOptions)) *GoTask {
	o := t.Options()
	set(&o)
	return t.withState(o)
}

func wireCases() []wireCase {
	pyTracked := NewPyTask("tasks:add", []any{1}, map[string]any{}).With(MaxRetries(2))
	pyTracked.options.Attempt, pyTracked.options.ID = 1, fixedID
	return []wireCase{
		{Name: "go_no_argument", Python: "GoTask('main.Ping')", Compare: "identical", task: NewGoTask("main.Ping")},
		{Name: "go_one_argument", Python: "GoTask('main.Add', 1)", Compare: "identical", task: NewGoTask("main.Add", 1)},
		{Name: "go_several_arguments", Python: "GoTask('main.Add', [1, 'a', 2.5])", Compare: "identical",
			task: NewGoTask("main.Add", 1, "a", 2.5)},
		{Name: "go_enqueue_options_only", Python: "GoTask('main.Add', 1, delay=60, result_ttl=60)", Compare: "identical",
			task: NewGoTask("main.Add", 1).With(Delay(time.Minute), ResultTTL(time.Minute))},
		{Name: "go_max_retries", Python: "GoTask('main.Add', [1, 2], max_retries=3)", Compare: "identical",
			task: NewGoTask("main.Add", 1, 2).With(MaxRetries(3))},
		{Name: "go_no_argument_with_options", Python: "GoTask('main.Ping', time_limit=30)", Compare: "identical",
			task: NewGoTask("main.Ping").With(TimeLimit(30 * time.Second))},
		{Name: "go_every_option", Python: "GoTask('main.Add', 1, max_retries=5, backoff=1.5, time_limit=2.5)",
			Compare: "identical", task: NewGoTask("main.Add", 1).With(MaxRetries(5), Backoff(1500*time.Millisecond), TimeLimit(2500*time.Millisecond))},
		{Name: "go_whole_seconds", Python: "GoTask('main.Add', 1, backoff=10, time_limit=1.0)", Compare: "decoded",
			task: NewGoTask("main.Add", 1).With(Backoff(10*time.Second), TimeLimit(time.Second))},
		{Name: "go_wide_counts", Python: "GoTask('main.Add', 1, max_retries=300, options=TaskOptions(attempt=70000, crashes=2147483647))",
			Compare: "identical", task: tracked(NewGoTask("main.Add", 1).With(MaxRetries(300)), func(o *TaskOptions) { o.Attempt, o.Crashes = 70000, MaxCount })},
		{Name: "go_tracked", Python: "GoTask('main.Add', [1, 2], options=TaskOptions(max_retries=2, attempt=1, crashes=1, id='" + fixedID + "'))",
			Compare: "identical", task: tracked(NewGoTask("main.Add", 1, 2).With(MaxRetries(2)), func(o *TaskOptions) { o.Attempt, o.Crashes, o.ID = 1, 1, fixedID })},
		{Name: "go_tracked_long_name", Python: "GoTask('example.com/svc/jobs.ResizeEveryImageOfTheAlbum', options=TaskOptions(id='" + fixedID + "'))",
			Compare: "identical", task: tracked(NewGoTask("example.com/svc/jobs.ResizeEveryImageOfTheAlbum"), func(o *TaskOptions) { o.ID = fixedID })},
		{Name: "go_flow_control", Python: "GoTask('main.Add', 1, rate_limit='100/m', concurrency_limit=5, limit_key='customer-7', headers={'traceparent': '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'}, options=TaskOptions(expires_at=1700000000.5))",
			Compare: "identical", task: tracked(NewGoTask("main.Add", 1).With(RateLimit("100/m"), ConcurrencyLimit(5), LimitKey("customer-7"),
				Header("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")), func(o *TaskOptions) { at := 1700000000.5; o.ExpiresAt = &at })},
		{Name: "go_unique", Python: "GoTask('main.Add', 1, options=TaskOptions(unique_key='report', unique_token='00ff00ff00ff00ff'))",
			Compare: "identical", task: tracked(NewGoTask("main.Add", 1), func(o *TaskOptions) { o.UniqueKey, o.UniqueToken = "report", "00ff00ff00ff00ff" })},
		{Name: "py_go_delayed", Python: "PyTask('tasks:add', [1, 2])", Compare: "decoded",
			task: NewPyTask("tasks:add", []any{1, 2}, nil)},
		{Name: "py_nil_arguments_with_options", Python: "PyTask('tasks:add', max_retries=1)", Compare: "decoded",
			task: NewPyTask("tasks:add", nil, nil).With(MaxRetries(1))},
		{Name: "py_every_option", Python: "PyTask('tasks:add', [1], {'b': 2}, max_retries=2, backoff=0.5, time_limit=2.5)",
			Compare: "identical", task: NewPyTask("tasks:add", []any{1}, map[string]any{"b": 2}).With(MaxRetries(2), Backoff(500*time.Millisecond), TimeLimit(2500*time.Millisecond))},
		{Name: "py_tracked", Python: "PyTask('tasks:add', [1], options=TaskOptions(max_retries=2, attempt=1, id='" + fixedID + "'))",
			Compare: "identical", task: pyTracked},
	}
}

// wireSpec is what TestWireSpec writes.
type wireSpec struct {
	Constants map[string]any      `json:"constants"`
	Options   []string            `json:"options"`
	Scheduled map[string]string   `json:"scheduled_kinds"`
	QueueKeys map[string]string   `json:"queue_keys"` // the keys of queue "q" by the names the scripts' headers use
	WorkerIDs map[string][]string `json:"worker_ids"` // three ids of one worker, by queue name
	HashTags  map[string]*string  `json:"hash_tags"`
	Cases     []wireCase          `json:"cases"`
	// CrashCounted are Python's golden blobs (testdata/python/) as Go's sweeper rewrites them to count
	// a crash (blobWithOptions), by case name: Python reads each as its own sweeper's rewrite.
	CrashCounted map[string]string `json:"crash_counted"`
}

func TestWireSpec(t *testing.T) {
	spec := wireSpec{Constants: wireConstants(), Options: mapOptions, Scheduled: scheduledKinds, QueueKeys: keysOf("q").named,
		WorkerIDs: map[string][]string{}, HashTags: map[string]*string{}}
	for _, name := range []string{"q", "{orders}q", "a{b}c{d}"} {
		spec.WorkerIDs[name] = keysOf(name).workerIDs(3)
	}
	for _, name := range []string{"q", "{orders}", "a{b}c", "{}x", "x{", "x}{y}", "{a}{b}", "{{a}}"} {
		if tag, ok := hashTag(name); ok {
			spec.HashTags[name] = &tag
		} else {
			spec.HashTags[name] = nil
		}
	}
	for _, c := range wireCases() {
		blob, err := c.task.Serialize()
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		c.Blob = hex.EncodeToString(blob)
		if c.Digest, err = uniqueDigest(blob); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		spec.Cases = append(spec.Cases, c)
	}
	spec.CrashCounted = map[string]string{}
	for _, c := range pythonCases(t) {
		if c.Kind == "malformed" {
			continue
		}
		blob := pythonBlob(t, c)
		task, err := decodeTask(blob)
		if err != nil {
			t.Fatalf("%s: %v", c.Python, err)
		}
		counted := optionsOf(task)
		counted.Crashes++
		again, err := blobWithOptions(blob, counted)
		if err != nil {
			t.Fatalf("%s: %v", c.Python, err)
		}
		spec.CrashCounted[c.Name] = hex.EncodeToString(again)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv(wireSpecFile); path != "" {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pythonCase is an entry of testdata/python/manifest.json: a blob Python wrote, and what it holds.
type pythonCase struct {
	Name    string          `json:"name"`
	Python  string          `json:"python"`
	Kind    string          `json:"kind"` // "go", "py", or "malformed" (Python refuses it)
	Func    string          `json:"func"`
	Payload string          `json:"payload"` // a GoTask's: hex of the msgpack of its argument
	Options json.RawMessage `json:"options"` // the options map, as JSON
	Unknown []string        `json:"unknown"` // the options Python does not know, kept as they are
	Error   string          `json:"error"`   // why Python refuses a malformed one
}

// wireValues are the options as the map would hold them, as JSON-able values (unknown ones decoded).
func wireValues(t *testing.T, o TaskOptions) map[string]any {
	values := map[string]any{}
	if o.MaxRetries != nil {
		values[optMaxRetries] = *o.MaxRetries
	}
	if o.Backoff != nil {
		values[optBackoff] = *o.Backoff
	}
	if o.TimeLimit != nil {
		values[optTimeLimit] = *o.TimeLimit
	}
	if o.ConcurrencyLimit != nil {
		values[optConcurrency] = *o.ConcurrencyLimit
	}
	if o.ExpiresAt != nil {
		values[optExpiresAt] = *o.ExpiresAt
	}
	if len(o.Headers) > 0 {
		values[optHeaders] = o.Headers
	}
	for key, value := range map[string]string{optUniqueKey: o.UniqueKey, optUniqueToken: o.UniqueToken, optID: o.ID,
		optRateLimit: o.RateLimit, optLimitKey: o.LimitKey} {
		if value != "" {
			values[key] = value
		}
	}
	for key, value := range map[string]int{optAttempt: o.Attempt, optCrashes: o.Crashes} {
		if value != 0 {
			values[key] = value
		}
	}
	for _, entry := range o.unknown {
		var value any
		if err := msgpack.Unmarshal(entry.value, &value); err != nil {
			t.Fatalf("unknown option %s: %v", entry.key, err)
		}
		values[entry.key] = value
	}
	return values
}

// sameJSON says whether two values are the same once written as JSON and read back (so 3, int8(3)
// and 3.0 are one number).
func sameJSON(t *testing.T, a, b any) bool {
	var values [2]any
	for i, value := range []any{a, b} {
		data, err := json.Marshal(value)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &values[i]); err != nil {
			t.Fatal(err)
		}
	}
	return reflect.DeepEqual(values[0], values[1])
}

// pythonDir holds the blobs Python wrote, and their manifest.
var pythonDir = filepath.Join("testdata", "python")

// pythonCases are the entries of testdata/python/manifest.json.
func pythonCases(t *testing.T) []pythonCase {
	data, err := os.ReadFile(filepath.Join(pythonDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Cases []pythonCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Cases) == 0 {
		t.Fatal("no cases in the manifest")
	}
	return manifest.Cases
}

// pythonBlob is the blob Python wrote for a case.
func pythonBlob(t *testing.T, c pythonCase) []byte {
	blob, err := os.ReadFile(filepath.Join(pythonDir, c.Name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	return blob
}

func TestPythonBlobsDecode(t *testing.T) {
	for _, c := range pythonCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			blob := pythonBlob(t, c)
			task, err := decodeTask(blob)
			if c.Kind == "malformed" {
				var malformed *MalformedTaskError
				if !errors.As(err, &malformed) || malformed.Reason != ReasonMalformed || malformed.FuncPath != c.Func {
					t.Fatalf("Go decodes what Python refuses (%s) as %v, %v", c.Error, task, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", c.Python, err)
			}
			var options TaskOptions
			switch decoded := task.(type) {
			case *GoTask:
				if c.Kind != "go" {
					t.Fatalf("%s decoded as a GoTask", c.Python)
				}
				if got := hex.EncodeToString(decoded.Payload()); got != c.Payload {
					t.Errorf("%s: payload %s, Python wrote %s", c.Python, got, c.Payload)
				}
				options = decoded.Options()
				again, err := decoded.withState(options).Serialize()
				if err != nil {
					t.Fatal(err)
				}
				if reread, err := DeserializeGoTask(again); err != nil || !reflect.DeepEqual(reread.Options(), options) ||
					hex.EncodeToString(reread.Payload()) != c.Payload {
					t.Errorf("%s: written again by Go, it reads back otherwise (%v)", c.Python, err)
				}
			case *PyTask:
				if c.Kind != "py" {
					t.Fatalf("%s decoded as a PyTask", c.Python)
				}
				options = decoded.Options()
			}
			if task.getFuncPath() != c.Func {
				t.Errorf("%s: func path %q", c.Python, task.getFuncPath())
			}
			var want any
			if err := json.Unmarshal(c.Options, &want); err != nil {
				t.Fatal(err)
			}
			if got := wireValues(t, options); !sameJSON(t, got, want) {
				t.Errorf("%s: options %v, Python wrote %s", c.Python, got, c.Options)
			}
			unknown := []string{}
			for _, entry := range options.unknown {
				if entry.key != optBackoff { // a Python backoff function, which Go keeps as it is
					unknown = append(unknown, entry.key)
				}
			}
			if !reflect.DeepEqual(unknown, c.Unknown) {
				t.Errorf("%s: Go does not know the options %v, Python does not know %v", c.Python, unknown, c.Unknown)
			}
		})
	}
}
