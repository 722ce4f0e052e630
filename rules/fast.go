package rules

import (
	"math"
	"reflect"
	"strings"
	"unsafe"

	"github.com/expr-lang/expr/ast"
)

// The fast path: expr's virtual machine reads every field through
// reflection and boxes every number in an interface, which is most of the
// cost of a rule. For the expressions rules are made of (field reads,
// constants, arithmetic, comparisons, logic) compileFast turns the tree that
// expr has parsed, type-checked, patched with the checked arithmetic and
// optimized — the very tree the VM's bytecode was compiled from — into
// typed Go closures that read Env's fields directly. Anything outside that
// subset makes compileFast decline, and the VM runs the expression as
// before.
//
// A closure returns ok = false where the checked arithmetic would report
// ErrNoData (a division or modulo by zero, a non-finite operand or result);
// the caller then runs the VM, which gives the very same error with its
// position in the source. Everything else follows expr's run-time rules
// (vm/runtime): integers of every size are int, an operation on two
// integers is integer arithmetic (wrapping on overflow), an operation with a
// float is float64 arithmetic, `/` and `**` always yield float64.

type fastKind uint8

const (
	fastInt fastKind = iota + 1
	fastFloat
	fastBool
	fastString
)

type (
	intFn    func(*Env) (int, bool)
	floatFn  func(*Env) (float64, bool)
	boolFn   func(*Env) (bool, bool)
	stringFn func(*Env) string
)

// fastNode is one compiled subexpression. Exactly the function of its kind
// is set. A constant also keeps its value, and a field read its offset in
// Env, so that the common "field op constant" shapes become one closure.
type fastNode struct {
	kind fastKind
	i    intFn
	f    floatFn
	b    boolFn
	s    stringFn

	isConst bool
	ci      int
	cf      float64
	cb      bool
	cs      string

	isField bool
	off     uintptr
	goKind  reflect.Kind // of the field
}

// compileFastBool compiles a boolean expression tree, or returns nil when it
// is outside the fast subset.
func compileFastBool(tree ast.Node) boolFn {
	n, ok := fastCompile(tree)
	if !ok || n.kind != fastBool {
		return nil
	}
	return n.b
}

// compileFastNumber compiles a numeric expression tree to a float64 result
// (as expr.AsFloat64 converts it), or returns nil when it is outside the
// fast subset.
func compileFastNumber(tree ast.Node) floatFn {
	n, ok := fastCompile(tree)
	if !ok || (n.kind != fastInt && n.kind != fastFloat) {
		return nil
	}
	return n.asFloat()
}

// fastCompile compiles tree, reporting false when some node is outside the
// subset. It never panics on a tree expr accepted; a panic would be a bug,
// but the fallback keeps the rule working all the same.
func fastCompile(tree ast.Node) (n fastNode, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			n, ok = fastNode{}, false
		}
	}()
	return fastNodeOf(tree)
}

// kindOf maps a checked node type to its fast kind, or 0.
func kindOf(t reflect.Type) fastKind {
	if t == nil {
		return 0
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fastInt
	case reflect.Float64:
		return fastFloat
	case reflect.Bool:
		return fastBool
	case reflect.String:
		return fastString
	}
	return 0
}

func fastNodeOf(node ast.Node) (fastNode, bool) {
	want := kindOf(node.Type())
	if want == 0 {
		return fastNode{}, false
	}
	n, ok := buildFast(node)
	if !ok || n.kind != want {
		// A kind other than the checker's means this compiler and expr
		// disagree about the expression: let the VM run it.
		return fastNode{}, false
	}
	return n, true
}

func buildFast(node ast.Node) (fastNode, bool) {
	switch n := node.(type) {
	case *ast.IntegerNode:
		return constInt(n.Value), true
	case *ast.FloatNode:
		return constFloat(n.Value), true
	case *ast.BoolNode:
		return constBool(n.Value), true
	case *ast.StringNode:
		return constString(n.Value), true
	case *ast.ConstantNode:
		switch v := n.Value.(type) {
		case int:
			return constInt(v), true
		case float64:
			return constFloat(v), true
		case bool:
			return constBool(v), true
		case string:
			return constString(v), true
		}
	case *ast.IdentifierNode:
		return fieldNode([]string{n.Value})
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == windowsName {
			return windowNode(n)
		}
		path, ok := memberPath(n)
		if !ok {
			return fastNode{}, false
		}
		return fieldNode(path)
	case *ast.UnaryNode:
		return unaryFast(n)
	case *ast.BinaryNode:
		return binaryFast(n)
	case *ast.CallNode:
		return callFast(n)
	case *ast.BuiltinNode:
		return builtinFast(n)
	case *ast.ConditionalNode:
		return conditionalFast(n)
	}
	return fastNode{}, false
}

