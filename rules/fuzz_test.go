package rules

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the rules file parser: it must return
// a set or an *ErrorList, never panic.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, "../rules.example.yaml")
	for _, path := range files {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("rules:\n  - name: a\n    when: |\n      1 /\n      0 > 1\n"))
	f.Add([]byte("rules: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("fuzz.yaml", data)
		if err == nil {
			for _, r := range set.Rules {
				if r.program == nil {
					t.Fatalf("rule %q parsed without a program", r.Name)
				}
				r.Eval(filled(nil))
				_ = r.Fingerprint()
			}
			return
		}
		if _, ok := err.(*ErrorList); !ok {
			t.Fatalf("error is %T, want *ErrorList", err)
		}
		_ = err.Error()
	})
}

// FuzzCompileExpr compiles and runs arbitrary expression text: errors are
// fine, panics are not, and the closures of the fast subset give the VM's
// results.
func FuzzCompileExpr(f *testing.F) {
	for _, s := range []string{
		"liquidationDistance < 0.05 && position.leverage > 10",
		"position.quantity / position.margin > 1",
		"position.leverage % 0 == 0",
		"riskLimit.maxLeverage / 2",
		"2 ** 1024 > 0",
		"now.Sub(now) > duration('1m')",
		"let x = 1; x / 0",
		"map(1..3, # / 0)",
		"position.symbol in ['XBTC', 'XETH']",
	} {
		f.Add(s)
	}
	env := filled(func(in *Input) { in.Position.Margin = 0 })
	raw := distinctEnv()
	f.Fuzz(func(t *testing.T, src string) {
		for _, kind := range []exprKind{exprBool, exprNumber} {
			p, _, err := compileExpr(src, kind)
			if err != nil {
				continue
			}
			var ev Evaluator
			_, _ = ev.vm.Run(p, env)
			// Where the text falls in the fast subset, the closures
			// must agree with the VM.
			fp := &fastProgram{kind: kind}
			if kind == exprBool {
				fp.b = compileFastBool(p.Node())
			} else {
				fp.f = compileFastNumber(p.Node())
			}
			if !fp.compiled() {
				continue
			}
			for _, e := range []*Env{env, raw} {
				if got, want := fp.run(e), vmOutcome(p, kind, e); !got.equal(want) {
					t.Fatalf("%q: closures %v, VM %v", src, got, want)
				}
			}
		}
	})
}
