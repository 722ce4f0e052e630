package rules

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/internal/yamlnode"

	"github.com/expr-lang/expr/file"
	"gopkg.in/yaml.v3"
)

// Document is a YAML file decoded once, with the position of every node:
// every reader of the configuration file (the rules, the loader of its
// other sections) walks the same nodes instead of parsing the text again.
type Document struct {
	File string
	Src  []byte
	// Root is the top-level mapping.
	Root *yaml.Node
}

// Decode parses data as one YAML document whose top level is a mapping. Its
// error is an *ErrorList saying where the file is not one.
func Decode(filename string, data []byte) (doc *Document, err error) {
	p := &parser{file: filename, src: data}
	defer func() {
		// yaml.v3 has panicked on malformed input before; a bad file must
		// be an error, never a crash of the loader.
		if r := recover(); r != nil {
			p.errorf(nil, "invalid YAML: %v", r)
			doc, err = nil, &ErrorList{Errors: p.errs}
		}
	}()
	root := p.decode()
	if root == nil {
		return nil, &ErrorList{Errors: p.errs}
	}
	return &Document{File: filename, Src: data, Root: root}, nil
}

// ParseDocument reads the rules of a decoded file: the list under its
// `rules` key (other top-level keys belong to the configuration and are not
// looked at). Every rule is checked and its expressions compiled; the
// returned error is an *ErrorList with every problem of the rules.
func ParseDocument(doc *Document) (*Set, error) {
	return ParseDocumentWith(doc, DefaultKinds())
}

// ParseDocumentWith is ParseDocument with the action kinds of table kinds
// (DefaultKinds and a caller's own rows).
func ParseDocumentWith(doc *Document, kinds Kinds) (*Set, error) {
	p := &parser{file: doc.File, src: doc.Src, kinds: kinds}
	set := p.parseRoot(doc.Root)
	if len(p.errs) > 0 {
		return nil, &ErrorList{Errors: p.errs}
	}
	return set, nil
}

// Parse is Decode and ParseDocument: the rules of a YAML file.
func Parse(filename string, data []byte) (*Set, error) {
	doc, err := Decode(filename, data)
	if err != nil {
		return nil, err
	}
	return ParseDocument(doc)
}

// ParseWith is Parse with the action kinds of table kinds.
func ParseWith(filename string, data []byte, kinds Kinds) (*Set, error) {
	doc, err := Decode(filename, data)
	if err != nil {
		return nil, err
	}
	return ParseDocumentWith(doc, kinds)
}

// ruleKeys lists the keys of a rule.
func ruleKeys() []string {
	return []string{"name", "description", "when", "for", "keep_firing_for", "cooldown", "on_nodata", "symbols", "severity", "message", "actions", "scope", "targets",
		"allow_closer_liquidation", "min_liquidation_distance", "margin_budget", "margin_budget_per"}
}

