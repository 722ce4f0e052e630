package web_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/web"
)

// A server of several accounts routes every read and control call by
// ?account=NAME, refuses a missing or unknown name with the list, and is
// healthy only when every account is.
func TestAccountsRouting(t *testing.T) {
	t.Parallel()
	fresh, stale := &fakeGuard{last: t0.Add(-time.Second)}, &fakeGuard{last: t0.Add(-time.Minute)}
	ca, cb := &fakeControls{}, &fakeControls{}
	srv, err := web.New(web.Options{
		Accounts: []web.Account{{Name: "main", Guard: fresh, Controls: ca}, {Name: "bot-2", Guard: stale, Controls: cb}},
		Metrics:  http.NotFoundHandler(), Token: testToken, HealthMaxAge: 10 * time.Second, Now: func() time.Time { return t0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv}
	tests := []struct {
		name, method, target, token, body string
		code                              int
		want                              string
	}{
		{"status of one", "GET", "/api/v1/status?account=main", "", "", 200, `"healthy": true`},
		{"status of the stale one", "GET", "/api/v1/status?account=bot-2", "", "", 200, `"healthy": false`},
		{"status without a name", "GET", "/api/v1/status", "", "", 400, "several accounts: name one with ?account=NAME (the CLI's --account): main, bot-2"},
		{"unknown name", "GET", "/api/v1/pauses?account=bot3", "", "", 404, `no account \"bot3\": the accounts are main, bot-2`},
		{"the list", "GET", "/api/v1/accounts", "", "", 200, `"name": "bot-2"`},
		{"pause one", "POST", "/api/v1/pause?account=bot-2", testToken, `{"createdBy":"alice"}`, 201, `"id": "p1"`},
		{"pause without a name", "POST", "/api/v1/pause", testToken, `{"createdBy":"alice"}`, 400, "?account=NAME"},
		{"healthz", "GET", "/healthz", "", "", 503, "account main: ok: last complete snapshot 1s ago\naccount bot-2: unhealthy: last complete snapshot 1m0s ago\n"},
	}
	for _, tt := range tests {
		rec := e.do(t, tt.method, tt.target, loopback, tt.token, tt.body)
		if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("%s: %s %s = %d %s, want %d with %q", tt.name, tt.method, tt.target, rec.Code, rec.Body.String(), tt.code, tt.want)
		}
	}
	if len(ca.calls) != 0 || len(cb.calls) != 1 || cb.calls[0].method != "Pause" {
		t.Errorf("calls: main %+v, bot-2 %+v; want one Pause on bot-2", ca.calls, cb.calls)
	}
}

// roleCluster is a Cluster in a fixed role.
type roleCluster struct{ role string }

func (c roleCluster) ClusterStatus() web.ClusterStatus {
	return web.ClusterStatus{Account: "main", Role: c.role, Host: "b", Leader: "a", LeaderAddress: "node1:9464"}
}

// Under ha, a standby answers a control call 421 with where the leader is;
// the leader, and a leader handing the account over (which still writes it
// to etcd for the next leader), take it.
func TestControlByRole(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		role  string
		code  int
		calls int
	}{
		{"standby", http.StatusMisdirectedRequest, 0},
		{"handing-over", http.StatusCreated, 1},
		{"leader", http.StatusCreated, 1},
	} {
		c := &fakeControls{}
		srv, err := web.New(web.Options{
			Accounts: []web.Account{{Name: "main", Guard: &fakeGuard{last: t0}, Controls: c, Cluster: roleCluster{tt.role}}},
			Metrics:  http.NotFoundHandler(), Token: testToken, HealthMaxAge: 10 * time.Second, Now: func() time.Time { return t0 },
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := (&env{srv: srv}).do(t, "POST", "/api/v1/pause?account=main", loopback, testToken, `{"createdBy":"alice"}`)
		if rec.Code != tt.code || len(c.calls) != tt.calls {
			t.Errorf("%s: pause = %d %s with %d calls, want %d with %d", tt.role, rec.Code, rec.Body.String(), len(c.calls), tt.code, tt.calls)
		}
		if tt.code == http.StatusMisdirectedRequest && !strings.Contains(rec.Body.String(), "node1:9464") {
			t.Errorf("%s: the 421 does not say where the leader is: %s", tt.role, rec.Body.String())
		}
	}
}