// memberPath returns the field names of a chain such as position.leverage
// (or position["leverage"]); method calls and optional chains are not in
// the subset.
func memberPath(n *ast.MemberNode) ([]string, bool) {
	if n.Optional || n.Method {
		return nil, false
	}
	prop, ok := n.Property.(*ast.StringNode)
	if !ok {
		return nil, false
	}
	var head []string
	switch inner := n.Node.(type) {
	case *ast.IdentifierNode:
		head = []string{inner.Value}
	case *ast.MemberNode:
		head, ok = memberPath(inner)
		if !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	return append(head, prop.Value), true
}

// fieldNode resolves a path of expr names (the `expr` tags, or the Go names
// of untagged fields, as expr resolves them) in Env to a direct read at the
// field's offset. The offsets come from reflect, so they always match the
// struct; Env holds no pointers to follow, only nested structs.
func fieldNode(path []string) (fastNode, bool) {
	t := reflect.TypeFor[Env]()
	var off uintptr
	var f reflect.StructField
	for i, name := range path {
		if t.Kind() != reflect.Struct {
			return fastNode{}, false
		}
		var ok bool
		f, ok = exprField(t, name)
		if !ok {
			return fastNode{}, false
		}
		off += f.Offset
		t = f.Type
		if i < len(path)-1 && t.Kind() != reflect.Struct {
			return fastNode{}, false
		}
	}
	n := fastNode{isField: true, off: off, goKind: t.Kind()}
	switch t.Kind() {
	case reflect.Float64:
		n.kind = fastFloat
		n.f = func(e *Env) (float64, bool) { return *(*float64)(unsafe.Add(unsafe.Pointer(e), off)), true }
	case reflect.Int:
		n.kind = fastInt
		n.i = func(e *Env) (int, bool) { return *(*int)(unsafe.Add(unsafe.Pointer(e), off)), true }
	case reflect.Int64:
		n.kind = fastInt
		n.i = func(e *Env) (int, bool) { return int(*(*int64)(unsafe.Add(unsafe.Pointer(e), off))), true }
	case reflect.Bool:
		n.kind = fastBool
		n.b = func(e *Env) (bool, bool) { return *(*bool)(unsafe.Add(unsafe.Pointer(e), off)), true }
	case reflect.String:
		n.kind = fastString
		n.s = func(e *Env) string { return *(*string)(unsafe.Add(unsafe.Pointer(e), off)) }
	default:
		return fastNode{}, false
	}
	return n, true
}

// exprField finds the exported, non-embedded field of struct t that expr
// knows as name.
func exprField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Anonymous {
			continue
		}
		tag := f.Tag.Get("expr")
		switch {
		case tag == "-":
			continue
		case tag == "" && f.Name == name, tag == name:
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func constInt(v int) fastNode {
	return fastNode{kind: fastInt, isConst: true, ci: v, i: func(*Env) (int, bool) { return v, true }}
}

func constFloat(v float64) fastNode {
	return fastNode{kind: fastFloat, isConst: true, cf: v, f: func(*Env) (float64, bool) { return v, true }}
}

func constBool(v bool) fastNode {
	return fastNode{kind: fastBool, isConst: true, cb: v, b: func(*Env) (bool, bool) { return v, true }}
}

func constString(v string) fastNode {
	return fastNode{kind: fastString, isConst: true, cs: v, s: func(*Env) string { return v }}
}

func (n fastNode) numeric() bool { return n.kind == fastInt || n.kind == fastFloat }

// asFloat is n as a float64, converting an integer as expr's helpers do.
func (n fastNode) asFloat() floatFn {
	switch {
	case n.kind == fastFloat:
		return n.f
	case n.isConst:
		c := float64(n.ci)
		return func(*Env) (float64, bool) { return c, true }
	case n.isField && n.goKind == reflect.Int:
		off := n.off
		return func(e *Env) (float64, bool) { return float64(*(*int)(unsafe.Add(unsafe.Pointer(e), off))), true }
	}
	i := n.i
	return func(e *Env) (float64, bool) {
		v, ok := i(e)
		return float64(v), ok
	}
}

// floatConst reports n's value when it is a numeric constant.
func (n fastNode) floatConst() (float64, bool) {
	switch {
	case !n.isConst:
		return 0, false
	case n.kind == fastFloat:
		return n.cf, true
	case n.kind == fastInt:
		return float64(n.ci), true
	}
	return 0, false
}

func unaryFast(u *ast.UnaryNode) (fastNode, bool) {
	x, ok := fastNodeOf(u.Node)
	if !ok {
		return fastNode{}, false
	}
	switch u.Operator {
	case "+":
		if x.numeric() {
			return x, true
		}
	case "-":
		switch x.kind {
		case fastInt:
			f := x.i
			return fastNode{kind: fastInt, i: func(e *Env) (int, bool) {
				v, ok := f(e)
				return -v, ok
			}}, true
		case fastFloat:
			f := x.f
			return fastNode{kind: fastFloat, f: func(e *Env) (float64, bool) {
				v, ok := f(e)
				return -v, ok
			}}, true
		}
	case "!", "not":
		if x.kind == fastBool {
			f := x.b
			return fastNode{kind: fastBool, b: func(e *Env) (bool, bool) {
				v, ok := f(e)
				return !v, ok
			}}, true
		}
	}
	return fastNode{}, false
}

func binaryFast(b *ast.BinaryNode) (fastNode, bool) {
	l, ok := fastNodeOf(b.Left)
	if !ok {
		return fastNode{}, false
	}
	r, ok := fastNodeOf(b.Right)
	if !ok {
		return fastNode{}, false
	}
	switch b.Operator {
	case "&&", "and":
		if l.kind == fastBool && r.kind == fastBool {
			return andFast(l.b, r.b), true
		}
	case "||", "or":
		if l.kind == fastBool && r.kind == fastBool {
			return orFast(l.b, r.b), true
		}
	case "+", "-", "*":
		return arithFast(b.Operator, l, r)
	case "<", ">", "<=", ">=", "==", "!=":
		return compareFast(b.Operator, l, r)
	case "contains", "startsWith", "endsWith":
		if l.kind == fastString && r.kind == fastString {
			return stringOpFast(b.Operator, l.s, r.s), true
		}
	}
	return fastNode{}, false
}

func andFast(l, r boolFn) fastNode {
	return fastNode{kind: fastBool, b: func(e *Env) (bool, bool) {
		v, ok := l(e)
		if !ok || !v {
			return false, ok
		}
		return r(e)
	}}
}

func orFast(l, r boolFn) fastNode {
	return fastNode{kind: fastBool, b: func(e *Env) (bool, bool) {
		v, ok := l(e)
		if !ok || v {
			return v, ok
		}
		return r(e)
	}}
}

func stringOpFast(op string, l, r stringFn) fastNode {
	var f func(s, sub string) bool
	switch op {
	case "contains":
		f = strings.Contains
	case "startsWith":
		f = strings.HasPrefix
	default:
		f = strings.HasSuffix
	}
	return fastNode{kind: fastBool, b: func(e *Env) (bool, bool) { return f(l(e), r(e)), true }}
}

// arithFast is +, - or * on two numbers: integer arithmetic when both are
// integers, float64 otherwise.
func arithFast(op string, l, r fastNode) (fastNode, bool) {
	if !l.numeric() || !r.numeric() {
		return fastNode{}, false
	}
	if l.kind == fastInt && r.kind == fastInt {
		var g func(x, y int) int
		switch op {
		case "+":
			g = func(x, y int) int { return x + y }
		case "-":
			g = func(x, y int) int { return x - y }
		default:
			g = func(x, y int) int { return x * y }
		}
		li, ri := l.i, r.i
		return fastNode{kind: fastInt, i: func(e *Env) (int, bool) {
			x, ok := li(e)
			if !ok {
				return 0, false
			}
			y, ok := ri(e)
			return g(x, y), ok
		}}, true
	}
	lf, rf := l.asFloat(), r.asFloat()
	// A constant times a float64 field, as in 0.9 * riskLimit.maxQuantity,
	// reads the field in its own closure.
	if c, ok := l.floatConst(); ok && r.isField && r.goKind == reflect.Float64 && op == "*" {
		off := r.off
		return floatNode(func(e *Env) (float64, bool) { return c * *(*float64)(unsafe.Add(unsafe.Pointer(e), off)), true }), true
	}
	if c, ok := r.floatConst(); ok && l.isField && l.goKind == reflect.Float64 && op == "*" {
		off := l.off
		return floatNode(func(e *Env) (float64, bool) { return *(*float64)(unsafe.Add(unsafe.Pointer(e), off)) * c, true }), true
	}
	// Other shapes with a constant operand save a call.
	if c, ok := l.floatConst(); ok {
		switch op {
		case "+":
			return floatNode(func(e *Env) (float64, bool) { y, ok := rf(e); return c + y, ok }), true
		case "-":
			return floatNode(func(e *Env) (float64, bool) { y, ok := rf(e); return c - y, ok }), true
		default:
			return floatNode(func(e *Env) (float64, bool) { y, ok := rf(e); return c * y, ok }), true
		}
	}
	if c, ok := r.floatConst(); ok {
		switch op {
		case "+":
			return floatNode(func(e *Env) (float64, bool) { x, ok := lf(e); return x + c, ok }), true
		case "-":
			return floatNode(func(e *Env) (float64, bool) { x, ok := lf(e); return x - c, ok }), true
		default:
			return floatNode(func(e *Env) (float64, bool) { x, ok := lf(e); return x * c, ok }), true
		}
	}
	var g func(x, y float64) float64
	switch op {
	case "+":
		g = func(x, y float64) float64 { return x + y }
	case "-":
		g = func(x, y float64) float64 { return x - y }
	default:
		g = func(x, y float64) float64 { return x * y }
	}
	return floatNode(func(e *Env) (float64, bool) {
		x, ok := lf(e)
		if !ok {
			return 0, false
		}
		y, ok := rf(e)
		return g(x, y), ok
	}), true
}

func floatNode(f floatFn) fastNode { return fastNode{kind: fastFloat, f: f} }

func boolNode(f boolFn) fastNode { return fastNode{kind: fastBool, b: f} }

// compareFast is an ordering or equality of two numbers (as integers when
// both are, else as float64), two strings, or (== and != only) two bools.
func compareFast(op string, l, r fastNode) (fastNode, bool) {
	switch {
	case l.kind == fastInt && r.kind == fastInt:
		return compareInts(op, l, r), true
	case l.numeric() && r.numeric():
		return compareFloats(op, l, r), true
	case l.kind == fastString && r.kind == fastString:
		if r.isConst && l.isField && l.goKind == reflect.String && (op == "==" || op == "!=") {
			// position.symbol == "XBTC": one closure, no calls.
			off, c, eq := l.off, r.cs, op == "=="
			return boolNode(func(e *Env) (bool, bool) { return (*(*string)(unsafe.Add(unsafe.Pointer(e), off)) == c) == eq, true }), true
		}
		ls, rs := l.s, r.s
		var g func(x, y string) bool
		switch op {
		case "<":
			g = func(x, y string) bool { return x < y }
		case ">":
			g = func(x, y string) bool { return x > y }
		case "<=":
			g = func(x, y string) bool { return x <= y }
		case ">=":
			g = func(x, y string) bool { return x >= y }
		case "==":
			g = func(x, y string) bool { return x == y }
		default:
			g = func(x, y string) bool { return x != y }
		}
		return boolNode(func(e *Env) (bool, bool) { return g(ls(e), rs(e)), true }), true
	case l.kind == fastBool && r.kind == fastBool && (op == "==" || op == "!="):
		lb, rb := l.b, r.b
		eq := op == "=="
		return boolNode(func(e *Env) (bool, bool) {
			x, ok := lb(e)
			if !ok {
				return false, false
			}
			y, ok := rb(e)
			return (x == y) == eq, ok
		}), true
	}
	return fastNode{}, false
}

func compareInts(op string, l, r fastNode) fastNode {
	if r.isConst && l.isField && l.goKind == reflect.Int {
		// position.leverage > 10 and the like: one closure, no calls.
		return fieldVsConst(op, l.off, r.ci)
	}
	if l.isField && l.goKind == reflect.Int {
		return fieldVsExpr(op, l.off, r.i)
	}
	return compareWith(l.i, r.i, orderedOp[int](op))
}

func compareFloats(op string, l, r fastNode) fastNode {
	if c, ok := r.floatConst(); ok && l.isField && l.goKind == reflect.Float64 {
		// liquidationDistance < 0.05 and the like: one closure, no calls.
		return fieldVsConst(op, l.off, c)
	}
	if l.isField && l.goKind == reflect.Float64 {
		return fieldVsExpr(op, l.off, r.asFloat())
	}
	return compareWith(l.asFloat(), r.asFloat(), orderedOp[float64](op))
}

// fieldVsConst compares the Env field of type T at offset off with a
// constant, reading the field directly: one closure, no calls.
func fieldVsConst[T int | float64](op string, off uintptr, c T) fastNode {
	switch op {
	case "<":
		return boolNode(func(e *Env) (bool, bool) { return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) < c, true })
	case ">":
		return boolNode(func(e *Env) (bool, bool) { return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) > c, true })
	case "<=":
		return boolNode(func(e *Env) (bool, bool) { return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) <= c, true })
	case ">=":
		return boolNode(func(e *Env) (bool, bool) { return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) >= c, true })
	case "==":
		return boolNode(func(e *Env) (bool, bool) { return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) == c, true })
	default:
		return boolNode(func(e *Env) (bool, bool) { return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) != c, true })
	}
}

