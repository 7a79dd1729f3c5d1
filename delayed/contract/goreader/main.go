// Command goreader reads one Go package and prints, as JSON, the parameter types of its top-level
// functions in the contract format of delayed (python -m delayed contract go), for go-delayed handlers.
package main

import (
	"encoding/json"
	"fmt"
	"go/types"
	"os"
	"reflect"
	"strings"

	"golang.org/x/tools/go/packages"
)

// refusal is why go-delayed cannot decode a parameter: a panic value carried up to the function.
type refusal string

type param struct {
	Name string         `json:"name"`
	Type map[string]any `json:"type"`
}

type handler struct {
	Signature string  `json:"signature"`
	Variadic  bool    `json:"variadic"`
	Params    []param `json:"params"`
}

type contract struct {
	Version  int                `json:"version"`
	Package  string             `json:"package"`
	Handlers map[string]handler `json:"handlers"`
	Refused  map[string]string  `json:"refused"`
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: goreader DIR [FUNC...]")
	}
	pkg := load(os.Args[1])
	out := contract{Version: 1, Package: pkg.PkgPath, Handlers: map[string]handler{}, Refused: map[string]string{}}
	wanted := map[string]bool{}
	for _, name := range os.Args[2:] {
		wanted[name] = false
	}
	scope := pkg.Types.Scope()
	for _, name := range scope.Names() {
		fn, ok := scope.Lookup(name).(*types.Func)
		if !ok || name == "init" || name == "_" || (name == "main" && pkg.Name == "main") {
			continue
		}
		key := runtimeName(pkg.Types) + "." + name
		if len(wanted) > 0 {
			_, byName := wanted[name]
			_, byKey := wanted[key]
			if !byName && !byKey {
				continue
			}
			wanted[name], wanted[key] = true, true
		}
		if h, why := describe(pkg.Types, fn); why != "" {
			out.Refused[key] = why
		} else {
			out.Handlers[key] = h
		}
	}
	var unknown []string
	for _, name := range os.Args[2:] {
		if !wanted[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		fail(fmt.Sprintf("no top-level function %s in %s", strings.Join(unknown, ", "), pkg.PkgPath))
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(out); err != nil {
		fail(err.Error())
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, message)
	os.Exit(1)
}

// load type-checks the package in dir, with the module settings found there.
func load(dir string) *packages.Package {
	mode := packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedDeps | packages.NeedImports
	pkgs, err := packages.Load(&packages.Config{Mode: mode, Dir: dir}, ".")
	if err != nil {
		fail(err.Error())
	}
	if len(pkgs) != 1 {
		fail(fmt.Sprintf("%s holds %d packages, not one", dir, len(pkgs)))
	}
	var problems []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			problems = append(problems, e.Error())
		}
	})
	if len(problems) > 0 {
		fail(strings.Join(problems, "\n"))
	}
	return pkgs[0]
}

// runtimeName is the package's part of the name runtime.FuncForPC gives its functions, which
// go-delayed uses: "main" for a command, else the import path with the last element's dots escaped.
func runtimeName(pkg *types.Package) string {
	if pkg.Name() == "main" {
		return "main"
	}
	path := pkg.Path()
	cut := strings.LastIndex(path, "/") + 1
	return path[:cut] + strings.ReplaceAll(path[cut:], ".", "%2e")
}

// describe is the handler entry of fn, or why go-delayed cannot call it.
func describe(pkg *types.Package, fn *types.Func) (h handler, why string) {
	sig := fn.Type().(*types.Signature)
	if sig.TypeParams().Len() > 0 {
		return h, "is generic: go-delayed registers a function value, and a generic function has none until instantiated"
	}
	defer func() {
		r := recover()
		if reason, ok := r.(refusal); ok {
			why = string(reason)
		} else if r != nil {
			panic(r)
		}
	}()
	h = handler{Signature: signature(pkg, fn), Variadic: sig.Variadic(), Params: []param{}}
	for i := 0; i < sig.Params().Len(); i++ {
		v := sig.Params().At(i)
		h.Params = append(h.Params, param{Name: v.Name(), Type: kind(pkg, v.Type(), "parameter "+paramName(v, i), nil)})
	}
	return h, ""
}

func paramName(v *types.Var, i int) string {
	if v.Name() == "" || v.Name() == "_" {
		return fmt.Sprintf("#%d", i+1)
	}
	return v.Name()
}

func signature(pkg *types.Package, fn *types.Func) string {
	return "func " + fn.Name() + strings.TrimPrefix(types.TypeString(fn.Type(), written(pkg)), "func")
}

