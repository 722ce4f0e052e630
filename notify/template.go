package notify

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/riskguard/riskguard/internal/didyoumean"
)

// defaultTemplate renders every kind unless WithTemplates says otherwise: an
// icon and the engine's sentence, or the fields when there is no sentence.
const defaultTemplate = `{{.Icon}} {{if .Text}}{{.Text}}{{else}}{{.Kind}}{{with .Rule}} {{.}}{{end}}{{with .Symbol}} on {{.}}{{end}}{{with .Action}}: {{.}}{{end}}{{with summary .Values}} ({{.}}){{end}}{{end}}`

// maxRendered bounds a rendered message, in characters.
const maxRendered = 8000

// maxCachedTemplates bounds the renderer's cache of parsed rule templates.
const maxCachedTemplates = 512

// TemplateData is what a template sees: the message's fields (.Rule,
// .Symbol, .Severity, .Kind, .Action, .Text, .Time, .Values, .Count), its
// figures by name, and an Icon for its kind and severity.
//
// Functions: pct (a fraction as a percentage: pct 0.0321 is "3.21%"), num (a
// number in its shortest form), upper, lower, and summary (the figures as
// "distance 3.21% · index 100 · liq 96.8 · lev 20x/50x").
type TemplateData struct {
	Message
	// Values are the figures by name (.Values.leverage), as Figures.Map
	// gives them.
	Values           map[string]float64
	Index            float64 // the symbol's index price
	LiquidationPrice float64
	Distance         float64 // distance to liquidation, a fraction of the index
	Leverage         float64
	MaxLeverage      float64
	Notional         float64
	Icon             string
}

func newTemplateData(m Message) TemplateData {
	d := TemplateData{Message: m, Values: m.Values.Map(), Icon: icon(m)}
	if f := m.Values; f != nil {
		d.Index, d.LiquidationPrice, d.Distance = f.Index, f.LiquidationPrice, f.Distance
		d.Leverage, d.MaxLeverage, d.Notional = f.Leverage, f.MaxLeverage, f.Notional
	}
	return d
}

func icon(m Message) string {
	switch m.Kind {
	case KindResolved:
		return "✅"
	case KindAction:
		return "🛠"
	case KindActionFailed:
		return "❌"
	case KindTest:
		return "🔔"
	}
	switch m.Severity {
	case "critical":
		return "🔴"
	case "warning":
		return "🟠"
	}
	return "🔵"
}

// templateFuncs are the functions a template can call.
func templateFuncs() template.FuncMap {
	return template.FuncMap{
		"pct":     pct,
		"num":     formatNumber,
		"upper":   strings.ToUpper,
		"lower":   strings.ToLower,
		"summary": summary,
	}
}

// pct prints a fraction as a percentage with two decimals.
func pct(f float64) string { return strconv.FormatFloat(f*100, 'f', 2, 64) + "%" }

