package main

import (
	"os"
	"time"

	"github.com/delayed-py/delayed/interop/internal/common"
)

// Point is a struct parameter: go-delayed carries it as the array of its fields, in order.
type Point struct {
	X     int
	Y     int
	Label string
}

// Reading has a float32 field, which go-delayed's msgpack only fills from a msgpack float32.
type Reading struct {
	Name  string
	Value float32
}

// handlers are registered as "main.<Name>".
var handlers = []interface{}{
	Int, Int8, Int16, Int32, Int64, Uint, Uint8, Uint16, Uint32, Uint64,
	Float32, Float64, String, Bytes, Bool,
	Ints, Strings, Nested, MapInt, MapAny,
	Struct, StructPtr, Float32Struct, Several, Variadic, VariadicOnly, NoArg, Any,
	Count, Slow, Noop, Elapsed,
}

func Int(v int)                           { common.Record("Int", v) }
func Int8(v int8)                         { common.Record("Int8", v) }
func Int16(v int16)                       { common.Record("Int16", v) }
func Int32(v int32)                       { common.Record("Int32", v) }
func Int64(v int64)                       { common.Record("Int64", v) }
func Uint(v uint)                         { common.Record("Uint", v) }
func Uint8(v uint8)                       { common.Record("Uint8", v) }
func Uint16(v uint16)                     { common.Record("Uint16", v) }
func Uint32(v uint32)                     { common.Record("Uint32", v) }
func Uint64(v uint64)                     { common.Record("Uint64", v) }
func Float32(v float32)                   { common.Record("Float32", v) }
func Float64(v float64)                   { common.Record("Float64", v) }
func String(v string)                     { common.Record("String", v) }
func Bytes(v []byte)                      { common.Record("Bytes", v) }
func Bool(v bool)                         { common.Record("Bool", v) }
func Ints(v []int)                        { common.Record("Ints", v) }
func Strings(v []string)                  { common.Record("Strings", v) }
func Nested(v [][]int)                    { common.Record("Nested", v) }
func MapInt(v map[string]int)             { common.Record("MapInt", v) }
func MapAny(v map[string]interface{})     { common.Record("MapAny", v) }
func Struct(v Point)                      { common.Record("Struct", v) }
func StructPtr(v *Point)                  { common.Record("StructPtr", v) }
func Float32Struct(v Reading)             { common.Record("Float32Struct", v) }
func Several(n int, s string, f float64)  { common.Record("Several", n, s, f) }
func Variadic(prefix string, rest ...int) { common.Record("Variadic", prefix, rest) }
func VariadicOnly(rest ...int)            { common.Record("VariadicOnly", rest) }
func NoArg()                              { common.Record("NoArg") }
func Any(v interface{})                   { common.Record("Any", v) }
func Noop()                               {}

// Elapsed RPUSHes to key the seconds from the Unix time since to its start (the bench's start latency).
func Elapsed(key string, since float64) {
	common.Do("RPUSH", key, common.SecondsSince(since))
}

// Count counts one execution of id in the hash "executions" (for soaks).
func Count(id string) { common.Do("HINCRBY", "executions", id, 1) }

// Slow marks itself started (key started:<id> = pid), sleeps ms, then counts and records:
// the window in which tests kill the worker.
func Slow(id string, ms int) {
	common.Do("SET", "started:"+id, os.Getpid())
	time.Sleep(time.Duration(ms) * time.Millisecond)
	common.Do("HINCRBY", "executions", id, 1)
	common.Record("Slow", id, ms)
}

// record appends one JSON object to the results list:
// {"func": name, "pid": ..., "args": [{"type": "%T", "go": "%#v", "json": value}, ...]}.
