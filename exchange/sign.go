package exchange

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed request (spec 5). Transport treats them
// case-insensitively; the signed text writes them in upper case.
const (
	HeaderKey              = "API-KEY"
	HeaderSignatureMethod  = "API-SIGNATURE-METHOD"
	HeaderSignatureVersion = "API-SIGNATURE-VERSION"
	HeaderTimestamp        = "API-TIMESTAMP"
	HeaderSignature        = "API-Signature"

	// SignatureMethod and SignatureVersion are the fixed header values.
	SignatureMethod  = "HmacSHA256"
	SignatureVersion = "1"
)

// SigningInput is everything a signature depends on. Time is an input, never
// read from a clock, so a signature is reproducible.
type SigningInput struct {
	Method string // GET or POST
	Host   string // host name; a port, if present, is dropped
	Path   string // starts with /v1/, no query string
	// RawQuery is the query string as sent (may be percent-encoded); its
	// pairs are decoded and sorted for the signed text.
	RawQuery  string
	Body      []byte // exactly as sent; nil for none
	Key       string
	Timestamp time.Time
}

// TimestampMillis is the value of the API-TIMESTAMP header for t.
func TimestampMillis(t time.Time) string {
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// CanonicalText builds the signed content of spec 5: method, host, path,
// sorted query pairs, the four sorted API headers and the body, joined by
// newlines.
func CanonicalText(in SigningInput) string {
	var b strings.Builder
	b.WriteString(strings.ToUpper(in.Method))
	b.WriteByte('\n')
	b.WriteString(hostWithoutPort(in.Host))
	b.WriteByte('\n')
	b.WriteString(in.Path)
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(in.RawQuery))
	b.WriteByte('\n')
	// Already in ascending string order.
	b.WriteString(HeaderKey + ": " + in.Key + "\n")
	b.WriteString(HeaderSignatureMethod + ": " + SignatureMethod + "\n")
	b.WriteString(HeaderSignatureVersion + ": " + SignatureVersion + "\n")
	b.WriteString(HeaderTimestamp + ": " + TimestampMillis(in.Timestamp) + "\n")
	b.Write(in.Body)
	return b.String()
}

// Sign returns the lowercase hex HMAC-SHA256 of the canonical text keyed with
// secret.
func Sign(secret string, in SigningInput) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(CanonicalText(in)))
	return hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature reports whether sig is the signature of in under secret,
// in constant time.
func VerifySignature(secret string, in SigningInput, sig string) bool {
	want := Sign(secret, in)
	return hmac.Equal([]byte(want), []byte(strings.ToLower(sig)))
}

// canonicalQuery decodes the pairs of a raw query and returns them as
// name=value strings, values unencoded, sorted ascending and joined by &.
// A pair that does not decode is kept as sent.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, "&")
	pairs := make([]string, 0, len(parts))
	for _, p := range parts {
		if p == "" {
			continue
		}
		name, value, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if v, err := url.QueryUnescape(value); err == nil {
			value = v
		}
		pairs = append(pairs, name+"="+value)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func hostWithoutPort(host string) string {
	if h, _, ok := strings.Cut(host, ":"); ok && !strings.Contains(h, "[") {
		return h
	}
	if strings.HasPrefix(host, "[") {
		if i := strings.Index(host, "]"); i > 0 {
			return host[1:i]
		}
	}
	return host
}
