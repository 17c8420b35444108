package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The linker drops unused methods only while no reachable function looks
// methods up by a name it cannot see at compile time: a call to
// reflect.Value.Method, reflect.Type.Method, or MethodByName with a
// non-constant name (the compiler flags the caller <ReflectMethod>). One such
// call keeps every exported method of every reachable type, several MB of
// binary. text/template and html/template do exactly that when a template is
// executed, so beyond their package init (cobra and spf13/cast import them)
// none of their code may become reachable.
func TestBinaryKeepsMethodDeadCodeElimination(t *testing.T) {
	deps := linkerDeps(t)
	tree := parseDumpDep(deps)
	if len(tree.parent) == 0 {
		t.Fatalf("the linker printed no reachability edges; -dumpdep output:\n%s", truncate(deps, 2000))
	}
	for _, sym := range tree.reflectMethod {
		t.Errorf("%s looks methods up by a non-constant name, which keeps every exported method; reached by:\n%s",
			sym, tree.path(sym))
	}
	for _, sym := range tree.templateCode() {
		t.Errorf("template code is reachable beyond package init: %s, reached by:\n%s", sym, tree.path(sym))
	}
}

// linkerDeps builds this command the way releases are built, with the
// linker printing how each symbol became reachable (one "from -> to" line
// per reachable symbol).
func linkerDeps(t *testing.T) []byte {
	t.Helper()
	goTool := findGoTool(t)
	cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags=-dumpdep",
		"-o", filepath.Join(t.TempDir(), "gateway"), ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep: %v\n%s", err, truncate(stderr.Bytes(), 4000))
	}
	return append(stdout.Bytes(), stderr.Bytes()...)
}

func findGoTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		if testing.Short() {
			t.Skip("no go tool to build the binary with")
		}
		t.Fatalf("no go tool to build the binary with: %v", err)
	}
	return p
}

// depTree is the linker's reachability tree: each reachable symbol with the
// symbol through which it was first reached.
type depTree struct {
	parent        map[string]string
	reflectMethod []string // symbols the compiler flagged <ReflectMethod>
}

func parseDumpDep(out []byte) depTree {
	tree := depTree{parent: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		name, flags := splitFlags(to)
		if _, seen := tree.parent[name]; !seen {
			from, _ = splitFlags(from)
			tree.parent[name] = from
		}
		if strings.Contains(flags, "<ReflectMethod>") {
			tree.reflectMethod = append(tree.reflectMethod, name)
		}
	}
	return tree
}

// splitFlags separates the linker's trailing attribute flags ("<UsedInIface>",
// "<ReflectMethod>") from a symbol name.
func splitFlags(s string) (name, flags string) {
	for strings.HasSuffix(s, ">") {
		i := strings.LastIndex(s, " <")
		if i < 0 {
			break
		}
		flags = s[i+1:] + flags
		s = s[:i]
	}
	return s, flags
}

var templatePackages = []string{"text/template.", "text/template/parse.", "html/template."}

var templateInits = map[string]bool{
	"text/template..inittask":       true,
	"text/template/parse..inittask": true,
	"html/template..inittask":       true,
}

// templateCode returns the reachable symbols of the template packages that
// are not reached through those packages' init.
func (d depTree) templateCode() []string {
	var out []string
	for sym := range d.parent {
		if !hasAnyPrefix(sym, templatePackages) || isSharedAux(sym) {
			continue
		}
		if !d.reachedVia(sym, templateInits) {
			out = append(out, sym)
		}
	}
	return out
}

// isSharedAux reports compiler metadata symbols (stack object lists,
// argument info, ...) that the linker deduplicates by content: one named
// after a template function may well be used by crypto code.
func isSharedAux(sym string) bool {
	for _, suffix := range []string{".stkobj", ".arginfo0", ".arginfo1", ".argliveinfo", ".opendefer", ".wrapinfo", ".args_stackmap"} {
		if strings.HasSuffix(sym, suffix) {
			return true
		}
	}
	return strings.HasPrefix(sym, "gclocals·")
}

func (d depTree) reachedVia(sym string, via map[string]bool) bool {
	for i := 0; i < len(d.parent); i++ {
		if via[sym] {
			return true
		}
		next, ok := d.parent[sym]
		if !ok || next == "_" {
			return false
		}
		sym = next
	}
	return false
}

// path lists the chain from sym back to the linker's roots, one symbol a
// line, so a failure names the code that made sym reachable.
func (d depTree) path(sym string) string {
	var b strings.Builder
	for i := 0; i < 40; i++ {
		b.WriteString("\t")
		b.WriteString(sym)
		b.WriteString("\n")
		next, ok := d.parent[sym]
		if !ok || next == "_" {
			break
		}
		sym = next
	}
	return b.String()
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
