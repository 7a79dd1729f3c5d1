package main

import (
	"time"

	"github.com/delayed-py/delayed/interop/internal/common"
)

// Point has exported fields (go-delayed's msgpack carries them as an array, in order) and an
// unexported one it never fills.
type Point struct {
	X     int
	Y     int
	Label string
	note  string
}

// handlers are registered as "main.<Name>". Each takes its kind's edge values at once, so no
// handler's previous task can leave a value behind (go-delayed decodes into the same variables).
var handlers = []interface{}{
	Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64,
	Float32, Float64, String, Bytes, Bool,
	Slices, Array, Maps, Struct, Pointers, Any, When, Variadic,
}

func Int8(lo, hi int8)                                 { common.Record("Int8", lo, hi) }
func Int16(lo, hi int16)                               { common.Record("Int16", lo, hi) }
func Int32(lo, hi int32)                               { common.Record("Int32", lo, hi) }
func Int64(lo, hi int64)                               { common.Record("Int64", lo, hi) }
func Uint8(lo, hi uint8)                               { common.Record("Uint8", lo, hi) }
func Uint16(lo, hi uint16)                             { common.Record("Uint16", lo, hi) }
func Uint32(lo, hi uint32)                             { common.Record("Uint32", lo, hi) }
func Uint64(lo, hi uint64)                             { common.Record("Uint64", lo, hi) }
func Float32(nan, pinf, ninf, v float32)               { common.Record("Float32", nan, pinf, ninf, v) }
func Float64(nan, pinf, ninf, v float64)               { common.Record("Float64", nan, pinf, ninf, v) }
func String(empty, s string)                           { common.Record("String", empty, s) }
func Bytes(empty, b []byte)                            { common.Record("Bytes", empty, b) }
func Bool(t, f bool)                                   { common.Record("Bool", t, f) }
func Slices(empty []int, s []string, n [][]int)        { common.Record("Slices", empty, s, n) }
func Array(a [3]int)                                   { common.Record("Array", a) }
func Maps(empty map[string]int, m map[string][]string) { common.Record("Maps", empty, m) }
func Struct(p Point, ps []Point)                       { common.Record("Struct", p, ps) }
func Any(none, n, s interface{})                       { common.Record("Any", none, n, s) }
func When(t time.Time)                                 { common.Record("When", t.UTC()) }
func Variadic(prefix string, rest ...int)              { common.Record("Variadic", prefix, rest) }

// Pointers records the nil pointer itself, and what the others point to (an address would
// change from run to run).
func Pointers(none *int, n *int, p *Point) { common.Record("Pointers", none, *n, *p) }

// record appends one JSON object to the results list:
// {"func": name, "pid": ..., "args": [{"type": "%T", "go": "%#v", "json": value}, ...]}.
