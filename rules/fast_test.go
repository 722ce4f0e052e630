package rules

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/expr-lang/expr/vm"
)

// vmOnly evaluates r with expr's virtual machine alone, as Eval did before
// the fast path.
func vmOnly(r *Rule, env *Env) (bool, error) {
	saved := *r
	saved.fast = nil
	var ev Evaluator
	return ev.Eval(&saved, env)
}

// result class of an evaluation: the value, or which kind of error.
type outcome struct {
	val    float64 // 0/1 for a bool
	class  string  // "ok", "nodata" or "error: ..."
	isBool bool
}

func (o outcome) equal(p outcome) bool {
	if o.class != p.class || o.isBool != p.isBool {
		return false
	}
	if o.class != "ok" {
		return true
	}
	// Zeros compare equal whatever their sign: expr's constant pool is a
	// map keyed by value, where 0.0 and -0.0 are one key, so the VM gives
	// whichever sign it met first ("c ? -0.0 : 0.0" is -0 both ways).
	// Nothing Eval or TargetLeverage returns can tell them apart: they
	// compare equal, and a division by either is no data.
	return o.val == p.val || (math.IsNaN(o.val) && math.IsNaN(p.val))
}

func (o outcome) String() string {
	if o.class != "ok" {
		return o.class
	}
	if o.isBool {
		return strconv.FormatBool(o.val == 1)
	}
	return strconv.FormatFloat(o.val, 'g', -1, 64)
}

func classOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNoData):
		return "nodata"
	}
	return "error: " + err.Error()
}

func boolOutcome(b bool, class string) outcome {
	o := outcome{class: class, isBool: true}
	if b && class == "ok" {
		o.val = 1
	}
	return o
}

// compileBoth compiles src for the VM and, where it is in the subset, to
// closures.
func compileBoth(t testing.TB, src string, kind exprKind) (*vm.Program, *fastProgram) {
	t.Helper()
	p, _, err := compileExpr(src, kind)
	if err != nil {
		t.Fatalf("compile %q: %v", src, err)
	}
	fp := &fastProgram{kind: kind}
	if kind == exprBool {
		fp.b = compileFastBool(p.Node())
	} else {
		fp.f = compileFastNumber(p.Node())
	}
	return p, fp
}

// vmOutcome runs p on env with the VM, with no check of env.NoData, so
// that invalid inputs (NaN, ±Inf) reach the expression.
func vmOutcome(p *vm.Program, kind exprKind, env *Env) outcome {
	var ev Evaluator
	out, err := ev.vm.Run(p, env)
	if kind == exprBool {
		b, _ := out.(bool)
		return boolOutcome(b, classOf(err))
	}
	f, _ := toFloat(out)
	if err != nil {
		f = 0
	}
	return outcome{val: f, class: classOf(err)}
}

type fastProgram struct {
	kind exprKind
	b    boolFn
	f    floatFn
}

func (fp *fastProgram) compiled() bool { return fp.b != nil || fp.f != nil }

func (fp *fastProgram) run(env *Env) outcome {
	class := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "nodata"
	}
	if fp.b != nil {
		b, ok := fp.b(env)
		return boolOutcome(b, class(ok))
	}
	f, ok := fp.f(env)
	if !ok {
		f = 0
	}
	return outcome{val: f, class: class(ok)}
}

// checkSame fails t when the closures and the VM disagree on src and one
// of envs.
func checkSame(t testing.TB, src string, kind exprKind, envs []*Env, mustCompile bool) {
	t.Helper()
	p, fp := compileBoth(t, src, kind)
	if !fp.compiled() {
		if mustCompile {
			t.Fatalf("%q: not compiled to closures", src)
		}
		return
	}
	for _, env := range envs {
		want := vmOutcome(p, kind, env)
		if got := fp.run(env); !got.equal(want) {
			t.Fatalf("%q on %s:\nclosures: %v\nVM:       %v", src, describeEnv(env), got, want)
		}
	}
}

func describeEnv(e *Env) string {
	v := reflect.ValueOf(*e)
	var parts []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch {
		case !f.IsExported() || f.Type == reflect.TypeFor[time.Time]():
		case f.Type.Kind() == reflect.Struct:
			parts = append(parts, f.Name+"{"+fmtValue(v.Field(i))+"}")
		default:
			parts = append(parts, f.Name+"="+reflectAny(v.Field(i)))
		}
	}
	return strings.Join(parts, " ")
}

