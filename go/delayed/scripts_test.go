package delayed

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// pythonLua is where the Python package keeps the scripts lua/ copies.
const pythonLua = "../../delayed/protocol/lua"

// TestScriptsAreThePythonPackages fails when lua/ and the Python package's scripts differ in any
// file, or in which files there are: run `make go-lua` to copy them again.
func TestScriptsAreThePythonPackages(t *testing.T) {
	theirs, err := filepath.Glob(filepath.Join(pythonLua, "*.lua"))
	if err != nil || len(theirs) == 0 {
		t.Fatalf("no scripts in %s: %v", pythonLua, err)
	}
	ours, _ := filepath.Glob("lua/*.lua")
	names := func(paths []string) []string {
		out := []string{}
		for _, path := range paths {
			out = append(out, filepath.Base(path))
		}
		sort.Strings(out)
		return out
	}
	if a, b := names(theirs), names(ours); len(a) != len(b) || len(a) == 0 {
		t.Fatalf("scripts differ: Python has %v, Go has %v (make go-lua)", a, b)
	}
	for _, path := range theirs {
		want, _ := os.ReadFile(path)
		got, err := os.ReadFile(filepath.Join("lua", filepath.Base(path)))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s differs from the Python package's (make go-lua)", filepath.Base(path))
		}
	}
}

func TestEveryScriptLoadsWithItsHeader(t *testing.T) {
	paths, _ := filepath.Glob("lua/*.lua")
	libraries := map[string]bool{}
	for _, path := range paths {
		source, _ := os.ReadFile(path)
		for _, match := range declaration.FindAllStringSubmatch(string(source), -1) {
			if match[1] == "uses" {
				for _, used := range strings.Fields(match[2]) {
					libraries[used] = true
				}
			}
		}
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".lua")
		if libraries[name] {
			continue
		}
		s := loadScript(name)
		if len(s.keys) == 0 {
			t.Errorf("%s declares no KEYS", name)
		}
		if len(s.sha) != 40 {
			t.Errorf("%s: sha %q", name, s.sha)
		}
	}
}
