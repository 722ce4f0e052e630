package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// runTestCmd runs `riskguard test args...` in process and returns its exit
// status and output.
func runTestCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, Getenv: envMap(nil)}
	err := m.Run(context.Background(), append([]string{"test"}, args...))
	var ec exitCode
	switch {
	case err == nil:
	case errors.As(err, &ec):
		code = int(ec)
	default:
		t.Fatalf("riskguard test: %v", err)
	}
	return code, out.String(), errOut.String()
}

const (
	exampleTests = "../../rules.example.test.yaml"
	brokenTests  = "testdata/ruletest/broken.test.yaml"
)

// brokenDiff is what the deliberately broken test file must print.
var brokenDiff = []string{
	"FAIL " + brokenTests + `:13: test "over-max leverage expected too low" at 0s: firing
    expected: [{rule: over-max-leverage, symbol: XSOL}]
    got:      [{rule: liquidation-distance-5pct, symbol: XSOL}, {rule: over-max-leverage, symbol: XSOL}]
    + unexpected: {rule: liquidation-distance-5pct, symbol: XSOL}
`,
	"FAIL " + brokenTests + `:13: test "over-max leverage expected too low" at 0s: actions
    expected: [{action: lower_leverage, symbol: XSOL, leverage: 5}]
`,
	"    - missing:    {action: lower_leverage, symbol: XSOL, leverage: 5}\n",
	"    + unexpected: {action: lower_leverage, symbol: XSOL, leverage: 10, from: 15, cross: false, rules: [over-max-leverage], outcome: sent}\n",
	"FAIL 1 of 2 tests failed\n",
}

func TestRuleTestExamplePasses(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runTestCmd(t, exampleTests)
	if code != 0 || stdout != "PASS 5 tests\n" {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 0 and PASS 5 tests", code, stdout, stderr)
	}
}

func TestRuleTestBrokenFailsWithDiff(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runTestCmd(t, brokenTests)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range brokenDiff {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks\n%s\ngot:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "a passing test next to it") {
		t.Errorf("the passing test is reported:\n%s", stdout)
	}
}

func TestRuleTestCommandErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrHave []string
	}{
		{"no file", nil, 2, "", []string{"give at least one test file", "usage: riskguard test"}},
		{"bad --run", []string{"--run", "(", exampleTests}, 2, "", []string{"--run: error parsing regexp"}},
		{"malformed", []string{"testdata/ruletest/malformed.test.yaml"}, 1, "FAIL 1 file not loaded\n", []string{
			`testdata/ruletest/malformed.test.yaml:7:12: test "malformed": input_series SOL: "abc": expected a number, _, axn or a+bxn`,
			`testdata/ruletest/malformed.test.yaml:9:13: test "malformed": expect: at 1.5s is not a multiple of the interval 1s`,
			`testdata/ruletest/malformed.test.yaml:10:44: test "malformed": expect at 1.5s: firing: unknown key "symbl" (did you mean "symbol"?)`,
		}},
		{"missing file", []string{"testdata/ruletest/nowhere.yaml"}, 1, "FAIL 1 file not loaded\n", []string{"read test file:"}},
		{"no test matched", []string{"--run", "^nothing$", exampleTests}, 1, "no test matched\n", nil},
		{"run filter", []string{"--run", "passing", brokenTests}, 0, "PASS 1 test\n", nil},
		{"two files", []string{exampleTests, brokenTests}, 1, "", nil},
		{"rules-only file and index_names", []string{"testdata/ruletest/loaders.test.yaml"}, 0, "PASS 1 test\n", nil},
		{"account rules and functions over time", []string{"testdata/ruletest/account.test.yaml"}, 0, "PASS 2 tests\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTestCmd(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if tt.stdout != "" && stdout != tt.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.stdout)
			}
			for _, want := range tt.stderrHave {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if tt.name == "two files" && !strings.HasSuffix(stdout, "FAIL 1 of 7 tests failed\n") {
				t.Errorf("stdout does not end with the total:\n%s", stdout)
			}
		})
	}
}

func TestRuleTestBinary(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	out, err := exec.Command(bin, "test", exampleTests).CombinedOutput()
	if err != nil || string(out) != "PASS 5 tests\n" {
		t.Errorf("riskguard test %s: %v\n%s", exampleTests, err, out)
	}
	cmd := exec.Command(bin, "test", brokenTests)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("riskguard test %s: %v, want exit status 1\n%s", brokenTests, err, stdout.String())
	}
	for _, want := range brokenDiff {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks\n%s\ngot:\n%s", want, stdout.String())
		}
	}
}