func fmtValue(v reflect.Value) string {
	var parts []string
	for i := range v.NumField() {
		parts = append(parts, v.Type().Field(i).Name+"="+reflectAny(v.Field(i)))
	}
	return strings.Join(parts, " ")
}

func reflectAny(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.String:
		return strconv.Quote(v.String())
	}
	return v.Type().String()
}

// fastCorpus is the table of the differential test: the benchmark's and the
// example's rules, and the corners of expr's arithmetic.
var fastCorpus = []string{
	"liquidationDistance < 0.10", "liquidationDistance < 0.05", "liquidationDistance < 0.03",
	"position.leverage > riskLimit.maxLeverage", "leverageRatio > 1.5",
	"position.quantity > 0.9 * riskLimit.maxQuantity", "position.riskLevel >= 90",
	"liquidationDistance < 0.05 && position.leverage > 10", "notional > 5e9",
	"position.cross && liquidationDistance < 0.04", "position.side < 0 && liquidationDistance < 0.02",
	"position.margin < 0.001 * notional", "position.leverage >= 100", "indexPrice <= 0.5 * position.entryPrice",
	"position.realizedPNL < -1e9", "liquidationDistance < 0.01 || leverageRatio > 2",
	"position.symbol == 'XNONE' && position.leverage > 1", "position.quantity / position.margin > 1e6",
	"position.entryValue > 1e12", "riskLimit.maintenanceMarginRate > 0.5",
	"riskLimit.maxQuantity > 0 && position.quantity > 0.9 * riskLimit.maxQuantity",
	"position.riskLevel >= 80", "position.cross && leverageRatio > 0.5",
	"position.leverage > riskLimit.maxLeverage / 2", "position.leverage >= riskLimit.maxLeverage / 2",
	"position.side * (indexPrice - position.entryPrice) >= 0",
	"position.symbol == 'XBTC' && symbol.baseName == 'BTC'",
	"position.direction == 'LONG' && !position.cross", "not position.cross or position.empty",
	"notional > 150 && leverageRatio == 0.5", "position.leverage % 3 == 1", "2 ** 3 == 8",
	"nowMillis - position.updatedAt > 0", "position.margin / 0 < 1",
	"position.leverage % (position.leverage - 10) == 0", "0 ** -1 > 0", "1 / (2 / position.margin) > 0",
	"false && position.quantity / position.margin > 1", "true || position.quantity / position.margin > 1",
	"position.leverage / riskLimit.maxLeverage == leverageRatio", "position.leverage * 3 == 30",
	"position.leverage - riskLimit.maxLeverage < 0", "-position.leverage < -5", "+position.margin > 0",
	"-(position.margin) != position.margin", "abs(position.side) == 1", "abs(-position.leverage) == position.leverage",
	"position.leverage == 10.0", "position.leverage != 10.5", "10 == position.leverage",
	"position.cross == false", "position.cross != (position.leverage > 5)",
	"position.symbol < 'Y'", "position.symbol >= symbol.name", "position.symbol != symbol.name",
	"position.symbol startsWith 'XB'", "position.symbol endsWith 'TC'", "position.symbol contains 'BT'",
	"(position.leverage > 5 ? position.margin : position.quantity) > 1",
	"(position.cross ? 1 : 2) == 1", "position.cross ? true : position.leverage > 1",
	"if position.cross { position.leverage > 1 } else { false }",
	"nowMillis % 1000 == 0", "position.userId % -1 == 0", "riskLimit.id * 0 == 0",
	"position.margin ^ 2 > 1", "position.margin ** 0.5 < 1e3", "(-8) ** (1/3) > 0",
	"position[\"leverage\"] > 1", "1 + 2 * 3 - 4 > position.leverage", "1.5 + 2 > 3",
	"position.margin * 1e308 * 10 > 0", "position.margin * 1e308 * 10 - position.margin * 1e308 * 10 != 0",
	"position.margin * 1e308 * 10 / 2 > 0", "symbol.baseScale + symbol.quoteScale >= 0",
	"position.createdAt <= position.updatedAt", "riskLimit.maxRiskLimitSteps - 1 < 100",
	// int64 fields stay int64 through -, abs and ?: in the VM.
	"-position.userId == -position.userId", "abs(position.userId) == abs(position.version)",
	"(position.cross ? position.userId : position.version) == 3", "position.leverage + position.userId == 3",
	// A field read in the comparison's own closure, against a constant
	// string, an expression or a product with a constant.
	"position.symbol != 'XBTC'", "position.symbol == ''", "position.margin * 0.5 > 1",
	"notional * 0.001 > position.margin", "liquidationDistance >= indexPrice / 1e6",
	"position.leverage != riskLimit.maxLeverage", "position.leverage <= riskLimit.maxLeverage - 1",
	"position.margin == position.margin * 1", "position.margin < position.quantity / 0",
	"position.leverage == position.leverage % 0",
}

