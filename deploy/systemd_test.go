package deploy

import (
	"bufio"
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/exchange/sim"
)

// unitKey is one Key=value line of a unit file.
type unitKey struct {
	section, key, value string
}

func parseUnit(t *testing.T, path string) []unitKey {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []unitKey
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not Key=value: %q", path, line)
			}
			out = append(out, unitKey{section, strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// values returns every value of key in section.
func values(keys []unitKey, section, key string) []string {
	var out []string
	for _, k := range keys {
		if k.section == section && k.key == key {
			out = append(out, k.value)
		}
	}
	return out
}

// The unit is a Type=notify service with a watchdog, restarts on failure,
// reloads with SIGHUP, gets its secrets through LoadCredential and runs
// sandboxed.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	keys := parseUnit(t, "riskguard.service")
	for _, want := range []struct{ key, value string }{
		{"Type", "notify"},
		{"Restart", "on-failure"},
		{"ExecReload", "/bin/kill -HUP $MAINPID"},
		{"DynamicUser", "yes"},
		{"NoNewPrivileges", "yes"},
		{"ProtectSystem", "strict"},
		{"ProtectHome", "yes"},
		{"PrivateTmp", "yes"},
		{"PrivateDevices", "yes"},
		{"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"},
		{"SystemCallFilter", "@system-service"},
		{"CapabilityBoundingSet", ""},
		{"StateDirectory", "riskguard"},
		{"LogsDirectory", "riskguard"},
	} {
		got := values(keys, "Service", want.key)
		found := false
		for _, v := range got {
			found = found || v == want.value
		}
		if !found {
			t.Errorf("[Service] %s=%s missing (got %q)", want.key, want.value, got)
		}
	}
	if got := values(keys, "Service", "WatchdogSec"); len(got) != 1 || got[0] == "0" {
		t.Errorf("WatchdogSec: got %q, want one non-zero value", got)
	}
	start := values(keys, "Service", "ExecStart")
	if len(start) != 1 || !strings.Contains(start[0], " run --config ") {
		t.Errorf("ExecStart: got %q, want one `riskguard run --config …`", start)
	}
	creds := map[string]bool{}
	for _, v := range values(keys, "Service", "LoadCredential") {
		name, _, _ := strings.Cut(v, ":")
		creds[name] = true
	}
	env := strings.Join(values(keys, "Service", "Environment"), "\n")
	for _, c := range []struct{ cred, env string }{
		{"api_key", "RISKGUARD_EXCHANGE_API_KEY_FILE=%d/api_key"},
		{"api_secret", "RISKGUARD_EXCHANGE_API_SECRET_FILE=%d/api_secret"},
	} {
		if !creds[c.cred] {
			t.Errorf("no LoadCredential=%s:…", c.cred)
		}
		if !strings.Contains(env, c.env) {
			t.Errorf("no Environment=%s", c.env)
		}
	}
}

// systemd-analyze verify accepts the unit. verify insists that ExecStart's
// binary exists, so it checks a copy whose ExecStart runs the binary the
// Dockerfile's build gives (or /bin/true under -short); everything else is
// the unit as shipped. verify exits 0 on unknown keys, so any complaint
// about the unit fails the test.
func TestSystemdAnalyzeVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found (Debian package systemd): the unit is not verified")
	}
	bin := "/bin/true"
	if !testing.Short() {
		bin = staticBinary(t)
	}
	data, err := os.ReadFile("riskguard.service")
	if err != nil {
		t.Fatal(err)
	}
	const shipped = "ExecStart=/usr/local/bin/riskguard "
	if !bytes.Contains(data, []byte(shipped)) {
		t.Fatalf("the unit has no %q line", shipped)
	}
	unit := filepath.Join(t.TempDir(), "riskguard.service")
	if err := os.WriteFile(unit, bytes.Replace(data, []byte(shipped), []byte("ExecStart="+bin+" "), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", unit)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "riskguard.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		} else if line != "" {
			t.Logf("systemd-analyze verify (not about the unit): %s", line)
		}
	}
}

// The unit's environment reaches the daemon as systemd would give it: the
// key pair read from the credentials directory (%d) through the
// RISKGUARD_EXCHANGE_API_*_FILE overrides, the audit log in the logs
// directory (%L) and the state in the state directory (%S). The binary the
// Dockerfile builds runs one dry-run tick of rules.example.yaml against the
// simulated exchange with it; the exchange checks the key pair's signature.
func TestSystemdUnitEnvironment(t *testing.T) {
	t.Parallel()
	bin := staticBinary(t)
	ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ex)
	t.Cleanup(srv.Close)

	root := t.TempDir()
	dirs := map[string]string{"%d": filepath.Join(root, "credentials"), "%S": filepath.Join(root, "state"), "%L": filepath.Join(root, "log")}
	keys := parseUnit(t, "riskguard.service")
	secrets := map[string]string{"api_key": sim.DefaultKey, "api_secret": sim.DefaultSecret}
	if err := os.MkdirAll(dirs["%d"], 0o700); err != nil {
		t.Fatal(err)
	}
	for _, v := range values(keys, "Service", "LoadCredential") {
		name, _, _ := strings.Cut(v, ":")
		secret, ok := secrets[name]
		if !ok {
			t.Fatalf("LoadCredential=%s: unknown credential", v)
		}
		if err := os.WriteFile(filepath.Join(dirs["%d"], name), []byte(secret+"\n"), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	expand := func(s string) string {
		for spec, dir := range dirs {
			s = strings.ReplaceAll(s, spec, dir)
		}
		if strings.Contains(s, "%") {
			t.Fatalf("unit specifier this test does not know in %q", s)
		}
		return s
	}
	// systemd creates StateDirectory= under %S and LogsDirectory= under %L.
	for spec, key := range map[string]string{"%S": "StateDirectory", "%L": "LogsDirectory"} {
		for _, d := range values(keys, "Service", key) {
			if err := os.MkdirAll(filepath.Join(dirs[spec], d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root, "RISKGUARD_EXCHANGE_BASE_URL=" + srv.URL}
	for _, v := range values(keys, "Service", "Environment") {
		env = append(env, expand(v))
	}
	config, err := filepath.Abs(filepath.Join("..", "rules.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", config, "--once", "--dry-run", "--log-format", "json")
	cmd.Env = env
	wd := values(keys, "Service", "WorkingDirectory")
	if len(wd) != 1 {
		t.Fatalf("WorkingDirectory: got %q, want one", wd)
	}
	cmd.Dir = expand(wd[0])
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("riskguard run --once with the unit's environment: %v\n%s", err, out)
	}
	if strings.Contains(string(out), sim.DefaultSecret) {
		t.Error("the API secret appears in the output")
	}
	if len(ex.Calls()) == 0 {
		t.Error("the daemon made no call to the exchange")
	}
	audit := filepath.Join(dirs["%L"], "riskguard", "riskguard-audit.jsonl")
	if _, err := os.Stat(audit); err != nil {
		t.Errorf("no audit log in the logs directory: %v\n%s", err, out)
	}
}
