package delayed

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"

	"github.com/shamaton/msgpack/v2"
)

// Task blobs, byte-compatible with go-delayed and keakon/delayed 1.x (delayed/wire/task.py is the
// Python side of the same format; go_fixtures/ and tests/test_go_module.py hold the two together):
//   - GoTask: [func_path, payload], the payload a bin holding the msgpack of the argument, exactly
//     what go-delayed writes. With options, a third element, the options map: [func_path, payload,
//     options], the payload then always a bin (no argument: the bin of msgpack nil), which tells it
//     from go-delayed's NewPyTask(f, nil, kwargs). go-delayed's decoder skips elements past its two
//     fields, so its workers still run such a task (ignoring the options).
//   - PyTask: [func_path, args, kwargs], as go-delayed's NewPyTask writes it; with options, Python's
//     five elements [func_path, args, kwargs, 0, options].
// An options map ends with the tracked task's id, so a tracked blob ends with trackedTail and the id.

// trackedTail comes before the id at the end of a tracked blob: "id" (fixstr), then a str8 of 32 bytes.
const trackedTail = "\xa2id\xd9\x20"

// The first byte of a blob with options: a GoTask's three-element array (its payload then always a
// bin, which tells it from go-delayed's NewPyTask), a PyTask's five (as Python's WITH_OPTIONS).
const (
	goWithOptions = 0x93
	pyWithOptions = 0x95
)

// noArgument is the payload of a task without one: go-delayed marshals its empty variadic slice as nil.
var noArgument = []byte{0xc0}

// Task is the interface of both GoTask and PyTask.
type Task interface {
	Serialize() ([]byte, error)
	getFuncPath() string
}

// RawGoTask store the fields need to be serialized for a GoTask.
type RawGoTask struct {
	FuncPath string
	Payload  []byte // serialized arg
}

// GoTask is a call of a Go handler: its function's path, its argument, and its options.
type GoTask struct {
	raw     RawGoTask
	arg     interface{}
	data    []byte // serialized data
	options TaskOptions
	err     error // an option's value With refused, returned by Serialize
}

// NewGoTask creates a new GoTask by the function path: one argument is the function's argument,
// several are its arguments in order.
func NewGoTask(funcPath string, arg ...interface{}) *GoTask {
	var a interface{}
	if len(arg) == 1 {
		a = arg[0]
	} else {
		a = arg
	}
	return &GoTask{raw: RawGoTask{FuncPath: funcPath}, arg: a}
}

// NewGoTaskOfFunc creates a new GoTask by a function (named as FuncPath names it); nil for a value
// that is no named function.
func NewGoTaskOfFunc(f interface{}, arg ...interface{}) *GoTask {
	funcPath := FuncPath(f)
	if funcPath == "" {
		return nil
	}
	return NewGoTask(funcPath, arg...)
}

// FuncPath is the name a worker knows a function by, as go-delayed names it: "main.Add" in a
// command, else its import path and name ("example.com/svc/jobs.Resize"); "" for a value that is
// no named function.
func FuncPath(f interface{}) string {
	fn := reflect.ValueOf(f)
	if fn.Kind() != reflect.Func {
		return ""
	}
	return runtime.FuncForPC(fn.Pointer()).Name()
}

// With returns the task with these options set (a value an option refuses is Serialize's error).
func (t *GoTask) With(options ...TaskOption) *GoTask {
	task := &GoTask{raw: RawGoTask{FuncPath: t.raw.FuncPath, Payload: t.raw.Payload}, arg: t.arg, err: t.err}
	if task.err == nil {
		task.options, task.err = t.options.with(options)
	}
	return task
}

// Options are the task's options.
func (t *GoTask) Options() TaskOptions { return t.options }

// FuncPath is the path of the function the task calls.
func (t *GoTask) FuncPath() string { return t.raw.FuncPath }

// Payload is the msgpack of the task's argument (nil for none).
func (t *GoTask) Payload() []byte { return t.raw.Payload }

// Equal returns if two tasks are equal.
// It may return false if one task is not serialized and the other is deserialized.
func (t *GoTask) Equal(task *GoTask) bool {
	return t.raw.FuncPath == task.raw.FuncPath && (bytes.Equal(t.raw.Payload, task.raw.Payload) || reflect.DeepEqual(t.arg, task.arg))
}

// Serialize returns the serialized data of the task: go-delayed's bytes when it carries no options.
func (t *GoTask) Serialize() (data []byte, err error) {
	if t.err != nil {
		return nil, t.err
	}
	if len(t.data) != 0 {
		return t.data, nil
	}
	if t.arg != nil && t.raw.Payload == nil {
		if t.raw.Payload, err = msgpack.MarshalAsArray(t.arg); err != nil {
			return nil, fmt.Errorf("task %s: its argument: %w", t.raw.FuncPath, err)
		}
	}
	carried := t.options.carried()
	raw := t.raw
	if carried && raw.Payload == nil {
		raw.Payload = noArgument
	}
	data, err = msgpack.MarshalAsArray(&raw)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.raw.FuncPath, err)
	}
	if carried {
		data[0] = goWithOptions
		if data, err = t.options.appendWireMap(data); err != nil {
			return nil, err
		}
	}
	t.data = data
	return data, nil
}

// withState is the same call with the options a worker writes as the task moves (attempt, crashes,
// unique token, id): a new task, its blob made anew.
func (t *GoTask) withState(options TaskOptions) *GoTask {
	return &GoTask{raw: t.raw, arg: t.arg, options: options}
}

