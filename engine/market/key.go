package market

import (
	"strings"

	"github.com/riskguard/riskguard/exchange"
)

// Key identifies a position in the guard's state: the exchange's id and
// the direction, so that a hedge-mode long and short on one symbol (one id
// in the spec) keep apart states. A key without a direction is state saved
// before positions were told apart by it.
type Key struct{ ID, Dir string }

// KeyOf is the key of p.
func KeyOf(p *exchange.Position) Key { return Key{p.ID, p.Direction} }

// String is the key as the state file writes it: ID/DIRECTION.
func (k Key) String() string {
	if k.Dir == "" {
		return k.ID
	}
	return k.ID + "/" + k.Dir
}

// ParseKey reads a key written by String.
func ParseKey(s string) Key {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return Key{s[:i], s[i+1:]}
	}
	return Key{ID: s}
}
