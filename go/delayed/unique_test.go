package delayed

import (
	"testing"
)

// TestUniqueDigestIsPythons holds the lock identity of Go's calls to the digests Python's producer
// computes for the same calls: hashlib.sha1(task.serialize()).hexdigest() of the Python task in each
// comment (a GoTask with options in the format delayed/wire/task.py shares with task.go:
// msgpack.packb([func, msgpack.packb(args), options])).
func TestUniqueDigestIsPythons(t *testing.T) {
	cases := []struct {
		name string
		task func() Task
		want string
	}{
		// PyTask("app.tasks:f")
		{"py_nil_nil", func() Task { return NewPyTask("app.tasks:f", nil, nil) }, "89db3cd77f88971fcfc4522062892a5a28892a03"},
		{"py_empty_empty", func() Task { return NewPyTask("app.tasks:f", []any{}, map[string]any{}) }, "89db3cd77f88971fcfc4522062892a5a28892a03"},
		// PyTask("app.tasks:f", [1, "x"])
		{"py_args", func() Task { return NewPyTask("app.tasks:f", []any{1, "x"}, nil) }, "e15b74895d604363a49f4d6af8404d03d7315f4e"},
		// PyTask("app.tasks:f", [1], {"a": 1, "b": "x"})
		{"py_kwargs_two", func() Task { return NewPyTask("app.tasks:f", []int{1}, map[string]any{"b": "x", "a": 1}) }, "e8736898a820ae24c6f210881ce40ffc9c9d95f4"},
		// PyTask("app.tasks:f", kwargs={"k": 1})
		{"py_kwargs_only", func() Task { return NewPyTask("app.tasks:f", nil, map[string]int{"k": 1}) }, "59275c66b59804afc05a5b8acfcab2dac4328bbc"},
		// PyTask("app.tasks:f", [1, "x"], max_retries=3)
		{"py_retries", func() Task { return NewPyTask("app.tasks:f", []any{1, "x"}, nil).With(MaxRetries(3)) }, "09b1583f5b686ee0b4c2836d83aef50a4c794515"},
		// PyTask("app.tasks:f", [1, "x"], headers={"traceparent": "t"}): its headers left out, as Python leaves them
		{"py_headers", func() Task {
			return NewPyTask("app.tasks:f", []any{1, "x"}, nil).With(Header("traceparent", "t"))
		}, "e15b74895d604363a49f4d6af8404d03d7315f4e"},
		// PyTask("app.tasks:f", [1, "x"], max_retries=3, headers={"traceparent": "t"})
		{"py_retries_headers", func() Task {
			return NewPyTask("app.tasks:f", []any{1, "x"}, nil).With(MaxRetries(3), Header("traceparent", "t"))
		}, "09b1583f5b686ee0b4c2836d83aef50a4c794515"},
		// GoTask("main.F", [1, "x"], headers={"traceparent": "t"})
		{"go_headers", func() Task { return NewGoTask("main.F", 1, "x").With(Header("traceparent", "t")) }, "4c623e9546f5fc855f4ac79a55cbd76e4f59ebc0"},
		{"go_expires_at", func() Task {
			t := NewGoTask("main.F", 1, "x")
			o := t.Options()
			at := 1700000000.5
			o.ExpiresAt = &at
			return t.withState(o)
		}, "4c623e9546f5fc855f4ac79a55cbd76e4f59ebc0"},
		// GoTask("main.F", [1, "x"])
		{"go_two", func() Task { return NewGoTask("main.F", 1, "x") }, "4c623e9546f5fc855f4ac79a55cbd76e4f59ebc0"},
		// GoTask("main.F", None), which go-delayed's NewGoTask("main.F", nil) writes as [func, nil]
		{"go_nil", func() Task { return NewGoTask("main.F", nil) }, "b9a28efc72d3171724187bae3fc13effec4a9616"},
		{"go_none", func() Task { return NewGoTask("main.F") }, "b9a28efc72d3171724187bae3fc13effec4a9616"},
		// GoTask("main.F", {"a": 1, "b": [2]})
		{"go_map", func() Task { return NewGoTask("main.F", map[string]any{"b": []int{2}, "a": 1}) }, "1b6e81182197516f83edccaf13a9f4c18ad5ff2e"},
		// GoTask("main.F", [1, "x"], max_retries=3)
		{"go_retries", func() Task { return NewGoTask("main.F", 1, "x").With(MaxRetries(3)) }, "e2700bca3f675adc7850129474f589403dc19455"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for try := 0; try < 20; try++ { // Go writes a map in random order: every serialization digests the same
				blob, err := c.task().Serialize()
				if err != nil {
					t.Fatal(err)
				}
				if got, err := uniqueDigest(blob); err != nil || got != c.want {
					t.Fatalf("digest %s (%v), Python's is %s (blob %x)", got, err, c.want, blob)
				}
			}
		})
	}
}

// TestBlobWithOptionsIsSerialize: a blob's options replaced byte for byte as Serialize writes a task
// with those options, for both kinds, and for the forms Python and go-delayed write.
func TestBlobWithOptionsIsSerialize(t *testing.T) {
	withID := func(task Task) TaskOptions {
		o := optionsOf(task)
		o.ID = "0123456789abcdef0123456789abcdef"
		return o
	}
	tasks := []Task{
		NewGoTask("main.F", 1, "x"), NewGoTask("main.F"), NewGoTask("main.F", nil), NewGoTask("main.F", 1).With(MaxRetries(2)),
		NewPyTask("app.tasks:f", nil, nil), NewPyTask("app.tasks:f", []int{1}, map[string]int{"k": 1}),
		NewPyTask("app.tasks:f", []int{1}, nil).With(TimeLimit(30e9)),
	}
	for _, task := range tasks {
		blob, _ := task.Serialize()
		o := withID(task)
		got, err := blobWithOptions(blob, o)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		switch task := task.(type) {
		case *GoTask:
			want, _ = task.withState(o).Serialize()
		case *PyTask:
			want, _ = (&PyTask{raw: task.raw, options: o}).Serialize()
		}
		if string(got) != string(want) {
			t.Errorf("%x with an id: %x, Serialize writes %x", blob, got, want)
		}
		if tracked := string(got); tracked[len(tracked)-37:len(tracked)-32] != trackedTail {
			t.Errorf("%x does not end with the tracked tail and the id", got)
		}
	}
	// Python's shortest forms ([func], [func, args]) take nil kwargs and a retry of 0.
	for _, python := range []string{"\x91\xa1f", "\x92\xa1f\x91\x01"} {
		got, err := blobWithOptions([]byte(python), TaskOptions{Crashes: 1})
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := decodeTask(got)
		if err != nil || optionsOf(decoded).Crashes != 1 || got[0] != 0x95 {
			t.Errorf("%x with crashes: %x (%v)", python, got, err)
		}
	}
}
