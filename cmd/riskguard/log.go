package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lmittmann/tint"
	"github.com/riskguard/riskguard/internal/nextstep"
	"github.com/riskguard/riskguard/notify"
)

// newLogger builds the program's logger on stderr: tint's text on a
// terminal, JSON otherwise, or as --log-format says. The text is coloured
// on a terminal unless NO_COLOR is set (https://no-color.org).
func (m *Main) newLogger(format, level string) (*slog.Logger, error) {
	w := m.Stderr
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	switch strings.ToLower(format) {
	case "", "auto":
		if isTerminal(w) {
			format = "text"
		} else {
			format = "json"
		}
	case "text", "json":
	default:
		return nil, fmt.Errorf("--log-format %q: want text, json or auto", format)
	}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText})
	} else {
		h = tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, NoColor: !m.colour()})
	}
	return slog.New(newCollapser(h, collapseWindow)), nil
}

// durationText writes a duration as Go writes it ("1.5s"), not in
// nanoseconds: a log is read by people first.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// collapseWindow is how long a warning or error is not repeated in the
// log: an exchange that is down says so once a minute, not on every
// retry of every tick.
const collapseWindow = time.Minute

// retryMsg is the exchange client's line before each retry; its repeats
// are collapsed whatever the route, the attempt or the error.
const retryMsg = "exchange request failed, retrying"

// collapser is a log handler that writes a failure (a warning or an error
// with an err) once per window: the same message with the same err, rule,
// symbol, action and channel (the client's retries by message alone) is
// counted instead, and the
// next one written after the window says how many were left out
// ("repeated"). Metrics and the audit log are not behind it: they count
// every failure. A line with an err the next step is known for gets it
// as "next" (nothing listens at the address, the credentials refused, …).
type collapser struct {
	h      slog.Handler
	window time.Duration
	seen   *collapseBook
	// attrs are the logger's own attributes (With), part of every key.
	attrs string
}

// collapseBook is the state shared by a collapser and the handlers
// derived from it.
type collapseBook struct {
	mu    sync.Mutex
	lines map[string]*collapsed
}

type collapsed struct {
	written time.Time
	left    int
}

func newCollapser(h slog.Handler, window time.Duration) *collapser {
	return &collapser{h: h, window: window, seen: &collapseBook{lines: map[string]*collapsed{}}}
}

// Enabled reports whether the wrapped handler writes level.
func (c *collapser) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }

// Handle writes r unless it repeats a line written within the window.
func (c *collapser) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return c.h.Handle(ctx, r)
	}
	key := c.attrs + "\x00" + r.Message
	var errText string
	hasErr, channel := false, false
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "err":
			hasErr = true
			errText = a.Value.String()
			if r.Message != retryMsg {
				key += "\x00" + errText
			}
		case "rule", "symbol", "action", "reason", "channel":
			channel = channel || a.Key == "channel"
			if r.Message != retryMsg {
				key += "\x00" + a.Key + "=" + a.Value.String()
			}
		}
		return true
	})
	if !hasErr || strings.Contains(r.Message, "reload") {
		// Not a failure that repeats by itself: a transition, an action
		// or an operator's reload is said every time.
		return c.h.Handle(ctx, r)
	}
	c.seen.mu.Lock()
	line := c.seen.lines[key]
	if line != nil && r.Time.Sub(line.written) < c.window {
		line.left++
		c.seen.mu.Unlock()
		return nil
	}
	left := 0
	if line == nil {
		if len(c.seen.lines) >= 1000 { // bounded: a flood of distinct lines starts a new book
			clear(c.seen.lines)
		}
		line = &collapsed{}
		c.seen.lines[key] = line
	}
	left, line.left, line.written = line.left, 0, r.Time
	c.seen.mu.Unlock()
	r = r.Clone()
	if left > 0 {
		r.AddAttrs(slog.String("repeated", fmt.Sprintf("%d more times in the last %s, not logged", left, c.window)))
	}
	// A channel's failure carries its own next step (notify); the others
	// are the exchange's.
	if next := exchangeTarget("exchange.base_url", "").ForText(errText); next != "" && !channel {
		r.AddAttrs(slog.String("next", next))
	}
	return c.h.Handle(ctx, r)
}

// WithAttrs returns a collapser over the wrapped handler with attrs.
func (c *collapser) WithAttrs(attrs []slog.Attr) slog.Handler {
	k := c.attrs
	for _, a := range attrs {
		k += "\x00" + a.String()
	}
	return &collapser{h: c.h.WithAttrs(attrs), window: c.window, seen: c.seen, attrs: k}
}

// WithGroup returns a collapser over the wrapped handler with the group.
func (c *collapser) WithGroup(name string) slog.Handler {
	return &collapser{h: c.h.WithGroup(name), window: c.window, seen: c.seen, attrs: c.attrs + "\x00g:" + name}
}

// exchangeTarget is the exchange for nextstep: its address written at
// setting (exchange.base_url, or check's --exchange), and where its key
// pair comes from.
func exchangeTarget(setting, url string) nextstep.Target {
	return nextstep.Target{
		Name:        "the exchange",
		Setting:     setting,
		URL:         url,
		Start:       "check it (riskguard sim serves the simulated exchange at http://" + defaultSimListen + ")",
		Credentials: "check RISKGUARD_API_KEY and RISKGUARD_API_SECRET, and that the key may read the account (README: Credentials)",
		Timeout:     "raise exchange.timeout",
	}
}

// colour reports whether the text log is coloured: on a terminal, unless
// NO_COLOR is set.
func (m *Main) colour() bool {
	return isTerminal(m.Stderr) && m.Getenv("NO_COLOR") == ""
}

// isTerminal reports whether w is a character device, without a
// dependency on a terminal library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// logNotifier sends notifications to the log. The engine already logs rule
// transitions and actions as they happen, so those kinds are not written a
// second time; what only a notification says (a rule's notify action, a
// failure, the breaker, reloads, start and stop) is.
type logNotifier struct {
	log *notify.Log
}

func newLogNotifier(logger *slog.Logger) *logNotifier {
	return &logNotifier{log: notify.NewLog(logger.With("channel", "log"))}
}

// Send logs m unless the engine has logged it already.
func (n *logNotifier) Send(ctx context.Context, m notify.Message) error {
	switch m.Kind {
	case notify.KindFiring, notify.KindResolved, notify.KindNoData, notify.KindAction:
		return nil
	}
	return n.log.Send(ctx, m)
}
