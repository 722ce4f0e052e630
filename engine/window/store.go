package window

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// HistoryReader can read an index's past prices (GET
// /v1/market/indexes/{name}); the store warms the windows over indexPrice
// from it, so that a restart does not blind a velocity rule. The history
// is stamped with the exchange's clock: ClockOffset is that clock's
// measured offset from ours (exchange minus local, as signing uses it), so
// the window asks for the span that ends at the exchange's now and places
// each row at our time.
type HistoryReader interface {
	IndexHistory(ctx context.Context, name string, q url.Values) ([][]decimal.Decimal, error)
	ClockOffset() time.Duration
}

// Bounds of one warm-up read: pages of warmPageSize rows (the most the
// exchange serves), at most maxWarmPages of them per index and window:
// 100,000 rows, a 24h window (the longest allowed) at one sample a second.
// Denser history is read from where those pages reach the window's end,
// since the recent past is what a rule reads first.
const (
	warmPageSize = 5000
	maxWarmPages = 20
)

// layout is the rule set's windowed terms, deduplicated, and their rings:
// one ring per series and span, and position (or one for the account),
// which every term over that series and span reads (rate and
// timeToLiquidation over liquidationDistance for a minute share one).
type layout struct {
	specs []rules.Window
	// byRule maps each rule's j-th window (Env.SetWindow) to a spec.
	byRule [][]int
	// position and account list the specs of each kind.
	position, account []int
	// ring is each spec's ring; rings has one of the specs of each ring
	// (its series and span), ringKeys their keys; posRings and
	// acctRings list the rings of each kind.
	ring                []int
	rings               []int
	ringKeys            []string
	posRings, acctRings []int
	// needAccount: some rule reads the account (or is an account rule).
	needAccount bool
}

// ringKey identifies the samples a term reads: its series and span.
func ringKey(w rules.Window) string { return w.Series + "," + w.Span.String() }

func newLayout(set *rules.Set) *layout {
	ws := &layout{}
	at := map[string]int{}
	ringAt := map[string]int{}
	ws.byRule = make([][]int, len(set.Rules))
	for ri, r := range set.Rules {
		if r.ReadsAccount() || r.Account() {
			ws.needAccount = true
		}
		for _, a := range r.Actions {
			if a.ReadsAccount() {
				ws.needAccount = true
			}
		}
		for _, w := range r.Windows() {
			g, ok := at[w.Key()]
			if !ok {
				g = len(ws.specs)
				at[w.Key()] = g
				ws.specs = append(ws.specs, w)
				if w.Account() {
					ws.account = append(ws.account, g)
					ws.needAccount = true
				} else {
					ws.position = append(ws.position, g)
				}
				k, ok := ringAt[ringKey(w)]
				if !ok {
					k = len(ws.rings)
					ringAt[ringKey(w)] = k
					ws.rings, ws.ringKeys = append(ws.rings, g), append(ws.ringKeys, ringKey(w))
					if w.Account() {
						ws.acctRings = append(ws.acctRings, k)
					} else {
						ws.posRings = append(ws.posRings, k)
					}
				}
				ws.ring = append(ws.ring, k)
			}
			ws.byRule[ri] = append(ws.byRule[ri], g)
		}
	}
	return ws
}

// Series is the rings of one position, or of the account. Its zero value
// is empty; it follows the layout in force the next time it is sampled (a
// term kept by a reload keeps its samples, and so does a series and span
// another term still reads).
type Series struct {
	of    *layout
	rings []*ring
}

// follow aligns the rings with ws.
func (s *Series) follow(ws *layout) {
	if s.of == ws {
		return
	}
	if len(s.rings) > 0 && s.of != nil {
		byKey := make(map[string]*ring, len(s.rings))
		for k, r := range s.rings {
			if k < len(s.of.ringKeys) && r != nil {
				byKey[s.of.ringKeys[k]] = r
			}
		}
		out := make([]*ring, len(ws.rings))
		for k, key := range ws.ringKeys {
			out[k] = byKey[key]
		}
		s.rings = out
	}
	if len(s.rings) < len(ws.rings) {
		s.rings = append(s.rings, make([]*ring, len(ws.rings)-len(s.rings))...)
	}
	s.of = ws
}

// values are the values of the specs for one position (or the account) at
// one tick.
type values struct {
	v   []float64
	why []string
}

func (wv *values) reset(n int) {
	if cap(wv.v) < n {
		wv.v, wv.why = make([]float64, n), make([]string, n)
	}
	wv.v, wv.why = wv.v[:n], wv.why[:n]
}