// actionKeys lists the keys of an action.
func actionKeys() []string { return []string{"action", "leverage", "channels", "fraction", "quantity"} }

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9-]+$`)
	yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	noFieldRE  = regexp.MustCompile(`^type rules\.(\w+) has no field (\S+)$`)
	noNameRE   = regexp.MustCompile(`^unknown name (\S+)$`)
)

type parser struct {
	file string
	src  []byte
	errs []*Error
	// kinds is the table of the action kinds a rule may use.
	kinds Kinds
	// rule context of the errors being reported
	rule      string
	ruleIndex int
}

// errorf records an error at n's position (1:1 when n is nil).
func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	line, col := 1, 1
	if n != nil {
		line, col = n.Line, n.Column
	}
	p.errs = append(p.errs, &Error{
		File: p.file, Line: line, Col: col,
		Rule: p.rule, RuleIndex: p.ruleIndex,
		Msg: fmt.Sprintf(format, args...),
	})
}

// decode parses the source and returns its top-level mapping, or nil
// after recording why there is none.
func (p *parser) decode() *yaml.Node {
	if len(bytes.TrimSpace(p.src)) == 0 {
		p.errorf(nil, "empty file")
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(p.src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(nil, "empty file")
			return nil
		}
		p.yamlError(err)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			p.yamlError(err)
		} else {
			p.errorf(&extra, "more than one YAML document; the file must hold one")
		}
		return nil
	}
	root := yamlnode.Deref(&doc)
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			p.errorf(nil, "empty file")
			return nil
		}
		root = yamlnode.Deref(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		if yamlnode.IsNull(root) {
			p.errorf(root, "empty file")
		} else {
			p.errorf(root, "expected a mapping with a \"rules\" key, got %s", yamlnode.Describe(root))
		}
		return nil
	}
	return root
}

// parseRoot reads the rules under the `rules` key of root.
func (p *parser) parseRoot(root *yaml.Node) *Set {
	rulesNode := yamlnode.Value(root, "rules")
	if rulesNode != nil {
		rulesNode = yamlnode.Deref(rulesNode)
	}
	if rulesNode == nil {
		p.errorf(root, "no \"rules\" key: the file defines no rules")
		return nil
	}
	set := &Set{Kinds: p.kinds}
	if yamlnode.IsNull(rulesNode) {
		return set
	}
	if rulesNode.Kind != yaml.SequenceNode {
		p.errorf(rulesNode, "rules: expected a list of rules, got %s", yamlnode.Describe(rulesNode))
		return nil
	}
	seen := map[string]*yaml.Node{}
	for i, n := range rulesNode.Content {
		r, name, nameNode := p.parseRule(i+1, yamlnode.Deref(n))
		if name != "" {
			if first, dup := seen[name]; dup {
				p.rule, p.ruleIndex = name, i+1
				p.errorf(nameNode, "duplicate rule name (first defined at line %d)", first.Line)
				continue
			}
			seen[name] = nameNode
		}
		if r != nil {
			set.Rules = append(set.Rules, r)
		}
	}
	p.rule, p.ruleIndex = "", 0
	slices.SortStableFunc(p.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	return set
}

func (p *parser) yamlError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		if l, convErr := strconv.Atoi(m[1]); convErr == nil && l > 0 {
			line = l
		}
		msg = m[2]
	}
	line = max(line, p.firstBadLine())
	e := &Error{File: p.file, Line: line, Col: 1, Msg: "invalid YAML: " + msg}
	e.Snippet = p.snippet(line, 1)
	p.errs = append(p.errs, e)
}

// firstBadLine returns the first line whose addition makes the file's
// prefix invalid YAML, or 0. yaml.v3 reports where the enclosing construct
// began (the "rules:" line for a badly indented rule); the first failing
// prefix is usually the line to fix. Bounded to the first 2000 lines.
func (p *parser) firstBadLine() int {
	end := 0
	for line := 1; line <= 2000 && end < len(p.src); line++ {
		j := bytes.IndexByte(p.src[end:], '\n')
		if j < 0 {
			end = len(p.src)
		} else {
			end += j + 1
		}
		var n yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(p.src[:end]))
		if err := dec.Decode(&n); err != nil && !errors.Is(err, io.EOF) {
			return line
		}
	}
	return 0
}

// parseRule checks one rule; it returns a nil rule when the rule has
// errors, and the rule's name with its node whenever it has one.
func (p *parser) parseRule(index int, n *yaml.Node) (*Rule, string, *yaml.Node) {
	p.rule, p.ruleIndex = "", index
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "expected a mapping (name, when, actions…), got %s", yamlnode.Describe(n))
		return nil, "", nil
	}
	nerr := len(p.errs)
	r := &Rule{
		File: p.file, Line: n.Line, Scope: ScopePosition,
		Cooldown: DefaultCooldown, Severity: DefaultSeverity, OnNoData: DefaultOnNoData,
		MinLiquidationDistance: DefaultMinLiquidationDistance, BudgetPer: "firing",
		MarginBudget: DefaultMarginBudget, BudgetFraction: DefaultBudgetFraction,
	}
	// The name first, so that every other error can carry it.
	var nameNode, whenNode *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" {
			nameNode = yamlnode.Deref(n.Content[i+1])
			if name, ok := p.str(nameNode, "name"); ok {
				r.Name = name
				if !nameRE.MatchString(name) {
					p.errorf(nameNode, "name %q: use lowercase letters, digits and '-' only", name)
				} else {
					p.rule = name
				}
			}
		}
	}
	if nameNode == nil {
		p.errorf(n, "missing name")
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], yamlnode.Deref(n.Content[i+1])
		if seen[k.Value] {
			p.errorf(k, "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		switch k.Value {
		case "name":
		case "description":
			r.Description, _ = p.str(v, k.Value)
		case "message":
			r.Message, _ = p.str(v, k.Value)
		case "when":
			whenNode = v
			r.When, _ = p.exprSource(v, k.Value)
		case "for":
			r.For = p.duration(v, k.Value)
		case "keep_firing_for":
			r.KeepFiringFor = p.duration(v, k.Value)
		case "cooldown":
			r.Cooldown = p.duration(v, k.Value)
		case "on_nodata":
			if s, ok := p.enum(v, k.Value, []string{string(NoDataAlert), string(NoDataIgnore)}); ok {
				r.OnNoData = NoDataPolicy(s)
			}
		case "severity":
			if s, ok := p.enum(v, k.Value, []string{string(Info), string(Warning), string(Critical)}); ok {
				r.Severity = Severity(s)
			}
		case "symbols":
			r.Symbols = p.strings(v, k.Value)
			if v.Kind == yaml.SequenceNode {
				for _, e := range v.Content {
					r.SymbolsAt = append(r.SymbolsAt, Pos{Line: e.Line, Col: e.Column})
				}
			}
		case "actions":
			r.Actions = p.actions(v)
		case "allow_closer_liquidation":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
				p.errorf(v, "%s: expected true or false, got %s", k.Value, yamlnode.Describe(v))
			} else {
				r.AllowCloserLiquidation = v.Value == "true"
			}
		case "min_liquidation_distance":
			f, err := strconv.ParseFloat(v.Value, 64)
			if v.Kind != yaml.ScalarNode || (v.Tag != "!!float" && v.Tag != "!!int") || err != nil || f < 0 || f >= 1 {
				p.errorf(v, "%s: expected a fraction of the index in [0, 1), like 0.03 for 3%%, got %s", k.Value, yamlnode.Describe(v))
			} else {
				r.MinLiquidationDistance = f
			}
		case "margin_budget":
			amount, fraction, ok := budget(v)
			if !ok {
				p.errorf(v, "%s: expected an amount of the quote currency like 500, a share of the free balance like \"25%%\", or none (no bound), got %s", k.Value, yamlnode.Describe(v))
			} else {
				r.MarginBudget, r.BudgetFraction, r.BudgetSet = amount, fraction, true
			}
		case "scope":
			if s, ok := p.enum(v, k.Value, []string{string(ScopePosition), string(ScopeAccount)}); ok {
				r.Scope = Scope(s)
			}
		case "targets":
			r.Targets = p.targets(v)
		case "margin_budget_per":
			if s, ok := p.enum(v, k.Value, []string{"firing", "day"}); ok {
				r.BudgetPer = s
			}
		default:
			p.unknownKey(k, ruleKeys())
		}
	}
	if whenNode == nil {
		p.errorf(n, "missing when: the condition is required")
	} else if strings.TrimSpace(r.When) == "" {
		p.errorf(whenNode, "when is empty")
	} else if prog, an, err := compileExpr(r.When, exprBool); err != nil {
		p.exprError(whenNode, "when", err)
	} else {
		r.setProgram(prog, an)
		if err := r.checkScope(); err != nil {
			at := whenNode
			if !strings.HasPrefix(err.Error(), "when:") {
				at = scopeNode(n, whenNode)
			}
			p.errorf(at, "%v", err)
		}
	}
	if len(p.errs) > nerr {
		return nil, r.Name, nameNode
	}
	return r, r.Name, nameNode
}

// targets reads an account rule's targets: all, cross, isolated,
// {riskiest: N} or {symbols: [...]}.
func (p *parser) targets(n *yaml.Node) Targets {
	const want = "expected all, cross, isolated, {riskiest: N} or {symbols: [XBTC, …]}"
	switch n.Kind {
	case yaml.ScalarNode:
		if s, ok := p.enum(n, "targets", []string{TargetAll, TargetCross, TargetIsolated}); ok {
			return Targets{Kind: s}
		}
		return Targets{}
	case yaml.MappingNode:
		if len(n.Content) != 2 {
			break
		}
		k, v := n.Content[0], yamlnode.Deref(n.Content[1])
		switch k.Value {
		case TargetRiskiest:
			count, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || count < 1 {
				p.errorf(v, "targets: riskiest: expected a count of positions, at least 1, got %s", yamlnode.Describe(v))
				return Targets{}
			}
			return Targets{Kind: TargetRiskiest, N: count}
		case TargetSymbols:
			syms := p.strings(v, "targets: symbols")
			if len(syms) == 0 {
				p.errorf(v, "targets: symbols: expected a list of symbols")
			}
			return Targets{Kind: TargetSymbols, Symbols: syms}
		}
		p.errorf(k, "targets: %s", yamlnode.UnknownKey(k.Value, "", []string{TargetRiskiest, TargetSymbols}))
		return Targets{}
	}
	p.errorf(n, "targets: %s, got %s", want, yamlnode.Describe(n))
	return Targets{}
}

// scopeNode is where a scope error is said: at the scope key's value when
// the rule has one, else at when.
func scopeNode(rule, when *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(rule.Content); i += 2 {
		if k := rule.Content[i].Value; k == "scope" || k == "targets" {
			return rule.Content[i+1]
		}
	}
	return when
}

func (p *parser) actions(n *yaml.Node) []Action {
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "actions: expected a list of actions, got %s", yamlnode.Describe(n))
		return nil
	}
	kinds := p.kinds.Names()
	var out []Action
	seenKind := map[ActionKind]int{}
	for _, an := range n.Content {
		an = yamlnode.Deref(an)
		if an.Kind != yaml.MappingNode {
			p.errorf(an, "action: expected a mapping like {action: notify}, got %s", yamlnode.Describe(an))
			continue
		}
		var a Action
		var kindNode, levNode, chanNode, fracNode, qtyNode *yaml.Node
		seen := map[string]bool{}
		for i := 0; i+1 < len(an.Content); i += 2 {
			k, v := an.Content[i], yamlnode.Deref(an.Content[i+1])
			if seen[k.Value] {
				p.errorf(k, "duplicate key %q", k.Value)
				continue
			}
			seen[k.Value] = true
			switch k.Value {
			case "action":
				kindNode = v
			case "leverage":
				levNode = v
			case "channels":
				chanNode = v
				a.Channels = p.strings(v, k.Value)
			case "fraction":
				fracNode = v
			case "quantity":
				qtyNode = v
			default:
				p.unknownKey(k, actionKeys())
			}
		}
		if kindNode == nil {
			p.errorf(an, "action: missing \"action\" key (one of %s)", strings.Join(kinds, ", "))
			continue
		}
		s, ok := p.enum(kindNode, "action", kinds)
		if !ok {
			continue
		}
		a.Kind = ActionKind(s)
		spec, _ := p.kinds.Spec(a.Kind)
		if prev, dup := seenKind[a.Kind]; dup && spec.Params&ParamChannels == 0 {
			p.errorf(kindNode, "action %s listed twice (first at line %d)", a.Kind, prev)
		}
		seenKind[a.Kind] = kindNode.Line
		if chanNode != nil && spec.Params&ParamChannels == 0 {
			p.errorf(chanNode, "channels: only the %s action takes channels", p.kinds.taking(ParamChannels))
		}
		switch {
		case spec.Params&ParamLeverage != 0 && levNode == nil:
			p.errorf(kindNode, "%s: missing parameter %s", a.Kind, spec.Missing)
		case spec.Params&ParamLeverage != 0:
			src, ok := p.exprSource(levNode, "leverage")
			if !ok {
				break
			}
			if strings.TrimSpace(src) == "" {
				p.errorf(levNode, "leverage is empty")
				break
			}
			prog, an, err := compileExpr(src, exprNumber)
			if err == nil {
				err = a.setProgram(prog, an, "leverage")
			}
			if err != nil {
				p.exprError(levNode, "leverage", err)
				break
			}
			a.Leverage = src
		case levNode != nil:
			p.errorf(levNode, "leverage: only the %s action takes a leverage", p.kinds.taking(ParamLeverage))
		}
		p.amountParams(&a, spec, kindNode, fracNode, qtyNode)
		out = append(out, a)
	}
	return out
}

func (p *parser) unknownKey(k *yaml.Node, known []string) {
	p.errorf(k, "%s", yamlnode.UnknownKey(k.Value, "", known))
}

// str reads a string scalar.
func (p *parser) str(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.errorf(n, "%s: expected a string, got %s", key, yamlnode.Describe(n))
		return "", false
	}
	return n.Value, true
}

// exprSource reads an expression: any scalar but null, so that `leverage: 5`
// and `when: true` work.
func (p *parser) exprSource(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, "%s: expected an expression, got %s", key, yamlnode.Describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) duration(n *yaml.Node, key string) time.Duration {
	d, err := yamlnode.Duration(n)
	if err != nil {
		p.errorf(n, "%s: %v", key, err)
		return 0
	}
	return d
}

func (p *parser) enum(n *yaml.Node, key string, values []string) (string, bool) {
	s, ok := p.str(n, key)
	if !ok {
		return "", false
	}
	for _, v := range values {
		if s == v {
			return s, true
		}
	}
	msg := fmt.Sprintf("%s: unknown value %q (want %s)", key, s, strings.Join(values, ", "))
	if hint := DidYouMean(s, values); hint != "" {
		msg += fmt.Sprintf("; did you mean %q?", hint)
	}
	p.errorf(n, "%s", msg)
	return "", false
}

func (p *parser) strings(n *yaml.Node, key string) []string {
	if yamlnode.IsNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "%s: expected a list of strings like [XBTC, XETH], got %s", key, yamlnode.Describe(n))
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range n.Content {
		e = yamlnode.Deref(e)
		s, ok := p.str(e, key)
		if !ok {
			continue
		}
		if strings.TrimSpace(s) == "" {
			p.errorf(e, "%s: empty string", key)
			continue
		}
		if seen[s] {
			p.errorf(e, "%s: %q listed twice", key, s)
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// exprError reports a compile error of the expression held by node n, at
// the expression's offending column when it can be mapped into the file.
func (p *parser) exprError(n *yaml.Node, key string, err error) {
	e := &Error{File: p.file, Line: n.Line, Col: n.Column, Rule: p.rule, RuleIndex: p.ruleIndex}
	var fe *file.Error
	if !errors.As(err, &fe) {
		e.Msg = key + ": " + friendlyExprMessage(err.Error())
		p.errs = append(p.errs, e)
		return
	}
	e.Msg = key + ": " + friendlyExprMessage(fe.Message)
	if line, col, ok := p.exprPosition(n, fe.Line, fe.Column); ok {
		e.Line, e.Col = line, col
		e.Snippet = p.snippet(line, col)
	} else if fe.Snippet != "" {
		// The expression is folded or spread over lines in a way that
		// does not map column for column: show expr's own rendering.
		e.Snippet = strings.TrimPrefix(strings.ReplaceAll(fe.Snippet, "\n | ", "\n    "), "\n")
	}
	p.errs = append(p.errs, e)
}

// exprPosition maps a position in an expression (line 1-based, col
// 0-based, as expr reports it) to the file.
func (p *parser) exprPosition(n *yaml.Node, line, col int) (int, int, bool) {
	if line < 1 {
		return 0, 0, false
	}
	switch n.Style {
	case 0, yaml.TaggedStyle:
		if !strings.Contains(n.Value, "\n") && line == 1 && p.lineHas(n.Line, n.Column, n.Value) {
			return n.Line, n.Column + col, true
		}
	case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
		if line == 1 && !strings.ContainsAny(p.lineAt(n.Line), `\'`+"\t") {
			return n.Line, n.Column + 1 + col, true
		}
	case yaml.LiteralStyle:
		// The text starts on the line after the indicator; every line
		// keeps its content, after the block's indentation.
		fl := n.Line + line
		text := p.lineAt(fl)
		indent := len(text) - len(strings.TrimLeft(text, " "))
		if fl <= p.lineCount() {
			return fl, indent + col + 1, true
		}
	}
	return 0, 0, false
}

