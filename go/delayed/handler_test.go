package delayed

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/shamaton/msgpack/v2"
)

// The handlers of go-delayed's own handler tests (its handler_test.go's cases, written anew): every
// payload go-delayed's worker decodes, ours decodes into the same arguments.

type pair struct {
	A int
	B string
}

var aPair = pair{A: 1, B: "four"}

func sumPair(a pair) int { return a.A + len(a.B) }

func sumPairPointer(a *pair) int {
	if a == nil {
		return 0
	}
	return a.A + len(a.B)
}

func identity(a int) int { return a }

func deref(a *int) int { return *a }

func zero() int { return 0 }

func addTwo(a, b int) int { return a + b }

func sumPairs(a, b pair) int { return sumPair(a) + sumPair(b) }

func sumPairPointers(a, b *pair) int { return sumPair(*a) + sumPair(*b) }

func sumSlicePair(a []int, b pair) int { return sum(a...) + sumPair(b) }

func sumArraySlice(a [3]int, b []int) int { return sum(a[:]...) + sum(b...) }

func sumSlice(a []int) int { return sum(a...) }

func sumVariadic(a ...int) int { return sum(a...) }

func sumSliceVariadic(a []int, b ...int) int { return sum(a...) + sum(b...) }

func sumPairSliceVariadic(a pair, b []int, c ...int) int { return sumPair(a) + sum(b...) + sum(c...) }

func sum(items ...int) int {
	total := 0
	for _, item := range items {
		total += item
	}
	return total
}

func TestHandlerDecodesAsGoDelayed(t *testing.T) {
	cases := []struct {
		name string
		f    interface{}
		args interface{} // marshalled as go-delayed's NewGoTask does; nil: no payload
		want int
	}{
		{"struct", sumPair, aPair, 5},
		{"struct as an array", sumPair, []interface{}{1, "four"}, 5},
		{"no payload for a struct", sumPair, nil, 0},
		{"*struct", sumPairPointer, &aPair, 5},
		{"no payload for a *struct", sumPairPointer, nil, 0},
		{"int", identity, 1, 1},
		{"*int", deref, new(int), 0},
		{"no parameter", zero, nil, 0},
		{"ints", addTwo, []int{2, 3}, 5},
		{"structs", sumPairs, []pair{aPair, aPair}, 10},
		{"*structs", sumPairPointers, []*pair{&aPair, &aPair}, 10},
		{"[]int and a struct", sumSlicePair, []interface{}{[]int{1, 2, 3}, aPair}, 11},
		{"[3]int and []int", sumArraySlice, []interface{}{[3]int{1, 2, 3}, []int{4, 5}}, 15},
		{"[]int", sumSlice, []int{1, 2, 3}, 6},
		{"...int", sumVariadic, []int{1, 2, 3}, 6},
		{"[]int and ...int", sumSliceVariadic, []interface{}{[]int{1, 2, 3}, []int{4, 5, 6}}, 21},
		{"struct, []int and ...int", sumPairSliceVariadic, []interface{}{aPair, []int{1, 2, 3}, []int{4, 5, 6}}, 26},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(tt.f)
			if h == nil || h.path != FuncPath(tt.f) || !strings.HasPrefix(h.path, "github.com/delayed-py/delayed/go/v2/delayed.") {
				t.Fatalf("NewHandler(%s) = %+v", tt.name, h)
			}
			var payload []byte
			if tt.args != nil {
				var err error
				if payload, err = msgpack.MarshalAsArray(tt.args); err != nil {
					t.Fatal(err)
				}
			}
			results, err := h.Call(payload)
			if err != nil {
				t.Fatal(err)
			}
			if got := results[0].Interface().(int); got != tt.want {
				t.Errorf("Call() = %d, want %d", got, tt.want)
			}
			// as the worker decodes it, from the blob of go-delayed's NewGoTask
			task, err := DeserializeGoTask(blob(t, NewGoTask(h.path, tt.args)))
			if err != nil {
				t.Fatal(err)
			}
			args, err := h.arguments(context.Background(), task.Payload())
			if err != nil {
				t.Fatal(err)
			}
			if value, err := h.outcome(h.call(args)); err != nil || value != tt.want {
				t.Errorf("from its blob: %v, %v; want %d", value, err, tt.want)
			}
		})
	}
}