// Store is the windows of the rule set in force: its layout, the account's
// series, the values of the tick's position and account, and the index
// history read to warm new rings. It is owned by the tick.
type Store struct {
	ws       *layout
	interval time.Duration
	hist     HistoryReader
	log      *slog.Logger
	account  Series
	pos      values
	acct     values
	// cur is each ring's reading, of the kind sampled last.
	cur []reading
	// history caches the tick's index history reads that warm new rings.
	history map[string]indexHistory
}

// indexHistory is one read of an index's history, its rows at our time.
type indexHistory struct {
	at   time.Time
	rows []point
}

// point is one row of an index's history.
type point struct {
	t time.Time
	v float64
}

// NewStore lays out set's windows for ticks every interval; hist (nil for
// none) warms the indexPrice windows. A nil logger discards.
func NewStore(set *rules.Set, interval time.Duration, hist HistoryReader, logger *slog.Logger) *Store {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Store{ws: newLayout(set), interval: interval, hist: hist, log: logger, history: make(map[string]indexHistory)}
}

// Bind lays out a new rule set's windows: each series follows it when next
// sampled.
func (s *Store) Bind(set *rules.Set) { s.ws = newLayout(set) }

// NeedAccount reports whether some rule reads the account.
func (s *Store) NeedAccount() bool { return s.ws.needAccount }

// Positional reports whether some rule has a window over a position's
// series.
func (s *Store) Positional() bool { return len(s.ws.position) > 0 }

// Windowed reports whether rule ri has windowed terms.
func (s *Store) Windowed(ri int) bool { return ri < len(s.ws.byRule) && len(s.ws.byRule[ri]) > 0 }

// Begin starts a tick: no value is known yet.
func (s *Store) Begin() {
	s.pos.reset(len(s.ws.specs))
	s.acct.reset(len(s.ws.specs))
}

// SampleAccount pushes the account's current values (env) into its series
// and computes its terms.
func (s *Store) SampleAccount(ctx context.Context, now time.Time, env *rules.Env) {
	if len(s.ws.account) > 0 {
		s.sample(ctx, now, env, s.ws.acctRings, s.ws.account, &s.account, "", &s.acct)
	}
}

// SamplePosition pushes a position's current values (env) into its series
// and computes its terms; index names the index that prices it, whose
// history warms a new indexPrice ring.
func (s *Store) SamplePosition(ctx context.Context, now time.Time, ser *Series, env *rules.Env, index string) {
	s.sample(ctx, now, env, s.ws.posRings, s.ws.position, ser, index, &s.pos)
}

// sample pushes env's current value of each ring's series in ks into the
// series ser (creating rings as needed), then computes every spec's value
// in gs from its ring. A series without a value now is not pushed, and its
// terms have none.
func (s *Store) sample(ctx context.Context, now time.Time, env *rules.Env, ks, gs []int, ser *Series, index string, out *values) {
	ser.follow(s.ws)
	if len(s.cur) < len(s.ws.rings) {
		s.cur = make([]reading, len(s.ws.rings))
	}
	for _, k := range ks {
		w := s.ws.specs[s.ws.rings[k]]
		v, ok := w.Read(env)
		s.cur[k] = reading{v, ok}
		if !ok {
			continue
		}
		r := ser.rings[k]
		if r == nil {
			r = newRing(w.Span, s.interval)
			if w.Series == "indexPrice" && index != "" {
				s.warm(ctx, now, r, index)
			}
			ser.rings[k] = r
		}
		r.push(now, v)
	}
	for _, g := range gs {
		k := s.ws.ring[g]
		if c := s.cur[k]; c.ok {
			out.v[g], out.why[g] = ser.rings[k].value(s.ws.specs[g].Fn, now, c.v)
		} else {
			out.v[g], out.why[g] = 0, whyNoValue
		}
	}
}

// reading is a series' value now; ok is false without one.
type reading struct {
	v  float64
	ok bool
}

// Fill sets rule ri's windowed terms in env from the tick's values: the
// position's last sampled and the account's.
func (s *Store) Fill(ri int, env *rules.Env) { s.fill(ri, env, &s.pos) }

// FillAccount sets an account rule's windowed terms in env.
func (s *Store) FillAccount(ri int, env *rules.Env) { s.fill(ri, env, &s.acct) }

