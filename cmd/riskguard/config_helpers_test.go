package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/riskguard/riskguard/config"
)

// envMap is a getenv over a map.
func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeConfig writes a config file with mode 0600 and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "riskguard.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadConfig loads path as run does with the shipped venues: the tests
// that look at what the program makes of a file.
func loadConfig(path string, getenv func(string) string) (*config.Config, error) {
	return config.Load(path, getenv, config.Options{})
}

const minimalRules = `
rules:
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
`