func (p *parser) lineHas(line, col int, s string) bool {
	text := p.lineAt(line)
	return col >= 1 && col-1 <= len(text) && strings.HasPrefix(text[col-1:], s)
}

func (p *parser) lineCount() int { return bytes.Count(p.src, []byte("\n")) + 1 }

// lineAt returns the 1-based line of the source, without its newline.
func (p *parser) lineAt(line int) string {
	if line < 1 {
		return ""
	}
	rest := p.src
	for i := 1; i < line; i++ {
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return ""
		}
		rest = rest[j+1:]
	}
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	return strings.TrimRight(string(rest), "\r")
}

// snippet renders a source line with a caret under col (1-based).
func (p *parser) snippet(line, col int) string {
	text := p.lineAt(line)
	if strings.TrimSpace(text) == "" {
		return ""
	}
	text = redactSecretValue(strings.ReplaceAll(text, "\t", " "))
	return "    " + text + "\n    " + strings.Repeat(" ", max(col-1, 0)) + "^"
}

// secretKeyRE finds a key whose value is a secret (a key, secret, token,
// password or webhook URL written in the file, not the name of a variable or
// file holding one), in block or flow style.
var secretKeyRE = regexp.MustCompile(`(?i)\b[a-z0-9_]*(?:secret|token|password|api_key|webhook_url|authorization)["']?\s*:`)

