module github.com/delayed-py/delayed/go/v2

go 1.22

require (
	github.com/gomodule/redigo v1.8.9
	github.com/redis/go-redis/v9 v9.18.0
	github.com/shamaton/msgpack/v2 v2.1.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	go.uber.org/atomic v1.11.0 // indirect
)
