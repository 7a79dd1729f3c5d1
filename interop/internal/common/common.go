// Package common holds what the interop commands share: go-delayed's logger on stderr, a Redis
// pool, reading JSON flag values as Go values, and the recording worker goworker and contractworker run.
package common

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/keakon/golog"
	"github.com/keakon/golog/log"
	"github.com/yizhisec/go-delayed/delayed"
)

// SetupLogger sends go-delayed's log (keakon/golog) to stderr at level: debug, info, warn or error.
// Without it go-delayed logs nothing at all, its errors included.
func SetupLogger(level string) {
	levels := map[string]golog.Level{
		"debug": golog.DebugLevel, "info": golog.InfoLevel, "warn": golog.WarnLevel, "error": golog.ErrorLevel,
	}
	lv, ok := levels[strings.ToLower(level)]
	if !ok {
		Fatalf("unknown log level %q (debug, info, warn or error)", level)
	}
	handler := golog.NewHandler(lv, golog.DefaultFormatter)
	handler.AddWriter(golog.NewStderrWriter())
	logger := golog.NewLogger(lv)
	logger.AddHandler(handler)
	log.SetDefaultLogger(logger)
}

// Pool is go-delayed's own Redis pool, after checking that Redis answers.
func Pool(address string) *redis.Pool {
	pool := delayed.NewRedisPool(address)
	conn := pool.Get()
	defer conn.Close()
	if _, err := conn.Do("PING"); err != nil {
		Fatalf("cannot reach Redis at %s: %v", address, err)
	}
	return pool
}

// Fatalf prints one line on stderr and exits with status 1.
func Fatalf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// PrintJSON prints value as one JSON line on stdout.
func PrintJSON(value interface{}) {
	line, err := json.Marshal(value)
	if err != nil {
		Fatalf("cannot encode %#v: %v", value, err)
	}
	fmt.Println(string(line))
}

// ParseJSON reads a flag's JSON as plain Go values: whole numbers become int64 (not
// encoding/json's float64), other numbers float64, arrays []interface{}, objects
// map[string]interface{}, null nil.
func ParseJSON(text string) (interface{}, error) {
	decoder := json.NewDecoder(bytes.NewReader([]byte(text)))
	decoder.UseNumber()
	var value interface{}
	if err := decoder.Decode(&value); err != nil {
		return nil, err
	}
	return numbers(value), nil
}

func numbers(value interface{}) interface{} {
	switch v := value.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []interface{}:
		for i := range v {
			v[i] = numbers(v[i])
		}
	case map[string]interface{}:
		for k := range v {
			v[k] = numbers(v[k])
		}
	}
	return value
}

// SecondsSince is the seconds from the Unix time since (a Python time.time() at enqueue) to now:
// the start latency every Go worker of the bench (go-delayed's, ours, Asynq's) pushes.
func SecondsSince(since float64) float64 {
	return float64(time.Now().UnixNano())/1e9 - since
}