// fastFallbacks are expressions the VM runs: outside the subset.
var fastFallbacks = []string{
	"now.Year() == 2025",
	"position.symbol in ['XBTC', 'XETH']",
	"let x = position.margin; x > 1",
	"upper(position.symbol) == 'XBTC'",
	"max(position.leverage, 2) > 3",
	"position?.leverage > 1",
	"position.symbol matches '^X'",
	"position.symbol + 'A' == 'XBTCA'",
	"len(position.symbol) > 3",
	"position.leverage in 1..10",
	"(position.cross ? 1 : 2.5) > 1",
	"now - now == duration('0s')",
}

func TestFastMatchesVMTable(t *testing.T) {
	t.Parallel()
	envs := fastEnvs()
	for _, src := range fastCorpus {
		checkSame(t, src, exprBool, envs, true)
	}
}

func TestFastNumberMatchesVM(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"riskLimit.maxLeverage", "riskLimit.maxLeverage / 3", "position.leverage / 2", "5", "2.999",
		"position.margin / position.quantity", "position.leverage - 1", "position.leverage * 0.5",
		"abs(position.side) * riskLimit.maxLeverage", "position.leverage % 7", "position.margin ** 2",
		"position.cross ? position.leverage / 2 : riskLimit.maxLeverage / 4",
	} {
		checkSame(t, src, exprNumber, fastEnvs(), true)
	}
}

// TestFastEveryField reads every number, bool and string field of Env
// through both paths, so a wrong offset or kind cannot hide.
func TestFastEveryField(t *testing.T) {
	t.Parallel()
	env := distinctEnv()
	var paths []string
	et := reflect.TypeFor[Env]()
	for i := range et.NumField() {
		f := et.Field(i)
		tag := f.Tag.Get("expr")
		if !f.IsExported() || tag == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[time.Time]() {
			for j := range f.Type.NumField() {
				if sf := f.Type.Field(j); sf.IsExported() {
					paths = append(paths, tag+"."+sf.Tag.Get("expr"))
				}
			}
			continue
		}
		paths = append(paths, tag)
	}
	compiledFields := 0
	for _, p := range paths {
		ft := fieldType(t, p)
		var src string
		var kind exprKind
		switch ft.Kind() {
		case reflect.Float64, reflect.Int, reflect.Int64:
			src, kind = p, exprNumber
		case reflect.Bool:
			src, kind = p, exprBool
		case reflect.String:
			src, kind = p+" == "+strconv.Quote(reflect.ValueOf(env).Elem().FieldByIndex(fieldIndex(t, p)).String()), exprBool
		default:
			continue // time.Time: the VM's
		}
		checkSame(t, src, kind, []*Env{env}, true)
		compiledFields++
	}
	if compiledFields < 50 {
		t.Errorf("only %d fields checked", compiledFields)
	}
}

func fieldIndex(t *testing.T, path string) []int {
	t.Helper()
	var idx []int
	typ := reflect.TypeFor[Env]()
	for _, name := range strings.Split(path, ".") {
		f, ok := exprField(typ, name)
		if !ok {
			t.Fatalf("no field %s", path)
		}
		idx = append(idx, f.Index...)
		typ = f.Type
	}
	return idx
}

func fieldType(t *testing.T, path string) reflect.Type {
	t.Helper()
	return reflect.TypeFor[Env]().FieldByIndex(fieldIndex(t, path)).Type
}

