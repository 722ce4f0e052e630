package yamlnode

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func node(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

func TestFields(t *testing.T) {
	t.Parallel()
	n := node(t, "interval: 2s\nintervall: 3s\ninterval: 4s\nbase: &b x\nalias: *b\nzzz: 1\n")
	var got []string
	vals := Fields(n, "engine.", []string{"interval", "base", "alias"}, func(at *yaml.Node, msg string) {
		got = append(got, strings.Join([]string{at.Value, msg}, ": "))
	})
	want := []string{
		`intervall: unknown key "engine.intervall" (did you mean "engine.interval"?)`,
		`interval: duplicate key "engine.interval"`,
		`zzz: unknown key "engine.zzz" (known: interval, base, alias)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("reports:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if vals["interval"].Value != "2s" || vals["alias"].Value != "x" {
		t.Errorf("values: interval %q alias %q", vals["interval"].Value, vals["alias"].Value)
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src     string
		want    time.Duration
		wantErr string
	}{
		{"5m", 5 * time.Minute, ""},
		{"0s", 0, ""},
		{"-2s", 0, "must not be negative, got -2s"},
		{"soon", 0, `bad duration "soon": use a number with a unit, like 30s, 5m or 1h`},
		{"~", 0, "expected a duration like 30s or 5m, got nothing (null)"},
		{"[1s]", 0, "expected a duration like 30s or 5m, got a list"},
	}
	for _, tt := range tests {
		d, err := Duration(node(t, "v: "+tt.src).Content[1])
		if d != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("Duration(%s) = %v, %v; want %v, %q", tt.src, d, err, tt.want, tt.wantErr)
		}
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		`"x"`: `the string "x"`, "5": "the integer 5", "1.5": "the number 1.5", "true": "the boolean true",
		"~": "nothing (null)", "{a: 1}": "a mapping", "[1]": "a list",
	} {
		if got := Describe(node(t, "v: "+src).Content[1]); got != want {
			t.Errorf("Describe(%s) = %q, want %q", src, got, want)
		}
	}
}
