package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// marker is in the credentials the fuzzed files are loaded with: an
// error or a warning that holds it shows a secret.
const (
	marker       = "d34db33f"
	markedSecret = "SECRET-" + marker
	markedKey    = "KEY-" + marker
)

// FuzzLoadConfig feeds arbitrary file contents to the config loader: it
// returns a config or an error list, never panics, and neither its errors
// nor its warnings show the credentials taken from the environment.
func FuzzLoadConfig(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "rules.example.yaml")); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"exchange:\n  base_url: https://api.example.com\nrules: []\n",
		"exchange:\n  base_url: http://10.0.0.1\n  api_key: k\n  api_secret: s\n  timeout: 0s\n  max_retries: 21\n  index_names: {XBTC: BTC_USD}\nengine:\n  listen: 0.0.0.0:9464\n  stale_after: -1s\nrules: []\n",
		"exchange: {base_url: https://a.example, rate_limit: .nan, rate_burst: 0}\nengine: {interval: 1h, dry_run: yes}\nnotify: 3\nrules: []\n",
		"exchange:\n  base_url: https://a.example\nexchange: {}\nrulez: []\n",
		"exchange:\n  base_url: https://a.example\nnotify:\n  channels:\n    t: {type: slack, webhook_url_env: SLACK}\nrules:\n  - name: r\n    when: position.leverage > 1\n",
		"- just\n- a list\n",
		"",
		"exchange: {base_url: https://a.example}\nengine: {state_file: s.json}\naccounts:\n  - name: a\n    exchange: {api_key: k, api_secret: s}\n  - {name: a, state_file: s.a.json, rules: [{name: r, when: x}]}\n  - name: &n B\n  - *n\nrules: []\n",
		"accounts: [{name: x, rules_file: /nonexistent, exchange: 3}, 7]\n",
	} {
		f.Add([]byte(s))
	}
	getenv := func(k string) string {
		switch k {
		case "RISKGUARD_API_KEY":
			return markedKey
		case "RISKGUARD_API_SECRET":
			return markedSecret
		}
		return ""
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "riskguard.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(path, getenv, Options{})
		if err != nil {
			if cfg != nil {
				t.Fatal("a config and an error")
			}
			if strings.Contains(err.Error(), marker) && !strings.Contains(string(data), marker) {
				t.Fatalf("the error shows a credential from the environment: %v", err)
			}
			return
		}
		if cfg.Rules == nil {
			t.Fatal("a config without a rule set")
		}
		for _, w := range cfg.Warnings {
			if strings.Contains(w, marker) {
				t.Fatalf("a warning shows a credential: %s", w)
			}
		}
	})
}
