package web

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SignScheme is the Authorization scheme of a control request signed with
// the control token instead of carrying it (a cluster forwarding a
// Telegram command to an account's leader): the token never leaves the
// process that has it, so an address that a value in etcd names — which
// anyone with access to the cluster's prefix may have written — learns
// nothing it can use but the one command, once.
const SignScheme = "RiskguardHMAC"

// signatureWindow is how far a signed request's time may be from the
// server's: a signature older than it is refused, and one seen within it
// is refused again (a replay).
const signatureWindow = 30 * time.Second

// maxSignedBody bounds the body a signed request is checked over, as the
// handlers bound what they decode.
const maxSignedBody = 64 << 10

// SignRequest signs r, whose body is body, with token at now:
// Authorization: RiskguardHMAC t=UNIX,s=HEX, over its method, its path
// with query, the time and the body's SHA-256.
func SignRequest(r *http.Request, body []byte, token string, now time.Time) {
	t := now.Unix()
	r.Header.Set("Authorization", fmt.Sprintf("%s t=%d,s=%s", SignScheme, t, signature(token, r.Method, r.URL.RequestURI(), t, body)))
}

func signature(token, method, uri string, t int64, body []byte) string {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, []byte(token))
	fmt.Fprintf(m, "%s\n%s\n%d\n%x", method, uri, t, sum)
	return hex.EncodeToString(m.Sum(nil))
}

// replays remembers the signatures accepted within the window.
type replays struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// first reports whether sig was not accepted before, and remembers it; the
// ones older than the window are forgotten.
func (rp *replays) first(sig string, now time.Time) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for s, at := range rp.seen {
		if now.Sub(at) > 2*signatureWindow {
			delete(rp.seen, s)
		}
	}
	if _, ok := rp.seen[sig]; ok {
		return false
	}
	if rp.seen == nil {
		rp.seen = map[string]time.Time{}
	}
	rp.seen[sig] = now
	return true
}

// signedOK reports whether r carries a valid signature of the control
// token, fresh and not seen before. Its body is read and put back.
func (s *Server) signedOK(r *http.Request) bool {
	params, ok := strings.CutPrefix(r.Header.Get("Authorization"), SignScheme+" ")
	if !ok {
		return false
	}
	var t int64
	var sig string
	for _, kv := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "t":
			t, _ = strconv.ParseInt(v, 10, 64)
		case "s":
			sig = v
		}
	}
	now := s.now()
	if t == 0 || sig == "" {
		return false
	}
	if d := now.Sub(time.Unix(t, 0)); d > signatureWindow || d < -signatureWindow {
		return false
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxSignedBody+1))
		if err != nil || len(b) > maxSignedBody {
			return false
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	want := signature(s.token, r.Method, r.URL.RequestURI(), t, body)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return false
	}
	return s.replays.first(sig, now)
}
