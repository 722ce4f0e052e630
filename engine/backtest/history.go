package backtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

// HistoryOptions configure FetchHistory.
type HistoryOptions struct {
	// CacheDir holds one file per index and time range; a range fetched
	// once is read from there. Required.
	CacheDir string
	// PageSize is the limit of one request; default 5000 (the most the
	// exchange serves).
	PageSize int
	// Progress, when set, is called after each page with the index, the
	// samples fetched so far and the time reached.
	Progress func(index string, samples int, reached time.Time)
}

// maxPages bounds the pages of one index's fetch.
const maxPages = 1_000_000

// FetchHistory fetches the history of each index between from and to (page
// by page, or from the cache) and returns a source that merges them by
// time. Close it when done.
func FetchHistory(ctx context.Context, c HistoryClient, names []string, from, to time.Time, opt HistoryOptions) (*HistorySource, error) {
	if opt.CacheDir == "" {
		return nil, errors.New("fetch history: a cache directory is required")
	}
	if opt.PageSize <= 0 {
		opt.PageSize = 5000
	}
	if err := os.MkdirAll(opt.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("fetch history: %w", err)
	}
	hs := &HistorySource{}
	for _, n := range names {
		path := cachePath(opt.CacheDir, n, from, to)
		if _, err := os.Stat(path); err != nil {
			if err := fetchIndex(ctx, c, n, from, to, path, opt); err != nil {
				hs.Close()
				return nil, err
			}
		}
		f, err := os.Open(path)
		if err != nil {
			hs.Close()
			return nil, fmt.Errorf("fetch history: %w", err)
		}
		hs.files = append(hs.files, &historyFile{name: n, path: path, f: f, br: bufio.NewReader(f)})
	}
	return hs, nil
}

// cachePath names the cache file of an index and range: readable, and
// unique whatever characters the name holds.
func cachePath(dir, name string, from, to time.Time) string {
	sum := sha256.Sum256([]byte(name))
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%d-%d.csv", safe, hex.EncodeToString(sum[:4]), from.UnixMilli(), to.UnixMilli()))
}

// fetchIndex pages one index's history into a temporary file, renamed into
// the cache only when complete.
func fetchIndex(ctx context.Context, c HistoryClient, name string, from, to time.Time, path string, opt HistoryOptions) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fetch-*")
	if err != nil {
		return fmt.Errorf("fetch history %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriter(tmp)
	next, end := from.UnixMilli(), to.UnixMilli()
	samples := 0
	for range maxPages {
		q := url.Values{"from": {strconv.FormatInt(next, 10)}, "to": {strconv.FormatInt(end, 10)}, "limit": {strconv.Itoa(opt.PageSize)}}
		page, err := c.IndexHistory(ctx, name, q)
		if err != nil {
			return fmt.Errorf("fetch history %s: %w", name, err)
		}
		last := next - 1
		for _, pt := range page {
			if len(pt) < 2 {
				return fmt.Errorf("fetch history %s: a sample has %d fields, want 2", name, len(pt))
			}
			ms := pt[0].IntPart()
			if ms <= last {
				return fmt.Errorf("fetch history %s: samples out of order at %d", name, ms)
			}
			last = ms
			fmt.Fprintf(w, "%d,%s\n", ms, pt[1].String())
		}
		samples += len(page)
		if opt.Progress != nil && len(page) > 0 {
			opt.Progress(name, samples, time.UnixMilli(last).UTC())
		}
		if len(page) < opt.PageSize || last >= end {
			if err := w.Flush(); err != nil {
				return fmt.Errorf("fetch history %s: %w", name, err)
			}
			if err := tmp.Close(); err != nil {
				return fmt.Errorf("fetch history %s: %w", name, err)
			}
			if err := os.Rename(tmp.Name(), path); err != nil {
				return fmt.Errorf("fetch history %s: %w", name, err)
			}
			return nil
		}
		next = last + 1
	}
	return fmt.Errorf("fetch history %s: more than %d pages", name, maxPages)
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
