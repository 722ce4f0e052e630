package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
)

// startHere returns the commands of the sh blocks of README's "Start
// here", a block a slice, their comments cut.
func startHere(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Start here\n")
	if !ok {
		t.Fatal(`README has no "## Start here"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if n := strings.Count(section, "\n"); n > 40 {
		t.Errorf("Start here is %d lines, want at most 40", n)
	}
	var blocks [][]string
	var in bool
	for _, l := range strings.Split(section, "\n") {
		switch {
		case l == "```sh":
			in = true
			blocks = append(blocks, nil)
		case l == "```":
			in = false
		case in:
			cmd, _, _ := strings.Cut(l, "#")
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				blocks[len(blocks)-1] = append(blocks[len(blocks)-1], cmd)
			}
		}
	}
	return blocks
}

// README's "Start here", followed command by command with the real binary
// in a directory of its own: the config copied from the example, checked;
// the simulated exchange; the sim's key pair exported; check against it;
// a dry run whose status page shows the positions and what it would do,
// and which sends nothing. Two fixed ports are the only change: the sim's
// 8790 and the example's listen 9464 are free ones, so that tests run side
// by side. A command added to the section that this test does not follow
// fails it.
func TestStartHere(t *testing.T) {
	t.Parallel()
	began := time.Now()
	blocks := startHere(t)
	if len(blocks) != 3 {
		t.Fatalf("Start here has %d sh blocks, want 3 (set up, the simulated exchange, your account): %q", len(blocks), blocks)
	}
	bin := testBinary(t) // go build -o riskguard ./cmd/riskguard
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	simAddr := ""
	riskguard := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		cmd.Env = env
		return cmd
	}
	sub := func(s string) string {
		if simAddr != "" {
			s = strings.ReplaceAll(s, "127.0.0.1:8790", simAddr)
		}
		return s
	}
	var dryRunChecked, installed bool
	follow := func(line string) {
		t.Helper()
		f := strings.Fields(sub(line))
		switch {
		case line == "riskguard demo":
			// TestDemo, TestDemoVerdictStatusPageAndControl and
			// TestDemoPrintsACommandThatRuns (its control command runs
			// at this point, riskguard installed on PATH or not).
			if !installed {
				t.Fatal("Start here runs riskguard before installing it")
			}
		case line == "go install ./cmd/riskguard":
			installed = true // testBinary built it
		case line == `export PATH="$(go env GOPATH)/bin:$PATH"`:
			// Where go install puts it: the test's binary's directory.
			out, err := exec.Command("go", "env", "GOPATH").Output()
			if err != nil || strings.TrimSpace(string(out)) == "" {
				t.Fatalf("go env GOPATH: %v", err)
			}
			env[0] = "PATH=" + filepath.Dir(bin) + string(filepath.ListSeparator) + os.Getenv("PATH")
		case line == "cp rules.example.yaml riskguard.yaml":
			b, err := os.ReadFile("../../rules.example.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "riskguard.yaml"), b, 0o600); err != nil {
				t.Fatal(err)
			}
		case f[0] == "export":
			env = append(env, f[1:]...)
		case line == "riskguard sim":
			cmd := riskguard("sim", "--listen", "127.0.0.1:0")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
			sc := bufio.NewScanner(out)
			if !sc.Scan() {
				t.Fatal("riskguard sim printed nothing")
			}
			_, rest, _ := strings.Cut(sc.Text(), "listening on http://")
			simAddr, _, _ = strings.Cut(rest, " ")
			// The banner's export line is README's, ready to paste.
			if !sc.Scan() || !strings.HasSuffix(sc.Text(), ": export RISKGUARD_API_KEY=demo-key RISKGUARD_API_SECRET=demo-secret") {
				t.Errorf("sim banner: %q", sc.Text())
			}
			go io.Copy(io.Discard, out)
		case f[0] == "riskguard" && !installed:
			t.Fatalf("Start here runs %q before installing riskguard", line)
		case f[0] == "riskguard" && len(f) >= 2 && f[1] == "check":
			out, err := riskguard(f[1:]...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "riskguard.yaml: OK, ") {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
		case line == "riskguard run --dry-run":
			cmd := riskguard("run", "--dry-run")
			cmd.Env = append(cmd.Env, "RISKGUARD_ENGINE_LISTEN=127.0.0.1:0")
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			addr, logs := listenAddr(t, stderr, 30*time.Second)
			checkDryRunPage(t, "http://"+addr)
			cmd.Process.Signal(os.Interrupt)
			if err := cmd.Wait(); err != nil {
				t.Errorf("run --dry-run: %v\n%s", err, logs.String())
			}
			if _, err := os.Stat(filepath.Join(dir, "riskguard-audit.jsonl")); err != nil {
				t.Errorf("no audit log next to the config: %v", err)
			}
			dryRunChecked = true
		default:
			t.Fatalf("README's Start here has a command this test does not follow: %q", line)
		}
	}
	for _, b := range blocks[:2] {
		for _, line := range b {
			follow(line)
		}
	}
	if !dryRunChecked {
		t.Error("Start here never reaches riskguard run --dry-run")
	}
	// What Start here left in the directory, had it been the clone, is
	// ignored by git: following README leaves the clone clean (issue 40,
	// item 8).
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if e.Name() == ".cache" || e.Name() == ".config" || e.Name() == "go" { // HOME's, not the clone's
			continue
		}
		if err := exec.Command("git", "-C", "../..", "check-ignore", "-q", "--no-index", e.Name()).Run(); err != nil {
			t.Errorf("Start here leaves %s, which .gitignore does not cover (git check-ignore: %v)", e.Name(), err)
		}
	}
	// The last block is the user's own account: the same commands, against
	// their exchange.
	if got := strings.Join(blocks[2], "\n"); !strings.HasPrefix(got, "riskguard check --exchange ") ||
		!strings.HasSuffix(got, "\nriskguard run --dry-run\nriskguard run") {
		t.Errorf("the account block:\n%s", got)
	}
	t.Logf("Start here, from the copied config to the dry run's status page, in %s", time.Since(began).Round(time.Millisecond))
}

