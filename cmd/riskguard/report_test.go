package main

import (
	"bytes"
	"context"
	"image/color"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chartRE finds the per-symbol charts of a report, in the page or in the
// browser's DOM.
var chartRE = regexp.MustCompile(`<svg class="chart" id="chart-\d+" data-symbol="([A-Z]+)"`)

func chartSymbols(page string) []string {
	var out []string
	for _, m := range chartRE.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

// backtest --report writes the page after the summary: a chart per
// position, the liquidation the guard avoided on XSOL's, the same bytes on
// a second run.
func TestBacktestReport(t *testing.T) {
	t.Parallel()
	e := newBacktestEnv(t)
	var pages []string
	for i := range 2 {
		report := filepath.Join(e.dir, "report"+string(rune('a'+i))+".html")
		code, out, stderr := runOut(t, context.Background(), e.env, "backtest", "--config", e.config, "--csv", e.csv,
			"--scenario", e.scenario, "--interval", "1s", "--report", report)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		if !strings.Contains(out, "liquidations the guard avoided:") {
			t.Errorf("no summary on stdout:\n%s", out)
		}
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, string(b))
	}
	if pages[0] != pages[1] {
		t.Error("two runs wrote different reports")
	}
	if got := strings.Join(chartSymbols(pages[0]), " "); got != "XSOL XBTC XETH" {
		t.Errorf("charts of %q, want XSOL XBTC XETH", got)
	}
	for _, want := range []string{
		"2026-03-02T09:00:00Z → 2026-03-02T09:02:00Z (2m0s) · 6 steps · 121 ticks per run",
		"<title>2026-03-02T09:01:10Z XSOL liquidated without guard: index 144.5 crossed 144.907 (15×)",
		"XSOL: lower_leverage 15× → 10× by over-max-leverage (sent)</title>",
		`<td class="saved">10× isolated, liq 139.84 (was 15×)</td>`,
		// The equity and distance curves: a time axis and the liquidation.
		`<g class="curve-liq"><title>2026-03-02T09:01:10Z XSOL liquidated without guard</title>`,
		`text-anchor="end">time (UTC), Mon 2 Mar 2026</text>`,
	} {
		if !strings.Contains(pages[0], want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// A report that cannot be written fails the command after the summary.
func TestBacktestReportUnwritable(t *testing.T) {
	t.Parallel()
	e := newBacktestEnv(t)
	report := filepath.Join(e.dir, "missing-dir", "report.html")
	code, out, stderr := runOut(t, context.Background(), e.env, "backtest", "--config", e.config, "--csv", e.csv,
		"--scenario", e.scenario, "--report", report)
	if code != 1 || !strings.Contains(stderr, "riskguard backtest: write report: ") || !strings.Contains(stderr, "missing-dir") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if !strings.Contains(out, "liquidations the guard avoided:") {
		t.Errorf("the summary was not printed first:\n%s", out)
	}
}

// The report opens in a real browser, offline, and shows its charts:
// headless Chromium dumps the DOM and takes a screenshot of the page.
// RISKGUARD_TEST_ARTIFACTS, when set, names a directory to keep the report
// and the screenshot in.
func TestBacktestReportInChromium(t *testing.T) {
	t.Parallel()
	browser := findChromium(t)
	e := newBacktestEnv(t)
	report := filepath.Join(e.dir, "report.html")
	code, _, stderr := runOut(t, context.Background(), e.env, "backtest", "--config", e.config, "--csv", e.csv,
		"--scenario", e.scenario, "--interval", "1s", "--report", report)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	page := (&url.URL{Scheme: "file", Path: report}).String()

	start := time.Now()
	dom := runChromium(t, browser, e.dir, "--dump-dom", page)
	t.Logf("chromium --dump-dom: %s", time.Since(start).Round(time.Millisecond))
	if got := strings.Join(chartSymbols(string(dom)), " "); got != "XSOL XBTC XETH" {
		t.Errorf("the browser's DOM holds charts of %q, want XSOL XBTC XETH:\n%.2000s", got, dom)
	}
	if n := strings.Count(string(dom), `class="index"`); n != 3 {
		t.Errorf("the DOM holds %d index price lines, want 3", n)
	}

	shot := filepath.Join(e.dir, "shot.png")
	start = time.Now()
	runChromium(t, browser, e.dir, "--screenshot="+shot, "--window-size=1280,2000", page)
	t.Logf("chromium --screenshot: %s", time.Since(start).Round(time.Millisecond))
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 2000 {
		t.Errorf("screenshot is %v, want 1280×2000", b)
	}
	if dir := os.Getenv("RISKGUARD_TEST_ARTIFACTS"); dir != "" {
		for _, p := range []string{report, shot} {
			b, err := os.ReadFile(p)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644)
			}
			if err != nil {
				t.Errorf("keep %s: %v", p, err)
			}
		}
	}

	// Not a blank page: many colours, among them the chart's lines.
	distinct := map[color.RGBA]bool{}
	found := map[string]bool{}
	lines := map[string]color.RGBA{
		"index price":               {0x1f, 0x29, 0x37, 0xff},
		"liquidation with guard":    {0x00, 0x9e, 0x73, 0xff},
		"liquidation without guard": {0xd5, 0x5e, 0x00, 0xff},
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if x%4 == 0 && y%4 == 0 {
				distinct[c] = true
			}
			for name, want := range lines {
				if near(c, want) {
					found[name] = true
				}
			}
		}
	}
	if len(distinct) < 16 {
		t.Errorf("screenshot has %d distinct colours: blank or not drawn", len(distinct))
	}
	for _, name := range []string{"index price", "liquidation with guard", "liquidation without guard"} {
		if !found[name] {
			t.Errorf("no %s line in the screenshot", name)
		}
	}
	t.Logf("screenshot: %d distinct colours sampled", len(distinct))
}

// near says whether two colours are within anti-aliasing of each other.
func near(a, b color.RGBA) bool {
	d := func(x, y uint8) int {
		if x > y {
			return int(x - y)
		}
		return int(y - x)
	}
	return d(a.R, b.R) <= 12 && d(a.G, b.G) <= 12 && d(a.B, b.B) <= 12
}

// findChromium finds the browser, or installs Debian's chromium package
// once where the test runs as root with apt-get, or skips.
func findChromium(t *testing.T) string {
	t.Helper()
	find := func() string {
		if p, err := exec.LookPath("chromium"); err == nil {
			return p
		}
		if _, err := os.Stat("/usr/bin/chromium"); err == nil {
			return "/usr/bin/chromium"
		}
		return ""
	}
	if p := find(); p != "" {
		return p
	}
	aptGet, err := exec.LookPath("apt-get")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("headless Chromium is needed to open the report: no chromium on PATH or at /usr/bin/chromium, and it cannot be installed here (needs root and apt-get: apt-get install -y chromium)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for _, args := range [][]string{{"update"}, {"install", "-y", "chromium"}} {
		cmd := exec.CommandContext(ctx, aptGet, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("headless Chromium is needed to open the report and could not be installed: apt-get %s: %v\n%s",
				strings.Join(args, " "), err, tail(out, 2000))
		}
	}
	t.Logf("installed chromium with apt-get in %s", time.Since(start).Round(time.Second))
	if p := find(); p != "" {
		return p
	}
	t.Skip("headless Chromium is needed to open the report: apt-get install chromium succeeded but no chromium binary was found")
	return ""
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// runChromium runs headless Chromium offline on a profile of its own and
// returns its stdout.
func runChromium(t *testing.T, browser, dir string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(home, "profile")}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Chromium's helper processes may hold the pipes open a little after
	// the browser exits.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, tail(stderr.Bytes(), 4000))
	}
	return stdout.Bytes()
}
