module github.com/delayed-py/delayed/interop

go 1.21

require (
	github.com/gomodule/redigo v1.8.9
	github.com/keakon/golog v0.0.0-20230323022214-04d52304f8cd
	github.com/yizhisec/go-delayed v0.0.0-20230324085158-b9b3a47d839c
)

require github.com/shamaton/msgpack/v2 v2.1.1 // indirect