// formatNumber prints f in its shortest form, without exponent for the
// magnitudes prices and leverages have.
func formatNumber(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e15) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// summary is the figures a rule saw, in the order a trader reads them.
func summary(v map[string]float64) string {
	var parts []string
	if d, ok := v["liquidationDistance"]; ok {
		parts = append(parts, "distance "+pct(d))
	}
	if x, ok := v["indexPrice"]; ok {
		parts = append(parts, "index "+formatNumber(x))
	}
	if x, ok := v["liquidationPrice"]; ok {
		parts = append(parts, "liq "+formatNumber(x))
	}
	if x, ok := v["leverage"]; ok {
		s := "lev " + formatNumber(x) + "x"
		if mx, ok := v["maxLeverage"]; ok {
			s += "/" + formatNumber(mx) + "x"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " · ")
}

// CheckTemplate parses a rule's message template and runs it on a sample
// message, so that every command that loads the configuration rejects a
// broken one before a notification needs it. Its error reads as a user's
// mistake, with a did-you-mean for a misspelt field or function.
func CheckTemplate(text string) error {
	t, err := template.New("message").Funcs(templateFuncs()).Option("missingkey=error").Parse(text)
	if err != nil {
		return templateError(err)
	}
	sample := Message{Kind: KindFiring, Severity: "critical", Rule: "r", Symbol: "XBTC", Text: "r firing on XBTC",
		Values: &Figures{Index: 100, LiquidationPrice: 95, Distance: 0.05, Leverage: 20, MaxLeverage: 50, Notional: 1000}}
	if err := t.Execute(&bytes.Buffer{}, newTemplateData(sample)); err != nil {
		return templateError(err)
	}
	return nil
}

var (
	// templatePosRE is text/template's position prefix: template: NAME:LINE:COL: or NAME:LINE:.
	templatePosRE = regexp.MustCompile(`^template: message:(\d+)(?::(\d+))?: (?:executing "message" at <[^>]*>: )?`)
	noFieldRE     = regexp.MustCompile(`can't evaluate field (\w+) in type`)
	noFuncRE      = regexp.MustCompile(`function "([^"]+)" not defined`)
)

// templateError rewrites text/template's error in the user's terms: where
// in the template, and what the misspelt name probably was, without Go's
// type names.
func templateError(err error) error {
	msg := err.Error()
	where := ""
	if m := templatePosRE.FindStringSubmatch(msg); m != nil {
		where = "line " + m[1]
		if m[2] != "" {
			where += ", column " + m[2]
		}
		where += ": "
		msg = msg[len(m[0]):]
	}
	switch {
	case noFieldRE.MatchString(msg):
		name := noFieldRE.FindStringSubmatch(msg)[1]
		fields := TemplateFields()
		if hint := didyoumean.Closest(name, fields); hint != "" {
			return fmt.Errorf("message template %sunknown field .%s (did you mean .%s?)", where, name, hint)
		}
		return fmt.Errorf("message template %sunknown field .%s (fields: .%s)", where, name, strings.Join(fields, ", ."))
	case noFuncRE.MatchString(msg):
		name := noFuncRE.FindStringSubmatch(msg)[1]
		funcs := slices.Sorted(maps.Keys(templateFuncs()))
		if hint := didyoumean.Closest(name, funcs); hint != "" {
			return fmt.Errorf("message template %sunknown function %q (did you mean %q?)", where, name, hint)
		}
		return fmt.Errorf("message template %sunknown function %q (functions: %s)", where, name, strings.Join(funcs, ", "))
	}
	return fmt.Errorf("message template %s%s", where, msg)
}

// TemplateFields lists the fields a message template can use, sorted.
func TemplateFields() []string {
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case f.IsExported() && f.Name != "Template" && f.Name != "Channels":
				// Template and Channels steer delivery; they are not
				// part of what a message says.
				out = append(out, f.Name)
			}
		}
	}
	walk(reflect.TypeFor[TemplateData]())
	slices.Sort(out)
	return slices.Compact(out)
}

// renderer renders messages: a per-kind default, or the message's own
// template. Parsed rule templates are cached.
type renderer struct {
	defaults map[Kind]*template.Template
	fallback *template.Template

	mu    sync.Mutex
	cache map[string]*template.Template
	bad   map[string]error
}

func newRenderer(overrides map[Kind]string) (*renderer, error) {
	r := &renderer{defaults: map[Kind]*template.Template{}, cache: map[string]*template.Template{}, bad: map[string]error{}}
	var err error
	if r.fallback, err = template.New("default").Funcs(templateFuncs()).Parse(defaultTemplate); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		if err := CheckTemplate(overrides[k]); err != nil {
			return nil, fmt.Errorf("template for %s: %w", k, err)
		}
		r.defaults[k] = template.Must(template.New(string(k)).Funcs(templateFuncs()).Option("missingkey=error").Parse(overrides[k]))
	}
	return r, nil
}

// render returns m's text: its own template's output, else its kind's
// default, with " (×N)" when it stands for N messages. When m's template
// fails the default is used and the error returned.
func (r *renderer) render(m Message) (string, error) {
	data := newTemplateData(m)
	var terr error
	out, ok := "", false
	if m.Template != "" {
		t, err := r.parse(m.Template)
		if err == nil {
			out, err = execute(t, data)
		}
		if err != nil {
			terr = err
		} else {
			ok = true
		}
	}
	if !ok {
		t := r.defaults[m.Kind]
		if t == nil {
			t = r.fallback
		}
		var err error
		if out, err = execute(t, data); err != nil {
			// Only a WithTemplates override can fail here; the built-in
			// default cannot.
			terr = err
			out, _ = execute(r.fallback, data)
		}
	}
	out = strings.TrimSpace(out)
	if m.Account != "" && !strings.HasPrefix(out, "["+m.Account+"] ") {
		out = "[" + m.Account + "] " + out
	}
	if m.Count > 1 {
		out += fmt.Sprintf(" (×%d)", m.Count)
	}
	return truncate(out, maxRendered), terr
}

func (r *renderer) parse(text string) (*template.Template, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.cache[text]; ok {
		return t, nil
	}
	if err, ok := r.bad[text]; ok {
		return nil, err
	}
	t, err := template.New("message").Funcs(templateFuncs()).Option("missingkey=error").Parse(text)
	if err != nil {
		err = fmt.Errorf("message template: %w", err)
		if len(r.bad) < maxCachedTemplates {
			r.bad[text] = err
		}
		return nil, err
	}
	if len(r.cache) < maxCachedTemplates {
		r.cache[text] = t
	}
	return t, nil
}

func execute(t *template.Template, data TemplateData) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("message template: %w", err)
	}
	return b.String(), nil
}
