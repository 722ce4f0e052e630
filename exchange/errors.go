package exchange

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNoCredentials is returned by a private (signed) call on a client built
// without an API key and secret.
var ErrNoCredentials = errors.New("exchange: private call needs an API key and secret")

// ErrPageLimit is returned by ClosedOrdersAll when the listing has more pages
// than the caller allowed.
var ErrPageLimit = errors.New("page limit reached")

// APIError is a failure the exchange reported in the envelope (spec 7):
// success:false, or a non-2xx status with a JSON envelope. Code, Field and
// Message are the envelope's error, errorField and errorMessage.
type APIError struct {
	Status  int
	Code    string
	Field   string
	Message string
	Method  string
	Route   string // path template, e.g. /v1/contracts/positions/{symbol}/settings
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: status %d", e.Method, e.Route, e.Status)
	if e.Code != "" {
		b.WriteString(": ")
		b.WriteString(e.Code)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %q)", e.Field)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(snippet([]byte(e.Message)))
	}
	return b.String()
}

// RateLimitError is returned when the exchange still answers 429 after the
// retry budget is spent. RetryAfter is the delay the exchange last asked for
// (zero when it named none); APIError is its last answer.
type RateLimitError struct {
	RetryAfter time.Duration
	APIError   *APIError
}

func (e *RateLimitError) Error() string {
	msg := "rate limited"
	if e.RetryAfter > 0 {
		msg += ", retry after " + e.RetryAfter.String()
	}
	if e.APIError != nil {
		msg += ": " + e.APIError.Error()
	}
	return msg
}

// Unwrap lets errors.As find the *APIError of the last answer.
func (e *RateLimitError) Unwrap() error {
	if e.APIError == nil {
		return nil
	}
	return e.APIError
}

// ResponseError is an answer that is not a usable envelope: not JSON (an HTML
// 502 page from a proxy), truncated, empty, without "success", or whose data
// does not decode into the expected type. Snippet is at most 200 bytes of the
// body, whitespace collapsed.
type ResponseError struct {
	Status  int
	Method  string
	Route   string
	Snippet string
	Err     error
}

func (e *ResponseError) Error() string {
	msg := fmt.Sprintf("%s %s: status %d: invalid response: %v", e.Method, e.Route, e.Status, e.Err)
	if e.Snippet != "" {
		msg += fmt.Sprintf(": body %q", e.Snippet)
	}
	return msg
}

func (e *ResponseError) Unwrap() error { return e.Err }

// FieldError is a required field missing (absent or null) from a decoded
// object. Type is the object, e.g. "position"; Field is its JSON name, dotted
// for nested objects ("riskLimit.maxLeverage").
type FieldError struct {
	Type  string
	Field string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: missing required field %q", e.Type, e.Field)
}

// maxSnippet bounds the body excerpt kept in a ResponseError.
const maxSnippet = 200

// snippet returns at most maxSnippet bytes of b as valid UTF-8 with runs of
// white space collapsed, so an HTML error page reads on one line.
func snippet(b []byte) string {
	if len(b) > 4*maxSnippet {
		b = b[:4*maxSnippet]
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if len(s) <= maxSnippet {
		return s
	}
	cut := maxSnippet - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// sanitizeURL renders u without credentials: user information and the values
// of query parameters whose names look like keys, secrets, tokens or
// signatures are replaced by REDACTED (after go-github's sanitizeURL).
func sanitizeURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		c.User = url.User("REDACTED")
	}
	if c.RawQuery != "" {
		q, err := url.ParseQuery(c.RawQuery)
		if err != nil {
			c.RawQuery = "REDACTED"
		} else {
			for name := range q {
				if credentialName(name) {
					q[name] = []string{"REDACTED"}
				}
			}
			c.RawQuery = q.Encode()
		}
	}
	return c.String()
}

// sanitizeRawURL is sanitizeURL for a URL held as text.
func sanitizeRawURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparsable URL]"
	}
	return sanitizeURL(u)
}

func credentialName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"key", "secret", "token", "signature", "sig", "password", "passwd", "auth", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// sanitizeTransportError rewrites the URL of a *url.Error so that no
// credential travels in the error text.
func sanitizeTransportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: sanitizeRawURL(ue.URL), Err: ue.Err}
	}
	return err
}

// PartialError is an answer some items of which could not be decoded. The
// method that returns it returns the good items too: one bad item never
// blinds the caller to the rest.
type PartialError struct {
	// What is the listing: "positions", "index prices", "symbols".
	What  string
	Items []ItemError
}

// ItemError is one item that could not be decoded: its identity where it
// could be read (a position's id and symbol id, an index's name, a
// symbol's id), and why.
type ItemError struct {
	ID       string
	SymbolID int64
	Err      error
}

func (e *PartialError) Error() string {
	parts := make([]string, 0, len(e.Items))
	for _, it := range e.Items {
		id := it.ID
		if id == "" {
			id = "an item without an id"
		}
		parts = append(parts, fmt.Sprintf("%s: %v", id, it.Err))
	}
	return fmt.Sprintf("%s: %d unreadable: %s", e.What, len(e.Items), strings.Join(parts, "; "))
}
