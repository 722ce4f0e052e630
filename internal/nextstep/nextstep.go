// Package nextstep turns a failure to reach a service over HTTP into the
// next step to take: the one place that reads a transport or HTTP failure
// (nothing listening, a host that does not resolve, the wrong scheme either
// way, an untrusted certificate, a refused credential) for every caller that
// reaches something — the exchange client's users (run, check), the control
// commands (status, ack, pause, …) and the notification channels. The
// caller says what it was reaching and where its address and credentials
// come from; the step names them. The raw error always follows the step.
package nextstep

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// Target is what a caller was reaching, in the words its reader knows.
type Target struct {
	// Name is what it is called in a sentence: "the exchange", "the
	// riskguard daemon", "channel pager".
	Name string
	// Setting is where its address is written: "exchange.base_url",
	// "--exchange", "--addr", "notify.channels.pager.url".
	Setting string
	// URL is the address tried; its scheme tells a reset connection to an
	// http:// address (likely a TLS server) from any other. Only its scheme
	// and host are ever shown.
	URL string
	// Start is the step when nothing listens at the address, after
	// "nothing listens at ADDRESS: "; "" says "check SETTING".
	Start string
	// Credentials is the step when the service refuses the credentials
	// (HTTP 401 or 403): where they come from.
	Credentials string
	// Timeout is added to the step of a timeout ("or raise
	// exchange.timeout"); "" adds nothing.
	Timeout string
}

// Error is a failure with its next step: the step, then the raw error.
type Error struct {
	// Next is the step.
	Next string
	// Err is the failure as it came.
	Err error
}

func (e *Error) Error() string { return e.Next + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Wrap returns err with its next step before it, or err itself when there
// is no step better than the error or it already carries one.
func (t Target) Wrap(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	next := t.For(err)
	if next == "" {
		return err
	}
	return &Error{Next: next, Err: err}
}

// For returns the next step for err, "" when there is none better than
// the error itself.
func (t Target) For(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Next
	}
	k := kindOf(err)
	if k == none {
		k = kindOfText(err.Error())
	}
	return t.withScheme(err.Error()).step(k)
}

// ForText is For on an error known only by its text (a log line's err).
func (t Target) ForText(s string) string {
	if s == "" {
		return ""
	}
	return t.withScheme(s).step(kindOfText(s))
}

// withScheme is t with the URL an error quotes (net/http's `Get
// "http://…"`) when t names none: a logger shared by every call knows the
// address only from the error.
func (t Target) withScheme(text string) Target {
	if t.URL == "" {
		if _, rest, ok := strings.Cut(text, `"http://`); ok {
			h, _, _ := strings.Cut(rest, "/")
			t.URL = "http://" + strings.TrimSuffix(h, `"`)
		}
	}
	return t
}

// ForStatus is the step for an HTTP answer with status code, "" for a
// status with none (only 401 and 403 have one).
func (t Target) ForStatus(code int) string {
	switch code {
	case 401, 403:
		return t.step(refusedCredentials)
	}
	return ""
}

// Lasting reports whether err is a failure that trying again will not
// change: the wrong scheme either way, or a certificate that does not
// verify. A sender gives up on it at once.
func Lasting(err error) bool {
	if err == nil {
		return false
	}
	k := kindOf(err)
	if k == none {
		k = kindOfText(err.Error())
	}
	return k == plainAnswersTLS || k == tlsAnswersPlain || k == untrustedCert
}

type kind int

const (
	none kind = iota
	nothingListens
	noSuchHost
	plainAnswersTLS    // an https:// address served plain HTTP
	tlsAnswersPlain    // an http:// address served TLS
	resetOnPlain       // an http:// address closed the connection: a TLS server, likely
	untrustedCert      // the certificate does not verify
	timedOut           // no answer in time
	refusedCredentials // 401 or 403
)

