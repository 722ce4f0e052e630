package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange"
)

// Each testdata/*.bad.yaml lists at its top, as "# want: FILE:LINE:COL:
// message" lines, every error Load reports for it, in order: the messages
// a newcomer reads, each naming the file, the line and the key.
func TestBadFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.bad.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for line := range strings.Lines(string(data)) {
				if w, ok := strings.CutPrefix(strings.TrimSpace(line), "# want: "); ok {
					want = append(want, "testdata/"+w)
				}
			}
			if len(want) == 0 {
				t.Fatal("no # want: lines")
			}
			_, err = Load(path, envMap(nil), Options{})
			if err == nil {
				t.Fatal("loaded, want errors")
			}
			if got := strings.Split(err.Error(), "\n"); !slices.Equal(got, want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// Each testdata/*.good.yaml loads, with what its sections say over the
// defaults of one place (DefaultExchange, engine.DefaultConfig).
func TestGoodFiles(t *testing.T) {
	t.Parallel()
	creds := map[string]string{
		"RISKGUARD_API_KEY": "k", "RISKGUARD_API_SECRET": "s",
		"RISKGUARD_MAIN_API_KEY": "k1", "RISKGUARD_MAIN_API_SECRET": "s1",
		"RISKGUARD_BOT_2_API_KEY": "k2", "RISKGUARD_BOT_2_API_SECRET": "s2",
	}
	wantExchange := func(base string) Exchange {
		x := DefaultExchange()
		x.BaseURL = base
		return x
	}
	for _, tc := range []struct {
		file  string
		check func(t *testing.T, cfg *Config)
	}{
		{"minimal.good.yaml", func(t *testing.T, cfg *Config) {
			x := wantExchange("https://api.example.com")
			x.APIKey, x.APISecret = "k", "s"
			if cfg.Exchange != x {
				t.Errorf("exchange = %+v, want %+v", cfg.Exchange, x)
			}
			if !reflect.DeepEqual(cfg.Engine, engine.DefaultConfig()) {
				t.Errorf("engine = %+v, want the defaults", cfg.Engine)
			}
			if cfg.Notify != nil || cfg.HA != nil || cfg.Accounts != nil || cfg.Listen != "" || len(cfg.Rules.Rules) != 1 {
				t.Errorf("cfg = %+v", cfg)
			}
		}},
		{"notify.good.yaml", func(t *testing.T, cfg *Config) {
			if cfg.Notify == nil || !slices.Equal(cfg.Notify.ChannelNames(), []string{"pager"}) {
				t.Errorf("notify = %v", cfg.Notify)
			}
		}},
		{"ha.good.yaml", func(t *testing.T, cfg *Config) {
			h := cfg.HA
			if h == nil || h.Host != "node-a" || h.Advertise != "127.0.0.1:9464" || h.Account != "default" ||
				!slices.Equal(h.Endpoints, []string{"http://127.0.0.1:2379"}) {
				t.Errorf("ha = %+v", h)
			}
		}},
		{"accounts.good.yaml", func(t *testing.T, cfg *Config) {
			if got := cfg.AccountNames(); !slices.Equal(got, []string{"main", "bot-2"}) {
				t.Fatalf("accounts = %q", got)
			}
			main, bot := cfg.Accounts[0], cfg.Accounts[1]
			if main.Exchange.BaseURL != "https://api.example.com" || main.Exchange.APIKey != "k1" || main.Engine.StateFile != "state.main.json" {
				t.Errorf("main: %+v, state %s", main.Exchange, main.Engine.StateFile)
			}
			if bot.Exchange.BaseURL != "https://api2.example.com" || bot.Exchange.APIKey != "k2" || bot.Engine.StateFile != "bot2.json" {
				t.Errorf("bot-2: %+v, state %s", bot.Exchange, bot.Engine.StateFile)
			}
			if cfg.Name != "" || cfg.Exchange.APIKey != "k1" {
				t.Errorf("the top level is not the first account's: %q %+v", cfg.Name, cfg.Exchange)
			}
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			cfg, err := Load(filepath.Join("testdata", tc.file), envMap(creds), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Warnings) != 0 {
				t.Errorf("warnings: %q", cfg.Warnings)
			}
			tc.check(t, cfg)
		})
	}
	files, _ := filepath.Glob("testdata/*.good.yaml")
	if len(files) != 4 {
		t.Errorf("%d good files, the table checks 4", len(files))
	}
}

// exchange.venue names one of Options.Venues, and a rule whose action
// needs a call the venue does not offer is refused at the action, naming
// the rule and the call.
func TestVenues(t *testing.T) {
	t.Parallel()
	readOnly := Venue{Name: "readonly", Offers: exchange.Calls{exchange.CallPositions, exchange.CallIndexPrices, exchange.CallTrades,
		exchange.CallSetPositionSettings, exchange.CallCancelOrders}}
	venues := append(DefaultVenues(), readOnly)
	reduce := "rules:\n  - name: cut\n    when: liquidationDistance < 0.05\n    actions:\n      - {action: reduce_position, fraction: 0.5}\n"
	for _, tc := range []struct {
		name, body string
		venues     []Venue
		wantVenue  string
		wantErr    string
	}{
		{"default", "exchange:\n  base_url: https://api.example.com\n" + reduce, nil, "rest", ""},
		{"named", "exchange:\n  venue: readonly\n  base_url: https://api.example.com\nrules: []\n", venues, "readonly", ""},
		{"lacks a call", "exchange:\n  venue: readonly\n  base_url: https://api.example.com\n" + reduce, venues, "",
			`:8:18: rule "cut": reduce_position needs PlaceOrder, which venue "readonly" does not offer (it offers Positions, IndexPrices, Trades, SetPositionSettings, CancelOrders)`},
		{"unknown", "exchange:\n  venue: readonly\n  base_url: https://api.example.com\nrules: []\n", nil, "",
			`:2:10: exchange.venue: "readonly" is not a venue riskguard knows: one of rest`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.body)
			cfg, err := Load(path, envMap(nil), Options{Venues: tc.venues})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || err.Error() != path+tc.wantErr):
				t.Fatalf("err = %v\nwant %s%s", err, path, tc.wantErr)
			case tc.wantErr == "" && cfg.Exchange.Venue != tc.wantVenue:
				t.Errorf("venue = %q, want %q", cfg.Exchange.Venue, tc.wantVenue)
			}
		})
	}
}