func (s *Store) fill(ri int, env *rules.Env, pos *values) {
	for j, g := range s.ws.byRule[ri] {
		src := pos
		if s.ws.specs[g].Account() {
			src = &s.acct
		}
		env.SetWindow(j, src.v[g], src.why[g])
	}
}

// warm fills a new indexPrice ring with the index's history over its span,
// read once per index name, span and tick.
func (s *Store) warm(ctx context.Context, now time.Time, r *ring, index string) {
	if s.hist == nil {
		return
	}
	key := index + " " + r.span.String()
	hist, ok := s.history[key]
	if !ok || !hist.at.Equal(now) {
		rows, pages, err := s.readHistory(ctx, index, now, r.span)
		if err != nil {
			s.log.Warn("index history not read in full: its windows start with the rows read", "index", index,
				"window", r.span.String(), "rows", len(rows), "pages", pages, "err", err)
		}
		hist = indexHistory{at: now, rows: rows}
		if len(s.history) > 256 {
			clear(s.history) // one tick's reads are all it is for
		}
		s.history[key] = hist
	}
	for _, p := range hist.rows {
		if p.t.Before(now.Add(-r.span)) || !p.t.Before(now) {
			continue
		}
		r.push(p.t, p.v)
	}
}

// Sample is one price of an index's history, at our time.
type Sample struct {
	At    time.Time
	Price float64
}

// IndexHistory reads the index's prices over the span that ends at now,
// oldest first, as the windows' warm-up reads them (the exchange's clock
// placed at ours, at most maxWarmPages pages): the stress grid's
// volatility starts from them. Without a history reader it reads nothing
// and says so (ErrNoHistory).
func (s *Store) IndexHistory(ctx context.Context, index string, now time.Time, span time.Duration) ([]Sample, error) {
	if s.hist == nil {
		return nil, ErrNoHistory
	}
	rows, _, err := s.readHistory(ctx, index, now, span)
	out := make([]Sample, len(rows))
	for i, r := range rows {
		out[i] = Sample{At: r.t, Price: r.v}
	}
	return out, err
}

// ErrNoHistory is IndexHistory's answer when the reader cannot read an
// index's history (a replay's, or an adapter without the call).
var ErrNoHistory = errors.New("no index history reader")

// readHistory reads the index's history over the span that ends at now,
// by the exchange's clock, paging forward; the rows come back at our time,
// oldest first. It reads at most maxWarmPages pages: when the first shows
// the history too dense for them to reach the end, it skips ahead so that
// they cover the window's most recent part.
func (s *Store) readHistory(ctx context.Context, index string, now time.Time, span time.Duration) ([]point, int, error) {
	off := s.hist.ClockOffset()
	next, end := now.Add(off-span).UnixMilli(), now.Add(off).UnixMilli()
	var out []point
	var skipped error
	last := int64(-1) << 62
	for page := range maxWarmPages {
		q := url.Values{}
		q.Set("from", strconv.FormatInt(next, 10))
		q.Set("to", strconv.FormatInt(end, 10))
		q.Set("limit", strconv.Itoa(warmPageSize))
		rows, err := s.hist.IndexHistory(ctx, index, q)
		if err != nil {
			return out, page, err
		}
		first, seen := int64(0), false
		for _, row := range rows {
			if len(row) < 2 {
				continue
			}
			ms := row[0].IntPart()
			if ms <= last || ms < next || ms > end {
				continue // out of order or outside what was asked: not trusted
			}
			if !seen {
				first, seen = ms, true
			}
			last = ms
			out = append(out, point{t: time.UnixMilli(ms).Add(-off), v: row[1].InexactFloat64()})
		}
		if len(rows) < warmPageSize || last >= end {
			return out, page + 1, skipped
		}
		if !seen {
			return out, page + 1, fmt.Errorf("index history %s: a full page without a row in order inside the window", index)
		}
		next = last + 1
		if page == 0 && last > first {
			// A page covers last−first; the pages left must reach end.
			perPage := last - first
			if skip := end - int64(maxWarmPages-1)*perPage; skip > next {
				next = skip
				skipped = fmt.Errorf("index history %s: %d pages of %d rows reach back %s, less than the %s window: its start was skipped",
					index, maxWarmPages, warmPageSize, time.Duration(int64(maxWarmPages)*perPage)*time.Millisecond, span)
			}
		}
	}
	return out, maxWarmPages, fmt.Errorf("index history %s: more than %d pages of %d rows for a %s window", index, maxWarmPages, warmPageSize, span)
}
