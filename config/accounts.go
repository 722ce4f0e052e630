package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/riskguard/riskguard/internal/yamlnode"
	"github.com/riskguard/riskguard/rules"
)

// accountDoc is what loadDocument needs to load one account of an
// accounts: section: its name, its rules when they come from a
// rules_file, and the keys the account sets itself.
type accountDoc struct {
	name string
	// rules is the account's rules_file, decoded; nil when the rules are
	// in the configuration file.
	rules *rules.Document
	// fileOnly are the keys ("exchange.base_url") the account sets in
	// the file: the top level's RISKGUARD_SECTION_KEY variables do not
	// override them.
	fileOnly map[string]bool
}

// credentialEnv is the variable of a credential ("API_KEY"): RISKGUARD_API_KEY
// without accounts, RISKGUARD_<NAME>_API_KEY for the account NAME (a dash
// is an underscore: RISKGUARD_BOT_2_API_KEY for bot-2).
func (a *accountDoc) credentialEnv(what string) string {
	if a == nil {
		return "RISKGUARD_" + what
	}
	return accountEnv(a.name, what)
}

func accountEnv(name, what string) string {
	return "RISKGUARD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_" + what
}

// accountNamePattern is what an account name may be: it goes into file
// names, variables, metric labels and URLs as it is.
var accountNamePattern = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// accountKeys are the keys of an item of accounts:.
func accountKeys() []string {
	return []string{"name", "exchange", "rules", "rules_file", "state_file", "audit_log"}
}

// credentialKeys are the exchange keys an account never inherits from the
// top level: each account has its own key pair.
var credentialKeys = []string{"api_key", "api_secret", "api_key_file", "api_secret_file"}

