package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"
)

// smtpServer is a small SMTP server on 127.0.0.1 that speaks enough of the
// protocol for net/smtp: EHLO, STARTTLS, AUTH PLAIN, MAIL, RCPT, DATA, QUIT.
type smtpServer struct {
	addr     string
	tls      *tls.Config // offer STARTTLS when set
	user     string      // require AUTH PLAIN with user and pass when set
	pass     string
	rcptCode int  // answer RCPT with this code instead of 250
	silent   bool // accept connections and say nothing
	got      chan smtpMail
}

type smtpMail struct {
	from   string
	to     []string
	data   string
	tls    bool
	authed bool
}

func startSMTP(t *testing.T, s *smtpServer) *smtpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.got = make(chan smtpMail, 10)
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		ln.Close()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if s.silent {
					<-done
					return
				}
				s.serve(c)
			}()
		}
	}()
	return s
}

func (s *smtpServer) serve(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	tp := textproto.NewConn(c)
	var m smtpMail
	reply := func(lines ...string) {
		for _, l := range lines {
			_ = tp.PrintfLine("%s", l)
		}
	}
	reply("220 127.0.0.1 ESMTP test")
	for range 100 {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			lines := []string{"250-127.0.0.1 hello"}
			if s.tls != nil && !m.tls {
				lines = append(lines, "250-STARTTLS")
			}
			if s.user != "" {
				lines = append(lines, "250-AUTH PLAIN")
			}
			reply(append(lines, "250 8BITMIME")...)
		case "STARTTLS":
			reply("220 go ahead")
			tc := tls.Server(c, s.tls)
			if tc.Handshake() != nil {
				return
			}
			c, tp, m.tls = tc, textproto.NewConn(tc), true
		case "AUTH":
			mech, b64, _ := strings.Cut(arg, " ")
			raw, _ := base64.StdEncoding.DecodeString(b64)
			if mech != "PLAIN" || string(raw) != "\x00"+s.user+"\x00"+s.pass {
				reply("535 5.7.8 authentication failed")
				continue
			}
			m.authed = true
			reply("235 2.7.0 accepted")
		case "MAIL":
			if s.user != "" && !m.authed {
				reply("530 5.7.0 authentication required")
				continue
			}
			m.from = arg
			reply("250 ok")
		case "RCPT":
			if s.rcptCode != 0 {
				reply(strconv.Itoa(s.rcptCode) + " no")
				continue
			}
			m.to = append(m.to, arg)
			reply("250 ok")
		case "DATA":
			reply("354 go on")
			data, err := io.ReadAll(tp.DotReader())
			if err != nil {
				return
			}
			m.data = string(data)
			reply("250 queued")
			s.got <- m
		case "QUIT":
			reply("221 bye")
			return
		case "RSET", "NOOP":
			reply("250 ok")
		default:
			reply("502 unknown")
		}
	}
}

// testCert is a certificate for 127.0.0.1 and a pool that trusts it.
func testCert(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	return &tls.Config{Certificates: ts.TLS.Certificates}, pool
}

func emailSender(t *testing.T, s *smtpServer, user, pass string, roots *x509.CertPool) *email {
	t.Helper()
	cc := ChannelConfig{Name: "mail", Type: TypeEmail, SMTP: s.addr, From: "guard@example.org", To: []string{"me@example.org", "you@example.org"},
		Username: user, Password: pass}
	var tc *tls.Config
	if roots != nil {
		tc = &tls.Config{RootCAs: roots}
	}
	e, err := newEmail(cc, tc, func() time.Time { return testNow })
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEmailDelivers(t *testing.T) {
	t.Parallel()
	srvTLS, roots := testCert(t)
	tests := []struct {
		name       string
		srv        *smtpServer
		user, pass string
		wantTLS    bool
	}{
		{name: "plain", srv: &smtpServer{}},
		{name: "auth on localhost", srv: &smtpServer{user: "guard", pass: "SECRETpass"}, user: "guard", pass: "SECRETpass"},
		{name: "starttls and auth", srv: &smtpServer{tls: srvTLS, user: "guard", pass: "SECRETpass"}, user: "guard", pass: "SECRETpass", wantTLS: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startSMTP(t, tt.srv)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			m := sampleMessage()
			m.Text = "🛠 lowered XBTCUSDT leverage 20→10\nsecond line"
			if err := emailSender(t, s, tt.user, tt.pass, roots).Send(ctx, m); err != nil {
				t.Fatal(err)
			}
			var got smtpMail
			select {
			case got = <-s.got:
			case <-ctx.Done():
				t.Fatal("no mail received")
			}
			if got.tls != tt.wantTLS || got.authed != (tt.user != "") {
				t.Errorf("tls %v authed %v", got.tls, got.authed)
			}
			if !strings.HasPrefix(got.from, "FROM:<guard@example.org>") || len(got.to) != 2 || got.to[1] != "TO:<you@example.org>" {
				t.Errorf("envelope from %q to %q", got.from, got.to)
			}
			msg, err := mail.ReadMessage(strings.NewReader(got.data))
			if err != nil {
				t.Fatal(err)
			}
			subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
			if err != nil || subject != "🛠 lowered XBTCUSDT leverage 20→10" {
				t.Errorf("subject %q (%v)", subject, err)
			}
			body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
			for _, want := range []string{"🛠 lowered XBTCUSDT leverage 20→10\nsecond line\n\nKind:     action\n", "Rule:     max-leverage", "leverage: 20"} {
				if !strings.Contains(string(body), want) {
					t.Errorf("body %q lacks %q", body, want)
				}
			}
			if msg.Header.Get("Date") != "Fri, 14 Mar 2025 09:26:53 +0000" || msg.Header.Get("To") != "me@example.org, you@example.org" {
				t.Errorf("headers %v", msg.Header)
			}
		})
	}
}

func TestEmailFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		srv        *smtpServer
		user, pass string
		status     int
		perm       bool
		timeout    bool
	}{
		{name: "wrong password", srv: &smtpServer{user: "guard", pass: "right"}, user: "guard", pass: "SECRETwrong", status: 535, perm: true},
		{name: "mailbox busy", srv: &smtpServer{rcptCode: 450}, status: 450},
		{name: "no such user", srv: &smtpServer{rcptCode: 550}, status: 550, perm: true},
		{name: "silent server", srv: &smtpServer{silent: true}, timeout: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startSMTP(t, tt.srv)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if tt.timeout {
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			}
			defer cancel()
			err := emailSender(t, s, tt.user, tt.pass, nil).Send(ctx, sampleMessage())
			var de *DeliveryError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T)", err, err)
			}
			if de.Status != tt.status || de.Permanent != tt.perm || errors.Is(err, context.DeadlineExceeded) != tt.timeout {
				t.Errorf("error %q: status %d permanent %v", err, de.Status, de.Permanent)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q reveals the password", err)
			}
		})
	}
}

func TestEmailRefusesConnection(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	e, err := newEmail(ChannelConfig{SMTP: addr, From: "a@b.c", To: []string{"d@e.f"}}, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	var de *DeliveryError
	if err := e.Send(context.Background(), sampleMessage()); !errors.As(err, &de) || de.Permanent {
		t.Errorf("error %v", err)
	}
}
