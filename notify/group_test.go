package notify

import (
	"fmt"
	"testing"
	"time"
)

// The grouper step by step, with explicit times: what goes at once, what
// waits, and what each follow-up stands for.
func TestGrouperSteps(t *testing.T) {
	t.Parallel()
	const wait = 30 * time.Second
	at := func(s int) time.Time { return testNow.Add(time.Duration(s) * time.Second) }
	msg := func(kind Kind, sev string) Message {
		return Message{Kind: kind, Severity: sev, Text: string(kind) + " " + sev}
	}
	type step struct {
		s     int  // seconds after testNow
		flush bool // flush at s instead of offering
		m     Message
		want  string // what goes out: "" none, else "kind severity ×count", ";"-joined for a flush
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"quiet key at once, then merged", []step{
			{s: 0, m: msg(KindFiring, "warning"), want: "firing warning ×1"},
			{s: 1, m: msg(KindResolved, "info")},
			{s: 2, m: msg(KindFiring, "warning")},
			{s: 29, flush: true},
			{s: 30, flush: true, want: "firing warning ×2"},
			{s: 59, m: msg(KindResolved, "info")}, // within the follow-up's wait
			{s: 60, flush: true, want: "resolved info ×1"},
			{s: 90, flush: true},                                              // quiet now
			{s: 91, m: msg(KindFiring, "warning"), want: "firing warning ×1"}, // at once again
		}},
		{"critical at once in a busy key, standing for what waited", []step{
			{s: 0, m: msg(KindFiring, "warning"), want: "firing warning ×1"},
			{s: 1, m: msg(KindResolved, "info")},
			{s: 2, m: msg(KindFiring, "critical"), want: "firing critical ×2"},
			{s: 3, m: msg(KindFiring, "critical")}, // its kind went critically 1 s ago, nothing between
			{s: 31, flush: true},                   // the critical one started a new wait
			{s: 32, flush: true, want: "firing critical ×1"},
			{s: 33, m: msg(KindNoData, "critical"), want: "nodata critical ×1"}, // another kind: at once
		}},
		{"a critical re-fire at once, once per wait (issue 40)", []step{
			{s: 0, m: msg(KindFiring, "critical"), want: "firing critical ×1"},
			{s: 3, m: msg(KindResolved, "info")},
			{s: 10, m: msg(KindFiring, "critical"), want: "firing critical ×2"}, // resolved, then fired again: news, standing for the resolved
			{s: 11, m: msg(KindResolved, "info")},
			{s: 12, m: msg(KindFiring, "critical")}, // a second re-fire within the wait: flapping, merged
			{s: 39, flush: true},
			{s: 40, flush: true, want: "firing critical ×2"},
			{s: 41, m: msg(KindResolved, "info")},
			{s: 45, m: msg(KindFiring, "critical"), want: "firing critical ×2"}, // 35 s after the last re-fire: at once again
		}},
		{"a critical kind at once again once its own wait is over", []step{
			{s: 0, m: msg(KindFiring, "critical"), want: "firing critical ×1"},
			{s: 1, m: msg(KindResolved, "info")},
			{s: 30, flush: true, want: "resolved info ×1"},
			{s: 31, m: msg(KindFiring, "critical"), want: "firing critical ×1"}, // busy, but 31 s since the last critical firing
			{s: 32, m: msg(KindFiring, "critical")},
			{s: 61, flush: true, want: "firing critical ×1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gr := newGrouper(wait)
			for i, st := range tt.steps {
				var got string
				if st.flush {
					due, _ := gr.due(at(st.s), false)
					for j, g := range due {
						if j > 0 {
							got += ";"
						}
						got += fmt.Sprintf("%s %s ×%d", g.msg.Kind, g.msg.Severity, g.count)
					}
				} else if g, _ := gr.offer("k", st.m, at(st.s)); g != nil {
					got = fmt.Sprintf("%s %s ×%d", g.msg.Kind, g.msg.Severity, g.count)
				}
				if got != st.want {
					t.Errorf("step %d at %ds: out %q, want %q", i, st.s, got, st.want)
				}
			}
		})
	}
}

// A grouper remembers at most maxRemembered keys: past that it forgets the
// ones with nothing waiting (their next message goes at once), never a
// waiting follow-up.
func TestGrouperMemoryBounded(t *testing.T) {
	t.Parallel()
	gr := newGrouper(time.Hour)
	if g, _ := gr.offer("held", Message{Text: "a"}, testNow); g == nil {
		t.Fatal("first message held")
	}
	if g, waits := gr.offer("held", Message{Text: "b"}, testNow); g != nil || !waits {
		t.Fatal("second message not held")
	}
	for i := range 3 * maxRemembered {
		if g, _ := gr.offer(fmt.Sprint("k", i), Message{Text: "x"}, testNow); g == nil {
			t.Fatalf("key %d: first message held", i)
		}
		if len(gr.keys) > maxRemembered {
			t.Fatalf("%d keys remembered, want at most %d", len(gr.keys), maxRemembered)
		}
	}
	due, _ := gr.due(testNow.Add(time.Hour), false)
	if len(due) != 1 || due[0].key != "held" || due[0].msg.Text != "b" {
		t.Errorf("the waiting follow-up was lost: %+v", due)
	}
}
