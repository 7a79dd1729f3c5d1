package delayed

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/shamaton/msgpack/v2"
)

var (
	contextType = reflect.TypeOf((*context.Context)(nil)).Elem()
	errorType   = reflect.TypeOf((*error)(nil)).Elem()
)

// A Handler is a function a worker runs tasks with, and how a task's payload becomes its arguments
// (go-delayed's Handler). The payload is decoded with shamaton/msgpack's UnmarshalAsArray, as
// go-delayed decodes it: a function of one parameter takes the whole payload as that value; one of
// several takes an array of them, in order (a variadic last parameter as a slice). A first parameter of
// type context.Context is no part of the payload: the worker passes the task's context (its time
// limit's deadline). The function may return nothing, an error, a value, or a value and an error.
type Handler struct {
	fn       reflect.Value
	path     string
	withCtx  bool           // its first parameter is a context.Context
	params   []reflect.Type // the parameters the payload fills
	arg      reflect.Type   // what the payload decodes into: the one parameter, or a struct of them
	variadic bool
	valueAt  int // which result is the value (-1: none)
	errorAt  int // which result is the error (-1: none)
}

// NewHandler creates a handler for a function, named as FuncPath names it; nil for a value that is
// no named function.
func NewHandler(f interface{}) *Handler {
	fn := reflect.ValueOf(f)
	path := FuncPath(f)
	if path == "" || fn.IsNil() {
		return nil
	}
	fnType := fn.Type()
	h := &Handler{fn: fn, path: path, variadic: fnType.IsVariadic(), valueAt: -1, errorAt: -1}
	for i := 0; i < fnType.NumIn(); i++ {
		if i == 0 && fnType.In(0) == contextType {
			h.withCtx = true
			continue
		}
		h.params = append(h.params, fnType.In(i))
	}
	switch len(h.params) {
	case 0:
	case 1:
		h.arg = h.params[0]
	default:
		fields := make([]reflect.StructField, len(h.params))
		for i, param := range h.params {
			fields[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: param}
		}
		h.arg = reflect.StructOf(fields)
	}
	if n := fnType.NumOut(); n > 0 {
		if fnType.Out(n-1) == errorType {
			h.errorAt = n - 1
		}
		if h.errorAt != 0 {
			h.valueAt = 0
		}
	}
	return h
}

// Call runs the handler's function with the arguments in payload (msgpack, as a GoTask carries them;
// empty: each parameter its zero value), and context.Background() for a context parameter: the
// function's results, or the error that decoding the payload gave (the function is then not called).
// A panic of the function is not recovered.
func (h *Handler) Call(payload []byte) (result []reflect.Value, err error) {
	args, err := h.arguments(context.Background(), payload)
	if err != nil {
		return nil, err
	}
	return h.call(args), nil
}

// arguments decodes payload into fresh values of the parameters (a worker runs tasks of one handler
// at once: none shares a value with another), ctx first if the function takes one.
func (h *Handler) arguments(ctx context.Context, payload []byte) ([]reflect.Value, error) {
	args := make([]reflect.Value, 0, len(h.params)+1)
	if h.withCtx {
		args = append(args, reflect.ValueOf(&ctx).Elem())
	}
	if h.arg == nil {
		return args, nil
	}
	arg := reflect.New(h.arg)
	if len(payload) > 0 {
		if err := msgpack.UnmarshalAsArray(payload, arg.Interface()); err != nil {
			return nil, &argumentsError{path: h.path, params: h.params, err: err}
		}
	}
	if len(h.params) == 1 {
		return append(args, arg.Elem()), nil
	}
	for i := range h.params {
		args = append(args, arg.Elem().Field(i))
	}
	return args, nil
}

func (h *Handler) call(args []reflect.Value) []reflect.Value {
	if h.variadic {
		return h.fn.CallSlice(args)
	}
	return h.fn.Call(args)
}

// outcome is what the function's results say: its value (nil if it returns none) and its error.
func (h *Handler) outcome(results []reflect.Value) (value any, err error) {
	if h.errorAt >= 0 {
		err, _ = results[h.errorAt].Interface().(error)
	}
	if h.valueAt >= 0 {
		value = results[h.valueAt].Interface()
	}
	return value, err
}

// argumentsError is a payload the handler's parameters do not take: its task is dead-lettered as
// bad_arguments, never retried.
type argumentsError struct {
	path   string
	params []reflect.Type
	err    error
}

func (e *argumentsError) Error() string {
	names := make([]string, len(e.params))
	for i, param := range e.params {
		names[i] = param.String()
	}
	return fmt.Sprintf("%s(%s) does not take the task's arguments: %v", e.path, strings.Join(names, ", "), e.err)
}

func (e *argumentsError) Unwrap() error { return e.err }
