package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The compose file of the three-node example: three etcd members that
// list one another, three riskguard processes each named, each with every
// etcd member as an endpoint. Docker cannot run here; the file is checked
// as data.
func TestHACompose(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("ha/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			DependsOn   []string          `yaml:"depends_on"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var etcds, guards []string
	for name := range doc.Services {
		switch {
		case strings.HasPrefix(name, "etcd-"):
			etcds = append(etcds, name)
		case strings.HasPrefix(name, "riskguard-"):
			guards = append(guards, name)
		default:
			t.Errorf("unexpected service %s", name)
		}
	}
	slices.Sort(etcds)
	slices.Sort(guards)
	if len(etcds) != 3 || len(guards) != 3 {
		t.Fatalf("services: etcd %v, riskguard %v; want three of each", etcds, guards)
	}
	initial := "--initial-cluster=etcd-1=http://etcd-1:2380,etcd-2=http://etcd-2:2380,etcd-3=http://etcd-3:2380"
	for _, name := range etcds {
		s := doc.Services[name]
		if !strings.HasPrefix(s.Image, "quay.io/coreos/etcd:v3.") {
			t.Errorf("%s: image %q", name, s.Image)
		}
		if !slices.Contains(s.Command, "--name="+name) || !slices.Contains(s.Command, initial) ||
			!slices.Contains(s.Command, "--advertise-client-urls=http://"+name+":2379") {
			t.Errorf("%s: command %v does not name it or the cluster", name, s.Command)
		}
	}
	hosts := map[string]bool{}
	for _, name := range guards {
		s := doc.Services[name]
		if s.Command[0] != "run" || !slices.Contains(s.Command, "/etc/riskguard/riskguard.yaml") {
			t.Errorf("%s: command %v", name, s.Command)
		}
		host := s.Environment["RISKGUARD_HA_HOST"]
		if host != name || hosts[host] {
			t.Errorf("%s: RISKGUARD_HA_HOST %q: each process needs its own name", name, host)
		}
		hosts[host] = true
		eps := strings.Split(s.Environment["RISKGUARD_HA_ENDPOINTS"], ",")
		slices.Sort(eps)
		if strings.Join(eps, ",") != "http://etcd-1:2379,http://etcd-2:2379,http://etcd-3:2379" {
			t.Errorf("%s: endpoints %v, want every etcd member", name, eps)
		}
		if len(s.Volumes) != 1 || !strings.HasPrefix(s.Volumes[0], "./riskguard-compose.yaml:") {
			t.Errorf("%s: volumes %v", name, s.Volumes)
		}
		if _, err := os.Stat(filepath.Join("ha", "riskguard-compose.yaml")); err != nil {
			t.Error(err)
		}
	}
}

// The HA drop-in on top of the shipped unit: systemd-analyze verify
// accepts the two merged, and the drop-in names each node and hands the
// etcd client certificates over as credentials.
func TestHADropIn(t *testing.T) {
	t.Parallel()
	keys := parseUnit(t, "ha/riskguard.service.d/ha.conf")
	if got := values(keys, "Service", "Environment"); !slices.Contains(got, "RISKGUARD_HA_HOST=%H") ||
		!slices.Contains(got, "RISKGUARD_HA_CA_FILE=%d/etcd-ca") || !slices.Contains(got, "RISKGUARD_HA_KEY_FILE=%d/etcd-key") {
		t.Errorf("drop-in Environment = %v", got)
	}
	if got := values(keys, "Service", "LoadCredential"); len(got) != 3 {
		t.Errorf("drop-in LoadCredential = %v, want the CA, the cert and the key", got)
	}
	if got := values(keys, "Unit", "Requires"); len(got) != 0 {
		t.Errorf("the guard must not require etcd (a node without etcd is a standby): Requires=%v", got)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found (Debian package systemd): the merged unit is not verified")
	}
	unit, err := os.ReadFile("riskguard.service")
	if err != nil {
		t.Fatal(err)
	}
	dropIn, err := os.ReadFile("ha/riskguard.service.d/ha.conf")
	if err != nil {
		t.Fatal(err)
	}
	unit = bytes.Replace(unit, []byte("ExecStart=/usr/local/bin/riskguard "), []byte("ExecStart=/bin/true "), 1)
	merged := filepath.Join(t.TempDir(), "riskguard.service")
	if err := os.WriteFile(merged, append(append(unit, '\n'), dropIn...), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", merged)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0", "SYSTEMD_PAGER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "riskguard.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}
