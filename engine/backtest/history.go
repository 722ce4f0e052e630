package backtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// HistoryClient reads an index's history: [time ms, price] pairs, oldest
// first, paged forward with from. *exchange.Client is one.
type HistoryClient interface {
	IndexHistory(ctx context.Context, name string, q url.Values) ([][]decimal.Decimal, error)
}

// HistoryOptions configure FetchHistory and FetchBars.
type HistoryOptions struct {
	// CacheDir holds one file per index and time range; a range fetched
	// once is read from there. Required.
	CacheDir string
	// PageSize is the limit of one request; default 5000 (the most the
	// exchange serves).
	PageSize int
	// Progress, when set, is called after each page with the index (for
	// bars, the symbol), the rows (samples or bars) fetched so far and the
	// time of the last one.
	Progress func(name string, rows int, reached time.Time)
	// BarPrices is what FetchBars makes of a bar: BarClose (the default)
	// or BarOHLC.
	BarPrices BarPrices
}

// maxPages bounds the pages of one index's fetch.
const maxPages = 1_000_000

// FetchHistory fetches the history of each index between from and to (page
// by page, or from the cache) and returns a source that merges them by
// time. Close it when done.
func FetchHistory(ctx context.Context, c HistoryClient, names []string, from, to time.Time, opt HistoryOptions) (*HistorySource, error) {
	list := make([]series, 0, len(names))
	for _, n := range names {
		list = append(list, series{
			name:   n,
			label:  n,
			what:   "fetch history " + n,
			key:    n,
			stride: 1,
			page: func(ctx context.Context, q url.Values) ([][]decimal.Decimal, error) {
				return c.IndexHistory(ctx, n, q)
			},
			decode: decodeSample,
		})
	}
	return openSeries(ctx, "fetch history", list, from, to, opt)
}

// decodeSample reads an index history row: [time ms, price].
func decodeSample(row []decimal.Decimal, dst []sample) ([]sample, error) {
	if len(row) < 2 {
		return dst, fmt.Errorf("a sample has %d fields, want 2", len(row))
	}
	return append(dst, sample{ms: row[0].IntPart(), price: row[1]}), nil
}

// series is one paged history: how a page is fetched, where it is cached
// and what a row means. FetchHistory and FetchBars differ only in these.
type series struct {
	name  string // the index its samples price
	label string // given to Progress: the index, or the symbol of bars
	what  string // the context of its errors
	key   string // names the cache file, with the range
	// stride is added to the last row's time to ask for the next page: 1 ms
	// for samples; a bar's period for bars, as a from inside a bar is
	// answered from that bar on.
	stride int64
	page   func(ctx context.Context, q url.Values) ([][]decimal.Decimal, error)
	// decode appends the samples of a row, whose first field is its time,
	// to dst, in time order and at or after that time.
	decode func(row []decimal.Decimal, dst []sample) ([]sample, error)
}

