package delayed

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/shamaton/msgpack/v2"
)

// Limits on options, as delayed/wire/options.py has them (tests/test_go_module.py compares).
const (
	// MaxSeconds is the longest delay, time limit, lock or record lifetime an option may ask for: ten years.
	MaxSeconds = 10 * 366 * 86400
	// MaxCount is the most retries or attempts an option may count.
	MaxCount = 1<<31 - 1
)

// The options map's keys, the names Python's TaskOptions gives them; id is always written last, so
// a tracked blob ends with trackedTail and the id (see task.go).
const (
	optMaxRetries  = "max_retries"
	optBackoff     = "backoff"
	optTimeLimit   = "time_limit"
	optUniqueKey   = "unique_key"
	optRateLimit   = "rate_limit"
	optConcurrency = "concurrency_limit"
	optLimitKey    = "limit_key"
	optHeaders     = "headers"
	optExpiresAt   = "expires_at"
	optAttempt     = "attempt"
	optCrashes     = "crashes"
	optUniqueToken = "unique_token"
	optID          = "id"
)

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// rateLimit is a rate_limit as Python's TaskOptions takes one: "N/s", "N/m" or "N/h".
var rateLimit = regexp.MustCompile(`^([1-9][0-9]*)/([smh])$`)

// ratePeriods are a rate_limit's periods, as Python's RATE_PERIODS.
var ratePeriods = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// pythonFuncPath is a "module:func" path as Python's TaskOptions takes one for a backoff function
// (Python's \w is a Unicode letter, digit or underscore).
var pythonFuncPath = regexp.MustCompile(`^[A-Za-z_][\p{L}\p{N}_.]*:[A-Za-z_][\p{L}\p{N}_]*$`)

// TaskOptions are a task's options: how it runs (carried in its blob, in the map Python's TaskOptions
// writes) and how it is enqueued. Set them with TaskOption values (MaxRetries(3), ResultTTL(time.Minute),
// ...) on GoTask.With, PyTask.With or Queue.EnqueueContext. A field left nil (or empty) is not set.
type TaskOptions struct {
	// Carried in the blob: what a worker acts on.
	MaxRetries *int     // retry with backoff: up to this many more runs after a failure
	Backoff    *float64 // seconds before each retry (default: Sidekiq's curve with jitter, as in Python)
	TimeLimit  *float64 // seconds a run may take: the handler's context deadline
	UniqueKey  string   // with UniqueFor: the lock's key, whatever the call

	RateLimit        string            // "N/s", "N/m" or "N/h": at most N starts per period of the tasks sharing LimitKey
	ConcurrencyLimit *int              // at most this many of the tasks sharing LimitKey run at once
	LimitKey         string            // what the limits count (default: the function's name)
	Headers          map[string]string // strings carried to the worker and its middleware (traceparent)

	// Used at enqueue: how the task goes in.
	Delay     *float64  // seconds until it is due
	At        time.Time // when it is due (zero: not set)
	UniqueFor *float64  // refuse an identical task while this one waits, retries or runs, for at most this long
	ResultTTL *float64  // track it: its record and result are kept this many seconds after it ended
	Expires   *float64  // seconds from the enqueue after which it never starts (see ExpiresAt)

	// State the producer and workers write as the task moves.
	ExpiresAt   *float64 // the unix time past which it never starts (written at enqueue from Expires)
	Attempt     int      // runs of it that failed, with MaxRetries
	Crashes     int      // times our workers died holding it
	UniqueToken string   // its hold on the unique lock
	ID          string   // a tracked task's id: 32 hex digits

	unknown []rawEntry // keys a newer producer wrote: carried along untouched, in order
}

// rawEntry is an options map entry kept as its raw msgpack value.
type rawEntry struct {
	key   string
	value []byte
}

// TaskOption sets one option, checking its value as Python's TaskOptions checks it.
type TaskOption func(*TaskOptions) error

func seconds(name string, d time.Duration, positive bool) (*float64, error) {
	value := d.Seconds()
	if value < 0 || (positive && value == 0) {
		return nil, fmt.Errorf("%s must be %s seconds, got %v", name, map[bool]string{true: "above 0", false: "0 or more"}[positive], d)
	}
	if value > MaxSeconds {
		return nil, fmt.Errorf("%s must be at most %d seconds (ten years), got %v", name, MaxSeconds, d)
	}
	return &value, nil
}

