package notify

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLogSend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sev       string
		wantLevel string
	}{
		{"critical", "level=ERROR"},
		{"warning", "level=WARN"},
		{"info", "level=INFO"},
	}
	for _, tt := range tests {
		t.Run(tt.sev, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			l := NewLog(slog.New(slog.NewTextHandler(&buf, nil)))
			m := Message{Time: time.Unix(0, 0), Kind: KindAction, Severity: tt.sev, Rule: "r1", Symbol: "XBTC", Action: "lower_leverage", Text: "lowered XBTC 20→10"}
			if err := l.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			for _, want := range []string{tt.wantLevel, "lowered XBTC 20→10", "rule=r1", "symbol=XBTC", "action=lower_leverage", "kind=action"} {
				if !strings.Contains(out, want) {
					t.Errorf("log line %q lacks %q", out, want)
				}
			}
		})
	}
	if err := NewLog(nil).Send(context.Background(), Message{Text: "x"}); err != nil {
		t.Fatal(err)
	}
}
