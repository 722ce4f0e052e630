package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium runs headless Chromium with args and URL, returning its stdout;
// the test skips when Debian's chromium is not installed.
func chromium(t *testing.T, url string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install chromium; .ci/run installs it as root): the status page is not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

const firingXETH = `
  - name: watch-xeth
    when: position.symbol == "XETH"
    cooldown: 1h
    severity: warning
    actions:
      - action: notify
`

// The status page, rendered by headless Chromium after its script ran,
// shows the demo's positions, a firing rule, the last actions and a pause.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	g := newControlEnv(t, firingXETH+overMaxRule, "")
	addr, _, stop := g.serve()
	defer stop()
	waitFor(t, "the XSOL action and the XETH rule firing", 10*time.Second, func() bool {
		_, body := api(t, addr, "GET", "/api/v1/status", "", nil)
		return strings.Contains(body, `"state": "firing"`) && strings.Contains(body, `"outcome": "sent"`)
	})
	if code, body := api(t, addr, "POST", "/api/v1/pause", testToken, map[string]string{"symbol": "XBTC", "createdBy": "grace@desk", "comment": "rolling"}); code != 201 {
		t.Fatalf("pause: %d %s", code, body)
	}
	url := "http://" + addr + "/"
	dom := chromium(t, url, "--virtual-time-budget=5000", "--dump-dom")
	for _, want := range []string{
		`data-symbol="XBTC"`, `data-symbol="XETH"`, `data-symbol="XSOL"`,
		`data-rule="watch-xeth" data-state="firing"`,
		"lower_leverage", "grace@desk", `id="paused"`, "breaker:", "last complete snapshot:", "exchange:",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	if strings.Contains(dom, `<div id="err">cannot`) {
		t.Errorf("the page could not read the API:\n%s", dom)
	}
	shot := filepath.Join(t.TempDir(), "status.png")
	chromium(t, url, "--virtual-time-budget=5000", "--window-size=1280,900", "--screenshot="+shot)
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) || len(png) < 10_000 {
		t.Errorf("the screenshot is not a rendered page (%d bytes)", len(png))
	}
	if dir := os.Getenv("RISKGUARD_SCREENSHOT_DIR"); dir != "" {
		os.WriteFile(filepath.Join(dir, "status.png"), png, 0o644)
	}
}