// MaxRetries retries a failed run with backoff, up to n more runs (0 to MaxCount).
func MaxRetries(n int) TaskOption {
	return func(o *TaskOptions) error {
		if n < 0 || n > MaxCount {
			return fmt.Errorf("max_retries must be from 0 to %d, got %d", MaxCount, n)
		}
		o.MaxRetries = &n
		return nil
	}
}

// Backoff waits d before each retry (0 or more).
func Backoff(d time.Duration) TaskOption {
	return func(o *TaskOptions) (err error) {
		o.Backoff, err = seconds(optBackoff, d, false)
		return
	}
}

// TimeLimit fails a run that takes longer than d: its context's deadline.
func TimeLimit(d time.Duration) TaskOption {
	return func(o *TaskOptions) (err error) {
		o.TimeLimit, err = seconds(optTimeLimit, d, true)
		return
	}
}

// Delay makes the task due d from its enqueue.
func Delay(d time.Duration) TaskOption {
	return func(o *TaskOptions) (err error) {
		o.Delay, err = seconds("delay", d, false)
		o.At = time.Time{}
		return
	}
}

// At makes the task due at t (a time already past: now).
func At(t time.Time) TaskOption {
	return func(o *TaskOptions) error {
		if time.Until(t).Seconds() > MaxSeconds {
			return fmt.Errorf("at must be at most ten years from now, got %v", t)
		}
		o.At, o.Delay = t, nil
		return nil
	}
}

// UniqueFor refuses (ErrDuplicateTask) an identical task while this one waits, retries or runs, for at most d.
func UniqueFor(d time.Duration) TaskOption {
	return func(o *TaskOptions) (err error) {
		o.UniqueFor, err = seconds("unique_for", d, true)
		return
	}
}

// UniqueKey makes every task with this key a duplicate of the others, whatever its call (with UniqueFor).
func UniqueKey(key string) TaskOption {
	return func(o *TaskOptions) error {
		if key == "" {
			return fmt.Errorf("unique_key must be a non-empty string")
		}
		o.UniqueKey = key
		return nil
	}
}

// ResultTTL tracks the task: its status and result are kept d (rounded up to whole seconds) after it ended.
func ResultTTL(d time.Duration) TaskOption {
	return func(o *TaskOptions) (err error) {
		o.ResultTTL, err = seconds("result_ttl", d, true)
		return
	}
}

// RateLimit starts at most count of the tasks sharing their limit key per second, minute or hour
// ("100/m"), across every worker of the queue.
func RateLimit(limit string) TaskOption {
	return func(o *TaskOptions) error {
		if _, _, err := RateOf(limit); err != nil {
			return err
		}
		o.RateLimit = limit
		return nil
	}
}

