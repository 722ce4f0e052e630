// Package printable writes text from outside (a comment, an exchange's
// message, a value in etcd) so that a terminal or a table shows it as
// text: control characters and bidirectional overrides as visible
// escapes, and long values bounded.
package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text is s with its control characters (terminal escapes, carriage
// returns, new lines, tabs) and the bidirectional overrides written as
// visible escapes (\x1b, \u202e; invalid UTF-8 as \ufffd), for a terminal
// or a table: a comment cannot move the cursor, recolour the screen or
// hide text.
func Text(s string) string {
	if !strings.ContainsFunc(s, unprintable) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case unprintable(r) && r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		case unprintable(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Bounded is Text of at most n runes of s, and how many more there were
// ("… (N more characters)"): a value anyone may have written, such as one
// read from etcd, cannot flood a terminal or an error.
func Bounded(s string, n int) string {
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + fmt.Sprintf("… (%d more characters)", len(r)-n)
	}
	return Text(s)
}

func unprintable(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == utf8.RuneError // invalid UTF-8 too
}