// checkDryRunPage reads the status page and API of a dry run against the
// default scenario until they show XSOL over its maximum leverage and the
// lowering the guard would do, not done: the next ticks still read 15x.
func checkDryRunPage(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<title>riskguard status</title>") {
		t.Errorf("GET /: %d", resp.StatusCode)
	}
	type status struct {
		DryRun    bool
		Positions []struct {
			Symbol   string
			Leverage json.Number
		}
		Actions []struct{ Symbol, Action, Outcome string }
	}
	var st status
	waitFor(t, "the dry run's lower_leverage XSOL on the status API", 30*time.Second, func() bool {
		resp, err := http.Get(base + "/api/v1/status")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		st = status{}
		if json.NewDecoder(resp.Body).Decode(&st) != nil {
			return false
		}
		for _, a := range st.Actions {
			if a.Symbol == "XSOL" && a.Action == "lower_leverage" && a.Outcome == "dry_run" {
				return st.DryRun // set when the tick ends, after its actions
			}
		}
		return false
	})
	for _, a := range st.Actions {
		if a.Outcome == "sent" && a.Action != "notify" { // a dry run still notifies
			t.Errorf("a dry run sent %s %s", a.Action, a.Symbol)
		}
	}
	for _, p := range st.Positions {
		if p.Symbol == "XSOL" && p.Leverage.String() != "15" {
			t.Errorf("XSOL at %sx in a dry run, want 15x untouched", p.Leverage)
		}
	}
}

// The repository stands alone: every relative link of README and docs/
// names a file of the repository, and none names the specification the
// guard was first written from, which a clone does not have (issue 40,
// item 7): docs/exchange.md says it in the repository's own words.
func TestDocsStayInTheRepository(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, f)
		for _, bad := range []string{"../shared", "000_c5c3bc99d7f7abf5", "STYLE.md"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s names %s, outside the repository", name, bad)
			}
		}
		prose := regexp.MustCompile("`[^`]*`").ReplaceAllString(string(b), "") // code is no link
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", name, m[1])
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links %s, which the repository does not have", name, m[1])
			}
		}
		// Every anchor names a heading of the page it links to.
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target, anchor, ok := strings.Cut(m[1], "#")
			if !ok || strings.Contains(target, "://") || (target != "" && !strings.HasSuffix(target, ".md")) {
				continue
			}
			page := f
			if target != "" {
				page = filepath.Clean(filepath.Join(filepath.Dir(f), target))
			}
			b, err := os.ReadFile(page)
			if err != nil {
				continue // said above
			}
			if !anchors(string(b))[anchor] {
				t.Errorf("%s links %s: no heading of %s has the anchor #%s", name, m[1], filepath.Base(page), anchor)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "docs", "exchange.md")); err != nil {
		t.Errorf("no docs/exchange.md: %v", err)
	}
}

// anchors returns the anchors of a Markdown page's headings as GitHub
// makes them: the text in lower case, its punctuation dropped, spaces as
// hyphens, a repeated one numbered. Lines in code blocks are no headings.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			continue
		}
		text := strings.TrimLeft(l, "#")
		if fenced || text == l || !strings.HasPrefix(text, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