// distinctEnv gives every field of Env a different value.
func distinctEnv() *Env {
	var e Env
	v := reflect.ValueOf(&e).Elem()
	n := 0
	var set func(v reflect.Value)
	set = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() {
				continue
			}
			n++
			switch f.Kind() {
			case reflect.Float64:
				f.SetFloat(float64(n) + 0.25)
			case reflect.Int, reflect.Int64:
				f.SetInt(int64(n) * 1000003)
			case reflect.Bool:
				f.SetBool(n%2 == 0)
			case reflect.String:
				f.SetString("s" + strconv.Itoa(n))
			case reflect.Struct:
				if f.Type() != reflect.TypeFor[time.Time]() {
					set(f)
				}
			}
		}
	}
	set(v)
	e.Now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	return &e
}

func TestFastFallsBack(t *testing.T) {
	t.Parallel()
	for _, src := range fastFallbacks {
		r := compiled(t, src)
		if r.fast != nil {
			t.Errorf("%q: compiled to closures, want the VM", src)
		}
		env := filled(nil)
		got, gotErr := r.Eval(env)
		want, wantErr := vmOnly(r, env)
		if got != want || classOf(gotErr) != classOf(wantErr) {
			t.Errorf("%q: Eval = %v, %v; VM %v, %v", src, got, gotErr, want, wantErr)
		}
	}
	for _, src := range fastCorpus {
		if r := compiled(t, src); r.fast == nil {
			t.Errorf("%q: not compiled to closures", src)
		}
	}
}