// fieldVsExpr compares the Env field of type T at offset off, read in the
// closure, with r (no data when r has none).
func fieldVsExpr[T int | float64](op string, off uintptr, r func(*Env) (T, bool)) fastNode {
	switch op {
	case "<":
		return boolNode(func(e *Env) (bool, bool) { y, ok := r(e); return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) < y, ok })
	case ">":
		return boolNode(func(e *Env) (bool, bool) { y, ok := r(e); return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) > y, ok })
	case "<=":
		return boolNode(func(e *Env) (bool, bool) { y, ok := r(e); return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) <= y, ok })
	case ">=":
		return boolNode(func(e *Env) (bool, bool) { y, ok := r(e); return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) >= y, ok })
	case "==":
		return boolNode(func(e *Env) (bool, bool) { y, ok := r(e); return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) == y, ok })
	default:
		return boolNode(func(e *Env) (bool, bool) { y, ok := r(e); return *(*T)(unsafe.Add(unsafe.Pointer(e), off)) != y, ok })
	}
}

// compareWith evaluates both sides (the left first, stopping at no data)
// and compares them with g. A field on the left is read in its own
// closure instead (fieldVsConst, fieldVsExpr): the common shapes.
func compareWith[T int | float64](l, r func(*Env) (T, bool), g func(x, y T) bool) fastNode {
	return boolNode(func(e *Env) (bool, bool) {
		x, ok := l(e)
		if !ok {
			return false, false
		}
		y, ok := r(e)
		return g(x, y), ok
	})
}

