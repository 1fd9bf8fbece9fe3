package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// ConfigHome holds each role's config type: package
// pkg/host/roleconf/<role>, type Config, with its Load (the daemon's)
// and Parse (`bxctl doctor`'s and bxctl's). No other struct decodes a
// role's config, so a config the daemon refuses is refused everywhere.
const ConfigHome = "pkg/host/roleconf"

// Schemas are the packages outside [ConfigHome] that may declare structs
// with TOML keys or call the strict loader: each decodes a file that is
// no role's config.
var Schemas = map[string]string{
	"pkg/tool/grant":          "the owner's grant files (grants_dir/*.toml)",
	"cmd/loopd/internal/jobs": "the owner's job files (jobs/*.toml)",
	"pkg/host/layout":         "config/users.toml, each role's uid and gid: the layout table's own file",
	"pkg/host/config":         "the strict loader itself, and its tests' own types",
}

// Decoders are the files outside which nothing calls the TOML parser
// itself (every typed decode goes through package config's strict
// loader), each with why it may.
var Decoders = map[string]string{
	"pkg/host/config/config.go":             "the strict loader every schema goes through",
	"pkg/host/layout/users.go":              "users.toml into the layout table's own type, unknown keys refused",
	"pkg/tool/grant/locate.go":              "a grant file the strict loader refused, read into a map to name each bad key",
	"cmd/bxctl/internal/install/configs.go": "edits a config's text one key at a time and compares the maps before and after (no schema)",
	"cmd/bxctl/internal/doctor/install.go":  "doctor-egress walks every value of a config its role's loader accepted (a map, no schema)",
}

// tomlDecoders are package toml's functions that decode.
var tomlDecoders = []string{"Decode", "DecodeFile", "DecodeFS", "DecodeReader", "NewDecoder", "Unmarshal", "PrimitiveDecode"}

// strictLoaders are package config's functions that decode into a type.
var strictLoaders = []string{"Load", "Decode", "Checked"}

// ConfigSchemas lists every struct with TOML keys declared, and every
// call of the strict loader, outside [ConfigHome] and [Schemas], and
// every call of the TOML parser outside [Decoders] and tests (which read
// texts into maps to compare them): each is a second schema for a file
// that has one.
func ConfigSchemas(root string) []string {
	files, err := goFiles(root)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, f := range files {
		r := filepath.ToSlash(rel(root, f))
		dir := filepath.ToSlash(filepath.Dir(r))
		home := strings.HasPrefix(dir+"/", ConfigHome+"/")
		if _, ok := Schemas[dir]; ok {
			home = true
		}
		if strings.HasPrefix(dir, "checks/arch") {
			continue // the rule's own tests spell planted twins
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", r, err))
			continue
		}
		tomlName, configName := "", ""
		for _, im := range file.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			name := filepath.Base(p)
			if im.Name != nil {
				name = im.Name.Name
			}
			switch {
			case p == "github.com/BurntSushi/toml":
				tomlName = name
			case strings.HasSuffix(p, "/pkg/host/config") && dir != "pkg/host/config":
				configName = name
			}
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.StructType:
				if keys := tomlKeys(n); len(keys) > 0 && !home {
					out = append(out, fmt.Sprintf("%s:%d: a struct with TOML keys (%s) outside %s: a role's config is decoded only by its type there (roleconf/<role>.Parse); another file's schema belongs in a package of arch.Schemas",
						r, fset.Position(n.Pos()).Line, strings.Join(keys, ", "), ConfigHome))
				}
			case *ast.SelectorExpr:
				x, ok := n.X.(*ast.Ident)
				if !ok {
					return true
				}
				line := fset.Position(n.Pos()).Line
				if tomlName != "" && x.Name == tomlName && slices.Contains(tomlDecoders, n.Sel.Name) && !strings.HasSuffix(r, "_test.go") {
					if _, ok := Decoders[r]; !ok {
						out = append(out, fmt.Sprintf("%s:%d: toml.%s outside arch.Decoders: read a role's config with roleconf/<role>.Parse (or Load)", r, line, n.Sel.Name))
					}
				}
				if configName != "" && x.Name == configName && slices.Contains(strictLoaders, n.Sel.Name) && !home {
					out = append(out, fmt.Sprintf("%s:%d: config.%s outside %s and arch.Schemas: a role's config has one loader, roleconf/<role>'s", r, line, n.Sel.Name, ConfigHome))
				}
			}
			return true
		})
	}
	return out
}

// tomlKeys are the keys a struct's tags name.
func tomlKeys(s *ast.StructType) []string {
	var keys []string
	for _, f := range s.Fields.List {
		if f.Tag == nil {
			continue
		}
		tag, err := strconv.Unquote(f.Tag.Value)
		if err != nil {
			continue
		}
		if v, ok := reflect.StructTag(tag).Lookup("toml"); ok {
			name, _, _ := strings.Cut(v, ",")
			keys = append(keys, name)
		}
	}
	return keys
}
