package deploy

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, …
	args string
	line int
}

// stage is one FROM and the instructions under it.
type stage struct {
	image, name string
	body        []instruction
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasPrefix(line, "#") {
			continue // a comment inside a continued instruction
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		cur.Reset()
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before FROM", path, in.line, in.cmd)
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	return stages
}

// shellWords splits a command line on blanks, honouring double quotes.
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	inQuote, inWord := false, false
	for _, c := range s {
		switch {
		case c == '"':
			inQuote, inWord = !inQuote, true
		case (c == ' ' || c == '\t') && !inQuote:
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}

// goBuild returns the arguments of the Dockerfile's `go build` (after
// "build") and whether the build stage sets CGO_ENABLED=0 before it.
func goBuild(st stage) (args []string, cgoOff bool, ok bool) {
	for _, in := range st.body {
		if in.cmd == "ENV" && slices.Contains(strings.Fields(in.args), "CGO_ENABLED=0") {
			cgoOff = true
		}
		if in.cmd != "RUN" {
			continue
		}
		w := shellWords(in.args)
		for i := 0; i+1 < len(w); i++ {
			if w[i] == "go" && w[i+1] == "build" {
				if i > 0 && w[i-1] == "CGO_ENABLED=0" {
					cgoOff = true
				}
				end := slices.Index(w[i:], "&&")
				if end < 0 {
					end = len(w) - i
				}
				return w[i+2 : i+end], cgoOff, true
			}
		}
	}
	return nil, cgoOff, false
}

var static struct {
	sync.Once
	path string
	err  error
}

// staticBinary builds riskguard the way the Dockerfile does (its go build
// flags, CGO_ENABLED=0) once for the package's tests, which then run the
// very binary the image would ship. It skips under -short.
func staticBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building the binary (about half a minute)")
	}
	static.Do(func() {
		stages := parseDockerfile(t, "Dockerfile")
		args, _, ok := goBuild(stages[0])
		if !ok {
			static.err = fmt.Errorf("the Dockerfile's first stage runs no go build")
			return
		}
		dir, err := os.MkdirTemp("", "riskguard-deploy-")
		if err != nil {
			static.err = err
			return
		}
		static.path = filepath.Join(dir, "riskguard")
		args = slices.Clone(args)
		i := slices.Index(args, "-o")
		if i < 0 || i+1 >= len(args) {
			static.err = fmt.Errorf("the Dockerfile's go build has no -o: %q", args)
			return
		}
		args[i+1] = static.path
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Dir = ".." // the Dockerfile builds from the repository root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			static.err = fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if static.err != nil {
		t.Fatal(static.err)
	}
	return static.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if static.path != "" {
		os.RemoveAll(filepath.Dir(static.path))
	}
	os.Exit(code)
}

// The Dockerfile builds in a golang:1.26 stage with CGO_ENABLED=0 and
// -trimpath, and runs as a non-root user on a static base with the state on
// a volume. Without a Docker engine here this reads the file; the build it
// describes is run by TestDockerBuildIsStatic.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t, "Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("got %d stages, want a multi-stage build", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(build.image, "golang:1.26") {
		t.Errorf("build stage FROM %s, want golang:1.26", build.image)
	}
	if build.name == "" {
		t.Error("the build stage is not named (FROM … AS build)")
	}
	args, cgoOff, ok := goBuild(build)
	if !ok {
		t.Fatal("the build stage runs no go build")
	}
	if !cgoOff {
		t.Error("CGO_ENABLED=0 is not set for the go build")
	}
	if !slices.Contains(args, "-trimpath") {
		t.Errorf("go build %q lacks -trimpath", args)
	}
	if final.image != "scratch" && !strings.HasPrefix(final.image, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s, want scratch or distroless/static", final.image)
	}
	var user string
	has := map[string]bool{}
	for _, in := range final.body {
		has[in.cmd] = true
		switch in.cmd {
		case "USER":
			user = in.args
			if name, _, _ := strings.Cut(in.args, ":"); name == "root" || name == "0" {
				t.Errorf("line %d: USER %s in the final stage", in.line, in.args)
			}
		case "COPY":
			if strings.HasPrefix(in.args, "--from=") {
				from := strings.TrimPrefix(strings.Fields(in.args)[0], "--from=")
				if from != build.name {
					t.Errorf("line %d: COPY --from=%s, want the build stage %s", in.line, from, build.name)
				}
				continue
			}
			src := shellWords(in.args)
			for _, s := range src[:len(src)-1] {
				if strings.HasPrefix(s, "--") {
					continue
				}
				if _, err := os.Stat(filepath.Join("..", s)); err != nil {
					t.Errorf("line %d: COPY %s: not in the repository: %v", in.line, s, err)
				}
			}
		}
	}
	if user == "" {
		t.Error("the final stage sets no USER: it would run as root")
	}
	if !strings.Contains(final.image, "nonroot") && user == "" {
		t.Error("neither a nonroot base nor a USER")
	}
	for _, want := range []string{"VOLUME", "ENTRYPOINT"} {
		if !has[want] {
			t.Errorf("the final stage has no %s", want)
		}
	}
	var copiesExample bool
	for _, in := range final.body {
		if in.cmd == "COPY" && strings.Contains(in.args, "rules.example.yaml") {
			copiesExample = true
		}
	}
	if !copiesExample {
		t.Error("rules.example.yaml is not copied into the image")
	}
}

// The Dockerfile's go build, run here, gives a static binary: no program
// interpreter and no dynamic section, so it runs on distroless/static or
// scratch, which have no libc.
func TestDockerBuildIsStatic(t *testing.T) {
	t.Parallel()
	bin := staticBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v: not a static binary", p.Type)
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		t.Error("the binary has a .dynamic section")
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v", libs)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "riskguard") {
		t.Errorf("riskguard version: %v: %s", err, out)
	}
}
