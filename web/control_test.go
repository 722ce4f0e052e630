package web_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/web"
)

// The mutating endpoints need the token, from loopback too: a wrong or
// missing one is 401 with a challenge, none configured is 403; the
// controls are not called.
func TestControlTokenRequired(t *testing.T) {
	t.Parallel()
	const (
		unauthorized = "{\n  \"error\": \"missing or wrong bearer token (Authorization: Bearer …)\"\n}\n"
		disabled     = "{\n  \"error\": \"the control API is disabled: no control token is configured (set RISKGUARD_CONTROL_TOKEN or engine.control_token_file and restart)\"\n}\n"
	)
	body := `{"createdBy":"mallory","rule":"r","symbol":"XBTC","duration":"1h"}`
	endpoints := []struct{ method, path string }{
		{"POST", "/api/v1/silences"},
		{"DELETE", "/api/v1/silences/x?createdBy=m"},
		{"POST", "/api/v1/pause"},
		{"POST", "/api/v1/resume"},
		{"POST", "/api/v1/ack"},
		{"POST", "/api/v1/liquidations/ack"},
	}
	for _, ep := range endpoints {
		for _, tc := range []struct {
			name, configured, token, header string
			code                            int
			want                            string
		}{
			{"wrong token", testToken, "guess", "", 401, unauthorized},
			{"no token", testToken, "", "", 401, unauthorized},
			{"not a bearer token", testToken, "", "Basic " + testToken, 401, unauthorized},
			{"empty bearer token", testToken, "", "Bearer ", 401, unauthorized},
			{"token with a suffix", testToken, testToken + "x", "", 401, unauthorized},
			{"lower-case scheme", testToken, "", "bearer " + testToken, 401, unauthorized},
			{"none configured", "", testToken, "", 403, disabled},
			{"none configured, none sent", "", "", "", 403, disabled},
		} {
			e := newEnv(t, tc.configured)
			for _, from := range []string{loopback, remote} {
				auth := tc.header
				if tc.token != "" {
					auth = "Bearer " + tc.token
				}
				rec := e.request(t, ep.method, ep.path, from, auth, body)
				if rec.Code != tc.code || rec.Body.String() != tc.want {
					t.Errorf("%s %s, %s, from %s: %d %q, want %d %q", ep.method, ep.path, tc.name, from, rec.Code, rec.Body, tc.code, tc.want)
				}
				wantChallenge := ""
				if tc.code == 401 {
					wantChallenge = `Bearer realm="riskguard"`
				}
				if got := rec.Header().Get("WWW-Authenticate"); got != wantChallenge {
					t.Errorf("%s %s, %s: WWW-Authenticate = %q, want %q", ep.method, ep.path, tc.name, got, wantChallenge)
				}
				for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"} {
					if got := rec.Header().Get(k); got != want {
						t.Errorf("%s %s, %s: %s = %q, want %q", ep.method, ep.path, tc.name, k, got, want)
					}
				}
			}
			if calls := e.controls.recorded(); len(calls) != 0 {
				t.Errorf("%s %s, %s: a refused call reached the controls: %+v", ep.method, ep.path, tc.name, calls)
			}
		}
	}
}

// A control request is JSON of at most 64 KiB, without unknown fields,
// with an author and a positive duration; anything else is 400 before
// the controls are called.
func TestControlBadRequests(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/api/v1/silences", "/api/v1/pause", "/api/v1/resume", "/api/v1/ack"} {
		for _, tc := range []struct {
			name, body, want string
		}{
			{"no author", `{}`, "createdBy is required: who makes the change (the CLI's --by)"},
			{"a blank author", `{"createdBy":"  "}`, "createdBy is required: who makes the change (the CLI's --by)"},
			{"an unknown field", `{"createdBy":"x","bogus":1}`, `bad request body: json: unknown field "bogus"`},
			{"not JSON", `not json`, "bad request body: invalid character 'o' in literal null (expecting 'u')"},
			{"no body", ``, "bad request body: EOF"},
			{"a negative duration", `{"createdBy":"x","duration":"-1h"}`, `duration "-1h": want a positive Go duration like 90m or 2h`},
			{"a zero duration", `{"createdBy":"x","duration":"0s"}`, `duration "0s": want a positive Go duration like 90m or 2h`},
			{"a duration in words", `{"createdBy":"x","duration":"soon"}`, `duration "soon": want a positive Go duration like 90m or 2h`},
			{"a duration over 90 days", `{"createdBy":"x","duration":"2161h"}`, `duration "2161h": at most 2160h0m0s (90 days)`},
			{"over 64 KiB", `{"createdBy":"x","comment":"` + strings.Repeat("a", 64<<10) + `"}`, "bad request body: unexpected EOF"},
		} {
			e := newEnv(t, testToken)
			rec := e.do(t, "POST", path, loopback, testToken, tc.body)
			want := fmt.Sprintf("{\n  \"error\": %q\n}\n", tc.want)
			if rec.Code != 400 || rec.Body.String() != want {
				t.Errorf("POST %s with %s: %d %s, want 400 %s", path, tc.name, rec.Code, rec.Body, want)
			}
			if calls := e.controls.recorded(); len(calls) != 0 {
				t.Errorf("POST %s with %s reached the controls: %+v", path, tc.name, calls)
			}
		}
	}
}