// Every row of engine.Settings is one key of the loader's table, so that
// the file and the environment both reach it.
func TestEverySettingIsOneKey(t *testing.T) {
	t.Parallel()
	keys := configKeys()
	for _, s := range engine.Settings() {
		k := settingKey(s)
		if n := slices.Index(keys, k); n < 0 || slices.Index(keys[n+1:], k) >= 0 {
			t.Errorf("%s is not one key of configKeys", s.Key)
		}
	}
}

// A rules-only file (rule tests, a backtest's baseline) is accepted with
// Options.RulesOnly: its engine settings are the defaults and its
// exchange section is empty; without the option it lacks base_url.
func TestRulesOnly(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, minimalRules)
	cfg, err := Load(path, envMap(nil), Options{RulesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.RulesOnly || cfg.Exchange != (Exchange{}) || !reflect.DeepEqual(cfg.Engine, engine.DefaultConfig()) || len(cfg.Rules.Rules) != 1 {
		t.Errorf("cfg = %+v", cfg)
	}
	if _, err := Load(path, envMap(nil), Options{}); err == nil || !strings.Contains(err.Error(), "exchange.base_url is required") {
		t.Errorf("without RulesOnly: %v", err)
	}
}

// A notification secret whose variable is unset stops run, and is a
// warning for the commands that send nothing (SecretsOptional).
func TestSecretsOptional(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\nnotify:\n  channels:\n    ops: {type: telegram, token_env: OPS_TOKEN, chat_id: \"1\"}\n"+minimalRules)
	_, err := Load(path, envMap(nil), Options{})
	if err == nil || !strings.Contains(err.Error(), path+":5:") || !strings.Contains(err.Error(), "OPS_TOKEN") {
		t.Errorf("err = %v", err)
	}
	cfg, err := Load(path, envMap(nil), Options{SecretsOptional: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "OPS_TOKEN") || !strings.Contains(cfg.Warnings[0], "needed by run") {
		t.Errorf("warnings = %q", cfg.Warnings)
	}
	if cfg, err := Load(path, envMap(map[string]string{"OPS_TOKEN": "t"}), Options{}); err != nil || cfg.Notify == nil {
		t.Errorf("with the secret: %v", err)
	}
}

// DefaultExchange is what a file that gives only base_url gets, and an
// environment variable overrides the file.
func TestDefaultExchangeAndEnvironment(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n  timeout: 3s\n"+minimalRules)
	cfg, err := Load(path, envMap(map[string]string{"RISKGUARD_EXCHANGE_TIMEOUT": "4s"}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultExchange()
	want.BaseURL, want.Timeout = "https://api.example.com", 4*time.Second
	if cfg.Exchange != want {
		t.Errorf("exchange = %+v, want %+v", cfg.Exchange, want)
	}
}
