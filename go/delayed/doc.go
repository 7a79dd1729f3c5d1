// Package delayed is a Redis task queue for Go services that shares its queues with Python ones:
// a drop-in for go-delayed (github.com/yizhisec/go-delayed/delayed: change the import path, nothing
// else), whose worker also runs many tasks at once, retries failures with backoff, dead-letters what
// it cannot run, stops gracefully, and writes the results Python's TaskHandle.result() reads.
//
// It speaks the wire format of go-delayed and of the Python package delayed: the same keys, blobs and
// Lua scripts (embedded from the Python package's delayed/protocol/lua/), so Python and Go producers,
// workers and sweepers share one Redis.
package delayed
