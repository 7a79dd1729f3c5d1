// Package main holds a go-delayed handler for every kind of parameter the contract format
// describes, and some that go-delayed cannot decode, for tests/test_contract_go.py.
package main

import "time"

type Point struct {
	X, Y  int
	Label string
	note  string // unexported: go-delayed's msgpack skips it
}

type Shape struct {
	Name    string
	Corner  Point
	Tags    map[string][]int
	Next    *Point
	hidden  int
	Skipped string `msgpack:"-"`
}

// Labelled embeds Point: go-delayed reads it as one field, an array of Point's fields.
type Labelled struct {
	Point
	Note string
}

// Node refers to itself: the format has no way to say so.
type Node struct {
	Value int
	Next  *Node
}

type Celsius float32

func Ints(a int8, b int16, c int32, d int64, e int)                          {}
func Uints(a uint8, b uint16, c uint32, d uint64, e uint, f byte)            {}
func Floats(a float32, b float64, c Celsius)                                 {}
func Text(s string, b []byte, ok bool)                                       {}
func Collections(s []string, a [3]int, m map[string]float64, k map[int]bool) {}
func Nested(s Shape, ps []*Point, l Labelled)                                {}
func Pointer(p *int)                                                         {}
func Anything(v interface{}, w any, m map[string]interface{})                {}
func When(t time.Time)                                                       {}
func Variadic(prefix string, rest ...int)                                    {}
func NoArg()                                                                 {}
func Returns(a int) (int, error)                                             { return a, nil }
func unexported(n int)                                                       {}
func Watch(c chan int)                                                       {}
func Callback(f func(int) error)                                             {}
func Complex(c complex128)                                                   {}
func Address(p uintptr)                                                      {}
func Chain(n Node)                                                           {}
func Fails(err error)                                                        {}
func Generic[T any](v T)                                                     {}

func main() {}
