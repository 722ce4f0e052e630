package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
)

// Every command's -h and --help exit 0 and print the one usage form on
// stdout (so that `riskguard backtest --help | less` shows it); a usage
// error prints it on stderr.
func TestEveryHelpExitsZero(t *testing.T) {
	t.Parallel()
	var names []string
	for n := range commands() {
		names = append(names, n)
	}
	slices.Sort(names)
	names = append(names, "notify test", "silence add", "silence list", "silence expire")
	for _, name := range names {
		for _, flag := range []string{"-h", "--help"} {
			args := append(strings.Fields(name), flag)
			code, stdout, stderr := runOut(t, context.Background(), envMap(nil), args...)
			if code != 0 {
				t.Errorf("riskguard %s %s: exit %d\n%s", name, flag, code, stderr)
			}
			usage := "usage: riskguard " + name
			if name == "notify" {
				usage = "usage: riskguard notify test"
			}
			if !strings.HasPrefix(stdout, usage) || !strings.Contains(stdout, "\nflags:\n") {
				t.Errorf("riskguard %s %s: stdout does not start with %q and list the flags:\n%s", name, flag, usage, stdout)
			}
			if stderr != "" {
				t.Errorf("riskguard %s %s: stderr %q", name, flag, stderr)
			}
		}
	}
	if code, stdout, stderr := runOut(t, context.Background(), envMap(nil), "check", "--no-such-flag"); code != 2 || !strings.Contains(stderr, "flag provided but not defined: -no-such-flag") ||
		!strings.Contains(stderr, "usage: riskguard check") || stdout != "" {
		t.Errorf("a bad flag: exit %d, want 2 and the usage on stderr\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, args := range [][]string{{"--help"}, {"help"}} {
		if code, stdout, stderr := runOut(t, context.Background(), envMap(nil), args...); code != 0 || !strings.HasPrefix(stdout, "usage: riskguard <command>") || stderr != "" {
			t.Errorf("riskguard %v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
	}
	if code, stdout, stderr := runOut(t, context.Background(), envMap(nil)); code != 2 || !strings.HasPrefix(stderr, "usage: riskguard <command>") || stdout != "" {
		t.Errorf("riskguard without a command: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, _ := runOut(t, context.Background(), envMap(nil), args...)
		if code != 0 || !regexp.MustCompile(`^riskguard \S+ \(.+\) go1\.\d+`).MatchString(stdout) {
			t.Errorf("%v: exit %d, %q", args, code, stdout)
		}
	}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionLine(bi, true), "riskguard v1.2.3 (commit abc123, modified) go1.26.8"; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	if got := versionLine(&debug.BuildInfo{GoVersion: "go1.26.8"}, true); got != "riskguard (devel) (commit unknown: built without version control information) go1.26.8" {
		t.Errorf("versionLine without vcs = %q", got)
	}
}

// NO_COLOR turns the text log's colours off even on a terminal: the real
// binary runs under script(1), which gives it a pseudo-terminal.
func TestNoColor(t *testing.T) {
	t.Parallel()
	scriptBin, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) not installed: no pseudo-terminal to test colours on")
	}
	bin := testBinary(t)
	g := newGuardEnv(t, "", overMaxRule)
	for _, noColor := range []string{"", "1"} {
		cmd := exec.Command(scriptBin, "-qec", bin+" run --once --log-format text --config "+g.config, "/dev/null")
		cmd.Env = append(os.Environ(), "RISKGUARD_API_KEY="+sim.DefaultKey, "RISKGUARD_API_SECRET="+sim.DefaultSecret, "NO_COLOR="+noColor)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("NO_COLOR=%q: %v\n%s", noColor, err, out)
		}
		coloured := strings.Contains(string(out), "\x1b[")
		if !strings.Contains(string(out), "tick done") || coloured != (noColor == "") {
			t.Errorf("NO_COLOR=%q on a terminal: coloured %t, want %t:\n%q", noColor, coloured, noColor == "", out)
		}
	}
}

// notify test tries every channel at once and says what each one did;
// the log channel's message is visible.
func TestNotifyTestReportsEachChannel(t *testing.T) {
	t.Parallel()
	ok := newHookServer(t, "")
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gone", http.StatusGone)
	}))
	t.Cleanup(bad.Close)
	notifyYAML := "notify:\n  channels:\n    good: {type: webhook, url: " + ok.srv.URL + "/hook}\n    broken: {type: webhook, url: " + bad.URL + "/hook}\n    console: {type: log}\n  max_attempts: 1\n"
	g := newGuardEnv(t, "", overMaxRule+notifyYAML)
	began := time.Now()
	code, stdout, stderr := runOut(t, context.Background(), g.env, "notify", "test", "--config", g.config)
	if code != 1 {
		t.Errorf("exit %d, want 1 (one channel failed)\n%s", code, stderr)
	}
	want := []string{"broken: failed: ", "console: sent", "good: sent"}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], want[0]) || !strings.Contains(lines[0], "410") || lines[1] != want[1] || lines[2] != want[2] {
		t.Errorf("stdout:\n%s\nwant lines starting %q", stdout, want)
	}
	if !strings.Contains(stderr, "riskguard notify: 1 of 3 channels failed") {
		t.Errorf("stderr:\n%s", stderr)
	}
	if n := len(ok.received()); n != 1 {
		t.Errorf("the good channel got %d messages", n)
	}
	t.Logf("three channels tested in %s", time.Since(began))

	code, stdout, stderr = runOut(t, context.Background(), g.env, "notify", "test", "--config", g.config, "--channel", "console")
	if code != 0 || stdout != "console: sent\n" || !strings.Contains(stderr, "riskguard test message to channel console: notifications work") {
		t.Errorf("--channel console: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}