// TestEvalFastErrorsAreTheVMs checks Eval as the engine calls it: the same
// value, and the same error text, with and without the closures.
func TestEvalFastErrorsAreTheVMs(t *testing.T) {
	t.Parallel()
	for _, src := range fastCorpus {
		r := compiled(t, src)
		for _, env := range []*Env{
			filled(nil),
			filled(func(in *Input) { in.Position.Margin = 0 }),
			filled(func(in *Input) { in.Position.Leverage = 10 }),
			filled(func(in *Input) { in.HasIndex = false }),
		} {
			got, gotErr := r.Eval(env)
			want, wantErr := vmOnly(r, env)
			if got != want || errString(gotErr) != errString(wantErr) {
				t.Errorf("%q: Eval = %v, %v; VM %v, %v", src, got, gotErr, want, wantErr)
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestTargetLeverageFastMatchesVM(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"riskLimit.maxLeverage / 3", "position.leverage / 2", "position.margin / position.quantity", "position.margin * 1e308 * 10"} {
		r := &Rule{Name: "r", When: "true", Actions: []Action{{Kind: LowerLeverage, Leverage: src}}}
		if err := r.Compile(); err != nil {
			t.Fatal(err)
		}
		a := &r.Actions[0]
		if a.fast == nil {
			t.Fatalf("%q: not compiled to closures", src)
		}
		slow := *a
		slow.fast = nil
		for _, env := range []*Env{filled(nil), filled(func(in *Input) { in.Position.Quantity = 0 })} {
			got, gotErr := a.TargetLeverage(env)
			want, wantErr := slow.TargetLeverage(env)
			if got != want || errString(gotErr) != errString(wantErr) {
				t.Errorf("%q: %d, %v; VM %d, %v", src, got, gotErr, want, wantErr)
			}
		}
	}
}

// Values that reach the corners: zeros of both signs, ±1, extremes, NaN.
var (
	fuzzFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.05, 2.5, 100, -3.75, 1e308, -1e308,
		5e-324, math.NaN(), math.Inf(1), math.Inf(-1), 1e9, 0.1, 1 << 53}
	fuzzInts = []int64{0, 1, -1, 2, -2, 3, 10, 20, 100, -7, math.MaxInt64, math.MinInt64, 1<<53 + 1}
)

// fastEnvs are filled environments plus raw ones with corner values.
func fastEnvs() []*Env {
	envs := []*Env{
		filled(nil),
		filled(func(in *Input) { in.Position.Margin = 0 }),
		filled(func(in *Input) { in.Position.Leverage = 10; in.IndexPrice = 93 }),
		filled(func(in *Input) {
			in.Position.Direction, in.Position.LiquidationPrice, in.Position.Cross = "SHORT", 120, true
		}),
		distinctEnv(),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 12 {
		envs = append(envs, randomEnv(func() byte { return byte(rng.Uint32()) }))
	}
	return envs
}

// randomEnv sets every field of an Env from next, which picks corner values.
func randomEnv(next func() byte) *Env {
	var e Env
	strs := []string{"", "XBTC", "LONG", "SHORT", "BTC", "XB", "TC"}
	var set func(v reflect.Value)
	set = func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() {
				continue
			}
			switch f.Kind() {
			case reflect.Float64:
				f.SetFloat(fuzzFloats[int(next())%len(fuzzFloats)])
			case reflect.Int, reflect.Int64:
				f.SetInt(fuzzInts[int(next())%len(fuzzInts)])
			case reflect.Bool:
				f.SetBool(next()%2 == 1)
			case reflect.String:
				f.SetString(strs[int(next())%len(strs)])
			case reflect.Struct:
				if f.Type() != reflect.TypeFor[time.Time]() {
					set(f)
				}
			}
		}
	}
	set(reflect.ValueOf(&e).Elem())
	return &e
}

// exprGen writes expressions of the fast subset from a stream of choices.
type exprGen struct {
	next  func() byte
	depth int
}

var (
	genFloatFields = []string{"position.margin", "position.quantity", "position.side", "riskLimit.maxQuantity",
		"liquidationDistance", "indexPrice", "notional", "leverageRatio", "symbol.settlementFeeRate", "position.entryPrice"}
	genIntFields = []string{"position.leverage", "riskLimit.maxLeverage", "position.riskLevel",
		"position.updatedAt", "nowMillis", "symbol.baseScale", "position.userId"}
	genBoolFields   = []string{"position.cross", "position.empty"}
	genStringFields = []string{"position.symbol", "position.direction", "symbol.name"}
	genFloatConsts  = []string{"0.0", "0.05", "1.5", "1e308", "2.5", "0.001", "1e-300", "100.0"}
	genIntConsts    = []string{"0", "1", "2", "3", "10", "100", "9223372036854775807"}
	genStrConsts    = []string{"'XBTC'", "'LONG'", "''", "'X'"}
)

func (g *exprGen) pick(list []string) string { return list[int(g.next())%len(list)] }

// num returns a numeric expression and its type as expr's checker sees
// it: "int", "int64" or "float".
func (g *exprGen) num() (string, string) {
	g.depth++
	defer func() { g.depth-- }()
	c := g.next() % 12
	if g.depth > 4 {
		c %= 4
	}
	switch c {
	case 0:
		return g.pick(genFloatFields), "float"
	case 1:
		f := g.pick(genIntFields)
		if f == "nowMillis" || strings.HasSuffix(f, "At") || strings.HasSuffix(f, "Id") {
			return f, "int64"
		}
		return f, "int"
	case 2:
		return g.pick(genFloatConsts), "float"
	case 3:
		return g.pick(genIntConsts), "int"
	case 4:
		s, typ := g.num()
		return "-(" + s + ")", typ
	case 5:
		s, typ := g.num()
		return "abs(" + s + ")", typ
	case 6:
		cond := g.boolean()
		a, at := g.num()
		b, bt := g.num()
		if at != bt {
			// Branches of different types are typed any: not in the
			// subset.
			return "(" + a + ")", at
		}
		return "(" + cond + " ? " + a + " : " + b + ")", at
	}
	a, at := g.num()
	b, bt := g.num()
	ints := at != "float" && bt != "float"
	switch op := []string{"+", "-", "*", "/", "%", "**"}[int(g.next())%6]; {
	case op == "%" && ints:
		return "(" + a + " % " + b + ")", "int"
	case op == "%", op == "/", op == "**":
		if op == "%" {
			op = "/"
		}
		return "(" + a + " " + op + " " + b + ")", "float"
	case ints:
		return "(" + a + " " + op + " " + b + ")", "int"
	default:
		return "(" + a + " " + op + " " + b + ")", "float"
	}
}

func (g *exprGen) boolean() string {
	g.depth++
	defer func() { g.depth-- }()
	c := g.next() % 10
	if g.depth > 4 {
		c %= 3
	}
	switch c {
	case 0:
		return g.pick(genBoolFields)
	case 1:
		return []string{"true", "false"}[g.next()%2]
	case 2, 3, 4:
		a, _ := g.num()
		b, _ := g.num()
		return "(" + a + " " + g.pick([]string{"<", ">", "<=", ">=", "==", "!="}) + " " + b + ")"
	case 5:
		return "!(" + g.boolean() + ")"
	case 6:
		return "(" + g.boolean() + " " + g.pick([]string{"&&", "||", "and", "or", "==", "!="}) + " " + g.boolean() + ")"
	case 7:
		return "(" + g.pick(genStringFields) + " " + g.pick([]string{"==", "!=", "<", ">=", "startsWith", "contains"}) + " " + g.pick(append(genStrConsts, genStringFields...)) + ")"
	case 8:
		return "not " + g.pick(genBoolFields)
	default:
		return "(" + g.boolean() + " ? " + g.boolean() + " : " + g.boolean() + ")"
	}
}

// byteStream turns fuzz bytes into choices; past the end it gives zeros,
// which select leaves, so every expression ends.
func byteStream(data []byte) func() byte {
	i := 0
	return func() byte {
		if i >= len(data) {
			return 0
		}
		i++
		return data[i-1]
	}
}

// checkGenerated compiles src and compares both paths on envs. Expressions
// expr rejects (an integer constant overflowing, say) are skipped.
func checkGenerated(t testing.TB, src string, kind exprKind, envs []*Env) bool {
	t.Helper()
	if _, _, err := compileExpr(src, kind); err != nil {
		return false
	}
	checkSame(t, src, kind, envs, true)
	return true
}

// TestFastMatchesVMGenerated is the fuzz target's grammar on a fixed seed,
// so that every go test run compares a few thousand expressions.
func TestFastMatchesVMGenerated(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 5))
	next := func() byte { return byte(rng.Uint32()) }
	envs := fastEnvs()
	n := 3000
	if testing.Short() {
		n = 300
	}
	checked := 0
	for range n {
		g := exprGen{next: next}
		if checkGenerated(t, g.boolean(), exprBool, envs) {
			checked++
		}
		src, _ := g.num()
		checkGenerated(t, src, exprNumber, envs)
	}
	if checked < n/2 {
		t.Errorf("only %d of %d generated expressions compiled", checked, n)
	}
}