// kindOf reads the failure's types: the errors net/http, net and
// crypto/tls return.
func kindOf(err error) kind {
	var dns *net.DNSError
	var rh tls.RecordHeaderError
	var unknownAuth x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return nothingListens
	case errors.As(err, &dns) && dns.IsNotFound:
		return noSuchHost
	case errors.As(err, &rh):
		return plainAnswersTLS
	case errors.As(err, &unknownAuth), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return untrustedCert
	}
	return none
}

// kindOfText reads the failure's text, for errors that crossed a string
// (a log attribute, a delivery error's message) and for the answers that
// are no error type: a TLS server's plain-text 400 to an HTTP request.
func kindOfText(s string) kind {
	switch {
	case strings.Contains(s, "connection refused"):
		return nothingListens
	case strings.Contains(s, "no such host"):
		return noSuchHost
	case strings.Contains(s, "server gave HTTP response to HTTPS client"),
		strings.Contains(s, "first record does not look like a TLS handshake"):
		return plainAnswersTLS
	case strings.Contains(s, "HTTP request to an HTTPS server"), strings.Contains(s, "malformed HTTP response"):
		return tlsAnswersPlain
	case strings.Contains(s, "certificate"):
		return untrustedCert
	case strings.Contains(s, "no complete answer within"), strings.Contains(s, "i/o timeout"),
		strings.Contains(s, "Client.Timeout exceeded"), strings.Contains(s, "timed out"):
		return timedOut
	case strings.Contains(s, "status 401"), strings.Contains(s, "status 403"),
		strings.Contains(s, "401 Unauthorized"), strings.Contains(s, "403 Forbidden"):
		return refusedCredentials
	case strings.Contains(s, "connection reset by peer"):
		return resetOnPlain
	}
	return none
}

func (t Target) step(k kind) string {
	setting := t.Setting
	switch k {
	case nothingListens:
		start := t.Start
		if start == "" {
			start = "check " + setting
		}
		return "nothing listens at " + t.where() + ": " + start
	case noSuchHost:
		return "the host of " + setting + " does not resolve: check it and the DNS"
	case plainAnswersTLS:
		return t.Name + " answers plain HTTP at that address: write http:// in " + setting + " (or put TLS in front of it)"
	case tlsAnswersPlain:
		return t.Name + " answers HTTPS at that address: write https:// in " + setting
	case resetOnPlain:
		if !strings.HasPrefix(strings.ToLower(t.URL), "http://") {
			return ""
		}
		return t.Name + " closed the connection to an http:// address: if it serves HTTPS there, write https:// in " + setting
	case untrustedCert:
		return t.Name + "'s TLS certificate is not trusted: check " + setting
	case timedOut:
		s := t.Name + " is slow or unreachable: check the network"
		if t.Timeout != "" {
			s += ", or " + t.Timeout
		}
		return s
	case refusedCredentials:
		if t.Credentials == "" {
			return ""
		}
		return t.Name + " refused the credentials: " + t.Credentials
	}
	return ""
}

// where is the setting, and the host and port of the URL when it has one
// (never its path, query or user: they may hold a secret).
func (t Target) where() string {
	h := host(t.URL)
	if h == "" || h == t.Setting {
		return t.Setting
	}
	return t.Setting + " (" + h + ")"
}

// host is the host and port of address (a URL or host:port), "" when it
// has none.
func host(address string) string {
	if !strings.Contains(address, "://") {
		return address
	}
	u, err := url.Parse(address)
	if err != nil {
		return ""
	}
	return u.Host
}

// ShownURL is address with what may be secret left out: the scheme, host
// and port are kept, a path, query, fragment or user become "/REDACTED"
// (https://hooks.example.org:8443/REDACTED). An address that does not
// parse is "REDACTED" whole.
func ShownURL(address string) string {
	u, err := url.Parse(address)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "REDACTED"
	}
	s := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		s += "/REDACTED"
	}
	return s
}