// written qualifies a type as the package's own code writes it: by package name, none for its own.
func written(pkg *types.Package) types.Qualifier {
	return func(other *types.Package) string {
		if other == pkg {
			return ""
		}
		return other.Name()
	}
}

// fullName is a named type's name with its package's import path ("main.Point", "example.com/jobs.Point").
func fullName(t types.Type) string {
	return types.TypeString(t, func(other *types.Package) string {
		if other.Name() == "main" {
			return "main"
		}
		return other.Path()
	})
}

// kind is the contract type of t; where says which parameter or field it is, seen the named
// types being described (a recursive type is refused).
func kind(pkg *types.Package, t types.Type, where string, seen []*types.Named) map[string]any {
	goType := types.TypeString(t, func(other *types.Package) string { return other.Name() })
	t = types.Unalias(t) // an alias (type P = Point) is the type it names
	refuse := func(what string) {
		panic(refusal(fmt.Sprintf("takes %s (%s), which go-delayed cannot decode", what, where)))
	}
	if named, ok := t.(*types.Named); ok {
		if obj := named.Obj(); obj.Pkg() != nil && obj.Pkg().Path() == "time" && obj.Name() == "Time" {
			return map[string]any{"kind": "time", "go": goType}
		}
		for _, s := range seen {
			if types.Identical(s, named) {
				panic(refusal(fmt.Sprintf("takes %s (%s), a recursive type, which a contract cannot describe", goType, where)))
			}
		}
		seen = append(seen, named)
	}
	out := map[string]any{"go": goType}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch info := u.Info(); {
		case u.Kind() == types.Uintptr:
			refuse("a " + goType)
		case u.Kind() == types.UnsafePointer:
			refuse("an unsafe.Pointer")
		case info&types.IsInteger != 0:
			out["kind"], out["bits"], out["signed"] = "int", intBits(u.Kind()), info&types.IsUnsigned == 0
		case info&types.IsFloat != 0:
			out["kind"], out["bits"] = "float", map[types.BasicKind]int{types.Float32: 32, types.Float64: 64}[u.Kind()]
		case info&types.IsComplex != 0:
			refuse("a " + goType)
		case info&types.IsString != 0:
			out["kind"] = "string"
		case info&types.IsBoolean != 0:
			out["kind"] = "bool"
		default:
			refuse("a " + goType)
		}
	case *types.Slice:
		if b, ok := u.Elem().Underlying().(*types.Basic); ok && b.Kind() == types.Byte {
			out["kind"] = "bytes"
		} else {
			out["kind"], out["elem"] = "slice", kind(pkg, u.Elem(), where+", element", seen)
		}
	case *types.Array:
		out["kind"], out["len"], out["elem"] = "array", u.Len(), kind(pkg, u.Elem(), where+", element", seen)
	case *types.Map:
		out["kind"], out["key"], out["elem"] = "map", kind(pkg, u.Key(), where+", key", seen), kind(pkg, u.Elem(), where+", value", seen)
	case *types.Pointer:
		out["kind"], out["elem"] = "pointer", kind(pkg, u.Elem(), where+", pointer target", seen)
	case *types.Interface:
		if u.NumMethods() > 0 || !u.IsMethodSet() {
			refuse(goType + ", an interface with methods")
		}
		out["kind"] = "any"
	case *types.Struct:
		fields := []param{}
		for i := 0; i < u.NumFields(); i++ {
			f := u.Field(i)
			if decoded(f.Name(), u.Tag(i)) {
				fields = append(fields, param{Name: f.Name(), Type: kind(pkg, f.Type(), where+", field "+f.Name(), seen)})
			}
		}
		out["kind"], out["name"], out["fields"] = "struct", fullName(t), fields
	case *types.Chan:
		refuse("a " + goType)
	case *types.Signature:
		refuse("a " + goType)
	default:
		refuse("a " + goType)
	}
	return out
}

// decoded says whether go-delayed's msgpack (shamaton/msgpack) reads a struct field: its name
// starts with an ASCII capital (an embedded struct is one field, named by its type) and its tag is not "-".
func decoded(name, tag string) bool {
	return name[0] >= 'A' && name[0] <= 'Z' && reflect.StructTag(tag).Get("msgpack") != "-"
}

func intBits(k types.BasicKind) int {
	switch k {
	case types.Int8, types.Uint8:
		return 8
	case types.Int16, types.Uint16:
		return 16
	case types.Int32, types.Uint32:
		return 32
	}
	return 64
}