// redactSecretValue hides everything after the first secret key of a source
// line quoted in an error, so a broken file never prints a credential.
func redactSecretValue(line string) string {
	loc := secretKeyRE.FindStringIndex(line)
	if loc == nil || strings.TrimSpace(line[loc[1]:]) == "" {
		return line
	}
	return line[:loc[1]] + " <redacted>"
}

// friendlyExprMessage rewords expr's messages about unknown names in terms
// of the rule language, with a suggestion.
func friendlyExprMessage(msg string) string {
	if m := noFieldRE.FindStringSubmatch(msg); m != nil {
		var t reflect.Type
		obj := ""
		switch m[1] {
		case "Position":
			t, obj = reflect.TypeFor[Position](), "position"
		case "RiskLimit":
			t, obj = reflect.TypeFor[RiskLimit](), "riskLimit"
		case "Symbol":
			t, obj = reflect.TypeFor[Symbol](), "symbol"
		case "Account":
			t, obj = reflect.TypeFor[Account](), "account"
		}
		if t != nil {
			out := fmt.Sprintf("unknown field %s.%s", obj, m[2])
			if hint := DidYouMean(m[2], exprNames(t)); hint != "" {
				out += fmt.Sprintf(" (did you mean %s.%s?)", obj, hint)
			}
			return out
		}
	}
	if m := noNameRE.FindStringSubmatch(msg); m != nil {
		out := "unknown name " + m[1]
		if hint := DidYouMean(m[1], append(exprNames(reflect.TypeFor[Env]()), windowFns...)); hint != "" {
			out += fmt.Sprintf(" (did you mean %s?)", hint)
		}
		return out
	}
	if strings.HasPrefix(msg, "expected bool, but got ") {
		return "must be a boolean condition, but it is a " + strings.TrimPrefix(msg, "expected bool, but got ")
	}
	if strings.HasPrefix(msg, "expected float64, but got ") {
		return "must be a number, but it is a " + strings.TrimPrefix(msg, "expected float64, but got ")
	}
	return msg
}

