package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// spreadAccounts are the accounts of TestHASpreadAccounts.
var spreadAccounts = []string{"acc1", "acc2", "acc3"}

// roles reads, from each process's /api/v1/status?account=NAME, which
// accounts it leads; a process that does not answer leads none.
func spreadRoles(t *testing.T, procs []*haProc) map[*haProc][]string {
	t.Helper()
	out := map[*haProc][]string{}
	for _, p := range procs {
		for _, a := range spreadAccounts {
			code, body := api(t, p.addr, "GET", "/api/v1/status?account="+a, "", nil)
			if code != 200 {
				continue
			}
			var st struct{ HA struct{ Role string } }
			if json.Unmarshal([]byte(body), &st) == nil && st.HA.Role == "leader" {
				out[p] = append(out[p], a)
			}
		}
	}
	return out
}

// spreadEven reports whether every account has exactly one leader among
// procs and each leads at most max.
func spreadEven(roles map[*haProc][]string, procs []*haProc, most int) bool {
	led := map[string]int{}
	for _, p := range procs {
		if len(roles[p]) > most {
			return false
		}
		for _, a := range roles[p] {
			led[a]++
		}
	}
	for _, a := range spreadAccounts {
		if led[a] != 1 {
			return false
		}
	}
	return true
}

// The real binary: three processes guarding three accounts lead one
// each; kill -9 one, and the two left lead all three (two and one); start
// it again, and it gets one back.
func TestHASpreadAccounts(t *testing.T) {
	// Not parallel, like the other HA daemon tests: three binaries.
	h := newHAEnv(t, 1)
	var accts strings.Builder
	for _, a := range spreadAccounts {
		k, s := ownCredFiles(t, h.dir, a)
		fmt.Fprintf(&accts, "  - name: %s\n    exchange: {api_key_file: %s, api_secret_file: %s}\n", a, k, s)
	}
	body := fmt.Sprintf("exchange:\n  base_url: http://127.0.0.1:1\nengine:\n  interval: %s\n  listen: 127.0.0.1:0\nha:\n  etcd:\n    endpoints: [%s]\n  lease_ttl: %s\n  prefix: /rg-test/\naccounts:\n%srules:\n%s",
		haInterval, h.etcd.Endpoints[0], haTTL, accts.String(), haRules)
	if err := os.WriteFile(h.config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := []*haProc{h.start("p1", 0), h.start("p2", 0), h.start("p3", 0)}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("%s's log:\n%s", p.name, p.logs.String())
			}
		}
	})
	var roles map[*haProc][]string
	show := func() string {
		var b strings.Builder
		for _, p := range procs {
			fmt.Fprintf(&b, "%s: %v; ", p.name, roles[p])
		}
		return b.String()
	}
	start := time.Now()
	waitFor(t, "one account each", 20*time.Second, func() bool { roles = spreadRoles(t, procs); return spreadEven(roles, procs, 1) })
	t.Logf("one account each %s after the start: %s", time.Since(start).Round(time.Millisecond), show())

	dead := procs[2]
	dead.kill()
	killed := time.Now()
	live := procs[:2]
	waitFor(t, "the two left lead the three accounts", 4*haTTL, func() bool { roles = spreadRoles(t, live); return spreadEven(roles, live, 2) })
	t.Logf("after kill -9 of %s, %s later: %s", dead.name, time.Since(killed).Round(time.Millisecond), show())

	dead.exited = make(chan struct{})
	dead.launch(h.front(dead.name))
	back := time.Now()
	waitFor(t, "one account each again", 6*haTTL, func() bool { roles = spreadRoles(t, procs); return spreadEven(roles, procs, 1) })
	t.Logf("%s back, %s later: %s", dead.name, time.Since(back).Round(time.Millisecond), show())
}
