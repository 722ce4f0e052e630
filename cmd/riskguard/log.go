package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
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
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
	}
	return slog.New(tint.NewHandler(w, &tint.Options{Level: lvl, TimeFormat: time.TimeOnly, NoColor: !m.colour()})), nil
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