func TestNewHandlerRefusesWhatIsNoNamedFunction(t *testing.T) {
	var nilFunc func()
	for _, value := range []interface{}{nil, 3, "main.Add", nilFunc} {
		if h := NewHandler(value); h != nil {
			t.Errorf("NewHandler(%#v) = %+v, want nil", value, h)
		}
	}
}

type ctxKey struct{}

func withContext(ctx context.Context, a, b int) (int, error) {
	if ctx.Value(ctxKey{}) != "given" {
		return 0, errors.New("not the worker's context")
	}
	return a * b, nil
}

func onlyContext(ctx context.Context) error { return ctx.Err() }

func returnsNothing(int) {}

func returnsError(message string) error { return errors.New(message) }

func returnsValueAndError(n int) (map[string]int, error) { return map[string]int{"n": n}, nil }

func TestHandlerTakesAContextAndReturnsAValueAndAnError(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, "given")
	cases := []struct {
		f       interface{}
		args    interface{}
		value   interface{}
		message string
	}{
		{withContext, []int{6, 7}, 42, ""},
		{onlyContext, nil, nil, ""},
		{returnsNothing, 3, nil, ""},
		{returnsError, "broke", nil, "broke"},
		{returnsValueAndError, 5, map[string]int{"n": 5}, ""},
	}
	for _, tt := range cases {
		h := NewHandler(tt.f)
		payload, _ := msgpack.MarshalAsArray(tt.args)
		args, err := h.arguments(ctx, payload)
		if err != nil {
			t.Fatalf("%s: %v", h.path, err)
		}
		value, err := h.outcome(h.call(args))
		if !reflect.DeepEqual(value, tt.value) || (err == nil) != (tt.message == "") || (err != nil && err.Error() != tt.message) {
			t.Errorf("%s = %#v, %v; want %#v, %q", h.path, value, err, tt.value, tt.message)
		}
	}
	// Call (go-delayed's) passes context.Background(): the handler sees no value of ours
	results, err := NewHandler(withContext).Call(mustMarshal(t, []int{1, 2}))
	if err != nil || results[1].Interface() == nil {
		t.Errorf("Call of a context handler = %v, %v; want the handler's own error", results, err)
	}
}

// blob serializes a task, failing the test on an error.
func blob(t testing.TB, task Task) []byte {
	t.Helper()
	data, err := task.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustMarshal(t *testing.T, value interface{}) []byte {
	t.Helper()
	data, err := msgpack.MarshalAsArray(value)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func keepSlice(a []int) []int { return a }

func TestEveryCallDecodesIntoFreshValues(t *testing.T) {
	h := NewHandler(keepSlice)
	first, _ := h.arguments(context.Background(), mustMarshal(t, []int{1, 2}))
	second, _ := h.arguments(context.Background(), mustMarshal(t, []int{3, 4}))
	a, _ := h.outcome(h.call(first))
	b, _ := h.outcome(h.call(second))
	if !reflect.DeepEqual(a, []int{1, 2}) || !reflect.DeepEqual(b, []int{3, 4}) {
		t.Errorf("two calls gave %v and %v: they share their arguments", a, b)
	}
}

func TestArgumentsThatDoNotFitAreAnError(t *testing.T) {
	h := NewHandler(addTwo)
	_, err := h.arguments(context.Background(), mustMarshal(t, []string{"a", "b"}))
	var misfit *argumentsError
	if !errors.As(err, &misfit) || !strings.Contains(err.Error(), "delayed.addTwo(int, int) does not take the task's arguments") {
		t.Errorf("arguments of strings for ints: %v", err)
	}
	if _, err := h.Call(mustMarshal(t, []string{"a", "b"})); err == nil {
		t.Error("Call took strings for ints")
	}
}