// loadAccounts loads a file with an accounts: section. Each account is
// the whole file as that account sees it, loaded by loadDocument with
// every check: the top-level exchange section with the account's own
// exchange keys over it (never the top level's credentials), the
// account's rules (inline, from rules_file, or else the top level's), and
// its state file and audit log (its own keys, or the top level's paths
// with the name before the extension). The accounts are then checked
// together: names, credentials, files shared.
func loadAccounts(path string, doc *rules.Document, getenv func(string) string, opts Options) (*Config, error) {
	var errs []*rules.Error
	errorf := func(n *yaml.Node, format string, args ...any) {
		e := &rules.Error{File: path, Msg: fmt.Sprintf(format, args...)}
		if n != nil {
			e.Line, e.Col = n.Line, n.Column
		}
		errs = append(errs, e)
	}
	list := yamlnode.Deref(yamlnode.Value(doc.Root, "accounts"))
	if list.Kind != yaml.SequenceNode || len(list.Content) == 0 {
		errorf(list, "accounts: expected a list of accounts, like\n  accounts:\n    - name: main\n      rules_file: main.rules.yaml")
		return nil, &rules.ErrorList{Errors: errs}
	}
	var (
		out      []*Config
		warnings []string
		seen     = map[string]*yaml.Node{}
		envSeen  = map[string]string{}
		files    = map[string]string{} // a state file or audit log → the account that has it
		owners   = map[string]string{} // an exchange account (accountIdentity) → the account entry that guards it
	)
	for i, item := range list.Content {
		item = yamlnode.Deref(item)
		prefix := fmt.Sprintf("accounts[%d].", i)
		if item.Kind != yaml.MappingNode {
			errorf(item, "accounts[%d]: expected a mapping with a name, got %s", i, yamlnode.Describe(item))
			continue
		}
		fields := yamlnode.Fields(item, prefix, accountKeys(), func(at *yaml.Node, msg string) { errorf(at, "%s", msg) })
		nameNode := fields["name"]
		name := ""
		if nameNode != nil && nameNode.Kind == yaml.ScalarNode {
			name = nameNode.Value
		}
		switch {
		case nameNode == nil:
			errorf(item, "%sname is required: a short name like main or bot-2 (a-z, 0-9, _ and -)", prefix)
			continue
		case !accountNamePattern.MatchString(name):
			errorf(nameNode, "%sname %q: use 1 to 32 of a-z, 0-9, _ and - (it names files, variables and metric labels)", prefix, name)
			continue
		case seen[name] != nil:
			errorf(nameNode, "%sname %q: duplicate account name (first at line %d)", prefix, name, seen[name].Line)
			continue
		}
		seen[name] = nameNode
		if other, ok := envSeen[accountEnv(name, "")]; ok {
			errorf(nameNode, "%sname %q: its variables (%s…) are those of account %q too: rename one", prefix, name, accountEnv(name, ""), other)
			continue
		}
		envSeen[accountEnv(name, "")] = name

		ad := &accountDoc{name: name, fileOnly: map[string]bool{}}
		root, ok := accountRoot(doc.Root, fields, ad, errorf, prefix)
		if !ok {
			continue
		}
		if rf := fields["rules_file"]; rf != nil {
			if fields["rules"] != nil {
				errorf(rf, "%srules_file: the account has rules: too; keep one", prefix)
				continue
			}
			file := rf.Value
			if !filepath.IsAbs(file) {
				file = filepath.Join(filepath.Dir(path), file)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				errorf(rf, "%srules_file: cannot read: %v", prefix, unwrapPathError(err))
				continue
			}
			rdoc, err := rules.Decode(file, data)
			if err != nil {
				var el *rules.ErrorList
				if errors.As(err, &el) {
					errs = append(errs, el.Errors...)
				}
				continue
			}
			ad.rules = rdoc
		}
		acfg, err := loadDocument(path, &rules.Document{File: path, Src: doc.Src, Root: root}, getenv, opts, ad)
		if err != nil {
			var el *rules.ErrorList
			if !errors.As(err, &el) {
				return nil, fmt.Errorf("account %s: %w", name, err)
			}
			errs = append(errs, el.Errors...)
			continue
		}
		if !ad.fileOnly["engine.state_file"] {
			acfg.Engine.StateFile = accountPath(acfg.Engine.StateFile, name)
		}
		if !ad.fileOnly["engine.audit_log"] {
			acfg.Engine.AuditLog = accountPath(acfg.Engine.AuditLog, name)
		}
		for _, f := range []struct{ key, file string }{{"state_file", acfg.Engine.StateFile}, {"audit_log", acfg.Engine.AuditLog}} {
			if f.file == "" {
				continue
			}
			abs, _ := filepath.Abs(f.file)
			if other, ok := files[abs]; ok {
				errorf(nameNode, "account %q: its %s %s is account %q's too: give each account its own (accounts[%d].%s)", name, f.key, f.file, other, i, f.key)
			}
			files[abs] = name
		}
		if id, fp := accountIdentity(acfg.Exchange.BaseURL, acfg.Exchange.APIKey); id != "" {
			if other, ok := owners[id]; ok {
				errorf(nameNode, "account %q is account %q: the same exchange (%s) and API key (fingerprint %s); two entries would guard it twice and send each order twice: remove one, or give each its own exchange account and key",
					name, other, acfg.Exchange.BaseURL, fp)
			}
			owners[id] = name
		}
		if !opts.SecretsOptional && (acfg.Exchange.APIKey == "" || acfg.Exchange.APISecret == "") {
			errorf(nameNode, "account %q has no credentials: set %s and %s, or %sexchange.api_key_file and api_secret_file", name,
				accountEnv(name, "API_KEY"), accountEnv(name, "API_SECRET"), prefix)
		}
		for _, w := range acfg.Warnings {
			if !slices.Contains(warnings, w) {
				warnings = append(warnings, w)
			}
		}
		out = append(out, acfg)
	}
	if len(errs) > 0 {
		// The top level is checked once per account: say each problem once.
		var uniq []*rules.Error
		have := map[string]bool{}
		for _, e := range errs {
			k := e.Error()
			if !have[k] {
				have[k] = true
				uniq = append(uniq, e)
			}
		}
		el := &rules.ErrorList{Errors: uniq}
		el.Sort()
		return nil, el
	}
	top := *out[0]
	top.Name, top.Accounts, top.Warnings = "", out, warnings
	return &top, nil
}

// accountIdentity names the exchange account a base URL and API key reach,
// for telling two entries that are one account: the URL's scheme, host and
// path in lower case without a trailing slash, and the key's fingerprint
// (KeyFingerprint; never the key). It is "" without a key (check without
// credentials).
func accountIdentity(baseURL, key string) (id, fingerprint string) {
	if key == "" {
		return "", ""
	}
	u := strings.ToLower(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		port := pu.Port()
		switch {
		case port == "" && pu.Scheme == "https":
			port = "443"
		case port == "" && pu.Scheme == "http":
			port = "80"
		}
		u = pu.Scheme + "://" + pu.Hostname() + ":" + port + strings.TrimRight(pu.EscapedPath(), "/")
	}
	fp := KeyFingerprint(key)
	return u + " " + fp, fp
}

