package web_test

import (
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/engine"
)

// box is an element's place on the page, in CSS pixels from the
// document's left and top.
type box struct {
	Left, Right, Top, Bottom, Height float64
}

// pageLayout is what layoutJS measures of the status page.
type pageLayout struct {
	Ready       bool
	InnerWidth  float64
	ScrollWidth float64
	TheadShown  bool
	Rows        []struct {
		Symbol string
		Row    box
		// Cells are the row's cells in the order of the table's columns:
		// symbol, side, size, leverage, margin, index, liquidation,
		// distance, rules.
		Cells []box
	}
}

// layoutJS waits (10 s at most) for the page to show n positions and
// measures it.
func layoutJS(n int) string {
	return `new Promise(done=>{
  const until=Date.now()+10000;
  const box=e=>{const b=e.getBoundingClientRect();return {left:b.left+scrollX,right:b.right+scrollX,top:b.top+scrollY,bottom:b.bottom+scrollY,height:b.height}};
  (function look(){
    const rows=[...document.querySelectorAll("#positions tbody tr[data-symbol]")];
    if(rows.length<` + strconv.Itoa(n) + `){if(Date.now()<until){setTimeout(look,50);return}done({ready:false});return}
    done({ready:true,innerWidth,scrollWidth:document.documentElement.scrollWidth,
      theadShown:getComputedStyle(document.querySelector("#positions thead")).display!=="none",
      rows:rows.map(tr=>({symbol:tr.dataset.symbol,row:box(tr),cells:[...tr.children].map(box)}))});
  })();
})`
}

// Column indexes of the positions table.
const (
	colSymbol, colSide, colLiquidation, colDistance = 0, 1, 6, 7
)

// The status page on a phone (issue 32, item 13), rendered by Chromium
// with a phone's 390×844 viewport: the document never scrolls sideways,
// and each position is a card whose symbol, side, distance and
// liquidation price are within the screen's width and come before its
// other figures. At 1280×900 it is still the table, one line a position,
// and nothing overflows either. The stress grid's loss at each move is
// open (#stress=1) and within the width too. The demo's positions, a hostile one and a
// dry run (its banner on top).
func TestStatusPageOnAPhone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	st := demoStatus(t0)
	st.DryRun = true
	st.Positions = append(st.Positions, engine.PositionStatus{Symbol: hostile, ID: "1_104", Side: "LONG", MarginMode: "isolated",
		Rules:      []engine.RuleStatus{{Rule: hostile, State: "firing", Next: "held: " + hostile + strings.Repeat("x", 80)}},
		Thresholds: []engine.DistanceThreshold{}})
	e.guard.status = st
	hs := httptest.NewServer(e.srv)
	defer hs.Close()

	for _, tc := range []struct {
		name  string
		vp    viewport
		phone bool
	}{
		{"phone 390x844", viewport{Width: 390, Height: 844, Mobile: true}, true},
		{"desktop 1280x900", viewport{Width: 1280, Height: 900}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got pageLayout
			measure(t, hs.URL+"/#stress=1", tc.vp, layoutJS(len(st.Positions)), &got) // the stress grid's moves open
			if !got.Ready {
				t.Fatal("the page did not render its positions within 10 s")
			}
			if got.InnerWidth != float64(tc.vp.Width) {
				t.Errorf("window %.0f px wide, want %d", got.InnerWidth, tc.vp.Width)
			}
			if got.ScrollWidth > got.InnerWidth {
				t.Errorf("the document is %.0f px wide in a %.0f px window: it scrolls sideways", got.ScrollWidth, got.InnerWidth)
			}
			if got.TheadShown == tc.phone {
				t.Errorf("the positions' header row shown: %t", got.TheadShown)
			}
			for _, r := range got.Rows {
				t.Logf("%.30s: row %.0f px tall", r.Symbol, r.Row.Height)
				if len(r.Cells) != 9 {
					t.Fatalf("%s: %d cells, want 9", r.Symbol, len(r.Cells))
				}
				first := []int{colSymbol, colSide, colDistance, colLiquidation}
				for _, c := range first {
					if b := r.Cells[c]; b.Left < 0 || b.Right > got.InnerWidth+0.5 {
						t.Errorf("%s: cell %d spans %.0f–%.0f px, outside the %.0f px window", r.Symbol, c, b.Left, b.Right, got.InnerWidth)
					}
				}
				if !tc.phone {
					// A row, not a card: every cell on one line. The hostile
					// row is the tallest (a 45-character symbol and rule name,
					// a 130-character next step, wrapped in the rules column
					// that the figures, never broken inside a word, leave:
					// 161 px); a card would be over 250.
					if r.Cells[colSymbol].Top != r.Cells[colLiquidation].Top || r.Row.Height > 200 {
						t.Errorf("%s: not a table row: symbol at %.0f, liquidation at %.0f, %.0f px tall", r.Symbol, r.Cells[colSymbol].Top, r.Cells[colLiquidation].Top, r.Row.Height)
					}
					continue
				}
				// A card: the four first, every other figure below them.
				lastFirst := 0.0
				for _, c := range first {
					lastFirst = max(lastFirst, r.Cells[c].Top)
				}
				for c, b := range r.Cells {
					if b.Height > 0 && !slices.Contains(first, c) && b.Top < lastFirst {
						t.Errorf("%s: cell %d (at %.0f px) comes before the symbol, side, distance and liquidation (down to %.0f px)", r.Symbol, c, b.Top, lastFirst)
					}
				}
			}
		})
	}

	dom := chromium(t, hs.URL+"/", "--virtual-time-budget=5000", "--dump-dom", "--window-size=390,844")
	if b, h1 := strings.Index(dom, `id="dryrunbanner"`), strings.Index(dom, "<h1>"); b < 0 || b > h1 {
		t.Errorf("the dry run's banner is not above the title (at %d, title at %d)", b, h1)
	}
	if strings.Contains(dom, "<img") || strings.Contains(dom, "pwned</title>") {
		t.Error("a string from outside became HTML")
	}
}
