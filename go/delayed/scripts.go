package delayed

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// The Lua scripts both languages run. lua/ is a copy of delayed/protocol/lua/ (go:embed cannot reach
// outside the module): `make go-lua` refreshes it, and TestScriptsAreThePythonPackages (and the Python
// suite's tests/test_go_module.py) fail on any difference, so the two can never drift.
//
//go:embed lua/*.lua
var luaFiles embed.FS

var declaration = regexp.MustCompile(`(?m)^-- (KEYS|ARGV|uses):(.*)$`)

// param is one name a script's header declares: filled from the queue's keys when it names one,
// else given by the caller; spread ("name...") takes a slice, spread in place.
type param struct {
	name   string
	spread bool
}

// script is one Lua script of lua/, with the KEYS and ARGV its header declares, in order (the
// header is the one statement of its arguments, read here as Python's scripts.py reads it).
type script struct {
	name       string
	keys, args []param
	source     string
	sha        string
}

func readLua(name string) string {
	data, err := luaFiles.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("delayed: no Lua script %q: %v", name, err))
	}
	return string(data)
}

// loadScript reads a script and its header; a misspelled name panics at package init.
func loadScript(name string) *script {
	source := readLua(name)
	s := &script{name: name}
	var uses []string
	for _, match := range declaration.FindAllStringSubmatch(source, -1) {
		for _, word := range strings.Fields(match[2]) {
			switch match[1] {
			case "KEYS":
				s.keys = append(s.keys, paramOf(word))
			case "ARGV":
				s.args = append(s.args, paramOf(word))
			case "uses":
				uses = append(uses, word)
			}
		}
	}
	var used strings.Builder
	for _, name := range usedFiles(uses, nil) {
		used.WriteString(readLua(name))
	}
	s.source = used.String() + source
	sum := sha1.Sum([]byte(s.source))
	s.sha = hex.EncodeToString(sum[:])
	return s
}

// usedFiles is the files a script uses, each after those it uses itself (a used file's "-- uses:"
// line), once (as Python's scripts.py orders them).
func usedFiles(names []string, order []string) []string {
	for _, name := range names {
		if slices.Contains(order, name) {
			continue
		}
		var own []string
		for _, match := range declaration.FindAllStringSubmatch(readLua(name), -1) {
			if match[1] == "uses" {
				own = append(own, strings.Fields(match[2])...)
			}
		}
		order = append(usedFiles(own, order), name)
	}
	return order
}

func paramOf(word string) param {
	if strings.HasSuffix(word, "...") {
		return param{strings.TrimSuffix(word, "..."), true}
	}
	return param{word, false}
}

// args maps a script's declared names to values: a spread name takes a []any (see spread).
type args map[string]any

// spread makes a []any of any slice's items, for a spread parameter.
func spread[T any](items []T) []any {
	out := make([]any, len(items))
	for i, item := range items {
		out[i] = item
	}
	return out
}

// layout fills the declared names in order: from keys when the queue has a key of that name, else
// from given; an error names what is missing or left over (a bug in the caller, found at its first call).
func (s *script) layout(keys *queueKeys, given args) (keyValues, argValues []any, err error) {
	used := 0
	fill := func(params []param) ([]any, error) {
		var values []any
		for _, p := range params {
			if keys != nil {
				if key, ok := keys.byName(p.name); ok {
					values = append(values, key)
					continue
				}
			}
			value, ok := given[p.name]
			if !ok {
				return nil, fmt.Errorf("delayed: script %s needs %q", s.name, p.name)
			}
			used++
			if p.spread {
				items, ok := value.([]any)
				if !ok {
					return nil, fmt.Errorf("delayed: script %s: %q takes a []any, not %T", s.name, p.name, value)
				}
				values = append(values, items...)
			} else {
				values = append(values, value)
			}
		}
		return values, nil
	}
	if keyValues, err = fill(s.keys); err != nil {
		return nil, nil, err
	}
	if argValues, err = fill(s.args); err != nil {
		return nil, nil, err
	}
	if used != len(given) {
		return nil, nil, fmt.Errorf("delayed: script %s called with %d names, declares %d it does not take from the queue's keys", s.name, len(given), used)
	}
	return keyValues, argValues, nil
}

// run runs the script on c (EVALSHA, then EVAL once Redis says NOSCRIPT), its KEYS and ARGV laid
// out from keys and given.
func (s *script) run(ctx context.Context, c conn, keys *queueKeys, given args) (any, error) {
	keyValues, argValues, err := s.layout(keys, given)
	if err != nil {
		return nil, err
	}
	command := make([]any, 0, 3+len(keyValues)+len(argValues))
	command = append(command, "EVALSHA", s.sha, len(keyValues))
	command = append(append(command, keyValues...), argValues...)
	reply, err := c.do(ctx, command...)
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		command[0], command[1] = "EVAL", s.source
		reply, err = c.do(ctx, command...)
	}
	return reply, err
}
