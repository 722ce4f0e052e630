package rules

import "github.com/expr-lang/expr/ast"

// DistanceBelow is the liquidation distance under which the rule's
// condition can hold, when it says so plainly: when is a comparison of
// liquidationDistance with a number (liquidationDistance < 0.05, or
// 0.05 > liquidationDistance, <= and >= alike), alone or as a term of an
// and (the smallest, when several). ok is false for any other condition.
// The status page colours a position's distance by it.
func (r *Rule) DistanceBelow() (d float64, ok bool) { return r.distanceBelow, r.hasDistanceBelow }

// distanceBelow finds DistanceBelow in a compiled condition.
func distanceBelow(n ast.Node) (float64, bool) {
	switch n := n.(type) {
	case *ast.BinaryNode:
		switch n.Operator {
		case "and", "&&":
			l, lok := distanceBelow(n.Left)
			r, rok := distanceBelow(n.Right)
			switch {
			case lok && rok:
				return min(l, r), true
			case lok:
				return l, true
			}
			return r, rok
		case "<", "<=":
			if isDistance(n.Left) {
				return number(n.Right)
			}
		case ">", ">=":
			if isDistance(n.Right) {
				return number(n.Left)
			}
		}
	}
	return 0, false
}

func isDistance(n ast.Node) bool {
	id, ok := n.(*ast.IdentifierNode)
	return ok && id.Value == "liquidationDistance"
}

func number(n ast.Node) (float64, bool) {
	switch n := n.(type) {
	case *ast.FloatNode:
		return n.Value, true
	case *ast.IntegerNode:
		return float64(n.Value), true
	}
	return 0, false
}

// CutZone is the liquidation distance under which the set's own rules
// would cut the position of symbol: the largest DistanceBelow of the
// position rules that apply to it and lower its leverage or reduce it
// (0 when none does). No settings call may move a position into it: a
// call that does so is undone by the next tick's cut, at a loss.
func (s *Set) CutZone(symbol string) float64 {
	zone := 0.0
	if s == nil {
		return zone
	}
	for _, r := range s.Rules {
		if r.Account() || !r.AppliesTo(symbol) || !(r.HasAction(LowerLeverage) || r.HasAction(ReducePosition)) {
			continue
		}
		if d, ok := r.DistanceBelow(); ok && d > zone && d < 1 {
			zone = d
		}
	}
	return zone
}
