package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/riskguard/riskguard/internal/nextstep"
)

// Sender delivers one rendered message to one channel. Each channel type has
// one; tests substitute their own through WithSenders.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// maxResponse bounds how much of a service's answer is read.
const maxResponse = 64 << 10

// ErrAnswerTooLarge is a service's answer longer than its reader's bound.
var ErrAnswerTooLarge = errors.New("answer too large")

// DeliveryError is a failed delivery attempt, as the service answered it.
// Its text never contains a secret.
type DeliveryError struct {
	// Status is the HTTP status, Telegram's error_code or the SMTP reply
	// code; 0 for a transport failure.
	Status int
	// RetryAfter is the service's rate-limit hint; 0 when it gave none.
	RetryAfter time.Duration
	// Permanent says retrying cannot help: a bad token, an unknown chat, a
	// rejected payload.
	Permanent bool
	// Msg says what happened, redacted.
	Msg string
	// Err is a context error when the attempt ran out of time,
	// ErrAnswerTooLarge for an answer past its bound, else nil.
	Err error
}

func (e *DeliveryError) Error() string {
	s := e.Msg
	if e.Status != 0 {
		s = fmt.Sprintf("status %d: %s", e.Status, e.Msg)
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// redactor replaces secrets in text: a URL that holds one by its scheme,
// host and port (https://hooks.example.org/REDACTED), so that an error
// still says where it went, and every other secret by REDACTED.
type redactor struct {
	// pairs are the replacements in order: the URL's forms first, then the
	// secrets, longest first, so that a secret containing another is
	// replaced whole.
	pairs []replacement
}

type replacement struct{ old, new string }

func newRedactor(secrets ...string) redactor {
	var r []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		r = append(r, s, url.PathEscape(s), url.QueryEscape(s))
	}
	slices.SortFunc(r, func(a, b string) int { return len(b) - len(a) })
	var out redactor
	for _, s := range slices.Compact(r) {
		out.pairs = append(out.pairs, replacement{s, "REDACTED"})
	}
	return out
}

// withURL returns r that also shows the secret URL u, in the forms
// net/http quotes it, as nextstep.ShownURL.
func (r redactor) withURL(u string) redactor {
	if u == "" {
		return r
	}
	shown := nextstep.ShownURL(u)
	forms := []string{u}
	var parts []string // in case the URL is quoted in yet another form
	if pu, err := url.Parse(u); err == nil {
		forms = append(forms, pu.String(), pu.Redacted())
		if len(pu.Path) > 1 {
			parts = append(parts, pu.Path, pu.EscapedPath())
		}
		if pu.RawQuery != "" {
			parts = append(parts, pu.RawQuery)
		}
		if pu.User != nil {
			parts = append(parts, pu.User.String())
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	var out redactor
	for _, f := range slices.Compact(forms) {
		out.pairs = append(out.pairs, replacement{f, shown})
	}
	out.pairs = append(out.pairs, newRedactor(parts...).pairs...)
	out.pairs = append(out.pairs, r.pairs...)
	return out
}

func (r redactor) apply(s string) string {
	for _, p := range r.pairs {
		s = strings.ReplaceAll(s, p.old, p.new)
	}
	return s
}

// transportError turns a failed round trip into a DeliveryError without the
// URL's secrets (net/http errors quote the whole URL), its next step first
// (nextstep: the wrong scheme, nothing listening, …).
func (r redactor) transportError(err error, next nextstep.Target) error {
	de := &DeliveryError{Msg: r.apply(err.Error())}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		de.Err, de.Msg = context.DeadlineExceeded, "timed out"
	case errors.Is(err, context.Canceled):
		de.Err, de.Msg = context.Canceled, "canceled"
	}
	var ue *url.Error
	if de.Err == nil && errors.As(err, &ue) && ue.Timeout() {
		de.Err, de.Msg = context.DeadlineExceeded, "timed out"
	}
	if de.Err == nil {
		if step := next.For(err); step != "" {
			de.Msg = step + ": " + de.Msg
		}
		de.Permanent = nextstep.Lasting(err)
	}
	return de
}

// httpPoster is what the HTTP senders share: a client, the secrets to keep
// out of errors, and the clock for Retry-After dates.
type httpPoster struct {
	hc     *http.Client
	redact redactor
	// target says what to do when the service cannot be reached.
	target nextstep.Target
	now    func() time.Time
	// limit, when set, bounds an answer: a longer one is an error rather
	// than cut at maxResponse (the Telegram control's getUpdates, whose
	// answers are large and must be read whole).
	limit int64
}

type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (p *httpPoster) postJSON(ctx context.Context, u string, v any, headers map[string]string) (*httpAnswer, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, &DeliveryError{Permanent: true, Msg: p.redact.apply(err.Error())}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "riskguard")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, p.redact.transportError(err, p.target)
	}
	defer resp.Body.Close()
	limit := int64(maxResponse)
	if p.limit > 0 {
		limit = p.limit + 1
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, p.redact.transportError(err, p.target)
	}
	if p.limit > 0 && int64(len(data)) > p.limit {
		return nil, &DeliveryError{Status: resp.StatusCode, Msg: fmt.Sprintf("answer longer than %d bytes; not read", p.limit), Err: ErrAnswerTooLarge}
	}
	return &httpAnswer{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// statusError classifies a non-2xx answer: 429 carries the Retry-After hint,
// 408, 429 and 5xx are worth retrying, other statuses are permanent.
func (p *httpPoster) statusError(a *httpAnswer, hint time.Duration) error {
	if hint == 0 {
		hint = retryAfterHeader(a.header.Get("Retry-After"), p.now())
	}
	msg := p.redact.apply(snippet(a.body, http.StatusText(a.status)))
	if a.status == http.StatusBadRequest {
		// A TLS server's plain-text answer to an http:// request.
		if step := p.target.ForText(msg); step != "" {
			msg = step + ": " + msg
		}
	}
	return &DeliveryError{
		Status:     a.status,
		RetryAfter: hint,
		Permanent:  a.status != http.StatusTooManyRequests && a.status != http.StatusRequestTimeout && a.status < 500,
		Msg:        msg,
	}
}

// snippet is the start of an answer's body for an error message.
func snippet(body []byte, fallback string) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return fallback
	}
	return truncate(s, 200)
}

// retryAfterHeader reads a Retry-After header: seconds (Discord sends
// fractions) or an HTTP date.
func retryAfterHeader(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return secondsDuration(f)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func secondsDuration(f float64) time.Duration {
	if f <= 0 || f != f {
		return 0
	}
	f = min(f, 24*3600)
	return time.Duration(f * float64(time.Second))
}

// truncate cuts s to n characters, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
