package notify

import (
	"context"
	"log/slog"
)

// TypeLog is the daemon's own log.
const TypeLog = "log"

// decodeLog reads nothing: the log channel has no settings.
func decodeLog(p *parser, path string, m map[string]any, cc *ChannelConfig) {
	p.unknown(path, m, "type")
}

func newLogSender(cc ChannelConfig, o *options) (Sender, error) {
	return NewLog(o.logger), nil
}

// Log is a sender that writes each message to a structured logger, at
// error level for critical messages and warn for warnings.
type Log struct {
	logger *slog.Logger
}

// NewLog returns a log sender; a nil logger discards.
func NewLog(logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Log{logger: logger}
}

// Send logs m. It never fails.
func (l *Log) Send(ctx context.Context, m Message) error {
	level := slog.LevelInfo
	switch m.Severity {
	case "critical":
		level = slog.LevelError
	case "warning":
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("kind", string(m.Kind))}
	if m.Rule != "" {
		attrs = append(attrs, slog.String("rule", m.Rule))
	}
	if m.Symbol != "" {
		attrs = append(attrs, slog.String("symbol", m.Symbol))
	}
	if m.Action != "" {
		attrs = append(attrs, slog.String("action", m.Action))
	}
	l.logger.LogAttrs(ctx, level, "notify: "+m.Text, attrs...)
	return nil
}
