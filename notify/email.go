package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/internal/nextstep"
)

// TypeEmail is e-mail over SMTP.
const TypeEmail = "email"

// decodeEmail reads smtp (host:port), from, to (one or more addresses)
// and the optional username and password, which go together.
func decodeEmail(p *parser, path string, m map[string]any, cc *ChannelConfig) {
	p.unknown(path, m, "type", "smtp", "from", "to", "username", "username_env", "password", "password_env")
	if s := p.required(m, path, "smtp", false); s != "" {
		if _, port, err := splitHostPort(s); err != nil || port == "" {
			p.errorf(path+".smtp", "expected host:port, like smtp.example.org:587")
		}
		cc.SMTP = s
	}
	if s := p.required(m, path, "from", false); s != "" {
		if _, err := mail.ParseAddress(s); err != nil {
			p.errorf(path+".from", "not an e-mail address")
		}
		cc.From = s
	}
	if v, ok := m["to"]; ok {
		cc.To = p.list(path+".to", v)
		for _, a := range cc.To {
			if _, err := mail.ParseAddress(a); err != nil {
				p.errorf(path+".to", "%q is not an e-mail address", a)
			}
		}
	}
	if len(cc.To) == 0 {
		p.errorf(path+".to", "required: one or more addresses")
	}
	cc.Username, _ = p.secret(m, path, "username", false)
	cc.Password, _ = p.secret(m, path, "password", true)
	if (cc.Username == "") != (cc.Password == "") {
		p.errorf(path+".password", "username and password go together")
	}
}

// splitHostPort splits an smtp setting into host and port ([::1]:25 too).
func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", errors.New("no port")
	}
	port := s[i+1:]
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", "", errors.New("bad port")
	}
	return strings.Trim(s[:i], "[]"), port, nil
}

// email sends over SMTP: STARTTLS when the server offers it, implicit TLS
// on port 465, PLAIN authentication when credentials are configured (Go's
// net/smtp refuses to send them unencrypted except to localhost).
type email struct {
	addr, host, port string
	from             string
	to               []string
	username         string
	password         string
	tlsConfig        *tls.Config // nil: system roots
	redact           redactor
	// target says what to do when the server cannot be reached.
	target nextstep.Target
	now    func() time.Time
}

func newEmail(cc ChannelConfig, tc *tls.Config, now func() time.Time) (*email, error) {
	host, port, err := splitHostPort(cc.SMTP)
	if err != nil {
		return nil, fmt.Errorf("smtp address: %w", err)
	}
	return &email{
		addr: cc.SMTP, host: host, port: port, from: cc.From, to: cc.To,
		username: cc.Username, password: cc.Password, tlsConfig: tc,
		redact: cc.redactor(), target: cc.target(), now: now,
	}, nil
}

func newEmailSender(cc ChannelConfig, o *options) (Sender, error) {
	return newEmail(cc, o.tlsConfig, o.now)
}

func (e *email) tls() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.tlsConfig != nil {
		c = e.tlsConfig.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = e.host
	}
	return c
}

func (e *email) Send(ctx context.Context, m Message) error {
	if err := e.send(ctx, m); err != nil {
		var ne net.Error
		if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			// The connection's deadline is the context's: either may fire first.
			cerr := ctx.Err()
			if cerr == nil {
				cerr = context.DeadlineExceeded
			}
			return &DeliveryError{Msg: "timed out", Err: cerr}
		}
		var de *DeliveryError
		if errors.As(err, &de) {
			return de
		}
		d := &DeliveryError{Msg: e.redact.apply(err.Error())}
		if step := e.target.For(err); step != "" {
			d.Msg = step + ": " + d.Msg
		}
		var te *textproto.Error
		if errors.As(err, &te) {
			d.Status = te.Code
			d.Permanent = te.Code >= 500
		}
		return d
	}
	return nil
}

func (e *email) send(ctx context.Context, m Message) error {
	var conn net.Conn
	var err error
	nd := &net.Dialer{}
	if e.port == "465" {
		conn, err = (&tls.Dialer{NetDialer: nd, Config: e.tls()}).DialContext(ctx, "tcp", e.addr)
	} else {
		conn, err = nd.DialContext(ctx, "tcp", e.addr)
	}
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	// The SMTP conversation has no context: closing the connection ends it.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("greeting: %w", err)
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("ehlo: %w", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok && e.port != "465" {
		if err := c.StartTLS(e.tls()); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	}
	if e.username != "" {
		if err := c.Auth(smtp.PlainAuth("", e.username, e.password, e.host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(e.from); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	for _, to := range e.to {
		if err := c.Rcpt(to); err != nil {
			return fmt.Errorf("rcpt to: %w", err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if _, err := w.Write(e.compose(m)); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return c.Quit()
}

// compose writes the mail: the text's first line as the subject, then the
// text and the details in a quoted-printable UTF-8 body.
func (e *email) compose(m Message) []byte {
	subject, _, _ := strings.Cut(m.Text, "\n")
	subject = truncate(subject, 120)
	var b bytes.Buffer
	hdr := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	hdr("From", e.from)
	hdr("To", strings.Join(e.to, ", "))
	hdr("Subject", mime.QEncoding.Encode("utf-8", subject))
	t := m.Time
	if t.IsZero() {
		t = e.now()
	}
	hdr("Date", t.Format(time.RFC1123Z))
	hdr("MIME-Version", "1.0")
	hdr("Content-Type", `text/plain; charset="utf-8"`)
	hdr("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(emailBody(m), "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}

// emailBody is the text and then, one per line, what the message is about.
func emailBody(m Message) string {
	var b strings.Builder
	b.WriteString(m.Text)
	b.WriteString("\n\n")
	values := m.Values.Map()
	width := len("Severity:")
	for k := range values {
		width = max(width, len(k)+1)
	}
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%-*s %s\n", width, k+":", v)
		}
	}
	line("Kind", string(m.Kind))
	line("Severity", m.Severity)
	line("Rule", m.Rule)
	line("Symbol", m.Symbol)
	line("Action", m.Action)
	if !m.Time.IsZero() {
		line("Time", m.Time.UTC().Format(time.RFC3339))
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		line(k, formatNumber(values[k]))
	}
	return b.String()
}