// RateOf is a rate_limit's count and period: "100/m" is 100 and a minute.
func RateOf(limit string) (int, time.Duration, error) {
	parts := rateLimit.FindStringSubmatch(limit)
	if parts == nil {
		return 0, 0, fmt.Errorf("rate_limit must be 'N/s', 'N/m' or 'N/h' with N a whole number above 0, got %q", limit)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n > MaxCount {
		return 0, 0, fmt.Errorf("rate_limit must count at most %d starts, got %q", MaxCount, limit)
	}
	return n, ratePeriods[parts[2]], nil
}

// ConcurrencyLimit runs at most n of the tasks sharing their limit key at once, across every worker of the queue.
func ConcurrencyLimit(n int) TaskOption {
	return func(o *TaskOptions) error {
		if n < 1 || n > MaxCount {
			return fmt.Errorf("concurrency_limit must be from 1 to %d, got %d", MaxCount, n)
		}
		o.ConcurrencyLimit = &n
		return nil
	}
}

// LimitKey says what the limits count: the tasks of the queue with this key (default: the function's name).
func LimitKey(key string) TaskOption {
	return func(o *TaskOptions) error {
		if key == "" {
			return fmt.Errorf("limit_key must be a non-empty string")
		}
		o.LimitKey = key
		return nil
	}
}

// Header carries a string to the worker and its middleware, under name (tracing's traceparent).
func Header(name, value string) TaskOption {
	return func(o *TaskOptions) error {
		headers := make(map[string]string, len(o.Headers)+1)
		for k, v := range o.Headers {
			headers[k] = v
		}
		headers[name] = value
		o.Headers = headers
		return nil
	}
}

// Expires keeps the task from starting once d has passed since its enqueue: a worker that claims
// it later dead-letters it (reason expired).
func Expires(d time.Duration) TaskOption {
	return func(o *TaskOptions) (err error) {
		o.Expires, err = seconds("expires", d, true)
		return
	}
}

// ExpiresAt keeps the task from starting after t (see Expires).
func ExpiresAt(t time.Time) TaskOption {
	return func(o *TaskOptions) error {
		if time.Until(t).Seconds() > MaxSeconds {
			return fmt.Errorf("expires must be at most ten years from now, got %v", t)
		}
		at := float64(t.UnixNano()) / 1e9
		o.ExpiresAt, o.Expires = &at, nil
		return nil
	}
}

// stamped is o as an enqueue at now writes it: Expires becomes ExpiresAt, the moment it counts to.
func (o TaskOptions) stamped(now time.Time) TaskOptions {
	if o.Expires != nil {
		at := float64(now.UnixNano())/1e9 + *o.Expires
		o.ExpiresAt = &at
	}
	return o
}

// with applies options to a copy of o.
func (o TaskOptions) with(options []TaskOption) (TaskOptions, error) {
	for _, option := range options {
		if err := option(&o); err != nil {
			return o, err
		}
	}
	if o.UniqueKey != "" && o.UniqueFor == nil && o.UniqueToken == "" {
		return o, fmt.Errorf("unique_key needs unique_for: the lock's key says which tasks are duplicates, unique_for how long")
	}
	if o.LimitKey != "" && o.RateLimit == "" && o.ConcurrencyLimit == nil {
		return o, fmt.Errorf("limit_key needs rate_limit or concurrency_limit: the key says which tasks share a limit, the limit how many")
	}
	return o, nil
}

// carried says whether the blob has an options map to write.
func (o *TaskOptions) carried() bool {
	return o.MaxRetries != nil || o.Backoff != nil || o.TimeLimit != nil || o.UniqueKey != "" || o.RateLimit != "" ||
		o.ConcurrencyLimit != nil || o.LimitKey != "" || len(o.Headers) > 0 || o.ExpiresAt != nil || o.Attempt != 0 ||
		o.Crashes != 0 || o.UniqueToken != "" || o.ID != "" || len(o.unknown) > 0
}

// appendWireMap writes the options map as Python's TaskOptions.wire_map orders it: its options in field
// order, then the unknown ones, the id last.
func (o *TaskOptions) appendWireMap(out []byte) ([]byte, error) {
	type entry struct {
		key   string
		value any
	}
	var entries []entry
	if o.MaxRetries != nil {
		entries = append(entries, entry{optMaxRetries, *o.MaxRetries})
	}
	if o.Backoff != nil {
		entries = append(entries, entry{optBackoff, wireSeconds(*o.Backoff)})
	}
	if o.TimeLimit != nil {
		entries = append(entries, entry{optTimeLimit, wireSeconds(*o.TimeLimit)})
	}
	if o.UniqueKey != "" {
		entries = append(entries, entry{optUniqueKey, o.UniqueKey})
	}
	if o.RateLimit != "" {
		entries = append(entries, entry{optRateLimit, o.RateLimit})
	}
	if o.ConcurrencyLimit != nil {
		entries = append(entries, entry{optConcurrency, *o.ConcurrencyLimit})
	}
	if o.LimitKey != "" {
		entries = append(entries, entry{optLimitKey, o.LimitKey})
	}
	if len(o.Headers) > 0 {
		entries = append(entries, entry{optHeaders, o.Headers})
	}
	if o.ExpiresAt != nil {
		entries = append(entries, entry{optExpiresAt, *o.ExpiresAt})
	}
	if o.Attempt != 0 {
		entries = append(entries, entry{optAttempt, o.Attempt})
	}
	if o.Crashes != 0 {
		entries = append(entries, entry{optCrashes, o.Crashes})
	}
	if o.UniqueToken != "" {
		entries = append(entries, entry{optUniqueToken, o.UniqueToken})
	}
	count := len(entries) + len(o.unknown)
	if o.ID != "" {
		count++
	}
	out = appendHeader(out, 'm', count)
	for _, e := range entries {
		value, err := msgpack.Marshal(e.value)
		if err != nil {
			return nil, err
		}
		out = append(appendString(out, e.key), value...)
	}
	for _, e := range o.unknown {
		out = append(appendString(out, e.key), e.value...)
	}
	if o.ID != "" {
		out = appendString(appendString(out, optID), o.ID)
	}
	return out, nil
}

// wireSeconds is a whole number of seconds as an int (as Python writes time_limit=30), else a float.
func wireSeconds(value float64) any {
	if value == math.Trunc(value) && math.Abs(value) < 1<<53 {
		return int64(value)
	}
	return value
}

// readWireMap reads a blob's options map (r at its header), checking each value as Python's
// TaskOptions.from_wire does.
func readWireMap(r *reader) (TaskOptions, error) {
	var o TaskOptions
	kind, n, err := r.header()
	if err != nil {
		return o, err
	}
	if kind != 'm' {
		return o, fmt.Errorf("task options must be a map with string keys")
	}
	for i := 0; i < n; i++ {
		key, err := r.text()
		if err != nil {
			return o, fmt.Errorf("task options must be a map with string keys")
		}
		raw, err := r.skip()
		if err != nil {
			return o, err
		}
		if err := o.setWire(key, raw); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (o *TaskOptions) setWire(key string, raw []byte) error {
	var value any
	if err := msgpack.Unmarshal(raw, &value); err != nil {
		return fmt.Errorf("task option %s: %v", key, err)
	}
	switch key {
	case optMaxRetries, optAttempt, optCrashes:
		n, ok := toInt(value)
		if !ok || n < 0 || n > MaxCount {
			return fmt.Errorf("%s must be from 0 to %d, got %v", key, MaxCount, value)
		}
		switch key {
		case optMaxRetries:
			o.MaxRetries = &n
		case optAttempt:
			o.Attempt = n
		default:
			o.Crashes = n
		}
	case optBackoff, optTimeLimit:
		f, ok := toFloat(value)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || (key == optTimeLimit && f == 0) || f > MaxSeconds {
			if s, isText := value.(string); key == optBackoff && isText && pythonFuncPath.MatchString(s) {
				o.unknown = append(o.unknown, rawEntry{key, raw}) // a Python backoff function: Go keeps it untouched
				return nil
			}
			return fmt.Errorf("%s must be a number of seconds from 0 to %d, got %v", key, MaxSeconds, value)
		}
		if key == optBackoff {
			o.Backoff = &f
		} else {
			o.TimeLimit = &f
		}
	case optConcurrency:
		n, ok := toInt(value)
		if !ok || n < 1 || n > MaxCount {
			return fmt.Errorf("%s must be from 1 to %d, got %v", key, MaxCount, value)
		}
		o.ConcurrencyLimit = &n
	case optExpiresAt:
		f, ok := toFloat(value)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			return fmt.Errorf("%s must be a unix time above 0, got %v", key, value)
		}
		o.ExpiresAt = &f
	case optRateLimit:
		s, ok := value.(string)
		if !ok {
			return fmt.Errorf("%s must be a string, got %v", key, value)
		}
		if _, _, err := RateOf(s); err != nil {
			return err
		}
		o.RateLimit = s
	case optHeaders:
		m, ok := value.(map[any]any)
		if !ok || len(m) == 0 {
			return fmt.Errorf("%s must be a non-empty map of strings to strings, got %v", key, value)
		}
		o.Headers = make(map[string]string, len(m))
		for k, v := range m {
			ks, kok := k.(string)
			vs, vok := v.(string)
			if !kok || !vok {
				return fmt.Errorf("%s must be a map of strings to strings, got %v", key, value)
			}
			o.Headers[ks] = vs
		}
	case optLimitKey, optUniqueKey, optUniqueToken, optID:
		s, ok := value.(string)
		if !ok || s == "" || (key == optID && !hexID.MatchString(s)) {
			return fmt.Errorf("%s must be a non-empty string, got %v", key, value)
		}
		switch key {
		case optLimitKey:
			o.LimitKey = s
		case optUniqueKey:
			o.UniqueKey = s
		case optUniqueToken:
			o.UniqueToken = s
		default:
			o.ID = s
		}
	default:
		o.unknown = append(o.unknown, rawEntry{key, raw})
	}
	return nil
}

func toInt(value any) (int, bool) {
	switch v := value.(type) {
	case int8:
		return int(v), true
	case int16:
		return int(v), true
	case int32:
		return int(v), true
	case int64:
		return int(v), true
	case int:
		return v, true
	case uint8:
		return int(v), true
	case uint16:
		return int(v), true
	case uint32:
		return int(v), true
	case uint64:
		if v > MaxCount {
			return 0, false
		}
		return int(v), true
	}
	return 0, false
}

func toFloat(value any) (float64, bool) {
	switch v := value.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	n, ok := toInt(value)
	return float64(n), ok
}
