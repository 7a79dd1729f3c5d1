package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/keakon/golog/log"
)

var (
	pool       *redis.Pool
	resultsKey string
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

func Int(v int)                           { record("Int", v) }
func Int8(v int8)                         { record("Int8", v) }
func Int16(v int16)                       { record("Int16", v) }
func Int32(v int32)                       { record("Int32", v) }
func Int64(v int64)                       { record("Int64", v) }
func Uint(v uint)                         { record("Uint", v) }
func Uint8(v uint8)                       { record("Uint8", v) }
func Uint16(v uint16)                     { record("Uint16", v) }
func Uint32(v uint32)                     { record("Uint32", v) }
func Uint64(v uint64)                     { record("Uint64", v) }
func Float32(v float32)                   { record("Float32", v) }
func Float64(v float64)                   { record("Float64", v) }
func String(v string)                     { record("String", v) }
func Bytes(v []byte)                      { record("Bytes", v) }
func Bool(v bool)                         { record("Bool", v) }
func Ints(v []int)                        { record("Ints", v) }
func Strings(v []string)                  { record("Strings", v) }
func Nested(v [][]int)                    { record("Nested", v) }
func MapInt(v map[string]int)             { record("MapInt", v) }
func MapAny(v map[string]interface{})     { record("MapAny", v) }
func Struct(v Point)                      { record("Struct", v) }
func StructPtr(v *Point)                  { record("StructPtr", v) }
func Float32Struct(v Reading)             { record("Float32Struct", v) }
func Several(n int, s string, f float64)  { record("Several", n, s, f) }
func Variadic(prefix string, rest ...int) { record("Variadic", prefix, rest) }
func VariadicOnly(rest ...int)            { record("VariadicOnly", rest) }
func NoArg()                              { record("NoArg") }
func Any(v interface{})                   { record("Any", v) }
func Noop()                               {}

// Elapsed RPUSHes to key the seconds from the Unix time since to its start (the bench's start latency).
func Elapsed(key string, since float64) {
	do("RPUSH", key, float64(time.Now().UnixNano())/1e9-since)
}

// Count counts one execution of id in the hash "executions" (for soaks).
func Count(id string) { do("HINCRBY", "executions", id, 1) }

// Slow marks itself started (key started:<id> = pid), sleeps ms, then counts and records:
// the window in which tests kill the worker.
func Slow(id string, ms int) {
	do("SET", "started:"+id, os.Getpid())
	time.Sleep(time.Duration(ms) * time.Millisecond)
	do("HINCRBY", "executions", id, 1)
	record("Slow", id, ms)
}

// record appends one JSON object to the results list:
// {"func": name, "pid": ..., "args": [{"type": "%T", "go": "%#v", "json": value}, ...]}.
func record(name string, args ...interface{}) {
	described := make([]map[string]interface{}, len(args))
	for i, arg := range args {
		entry := map[string]interface{}{"type": fmt.Sprintf("%T", arg), "go": fmt.Sprintf("%#v", arg)}
		if encoded, err := json.Marshal(arg); err == nil {
			entry["json"] = json.RawMessage(encoded)
		} else {
			entry["json_error"] = err.Error()
		}
		described[i] = entry
	}
	line, _ := json.Marshal(map[string]interface{}{"func": name, "pid": strconv.Itoa(os.Getpid()), "args": described})
	do("RPUSH", resultsKey, line)
}

func do(command string, args ...interface{}) {
	conn := pool.Get()
	defer conn.Close()
	if _, err := conn.Do(command, args...); err != nil {
		log.Errorf("%s failed: %v", command, err)
	}
}
