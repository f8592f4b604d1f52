package importrules

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/lakedata/lake"

// rule forbids every package at or under from to depend, directly or
// through other lake packages, on a package at or under one of to, except
// those at or under one of allow.
type rule struct {
	from  string
	to    []string
	allow []string
	why   string
}

// forbidden says what the rule keeps out, for its message.
func (r rule) forbidden() string {
	if len(r.to) == 1 && r.to[0] == "" {
		return "any other package of lake"
	}
	return strings.Join(r.to, ", ")
}

var rules = []rule{
	{from: "roles/meta", to: []string{"roles/query"}, why: "the roles talk over Flight"},
	{from: "roles/query", to: []string{"roles/meta"}, why: "the roles talk over Flight"},
	{from: "client", to: []string{"roles"}, why: "a client reaches the roles over Flight only"},
	{from: "wire", to: []string{""}, allow: []string{"wire"}, why: "wire is the protocol; other programs build on it alone"},
}

// TestImportRules checks the rules on the source as it is. Test files are
// left out (a role's tests may start the other role), build constraints
// are not: a file counts whatever tags or platform it is built for.
func TestImportRules(t *testing.T) {
	graph := loadGraph(t, filepath.Join("..", ".."))
	for _, r := range rules {
		if !hasPackageUnder(graph, r.from) {
			t.Fatalf("rule %s: no package at or under %s; the layout changed, update the rule", r.from, r.from)
		}
	}
	for _, v := range violations(graph, rules) {
		t.Error(v)
	}
}

// TestViolationsFound: the checker itself finds direct and indirect
// dependencies and honours allow.
func TestViolationsFound(t *testing.T) {
	graph := map[string][]string{
		"roles/meta":      {"internal/helper", "wire"},
		"internal/helper": {"roles/query/sqlguard"},
		"client":          {"wire"},
		"wire":            {"wire/lakepb"},
		"wire/lakepb":     {"objects"},
	}
	got := violations(graph, rules)
	want := []string{
		"lake/roles/meta → " + module + "/internal/helper → " + module + "/roles/query/sqlguard",
		"lake/wire → " + module + "/wire/lakepb → " + module + "/objects",
		": " + module + "/wire/lakepb → " + module + "/objects",
	}
	if len(got) != len(want) {
		t.Fatalf("%d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasSuffix(got[i], w) {
			t.Errorf("violation %d:\n%s\nwant it to end in %s", i, got[i], w)
		}
	}
}

// loadGraph maps each package directory of the module under root
// (relative import path, "" for the root) to the lake packages its
// non-test files import.
func loadGraph(t *testing.T, root string) map[string][]string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	graph := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if pkg == "." {
			pkg = ""
		}
		deps := graph[pkg]
		for _, imp := range f.Imports {
			ip, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if ip == module || strings.HasPrefix(ip, module+"/") {
				deps = append(deps, strings.TrimPrefix(strings.TrimPrefix(ip, module), "/"))
			}
		}
		graph[pkg] = deps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

// under reports whether pkg is dir or below it ("" is the whole module).
func under(pkg, dir string) bool {
	return dir == "" || pkg == dir || strings.HasPrefix(pkg, dir+"/")
}

func underAny(pkg string, dirs []string) bool {
	for _, d := range dirs {
		if under(pkg, d) {
			return true
		}
	}
	return false
}

func hasPackageUnder(graph map[string][]string, dir string) bool {
	for pkg := range graph {
		if under(pkg, dir) {
			return true
		}
	}
	return false
}

// violations returns one line per forbidden dependency, with the chain of
// imports that leads to it, in a stable order.
func violations(graph map[string][]string, rules []rule) []string {
	var out []string
	pkgs := make([]string, 0, len(graph))
	for pkg := range graph {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, r := range rules {
		for _, start := range pkgs {
			if !under(start, r.from) {
				continue
			}
			// Breadth first, so each chain reported is a shortest one.
			via := map[string]string{start: ""}
			queue := []string{start}
			for len(queue) > 0 {
				pkg := queue[0]
				queue = queue[1:]
				for _, dep := range graph[pkg] {
					if _, seen := via[dep]; seen {
						continue
					}
					via[dep] = pkg
					if underAny(dep, r.to) && !underAny(dep, r.allow) && !under(dep, r.from) {
						out = append(out, r.from+" must not depend on "+r.forbidden()+" ("+r.why+"): "+chain(via, dep))
						continue
					}
					queue = append(queue, dep)
				}
			}
		}
	}
	return out
}

func chain(via map[string]string, last string) string {
	var c []string
	for p := last; p != ""; p = via[p] {
		c = append(c, path.Join(module, p))
	}
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return strings.Join(c, " → ")
}
