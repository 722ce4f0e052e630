package engine

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
)

// Whatever times a control is asked for, the state file stays writable:
// the engine refuses the times outside the bounds of engine/control, and
// every control it accepts is saved and read back. (A silence from year
// 9999 once made every later save fail: "year outside of range".)
func FuzzControlTimesKeepStateWritable(f *testing.F) {
	never := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, seed := range []struct{ start, silenceFor, pauseFor int64 }{
		{t0.Unix(), 3600, 0},
		{never.Unix(), 48 * 3600, 0},
		{never.Unix(), 1 << 40, 1 << 40},
		{time.Time{}.Unix(), 3600, 1},
		{-1 << 62, 1 << 62, -1},
		{1 << 62, 1, 1 << 62},
		{t0.Unix() + 86400, int64(control.MaxDuration / time.Second), int64(control.MaxDuration / time.Second)},
		{t0.Unix() - 86400, int64(control.MaxDuration/time.Second) + 86400, int64(control.MaxDuration/time.Second) + 1},
	} {
		f.Add(seed.start, seed.silenceFor, seed.pauseFor)
	}
	// One engine for every run (a new one each run is 10 times slower):
	// each run ends the controls it made.
	path := filepath.Join(f.TempDir(), "state.json")
	fx := newFake()
	e, err := New(Config{StateFile: path}, &rules.Set{Rules: []*rules.Rule{rule(f, overMax)}},
		Deps{Reader: fx, Actuator: fx, Notifier: new(recorder), Audit: journal.NewAudit(io.Discard)})
	if err != nil {
		f.Fatal(err)
	}
	h := &harness{e: e}
	f.Fuzz(func(t *testing.T, start, silenceFor, pauseFor int64) {
		ctx, now := context.Background(), t0
		defer func() {
			for _, s := range h.e.Control().Silences(now) {
				_ = h.e.Control().ExpireSilence(ctx, now, s.ID, "fuzz")
			}
			_, _ = h.e.Control().Resume(ctx, now, "", "", "fuzz")
		}()
		startsAt := time.Unix(start, 0).UTC()
		s, err := h.e.Control().AddSilence(ctx, now, control.Silence{Rule: "over-max-leverage", StartsAt: startsAt,
			EndsAt: startsAt.Add(time.Duration(silenceFor) * time.Second), CreatedBy: "fuzz"})
		if err == nil && (s.StartsAt.Sub(now).Abs() > control.MaxLead || s.EndsAt.Sub(s.StartsAt) > control.MaxDuration) {
			t.Fatalf("accepted a silence out of bounds: %+v", s)
		}
		var endsAt time.Time
		if pauseFor != 0 {
			endsAt = now.Add(time.Duration(pauseFor) * time.Second)
		}
		p, err := h.e.Control().Pause(ctx, now, control.Pause{EndsAt: endsAt, CreatedBy: "fuzz"})
		if err == nil && !p.EndsAt.IsZero() && p.EndsAt.Sub(now) > control.MaxDuration {
			t.Fatalf("accepted a pause out of bounds: %+v", p)
		}
		h.e.file.changed()
		if err := h.e.saveLocked(); err != nil {
			t.Fatalf("the state file cannot be written: %v", err)
		}
		st, err := loadState(path)
		if err != nil {
			t.Fatalf("the state file cannot be read back: %v", err)
		}
		if got, want := len(st.Silences)+len(st.Pauses), len(h.e.Control().Silences(now))+len(h.e.Control().Pauses(now)); got != want {
			t.Errorf("saved %d controls, the engine holds %d", got, want)
		}
	})
}

// Controls name what the guard knows: a misspelt rule or symbol is refused
// with the closest known name, a name in another case is stored as the
// guard spells it, and AllowUnknown takes a symbol not open yet.
func TestControlNamesResolved(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{}, overMax, nearLiq)
	h.tick(0) // reads the symbols the exchange lists
	ctx := context.Background()
	for _, tc := range []struct {
		name, rule, symbol, severity string
		allow                        bool
		want                         string // the error's text, or "rule/symbol" stored
	}{
		{"a misspelt rule", "near-liquidaton", "", "", false, `rule "near-liquidaton": the guard knows no such rule (did you mean near-liquidation?)`},
		{"a rule that does not exist", "nope-nothing", "", "", false, `rule "nope-nothing": the guard knows no such rule;`},
		{"a misspelt symbol", "", "XBTX", "", false, `symbol "XBTX": the guard knows no such symbol (did you mean XBTC?); to name a symbol not open yet on purpose, add --allow-unknown`},
		{"a symbol in lower case", "", "xbtc", "", false, "/XBTC"},
		{"a rule in another case", "Near-Liquidation", "xbtc", "", false, "near-liquidation/XBTC"},
		{"an unknown symbol allowed", "", "XNEW", "", true, "/XNEW"},
		{"the account", "", "account", "", false, "/account"},
		{"a severity", "", "", "Critical", false, "/"},
		{"an unknown severity", "", "", "fatal", false, `severity "fatal": want one of info, warning, critical`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := h.e.Control().AddSilence(ctx, t0, control.Silence{Rule: tc.rule, Symbol: tc.symbol, Severity: tc.severity, AllowUnknown: tc.allow,
				EndsAt: t0.Add(time.Hour), CreatedBy: "test"})
			p, perr := h.e.Control().Pause(ctx, t0, control.Pause{Rule: tc.rule, Symbol: tc.symbol, AllowUnknown: tc.allow, CreatedBy: "test"})
			if tc.severity != "" {
				perr = nil // a pause has no severity
				p = control.Pause{Rule: s.Rule, Symbol: s.Symbol}
			}
			if strings.Contains(tc.want, "/") && !strings.Contains(tc.want, " ") {
				if err != nil || perr != nil {
					t.Fatalf("refused: %v / %v", err, perr)
				}
				if got := s.Rule + "/" + s.Symbol; got != tc.want {
					t.Errorf("silence stored as %s, want %s", got, tc.want)
				}
				if got := p.Rule + "/" + p.Symbol; got != tc.want {
					t.Errorf("pause stored as %s, want %s", got, tc.want)
				}
				if tc.severity != "" && s.Severity != strings.ToLower(tc.severity) {
					t.Errorf("severity stored as %q", s.Severity)
				}
				return
			}
			for _, err := range []error{err, perr} {
				if tc.severity != "" && err == nil {
					continue
				}
				if !errors.Is(err, control.ErrUnknownName) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want control.ErrUnknownName saying %q", err, tc.want)
				}
			}
		})
	}
	// An acknowledgement of a misspelt rule says so, not "inactive".
	if _, err := h.e.Control().Ack(ctx, t0, "near-liquidaton", "XBTC", "test", "", time.Time{}); !errors.Is(err, control.ErrUnknownName) || !strings.Contains(err.Error(), "did you mean near-liquidation?") {
		t.Errorf("ack of a misspelt rule: %v", err)
	}
	// Resume matches the pause regardless of case.
	if _, err := h.e.Control().Resume(ctx, t0, "", "xnew", "test"); err != nil {
		t.Errorf("resume of xnew (paused as XNEW): %v", err)
	}
}

// Compile-time checks that what the engine hands its control service is
// what the service declares it needs.
var (
	_ control.Guard   = (*Engine)(nil)
	_ control.Emitter = (*journal.Journal)(nil)
	_ control.Gauges  = (*journal.Metrics)(nil)
	_ control.Standby = (*leader)(nil)
)
