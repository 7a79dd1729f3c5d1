module github.com/delayed-py/delayed/interop

go 1.21

require (
	github.com/gomodule/redigo v1.8.9
	github.com/keakon/golog v0.0.0-20230323022214-04d52304f8cd
	github.com/redis/go-redis/v9 v9.18.0
	github.com/yizhisec/go-delayed v0.0.0-20230324085158-b9b3a47d839c
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/shamaton/msgpack/v2 v2.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
)