// DeserializeGoTask creates a new GoTask from the serialized data.
func DeserializeGoTask(data []byte) (*GoTask, error) {
	task, err := decodeTask(data)
	if err != nil {
		return nil, err
	}
	goTask, ok := task.(*GoTask)
	if !ok {
		return nil, &MalformedTaskError{FuncPath: task.getFuncPath(), Reason: ReasonPyTask,
			Message: fmt.Sprintf("a PyTask for %q, not a GoTask", task.getFuncPath())}
	}
	return goTask, nil
}

func (t *GoTask) getFuncPath() string {
	return t.raw.FuncPath
}

// RawPyTask store the fields need to be serialized for a PyTask.
type RawPyTask struct {
	FuncPath string
	Args     interface{} // must be slice, array or nil
	KwArgs   interface{} // must be map, struct or nil
}

// PyTask is a call of a Python function ("module.path:func"): its arguments and its options.
type PyTask struct {
	raw     RawPyTask
	data    []byte // serialized data
	options TaskOptions
	err     error
}

// NewPyTask creates a new PyTask by the function path.
func NewPyTask(funcPath string, args, kwArgs interface{}) *PyTask {
	return &PyTask{raw: RawPyTask{FuncPath: funcPath, Args: args, KwArgs: kwArgs}}
}

// With returns the task with these options set (a value an option refuses is Serialize's error).
func (t *PyTask) With(options ...TaskOption) *PyTask {
	task := &PyTask{raw: t.raw, err: t.err}
	if task.err == nil {
		task.options, task.err = t.options.with(options)
	}
	return task
}

// Options are the task's options.
func (t *PyTask) Options() TaskOptions { return t.options }

// FuncPath is the Python function the task calls, "module.path:func".
func (t *PyTask) FuncPath() string { return t.raw.FuncPath }

// Serialize returns the serialized data of the task: go-delayed's bytes when it carries no options,
// else Python's five elements.
func (t *PyTask) Serialize() (data []byte, err error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.data != nil {
		return t.data, nil
	}
	if data, err = msgpack.MarshalAsArray(&t.raw); err != nil {
		return nil, fmt.Errorf("task %s: %w", t.raw.FuncPath, err)
	}
	if t.options.carried() {
		data[0] = pyWithOptions
		data = append(data, 0) // retry: keakon's fourth element, unused by options
		if data, err = t.options.appendWireMap(data); err != nil {
			return nil, err
		}
	}
	t.data = data
	return data, nil
}

func (t *PyTask) getFuncPath() string {
	return t.raw.FuncPath
}

// decodeTask reads either kind of blob, checking its shape: a GoTask whole (its payload is decoded
// by its handler), a PyTask as far as its func path and options (Go runs none).
func decodeTask(data []byte) (Task, error) {
	r := &reader{data: data}
	malformed := func(funcPath, message string) error {
		return &MalformedTaskError{FuncPath: funcPath, Reason: ReasonMalformed, Message: message}
	}
	kind, n, err := r.header()
	if err != nil || kind != 'a' || n < 1 || n > 5 {
		return nil, malformed("", "not a task: expected a msgpack array [func_path, ...]")
	}
	funcPath, err := r.text()
	if err != nil {
		return nil, malformed("", "not a task: its first element is not a func path")
	}
	if n > 1 { // Python writes a PyTask without arguments as [func_path]
		second := r.at
		if kind, _, err = r.header(); err != nil {
			return nil, malformed(funcPath, err.Error())
		}
		r.at = second
	}
	if (n == 2 && (kind == 'b' || kind == 'n')) || (n == 3 && kind == 'b') {
		task := &GoTask{raw: RawGoTask{FuncPath: funcPath}, data: data}
		payload, err := r.skip()
		if err != nil {
			return nil, malformed(funcPath, err.Error())
		}
		if kind == 'b' {
			var bin []byte
			if err := msgpack.Unmarshal(payload, &bin); err != nil {
				return nil, malformed(funcPath, err.Error())
			}
			task.raw.Payload = bin
		}
		if n == 3 {
			if task.options, err = readWireMap(r); err != nil {
				return nil, malformed(funcPath, err.Error())
			}
		}
		if r.at != len(data) {
			return nil, malformed(funcPath, "bytes after the task")
		}
		return task, nil
	}
	task := &PyTask{raw: RawPyTask{FuncPath: funcPath}, data: data}
	for i := 1; i < n && i < 4; i++ {
		if _, err := r.skip(); err != nil {
			return nil, malformed(funcPath, err.Error())
		}
	}
	if n == 5 {
		if task.options, err = readWireMap(r); err != nil {
			return nil, malformed(funcPath, err.Error())
		}
	}
	if r.at != len(data) {
		return nil, malformed(funcPath, "bytes after the task")
	}
	return task, nil
}

// Reasons a task is dead-lettered, as delayed/wire/dead_letter.py names them.
const (
	ReasonMalformed = "malformed"
	ReasonPyTask    = "py_task"
)

// MalformedTaskError is a blob that is no task this worker can run, and why (Reason, a dead
// letter's reason).
type MalformedTaskError struct {
	FuncPath string // "" when even the func path did not decode
	Reason   string
	Message  string
}

func (e *MalformedTaskError) Error() string {
	if e.FuncPath == "" {
		return e.Message
	}
	return fmt.Sprintf("task %s: %s", e.FuncPath, e.Message)
}

// InvalidRedisReplyError is a reply of a shape the command never gives.
var InvalidRedisReplyError = errors.New("Invalid redis reply")
