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

func Int8(lo, hi int8)                                 { record("Int8", lo, hi) }
func Int16(lo, hi int16)                               { record("Int16", lo, hi) }
func Int32(lo, hi int32)                               { record("Int32", lo, hi) }
func Int64(lo, hi int64)                               { record("Int64", lo, hi) }
func Uint8(lo, hi uint8)                               { record("Uint8", lo, hi) }
func Uint16(lo, hi uint16)                             { record("Uint16", lo, hi) }
func Uint32(lo, hi uint32)                             { record("Uint32", lo, hi) }
func Uint64(lo, hi uint64)                             { record("Uint64", lo, hi) }
func Float32(nan, pinf, ninf, v float32)               { record("Float32", nan, pinf, ninf, v) }
func Float64(nan, pinf, ninf, v float64)               { record("Float64", nan, pinf, ninf, v) }
func String(empty, s string)                           { record("String", empty, s) }
func Bytes(empty, b []byte)                            { record("Bytes", empty, b) }
func Bool(t, f bool)                                   { record("Bool", t, f) }
func Slices(empty []int, s []string, n [][]int)        { record("Slices", empty, s, n) }
func Array(a [3]int)                                   { record("Array", a) }
func Maps(empty map[string]int, m map[string][]string) { record("Maps", empty, m) }
func Struct(p Point, ps []Point)                       { record("Struct", p, ps) }
func Any(none, n, s interface{})                       { record("Any", none, n, s) }
func When(t time.Time)                                 { record("When", t.UTC()) }
func Variadic(prefix string, rest ...int)              { record("Variadic", prefix, rest) }

// Pointers records the nil pointer itself, and what the others point to (an address would
// change from run to run).
func Pointers(none *int, n *int, p *Point) { record("Pointers", none, *n, *p) }

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