// openSeries fetches what the cache lacks and opens each series' cache file.
func openSeries(ctx context.Context, what string, list []series, from, to time.Time, opt HistoryOptions) (*HistorySource, error) {
	if opt.CacheDir == "" {
		return nil, fmt.Errorf("%s: a cache directory is required", what)
	}
	if opt.PageSize <= 0 {
		opt.PageSize = 5000
	}
	if err := os.MkdirAll(opt.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	hs := &HistorySource{}
	for _, s := range list {
		path := cachePath(opt.CacheDir, s.key, from, to)
		if _, err := os.Stat(path); err != nil {
			if err := fetchSeries(ctx, s, from, to, path, opt); err != nil {
				hs.Close()
				return nil, err
			}
		}
		f, err := os.Open(path)
		if err != nil {
			hs.Close()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		hs.files = append(hs.files, &historyFile{name: s.name, path: path, f: f, br: bufio.NewReader(f)})
	}
	return hs, nil
}

// cachePath names the cache file of a series and range: readable, and
// unique whatever characters the key holds.
func cachePath(dir, key string, from, to time.Time) string {
	sum := sha256.Sum256([]byte(key))
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, key)
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%d-%d.csv", safe, hex.EncodeToString(sum[:4]), from.UnixMilli(), to.UnixMilli()))
}

// fetchSeries pages one series into a temporary file, renamed into the
// cache only when complete.
func fetchSeries(ctx context.Context, s series, from, to time.Time, path string, opt HistoryOptions) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fetch-*")
	if err != nil {
		return fmt.Errorf("%s: %w", s.what, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriter(tmp)
	next, end := from.UnixMilli(), to.UnixMilli()
	last := int64(math.MinInt64)
	rows := 0
	var samples []sample
	for range maxPages {
		q := url.Values{"from": {strconv.FormatInt(next, 10)}, "to": {strconv.FormatInt(end, 10)}, "limit": {strconv.Itoa(opt.PageSize)}}
		page, err := s.page(ctx, q)
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		for _, row := range page {
			if len(row) == 0 {
				return fmt.Errorf("%s: an empty row", s.what)
			}
			ms := row[0].IntPart()
			if ms <= last {
				return fmt.Errorf("%s: rows out of order at %d", s.what, ms)
			}
			last = ms
			if samples, err = s.decode(row, samples[:0]); err != nil {
				return fmt.Errorf("%s: at %d: %w", s.what, ms, err)
			}
			for _, sm := range samples {
				fmt.Fprintf(w, "%d,%s\n", sm.ms, sm.price.String())
			}
		}
		rows += len(page)
		if opt.Progress != nil && len(page) > 0 {
			opt.Progress(s.label, rows, time.UnixMilli(last).UTC())
		}
		if len(page) < opt.PageSize || last >= end {
			if err := w.Flush(); err != nil {
				return fmt.Errorf("%s: %w", s.what, err)
			}
			if err := tmp.Close(); err != nil {
				return fmt.Errorf("%s: %w", s.what, err)
			}
			if err := os.Rename(tmp.Name(), path); err != nil {
				return fmt.Errorf("%s: %w", s.what, err)
			}
			return nil
		}
		next = last + s.stride
	}
	return fmt.Errorf("%s: more than %d pages", s.what, maxPages)
}

// HistorySource merges cached index histories by time: each step holds the
// indexes that have a sample at its time.
type HistorySource struct {
	files []*historyFile
}

type historyFile struct {
	name, path string
	f          *os.File
	br         *bufio.Reader
	line       int
	head       *sample // the next sample, read ahead
	done       bool
}

type sample struct {
	ms    int64
	price decimal.Decimal
}

// Next returns the samples of the earliest time not yet returned.
func (h *HistorySource) Next() (Step, error) {
	minMs, found := int64(0), false
	for _, f := range h.files {
		if err := f.peek(); err != nil {
			return Step{}, err
		}
		if f.head != nil && (!found || f.head.ms < minMs) {
			minMs, found = f.head.ms, true
		}
	}
	if !found {
		return Step{}, io.EOF
	}
	st := Step{Time: time.UnixMilli(minMs).UTC(), Prices: map[string]decimal.Decimal{}}
	for _, f := range h.files {
		if f.head != nil && f.head.ms == minMs {
			st.Prices[f.name] = f.head.price
			f.head = nil
		}
	}
	return st, nil
}

func (f *historyFile) peek() error {
	if f.head != nil || f.done {
		return nil
	}
	line, err := f.br.ReadString('\n')
	if errors.Is(err, io.EOF) && line == "" {
		f.done = true
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	f.line++
	msText, priceText, ok := strings.Cut(strings.TrimSpace(line), ",")
	ms, merr := strconv.ParseInt(msText, 10, 64)
	price, perr := decimal.NewFromString(priceText)
	if !ok || merr != nil || perr != nil {
		return fmt.Errorf("%s:%d: want time ms,price: delete the cache file", f.path, f.line)
	}
	f.head = &sample{ms: ms, price: price}
	return nil
}

// Close closes the cache files.
func (h *HistorySource) Close() error {
	var errs []error
	for _, f := range h.files {
		errs = append(errs, f.f.Close())
	}
	return errors.Join(errs...)
}