// FuzzFastVsVM generates an expression of the fast subset and an
// environment from the fuzzer's bytes: the closures must give the VM's
// value and error class.
func FuzzFastVsVM(f *testing.F) {
	f.Add([]byte{2, 0, 1, 3}, []byte{0, 1, 2})
	f.Add([]byte{6, 5, 2, 1, 0, 9, 4, 7, 0, 3, 1, 11, 4}, []byte{11, 10, 1, 0, 5, 13})
	f.Add([]byte{4, 2, 11, 2, 3, 1, 1, 4, 1, 0, 1}, []byte{})
	f.Fuzz(func(t *testing.T, prog, vals []byte) {
		if len(prog) > 256 {
			return
		}
		g := exprGen{next: byteStream(prog)}
		src := g.boolean()
		env := randomEnv(byteStream(vals))
		envs := []*Env{env, filled(nil)}
		checkGenerated(t, src, exprBool, envs)
		g = exprGen{next: byteStream(prog)}
		num, _ := g.num()
		checkGenerated(t, num, exprNumber, envs)
	})
}

// BenchmarkEvalTypical is the typical rule through Evaluator.Eval, with its
// closures (fast) and with expr's VM alone (vm).
func BenchmarkEvalTypical(b *testing.B) {
	const when = "liquidationDistance < 0.05 && position.leverage > 10"
	r := compiled(b, when)
	if r.fast == nil {
		b.Fatalf("%q: not compiled to closures", when)
	}
	vmRule := *r
	vmRule.fast = nil
	env := filled(func(in *Input) { in.IndexPrice = 93; in.Position.Leverage = 20 })
	for _, bc := range []struct {
		name string
		r    *Rule
	}{{"fast", r}, {"vm", &vmRule}} {
		b.Run(bc.name, func(b *testing.B) {
			var ev Evaluator
			b.ReportAllocs()
			for b.Loop() {
				ok, err := ev.Eval(bc.r, env)
				if err != nil || !ok {
					b.Fatalf("Eval = %v, %v", ok, err)
				}
			}
		})
	}
}

// Rules read from a file take the same native path as rules compiled by
// hand: every rule of the example file and every leverage target.
func TestParsedRulesUseFastPath(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../rules.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	set, err := Parse("rules.example.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range set.Rules {
		if r.fast == nil {
			t.Errorf("rule %q runs on the VM after Parse", r.Name)
		}
		for _, a := range r.Actions {
			if a.Kind == LowerLeverage && a.fast == nil {
				t.Errorf("rule %q: leverage target runs on the VM after Parse", r.Name)
			}
		}
	}
}