// exprNames lists the expression names (expr tags) of a struct's fields.
func exprNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("expr"); tag != "" && !strings.HasPrefix(tag, "_") {
			out = append(out, tag)
		}
	}
	return out
}

// budget reads a margin budget: a number (0: no bound), a percentage
// string "25%" (a fraction in (0, 1]), or none (no bound).
func budget(n *yaml.Node) (amount float64, fraction, ok bool) {
	if n.Kind != yaml.ScalarNode {
		return 0, false, false
	}
	if n.Tag == "!!str" && strings.TrimSpace(n.Value) == "none" {
		return 0, false, true // no bound
	}
	if s, isPct := strings.CutSuffix(strings.TrimSpace(n.Value), "%"); isPct && n.Tag == "!!str" {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f <= 0 || f > 100 {
			return 0, false, false
		}
		return f / 100, true, true
	}
	if n.Tag != "!!int" && n.Tag != "!!float" {
		return 0, false, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		return 0, false, false
	}
	return f, false, true // 0: no bound
}

// amountParams reads the fraction or quantity of a kind that takes an
// amount (ParamAmount), exactly one of them, and refuses them on any other
// action.
func (p *parser) amountParams(a *Action, spec KindSpec, kindNode, fracNode, qtyNode *yaml.Node) {
	if spec.Params&ParamAmount == 0 {
		for _, n := range []struct {
			node *yaml.Node
			key  string
		}{{fracNode, "fraction"}, {qtyNode, "quantity"}} {
			if n.node != nil {
				p.errorf(n.node, "%s: only the %s action takes a %s", n.key, p.kinds.taking(ParamAmount), n.key)
			}
		}
		return
	}
	switch {
	case fracNode == nil && qtyNode == nil:
		p.errorf(kindNode, "%s: missing parameter: %s", a.Kind, spec.Missing)
		return
	case fracNode != nil && qtyNode != nil:
		p.errorf(qtyNode, "%s: fraction and quantity are both set; give one", a.Kind)
		return
	case fracNode != nil:
		f, err := strconv.ParseFloat(fracNode.Value, 64)
		if fracNode.Kind != yaml.ScalarNode || (fracNode.Tag != "!!float" && fracNode.Tag != "!!int") || err != nil || !(f > 0 && f <= 1) {
			p.errorf(fracNode, "fraction: expected a share of the position's quantity in (0, 1], like 0.5 for half, got %s", yamlnode.Describe(fracNode))
			return
		}
		a.Fraction = f
		return
	}
	src, ok := p.exprSource(qtyNode, "quantity")
	if !ok {
		return
	}
	if strings.TrimSpace(src) == "" {
		p.errorf(qtyNode, "quantity is empty")
		return
	}
	prog, an, err := compileExpr(src, exprNumber)
	if err == nil {
		err = a.setProgram(prog, an, "quantity")
	}
	if err != nil {
		p.exprError(qtyNode, "quantity", err)
		return
	}
	a.Quantity = src
}