// orderedOp is the comparison op on T.
func orderedOp[T int | float64](op string) func(x, y T) bool {
	switch op {
	case "<":
		return func(x, y T) bool { return x < y }
	case ">":
		return func(x, y T) bool { return x > y }
	case "<=":
		return func(x, y T) bool { return x <= y }
	case ">=":
		return func(x, y T) bool { return x >= y }
	case "==":
		return func(x, y T) bool { return x == y }
	default:
		return func(x, y T) bool { return x != y }
	}
}

// callFast compiles the checked arithmetic that compileExpr patched in for
// /, % and **, with checkedDiv's, checkedMod's and checkedPow's rules.
func callFast(c *ast.CallNode) (fastNode, bool) {
	id, ok := c.Callee.(*ast.IdentifierNode)
	if !ok || len(c.Arguments) != 2 {
		return fastNode{}, false
	}
	l, ok := fastNodeOf(c.Arguments[0])
	if !ok {
		return fastNode{}, false
	}
	r, ok := fastNodeOf(c.Arguments[1])
	if !ok || !l.numeric() || !r.numeric() {
		return fastNode{}, false
	}
	switch id.Value {
	case fnDiv, fnPow:
		lf, rf := l.asFloat(), r.asFloat()
		div := id.Value == fnDiv
		return floatNode(func(e *Env) (float64, bool) {
			x, ok := lf(e)
			if !ok {
				return 0, false
			}
			y, ok := rf(e)
			if !ok || !finite(x) || !finite(y) {
				return 0, false
			}
			var z float64
			if div {
				if y == 0 {
					return 0, false
				}
				z = x / y
			} else {
				z = math.Pow(x, y)
			}
			return z, finite(z)
		}), true
	case fnMod:
		if l.kind != fastInt || r.kind != fastInt {
			return fastNode{}, false
		}
		li, ri := l.i, r.i
		return fastNode{kind: fastInt, i: func(e *Env) (int, bool) {
			x, ok := li(e)
			if !ok {
				return 0, false
			}
			y, ok := ri(e)
			switch {
			case !ok || y == 0:
				return 0, false
			case y == -1:
				return 0, true
			}
			return x % y, true
		}}, true
	}
	return fastNode{}, false
}