// Each control endpoint calls the controls with the request's fields and
// the server's clock, and maps their answer and errors to a status.
func TestControlEndpoints(t *testing.T) {
	t.Parallel()
	starts := t0.Add(time.Hour)
	notFound := fmt.Errorf("silence s9: %w", control.ErrNotFound)
	for _, tc := range []struct {
		name, method, path, body string
		err                      error
		code                     int
		want                     string
		call                     call
	}{
		{"silence for a duration", "POST", "/api/v1/silences",
			`{"rule":"xbtc-near","symbol":"XBTC","severity":"critical","duration":"90m","comment":"known","createdBy":"dave@desk"}`, nil, 201,
			`{
  "id": "s1",
  "rule": "xbtc-near",
  "symbol": "XBTC",
  "severity": "critical",
  "startsAt": "2025-03-14T09:26:53Z",
  "endsAt": "2025-03-14T10:56:53Z",
  "comment": "known",
  "createdBy": "dave@desk",
  "createdAt": "2025-03-14T09:26:53Z"
}
`, call{"AddSilence", t0, []any{control.Silence{Rule: "xbtc-near", Symbol: "XBTC", Severity: "critical", EndsAt: t0.Add(90 * time.Minute), Comment: "known", CreatedBy: "dave@desk"}}}},
		{"silence from a start for a duration", "POST", "/api/v1/silences",
			`{"severity":"info","startsAt":"2025-03-14T10:26:53Z","duration":"2h","createdBy":"d"}`, nil, 201, "",
			call{"AddSilence", t0, []any{control.Silence{Severity: "info", StartsAt: starts, EndsAt: starts.Add(2 * time.Hour), CreatedBy: "d"}}}},
		{"silence between two times", "POST", "/api/v1/silences",
			`{"rule":"r","startsAt":"2025-03-14T10:26:53Z","endsAt":"2025-03-14T11:26:53Z","createdBy":"d"}`, nil, 201, "",
			call{"AddSilence", t0, []any{control.Silence{Rule: "r", StartsAt: starts, EndsAt: starts.Add(time.Hour), CreatedBy: "d"}}}},
		{"silence refused", "POST", "/api/v1/silences", `{"createdBy":"d","duration":"1h"}`,
			errors.New("a silence needs a matcher: rule, symbol or severity"), 400,
			"{\n  \"error\": \"a silence needs a matcher: rule, symbol or severity\"\n}\n",
			call{"AddSilence", t0, []any{control.Silence{EndsAt: t0.Add(time.Hour), CreatedBy: "d"}}}},

		{"expire", "DELETE", "/api/v1/silences/s9?createdBy=erin%40desk", "", nil, 200, "{\n  \"expired\": \"s9\"\n}\n",
			call{"ExpireSilence", t0, []any{"s9", "erin@desk"}}},
		{"expire an unknown silence", "DELETE", "/api/v1/silences/s9?createdBy=erin", "", notFound, 404,
			"{\n  \"error\": \"silence s9: not found\"\n}\n", call{"ExpireSilence", t0, []any{"s9", "erin"}}},
		{"expire refused", "DELETE", "/api/v1/silences/s9?createdBy=erin", "", errors.New("state file: disk full"), 400,
			"{\n  \"error\": \"state file: disk full\"\n}\n", call{"ExpireSilence", t0, []any{"s9", "erin"}}},
		{"expire without an author", "DELETE", "/api/v1/silences/s9?createdBy=+", "", nil, 400,
			"{\n  \"error\": \"createdBy is required (a query parameter): who expires the silence\"\n}\n", call{}},

		{"pause everything", "POST", "/api/v1/pause", `{"createdBy":"alice@desk","comment":"maintenance"}`, nil, 201,
			"{\n  \"id\": \"p1\",\n  \"startsAt\": \"2025-03-14T09:26:53Z\",\n  \"comment\": \"maintenance\",\n  \"createdBy\": \"alice@desk\"\n}\n",
			call{"Pause", t0, []any{control.Pause{Comment: "maintenance", CreatedBy: "alice@desk"}}}},
		{"pause a rule for a duration", "POST", "/api/v1/pause", `{"rule":"near-liquidation","symbol":"XBTC","duration":"4s","createdBy":"carol@desk"}`, nil, 201, "",
			call{"Pause", t0, []any{control.Pause{Rule: "near-liquidation", Symbol: "XBTC", EndsAt: t0.Add(4 * time.Second), CreatedBy: "carol@desk"}}}},
		{"pause of a symbol not open yet", "POST", "/api/v1/pause", `{"symbol":"XNEW","allowUnknown":true,"createdBy":"carol@desk"}`, nil, 201, "",
			call{"Pause", t0, []any{control.Pause{Symbol: "XNEW", AllowUnknown: true, CreatedBy: "carol@desk"}}}},
		{"pause refused", "POST", "/api/v1/pause", `{"createdBy":"c","endsAt":"2025-03-14T08:00:00Z"}`, errors.New("the pause would end before it starts"), 400,
			"{\n  \"error\": \"the pause would end before it starts\"\n}\n",
			call{"Pause", t0, []any{control.Pause{EndsAt: time.Date(2025, 3, 14, 8, 0, 0, 0, time.UTC), CreatedBy: "c"}}}},

		{"resume", "POST", "/api/v1/resume", `{"symbol":"XBTC","createdBy":"bob@desk"}`, nil, 200,
			"{\n  \"resumed\": [\n    {\n      \"id\": \"p1\",\n      \"symbol\": \"XBTC\",\n      \"startsAt\": \"2025-03-14T08:26:53Z\",\n      \"createdBy\": \"grace@desk\"\n    }\n  ]\n}\n",
			call{"Resume", t0, []any{"", "XBTC", "bob@desk"}}},
		{"resume without a pause", "POST", "/api/v1/resume", `{"createdBy":"bob@desk"}`, fmt.Errorf("no pause of everything: %w", control.ErrNotFound), 404,
			"{\n  \"error\": \"no pause of everything: not found\"\n}\n", call{"Resume", t0, []any{"", "", "bob@desk"}}},

		{"ack", "POST", "/api/v1/ack", `{"rule":"xbtc-near","symbol":"XBTC","comment":"on it","createdBy":"frank@desk"}`, nil, 201,
			`{
  "id": "a1",
  "rule": "xbtc-near",
  "symbol": "XBTC",
  "startsAt": "2025-03-14T09:26:53Z",
  "ack": true,
  "comment": "on it",
  "createdBy": "frank@desk",
  "createdAt": "2025-03-14T09:26:53Z"
}
`, call{"Ack", t0, []any{"xbtc-near", "XBTC", "frank@desk", "on it", time.Time{}}}},
		{"ack for a duration", "POST", "/api/v1/ack", `{"rule":"r","symbol":"XBTC","duration":"30m","createdBy":"f"}`, nil, 201, "",
			call{"Ack", t0, []any{"r", "XBTC", "f", "", t0.Add(30 * time.Minute)}}},
		{"ack of an inactive alert", "POST", "/api/v1/ack", `{"rule":"r","symbol":"XBTC","createdBy":"x"}`,
			fmt.Errorf("%w: rule r on XBTC is inactive", control.ErrNotActive), 409,
			"{\n  \"error\": \"alert not active: rule r on XBTC is inactive\"\n}\n", call{"Ack", t0, []any{"r", "XBTC", "x", "", time.Time{}}}},
		{"ack of an unknown rule", "POST", "/api/v1/ack", `{"rule":"r2","symbol":"XBTC","createdBy":"x"}`,
			fmt.Errorf("%w rule \"r2\" (%w)", control.ErrUnknownName, control.ErrNotActive), 400,
			"{\n  \"error\": \"unknown rule \\\"r2\\\" (alert not active)\"\n}\n", call{"Ack", t0, []any{"r2", "XBTC", "x", "", time.Time{}}}},
		{"ack refused", "POST", "/api/v1/ack", `{"rule":"r","createdBy":"x"}`, errors.New("an acknowledgement names a rule and a symbol"), 400,
			"{\n  \"error\": \"an acknowledgement names a rule and a symbol\"\n}\n", call{"Ack", t0, []any{"r", "", "x", "", time.Time{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, testToken)
			e.controls.err = tc.err
			rec := e.do(t, tc.method, tc.path, remote, testToken, tc.body)
			if rec.Code != tc.code || tc.want != "" && rec.Body.String() != tc.want {
				t.Errorf("%s %s = %d\n%s\nwant %d\n%s", tc.method, tc.path, rec.Code, rec.Body, tc.code, tc.want)
			}
			for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			var want []call
			if tc.call.method != "" {
				want = []call{tc.call}
			}
			if got := e.controls.recorded(); !reflect.DeepEqual(got, want) {
				t.Errorf("calls = %+v\nwant %+v", got, want)
			}
		})
	}
}

// A liquidation the status keeps marked is acknowledged with the token and
// an author; one the guard does not keep is 404.
func TestLiquidationAcknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	e.guard.liquidated = map[string]bool{"XSOL": true}
	auth := "Bearer " + testToken
	if rec := e.request(t, "POST", "/api/v1/liquidations/ack", loopback, auth, `{"symbol":"XBTC","createdBy":"ops"}`); rec.Code != 404 ||
		!strings.Contains(rec.Body.String(), "no liquidation to acknowledge of XBTC") {
		t.Errorf("unknown symbol: %d %s", rec.Code, rec.Body)
	}
	if rec := e.request(t, "POST", "/api/v1/liquidations/ack", loopback, auth, `{"symbol":"XSOL","createdBy":"ops"}`); rec.Code != 200 ||
		rec.Body.String() != "{\n  \"acknowledged\": 1\n}\n" || len(e.guard.ackedBy) != 1 || e.guard.ackedBy[0] != "ops" {
		t.Errorf("XSOL: %d %q, acked by %v", rec.Code, rec.Body, e.guard.ackedBy)
	}
}