// KeyFingerprint is a short fingerprint of an API key, safe to print and
// compare (a SHA-256 prefix of the key under a fixed label): two configs
// on one key have the same one, and the key cannot be read back from it.
func KeyFingerprint(key string) string {
	sum := sha256.Sum256([]byte("riskguard api key\x00" + key))
	return hex.EncodeToString(sum[:6])
}

// accountRoot builds the configuration as account ad sees it: the file's
// top level without accounts:, the account's exchange keys over the top
// level's (whose credentials are left out), its rules over the top
// level's, its state_file and audit_log over the top level's. The nodes
// are the file's own, so that every error points into it.
func accountRoot(top *yaml.Node, fields map[string]*yaml.Node, ad *accountDoc, errorf func(*yaml.Node, string, ...any), prefix string) (*yaml.Node, bool) {
	root := &yaml.Node{Kind: yaml.MappingNode, Line: top.Line, Column: top.Column}
	override := func(section string, own *yaml.Node, drop []string) *yaml.Node {
		base := yamlnode.Value(top, section)
		if base != nil {
			base = yamlnode.Deref(base)
		}
		if own == nil && (base == nil || base.Kind != yaml.MappingNode) {
			return base
		}
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if base != nil && base.Kind == yaml.MappingNode {
			m.Line, m.Column = base.Line, base.Column
		} else {
			m.Line, m.Column = own.Line, own.Column
		}
		ownKeys := map[string]bool{}
		if own != nil {
			for j := 0; j+1 < len(own.Content); j += 2 {
				ownKeys[own.Content[j].Value] = true
			}
		}
		if base != nil && base.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(base.Content); j += 2 {
				k := base.Content[j].Value
				if ownKeys[k] || slices.Contains(drop, k) {
					continue
				}
				m.Content = append(m.Content, base.Content[j], base.Content[j+1])
			}
		}
		if own != nil {
			for j := 0; j+1 < len(own.Content); j += 2 {
				m.Content = append(m.Content, own.Content[j], own.Content[j+1])
				ad.fileOnly[section+"."+own.Content[j].Value] = true
			}
		}
		return m
	}
	ex := fields["exchange"]
	if ex != nil && ex.Kind != yaml.MappingNode {
		errorf(ex, "%sexchange: expected a mapping of exchange keys (base_url, api_key_file, …)", prefix)
		return nil, false
	}
	var eng *yaml.Node
	for _, k := range []string{"state_file", "audit_log"} {
		if v := fields[k]; v != nil {
			if eng == nil {
				eng = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: v.Line, Column: v.Column}
			}
			eng.Content = append(eng.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: v.Line, Column: v.Column}, v)
		}
	}
	for j := 0; j+1 < len(top.Content); j += 2 {
		k, v := top.Content[j], top.Content[j+1]
		switch k.Value {
		case "accounts":
			continue
		case "exchange":
			v = override("exchange", ex, credentialKeys)
		case "engine":
			v = override("engine", eng, nil)
		case "rules":
			if fields["rules"] != nil || fields["rules_file"] != nil {
				continue
			}
		}
		root.Content = append(root.Content, k, v)
	}
	has := func(k string) bool { return yamlnode.Value(top, k) != nil }
	if !has("exchange") && ex != nil {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "exchange", Line: ex.Line, Column: ex.Column}, override("exchange", ex, credentialKeys))
	}
	if !has("engine") && eng != nil {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "engine", Line: eng.Line, Column: eng.Column}, override("engine", eng, nil))
	}
	if r := fields["rules"]; r != nil {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "rules", Line: r.Line, Column: r.Column}, r)
	}
	return root, true
}

// accountPath is the top level's state file or audit log for the account
// name: the name goes before the extension (riskguard-state.json is
// riskguard-state.main.json for main); "" stays "" (none).
func accountPath(p, name string) string {
	if p == "" {
		return ""
	}
	ext := filepath.Ext(p)
	return strings.TrimSuffix(p, ext) + "." + name + ext
}

// AccountNames lists the names of cfg's accounts, in the file's order;
// nil without accounts:.
func (c *Config) AccountNames() []string {
	var out []string
	for _, a := range c.Accounts {
		out = append(out, a.Name)
	}
	return out
}
