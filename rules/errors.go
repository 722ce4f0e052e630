package rules

import (
	"cmp"
	"fmt"
	"github.com/riskguard/riskguard/internal/didyoumean"
	"slices"
	"strings"
)

// Error is one problem in a rules file, with its position.
type Error struct {
	File string
	// Line and Col are 1-based; 0 when unknown.
	Line int
	Col  int
	// Rule is the rule's name, "" when the error is not inside a rule or
	// the rule has no name yet; RuleIndex is the rule's 1-based position in
	// the list, 0 outside a rule.
	Rule      string
	RuleIndex int
	Msg       string
	// Snippet, when set, shows the offending source line with a caret
	// under the column; it is printed on the lines after the message.
	Snippet string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, max(e.Col, 1))
	}
	b.WriteString(": ")
	switch {
	case e.Rule != "":
		fmt.Fprintf(&b, "rule %q: ", e.Rule)
	case e.RuleIndex > 0:
		fmt.Fprintf(&b, "rule #%d: ", e.RuleIndex)
	}
	b.WriteString(e.Msg)
	if e.Snippet != "" {
		b.WriteByte('\n')
		b.WriteString(e.Snippet)
	}
	return b.String()
}

// ErrorList is every error of a file, in file order.
type ErrorList struct {
	Errors []*Error
}

func (l *ErrorList) Error() string {
	msgs := make([]string, len(l.Errors))
	for i, e := range l.Errors {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap gives errors.As access to each *Error.
func (l *ErrorList) Unwrap() []error {
	errs := make([]error, len(l.Errors))
	for i, e := range l.Errors {
		errs[i] = e
	}
	return errs
}

// Sort orders the errors by position, the order a reader fixes them in.
func (l *ErrorList) Sort() {
	slices.SortStableFunc(l.Errors, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
}

// DidYouMean returns the candidate closest to word when it is close enough
// to be a likely typo, else "".
func DidYouMean(word string, candidates []string) string {
	return didyoumean.Closest(word, candidates)
}