// A control request signed with the token (web.SignScheme: how a cluster
// forwards a Telegram command, never sending the token) is taken when its
// signature, time and body match, and once (issue 32, item 1).
func TestSignedControlRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testToken)
	body := `{"createdBy":"telegram","duration":"1h"}`
	signed := func(token string, at time.Time, send string) *http.Request {
		req := httptest.NewRequest("POST", "/api/v1/pause", strings.NewReader(send))
		req.RemoteAddr, req.Host = remote, "127.0.0.1:9464"
		web.SignRequest(req, []byte(body), token, at)
		return req
	}
	serve := func(req *http.Request) int {
		rec := httptest.NewRecorder()
		e.srv.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := serve(signed("wrong", t0, body)); code != 401 {
		t.Errorf("signed with another token: %d, want 401", code)
	}
	if code := serve(signed(testToken, t0.Add(-time.Minute), body)); code != 401 {
		t.Errorf("signed a minute ago: %d, want 401", code)
	}
	if code := serve(signed(testToken, t0, `{"createdBy":"mallory","duration":"90d"}`)); code != 401 {
		t.Errorf("the body changed after signing: %d, want 401", code)
	}
	good := signed(testToken, t0, body)
	again := good.Clone(good.Context())
	again.Body = io.NopCloser(strings.NewReader(body))
	if code := serve(good); code != 201 {
		t.Errorf("signed with the token: %d, want 201", code)
	}
	if code := serve(again); code != 401 {
		t.Errorf("the same signed request again: %d, want 401 (a replay)", code)
	}
	if strings.Contains(good.Header.Get("Authorization"), testToken) {
		t.Errorf("the signed request carries the token: %q", good.Header.Get("Authorization"))
	}
}
