package delayed

import (
	"fmt"
	"reflect"

	"github.com/shamaton/msgpack/v2"
	"github.com/shamaton/msgpack/v2/def"
	"github.com/shamaton/msgpack/v2/ext"
)

// failedStepExt is the msgpack ext type of a failed workflow step passed on in place of its result
// ("D"): delayed/protocol/lua/flow.lua's failure writes it, Python's delayed/wire/ext.py reads it
// (FAILED_STEP_EXT; tests/test_go_module.py holds the two equal).
const failedStepExt int8 = 68

// StepFailed is a workflow step that failed, as a step after it receives it in place of the step's
// result (Python's delayed.StepFailed): in the results of a group's callback enqueued with
// on_member_failure="pass", and as the last argument of an on_failure step that takes a result.
//
// A handler takes it as a parameter of type StepFailed (or *StepFailed), or finds it in a list of
// results: a callback that must tell results from failures takes its list as []any, where a failed
// member's place holds a StepFailed value and the others hold their results as shamaton/msgpack
// decodes them into an interface{}:
//
//	func Collect(results []any) {
//		for _, r := range results {
//			if failed, ok := r.(delayed.StepFailed); ok { ... }
//		}
//	}
//
// A list of a concrete type ([]int) does not take a failure: its task is dead-lettered as bad_arguments.
type StepFailed struct {
	ID     string     // the failed step's task id
	Func   string     // its function
	Status TaskStatus // how it ended: TaskFailed, TaskDead or TaskCancelled
	Error  string     // what it failed with (or why it could not run)
}

// String says which step failed, how, and why, as Python's StepFailed does.
func (f StepFailed) String() string {
	text := fmt.Sprintf("step %s (%s) %s", f.ID, f.Func, f.Status)
	if f.Error != "" {
		text += ": " + f.Error
	}
	return text
}

// stepFailedFields is the map inside the ext value (flow.lua writes it with these keys).
type stepFailedFields struct {
	ID     string     `msgpack:"id"`
	Func   string     `msgpack:"func"`
	Status TaskStatus `msgpack:"status"`
	Error  string     `msgpack:"error"`
}

var stepFailedType = reflect.TypeOf(StepFailed{})

// stepFailedCoder reads and writes a StepFailed as msgpack ext failedStepExt, for shamaton/msgpack:
// registered at init, so every payload a handler decodes (and a StepFailed a test or handler
// marshals) goes through it.
type stepFailedCoder struct {
	ext.DecoderCommon
	ext.EncoderCommon
}

func init() {
	coder := &stepFailedCoder{}
	if err := msgpack.AddExtCoder(coder, coder); err != nil {
		panic(err)
	}
}

func (c *stepFailedCoder) Code() int8 { return failedStepExt }

// extHeader reads the header of the ext value at offset in d: the length of its data, its type, and
// where the data starts; ok false for no ext value, or one cut short.
func extHeader(offset int, d []byte) (size int, code int8, start int, ok bool) {
	if offset >= len(d) {
		return 0, 0, 0, false
	}
	lengthBytes := 0
	switch marker := d[offset]; marker {
	case def.Fixext1, def.Fixext2, def.Fixext4, def.Fixext8, def.Fixext16:
		size = 1 << (marker - def.Fixext1)
	case def.Ext8, def.Ext16, def.Ext32:
		lengthBytes = 1 << (marker - def.Ext8)
	default:
		return 0, 0, 0, false
	}
	start = offset + 2 + lengthBytes
	if start+size > len(d) {
		return 0, 0, 0, false
	}
	for _, b := range d[offset+1 : offset+1+lengthBytes] {
		size = size<<8 | int(b)
	}
	if start+size > len(d) {
		return 0, 0, 0, false
	}
	return size, int8(d[start-1]), start, true
}

func (c *stepFailedCoder) IsType(offset int, d *[]byte) bool {
	_, code, _, ok := extHeader(offset, *d)
	return ok && code == failedStepExt
}

func (c *stepFailedCoder) AsValue(offset int, k reflect.Kind, d *[]byte) (interface{}, int, error) {
	size, _, start, ok := extHeader(offset, *d)
	if !ok {
		return nil, 0, fmt.Errorf("msgpack: a failed step's ext value runs past the data")
	}
	var fields stepFailedFields
	if err := msgpack.Unmarshal((*d)[start:start+size], &fields); err != nil {
		return nil, 0, fmt.Errorf("msgpack: a failed step's ext value: %w", err)
	}
	return StepFailed(fields), start + size, nil
}

func (c *stepFailedCoder) Type() reflect.Type { return stepFailedType }

// body is the ext value's data: the msgpack map of the step's fields.
func (c *stepFailedCoder) body(value reflect.Value) ([]byte, error) {
	return msgpack.Marshal(stepFailedFields(value.Interface().(StepFailed)))
}

// CalcByteSize is the ext value's size but its first byte (which shamaton counts itself).
func (c *stepFailedCoder) CalcByteSize(value reflect.Value) (int, error) {
	body, err := c.body(value)
	if err != nil {
		return 0, err
	}
	return extHeaderSize(len(body)) - 1 + len(body), nil
}

// extHeaderSize is the bytes before an ext value's data of size bytes: marker, length, type.
func extHeaderSize(size int) int {
	switch {
	case size < 1<<8:
		return 3
	case size < 1<<16:
		return 4
	default:
		return 6
	}
}

func (c *stepFailedCoder) WriteToBytes(value reflect.Value, offset int, bytes *[]byte) int {
	body, _ := c.body(value) // CalcByteSize, called first, returned its error
	switch extHeaderSize(len(body)) {
	case 3:
		offset = c.SetByte1Int(def.Ext8, offset, bytes)
		offset = c.SetByte1Int(len(body), offset, bytes)
	case 4:
		offset = c.SetByte1Int(def.Ext16, offset, bytes)
		offset = c.SetByte2Int(len(body), offset, bytes)
	default:
		offset = c.SetByte1Int(def.Ext32, offset, bytes)
		offset = c.SetByte4Int(len(body), offset, bytes)
	}
	offset = c.SetByte1Int(int(failedStepExt), offset, bytes)
	return c.SetBytes(body, offset, bytes)
}