// builtinFast compiles abs, with expr's Abs: the sign of -0 is kept.
func builtinFast(b *ast.BuiltinNode) (fastNode, bool) {
	if b.Name != "abs" || len(b.Arguments) != 1 || b.Map != nil {
		return fastNode{}, false
	}
	x, ok := fastNodeOf(b.Arguments[0])
	if !ok {
		return fastNode{}, false
	}
	switch x.kind {
	case fastInt:
		f := x.i
		return fastNode{kind: fastInt, i: func(e *Env) (int, bool) {
			v, ok := f(e)
			if v < 0 {
				return -v, ok
			}
			return v, ok
		}}, true
	case fastFloat:
		f := x.f
		return floatNode(func(e *Env) (float64, bool) {
			v, ok := f(e)
			if v < 0 {
				return -v, ok
			}
			return v, ok
		}), true
	}
	return fastNode{}, false
}

// conditionalFast is cond ? a : b (and if/else) with both branches of one
// kind; only the branch taken is evaluated.
func conditionalFast(c *ast.ConditionalNode) (fastNode, bool) {
	cond, ok := fastNodeOf(c.Cond)
	if !ok || cond.kind != fastBool {
		return fastNode{}, false
	}
	a, ok := fastNodeOf(c.Exp1)
	if !ok {
		return fastNode{}, false
	}
	b, ok := fastNodeOf(c.Exp2)
	if !ok || a.kind != b.kind {
		return fastNode{}, false
	}
	cf := cond.b
	switch a.kind {
	case fastInt:
		x, y := a.i, b.i
		return fastNode{kind: fastInt, i: func(e *Env) (int, bool) {
			v, ok := cf(e)
			switch {
			case !ok:
				return 0, false
			case v:
				return x(e)
			}
			return y(e)
		}}, true
	case fastFloat:
		x, y := a.f, b.f
		return floatNode(func(e *Env) (float64, bool) {
			v, ok := cf(e)
			switch {
			case !ok:
				return 0, false
			case v:
				return x(e)
			}
			return y(e)
		}), true
	case fastBool:
		x, y := a.b, b.b
		return boolNode(func(e *Env) (bool, bool) {
			v, ok := cf(e)
			switch {
			case !ok:
				return false, false
			case v:
				return x(e)
			}
			return y(e)
		}), true
	}
	return fastNode{}, false
}

// windowNode reads a windowed term's value, _windows[j], which the engine
// set before the evaluation (Evaluator.Eval has checked it is known).
func windowNode(n *ast.MemberNode) (fastNode, bool) {
	j, ok := n.Property.(*ast.IntegerNode)
	if !ok || j.Value < 0 || j.Value >= MaxWindows {
		return fastNode{}, false
	}
	f, ok := reflect.TypeFor[Env]().FieldByName("Windows")
	if !ok {
		return fastNode{}, false
	}
	off := f.Offset + uintptr(j.Value)*unsafe.Sizeof(float64(0))
	return fastNode{kind: fastFloat, isField: true, off: off, goKind: reflect.Float64,
		f: func(e *Env) (float64, bool) { return *(*float64)(unsafe.Add(unsafe.Pointer(e), off)), true }}, true
}
