package web_test

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
)

// hostile is text from the exchange or the config that tries to be HTML.
const hostile = `<img src=x onerror="document.title='pwned'">`

// The page as a trader reads it first, rendered by Chromium: the account
// line; the positions closest to liquidation first (one without an index
// price, no data, before them); each position's active rules, the inactive
// ones folded; the last actions without the notify rows unless asked
// (#notify=1), those from before a restart marked; and every string from
// outside escaped.
func TestStatusPageLayoutInChromium(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	st := demoStatus(t0)
	equity, free, ratio := 23253.0, 17973.33, 0.4125
	st.Account = &engine.AccountStatus{Equity: &equity, FreeBalance: &free, MarginRatio: &ratio}
	st.Positions = append(st.Positions, engine.PositionStatus{Symbol: hostile, ID: "1_104", Side: "LONG", MarginMode: "isolated",
		Rules: []engine.RuleStatus{{Rule: hostile, State: "nodata"}}})
	st.Actions = append(st.Actions,
		journal.RecentAction{Time: t0.Add(-2 * time.Hour), Symbol: "XSOL", Action: "cancel_orders", Rules: []string{"near-liquidation"},
			Outcome: "error", Error: "status 500: " + hostile, Restored: true},
		journal.RecentAction{Time: t0.Add(-3 * time.Hour), Symbol: "XSOL", Action: "notify", Rules: []string{"near-liquidation"}, Outcome: "sent", Restored: true})
	e.guard.status = st
	hs := httptest.NewServer(e.srv)
	defer hs.Close()

	dom := chromium(t, hs.URL+"/", "--virtual-time-budget=5000", "--dump-dom")
	if strings.Contains(dom, `<div id="err">cannot`) {
		t.Fatalf("the page could not read the API:\n%s", dom)
	}
	// Closest to liquidation first: the unknown, XETH 5.52%, XSOL 8.97%, XBTC 49%.
	var order []string
	for _, m := range regexp.MustCompile(`<tr data-symbol="([^"]*)"`).FindAllStringSubmatch(dom, -1) {
		if !strings.Contains(m[1], "esc(") { // not the script's own text
			order = append(order, m[1])
		}
	}
	if got, want := strings.Join(order, " | "), `&lt;img src=x onerror=&quot;document.title='pwned'&quot;&gt; | XETH | XSOL | XBTC`; got != want {
		t.Errorf("positions in the order %s, want %s", got, want)
	}
	for _, want := range []string{
		`id="equity">23,253.00</b>`, `id="free">17,973.33</b>`, `id="marginratio" class="">41.3%</b>`, `model fit: <span id="modelfit">n/a</span>`,
		// XETH's firing rule is shown; its inactive one and XBTC's two are folded.
		`<div class="rule" data-rule="watch-xeth" data-state="firing">`,
		`<details class="inactive-rules"><summary>1 inactive</summary><div class="rule" data-rule="over-max-leverage" data-state="inactive">`,
		`<details class="inactive-rules"><summary>2 inactive</summary>`,
		`data-action="lower_leverage"`, `<tr class="action restored" data-action="cancel_orders">`, "before the restart",
		`id="notifycount">(2)</span>`,
		`status 500: &lt;img src=x onerror="document.title='pwned'"&gt;`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	if strings.Contains(dom, `data-action="notify"`) {
		t.Error("notify rows are shown by default")
	}
	// Times in UTC, money and prices with thousands separators, a firing
	// rule's next step, and the distance coloured by the rules' own
	// thresholds: XETH at 5.52% is under watch-xeth's critical 6% (red),
	// XSOL's rules name no distance (grey), whatever 5%/10% would say.
	rowOf := func(symbol string) string {
		return regexp.MustCompile(`<tr data-symbol="` + symbol + `".*?</tr>`).FindString(dom)
	}
	for _, c := range []struct{ row, want string }{
		{rowOf("XBTC"), `>64,911.9</td>`},
		{rowOf("XBTC"), `>33,101</td>`},
		{rowOf("XBTC"), `>cross 5,136</td>`},
		{rowOf("XETH"), `<div class="next">next: notified; cooling down until 09:28:13 UTC</div>`},
		{rowOf("XETH"), `since 2025-03-14 09:26:13 UTC (40s)`},
		{rowOf("XETH"), `background:#c0392b`},
		{rowOf("XSOL"), `background:#7f8c8d`},
		{dom, `<span class="nw">2025-03-14 09:26:13 UTC</span>`},
		{dom, `id="updated">updated 09:26:53 UTC</small>`},
		// The stress grid's loss at each move, folded, its text escaped.
		{dom, `<details id="stressmoves"><summary>loss at each move (σ XBTC 2.00%, XETH 2.00%, XSOL 2.00%)</summary>`},
		{dom, `<td class="num" data-label="move">-2σ</td><td data-label="together">3,253.33 (XSOL LONG)</td><td data-label="worst alone">XSOL: 3,253.33 (XSOL LONG)</td>`},
		{dom, `<td class="num" data-label="move">-1σ</td><td data-label="together">0</td><td data-label="worst alone">0</td>`},
		{dom, `<td data-label="together">2,310.00 (XETH SHORT &lt;b&gt;)</td><td data-label="worst alone">XETH &lt;i&gt;: 2,310.00 (XETH SHORT &lt;b&gt;)</td>`},
		// The stress grid (issue 31), its text escaped.
		{dom, `<span id="stress"><b>expected loss 84.30</b> <span class="bad">within ±3σ: +5.40% (+2.7σ, every index together) liquidates XETH SHORT &lt;b&gt;</span></span>`},
	} {
		if !strings.Contains(c.row, c.want) {
			t.Errorf("the rendered page lacks %s in %s", c.want, c.row)
		}
	}
	if strings.Contains(dom, "<img") || strings.Contains(dom, "pwned</title>") {
		t.Error("a string from outside became HTML")
	}
	if regexp.MustCompile(`<div class="rule" data-rule="(watch-xeth|over-max-leverage)" data-state="inactive">[^<]*<span[^>]*>inactive</span></div></td>`).MatchString(dom) {
		t.Error("an inactive rule is shown outside the fold")
	}

	// #notify=1: the notify rows too.
	dom = chromium(t, hs.URL+"/#notify=1", "--virtual-time-budget=5000", "--dump-dom")
	if n := strings.Count(dom, `data-action="notify"`); n != 2 {
		t.Errorf("#notify=1 shows %d notify rows, want 2", n)
	}
}
