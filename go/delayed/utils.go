package delayed

import "log/slog"

// Recover recovers from a panic and logs it (go-delayed's): `defer delayed.Recover()` at the top of
// a goroutine keeps a panic in it from ending the program. The worker recovers its handlers' panics
// itself (their tasks fail, with the panic's stack in the dead letter).
func Recover() {
	if p := recover(); p != nil {
		slog.Error("recovered from a panic", "panic", p)
	}
}

// RandHexString is size random bytes in hex (go-delayed's; it made its worker ids so).
func RandHexString(size int) string {
	return randomHex(size)
}
