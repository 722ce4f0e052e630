package notify

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// TypeWebhook is a generic webhook: the message posted as JSON.
const TypeWebhook = "webhook"

// decodeWebhook reads url (or url_env) and the optional headers, each
// written or read from the environment (NAME_env).
func decodeWebhook(p *parser, path string, m map[string]any, cc *ChannelConfig) {
	p.unknown(path, m, "type", "url", "url_env", "headers")
	cc.URL = p.requiredURL(m, path, "url", false)
	cc.Headers = p.headers(m, path+".headers")
}

// headers reads the headers mapping at path: NAME: value, or NAME_env: VAR
// for a value from the environment; a secret-looking one written in the
// file is accepted with a warning.
func (p *parser) headers(m map[string]any, path string) map[string]string {
	v, ok := m["headers"]
	if !ok || v == nil {
		return nil
	}
	hm, ok := v.(map[string]any)
	if !ok {
		p.errorf(path, "expected a mapping of header names to values")
		return nil
	}
	keys := make([]string, 0, len(hm))
	for k := range hm {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := map[string]string{}
	for _, k := range keys {
		name, fromEnv := strings.CutSuffix(k, "_env")
		if !validHeaderName(name) {
			p.errorf(path+"."+k, "not a valid header name")
			continue
		}
		s, ok := hm[k].(string)
		if !ok {
			p.errorf(path+"."+k, "expected a string")
			continue
		}
		if _, dup := out[name]; dup {
			p.errorf(path+"."+k, "header %s set twice", name)
			continue
		}
		if fromEnv {
			val := strings.TrimSpace(p.getenv(s))
			if val == "" {
				p.errorf(path+"."+k, "environment variable %s is unset or empty", s)
				continue
			}
			s = val
		} else if sensitiveHeader(name) {
			p.warnings = append(p.warnings, fmt.Sprintf("%s.%s: a secret written in the configuration file; prefer %s_env", path, k, k))
		}
		if strings.ContainsAny(s, "\r\n") {
			p.errorf(path+"."+k, "a header value cannot contain a line break")
			continue
		}
		out[name] = s
	}
	return out
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func sensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "token", "key", "secret", "signature", "cookie", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// webhook posts the message as JSON, with the configured headers.
type webhook struct {
	httpPoster
	url     string
	headers map[string]string
}

func newWebhook(cc ChannelConfig, o *options) (Sender, error) {
	return &webhook{httpPoster: o.poster(cc), url: cc.URL, headers: cc.Headers}, nil
}

func (w *webhook) Send(ctx context.Context, m Message) error {
	m.Channels = nil
	a, err := w.postJSON(ctx, w.url, m, w.headers)
	if err != nil {
		return err
	}
	if a.status/100 != 2 {
		return w.statusError(a, 0)
	}
	return nil
}
