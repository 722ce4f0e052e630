package web_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/shopspring/decimal"
)

// readableLayout is what readableJS measures.
type readableLayout struct {
	Ready bool
	// Broken are the words of the tables' headers and cells that the
	// layout broke across lines.
	Broken []string
	// Tops of the liquidation banner, the firing position's card or row,
	// the health line and the account block, in CSS pixels from the top.
	LiqTop, FiringTop, GuardTop, AccountTop float64
	Margin, Banner                          string
	InnerWidth, ScrollWidth                 float64
}

// readableJS waits (10 s at most) for the page to show its positions and
// the liquidation banner, then reads every word of the tables' headers
// and cells: one that the layout put on two lines is broken inside.
const readableJS = `new Promise(done=>{
  const until=Date.now()+10000;
  const top=e=>e?e.getBoundingClientRect().top+scrollY:-1;
  (function look(){
    const rows=document.querySelectorAll("#positions tbody tr[data-symbol]");
    const liq=document.querySelector("#liquidations .liq");
    if(rows.length<3||!liq){if(Date.now()<until){setTimeout(look,50);return}done({ready:false});return}
    const broken=[];
    for(const sel of ["#positions","#actions","#control"]){
      const w=document.createTreeWalker(document.querySelector(sel),NodeFilter.SHOW_TEXT);
      for(let n;(n=w.nextNode());){
        const re=/\S+/g;
        for(let m;(m=re.exec(n.data));){
          const r=document.createRange();r.setStart(n,m.index);r.setEnd(n,m.index+m[0].length);
          const lines=new Set([...r.getClientRects()].filter(x=>x.width>0).map(x=>Math.round(x.top)));
          if(lines.size>1)broken.push(sel+": "+m[0]);
        }
      }
    }
    const xsol=document.querySelector('#positions tr[data-symbol="XSOL"]');
    done({ready:true,broken,liqTop:top(liq),firingTop:top(document.querySelector('#positions tr[data-symbol="XETH"]')),
      guardTop:top(document.getElementById("guard")),accountTop:top(document.getElementById("account")),
      margin:xsol.children[4].textContent,banner:liq.textContent,innerWidth,scrollWidth:document.documentElement.scrollWidth});
  })();
})`

// The status page reads well on a desk and on a phone (issue 40, item 6),
// rendered by Chromium at 1280×900 and 390×844: no header or value is
// broken inside a word (the predicted effect wraps between words), money
// is rounded to the symbol's quote scale, and on the phone the
// liquidation banner comes first, then the firing position, then the
// rest (health, account, stress); the banner names what the liquidation
// cost.
func TestStatusPageReadsWell(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	st := demoStatus(t0)
	dec := decimal.RequireFromString
	st.Positions[2].Margin, st.Positions[2].QuoteScale = dec("4053.33333333"), 3
	st.Positions[1].Rules[0].Next = "lower_leverage 20→10 skipped: it would move the liquidation price closer (3,172.00 → 3,101.20) " +
		"and the rule does not allow it (allow_closer_liquidation); notified; cooling down until 09:28:13 UTC"
	st.Liquidations = []engine.LiquidationStatus{{Time: t0.Add(-time.Minute), Symbol: "XLTC", Side: "LONG", Quantity: dec("50"),
		LiquidationPrice: dec("61.25"), Index: dec("61.1"), Margin: dec("612.5"), Loss: "its margin 612.50 (isolated)"}}
	st.Actions = append(st.Actions, journal.RecentAction{Time: t0.Add(-50 * time.Second), Symbol: "XETH", Action: "set_isolated",
		Rules: []string{"watch-xeth"}, Outcome: "sent",
		Effect: "liquidation price 3,172.00 → 3,301.55, margin moved 1,216.00 from the pool, free balance after 16,757.33; expected loss 84.30 → 61.20 within ±3σ",
		Actual: "liquidation price 3,301.50"})
	e.guard.status = st
	hs := httptest.NewServer(e.srv)
	defer hs.Close()
	for _, tc := range []struct {
		name  string
		vp    viewport
		phone bool
	}{
		{"desktop 1280x900", viewport{Width: 1280, Height: 900}, false},
		{"phone 390x844", viewport{Width: 390, Height: 844, Mobile: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got readableLayout
			measure(t, hs.URL+"/", tc.vp, readableJS, &got)
			if !got.Ready {
				t.Fatal("the page did not render its positions and the banner within 10 s")
			}
			if len(got.Broken) > 0 {
				t.Errorf("words broken across lines: %q", got.Broken)
			}
			if got.ScrollWidth > got.InnerWidth {
				t.Errorf("the document is %.0f px wide in a %.0f px window", got.ScrollWidth, got.InnerWidth)
			}
			if !strings.HasSuffix(got.Margin, "isolated 4,053.333") {
				t.Errorf("XSOL's margin reads %q, want isolated 4,053.333 (quote scale 3)", got.Margin)
			}
			if !strings.Contains(got.Banner, "lost its margin 612.50 (isolated)") {
				t.Errorf("the banner does not name the loss: %q", got.Banner)
			}
			if !tc.phone {
				return
			}
			t.Logf("banner at %.0f px, firing XETH at %.0f, health at %.0f, account at %.0f", got.LiqTop, got.FiringTop, got.GuardTop, got.AccountTop)
			if !(got.LiqTop < got.FiringTop && got.FiringTop < got.GuardTop && got.FiringTop < got.AccountTop) {
				t.Errorf("on a phone the order is not banner, firing position, the rest: banner %.0f, firing %.0f, health %.0f, account %.0f",
					got.LiqTop, got.FiringTop, got.GuardTop, got.AccountTop)
			}
			if got.FiringTop > 844/2 {
				t.Errorf("the firing position starts at %.0f px of an 844 px screen, want in its top half", got.FiringTop)
			}
		})
	}
}
