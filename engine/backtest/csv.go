package backtest

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// CSVReader reads prices from CSV rows `time,name,price`: time in RFC 3339
// or Unix milliseconds, name an index or a contract symbol (standing for its
// index), price a positive decimal. Rows of one time form one step; times
// must not go backwards. A first row that is not data (time,symbol,price) is
// a header and skipped.
type CSVReader struct {
	name string
	r    *csv.Reader
	c    io.Closer
	line int

	next    csvRow // read ahead: the first row of the next step
	hasNext bool
	started bool
	last    time.Time
	// The last time field as written and as parsed: the rows of one step
	// repeat it, so it is parsed once per step.
	lastText string
	lastAt   time.Time
}

type csvRow struct {
	at    time.Time
	name  string
	price decimal.Decimal
	line  int
}

// NewCSVReader reads CSV rows from r; name labels errors.
func NewCSVReader(name string, r io.Reader) *CSVReader {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	return &CSVReader{name: name, r: cr}
}

// OpenCSV opens a CSV file of prices. Close it when done.
func OpenCSV(path string) (*CSVReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open csv: %w", err)
	}
	c := NewCSVReader(path, f)
	c.c = f
	return c, nil
}

// Close closes the file OpenCSV opened.
func (c *CSVReader) Close() error {
	if c.c == nil {
		return nil
	}
	return c.c.Close()
}

// Next returns the prices of the next time.
func (c *CSVReader) Next() (Step, error) {
	first := c.next
	if !c.hasNext {
		r, err := c.row()
		if err != nil {
			return Step{}, err
		}
		first = r
	}
	c.hasNext = false
	st := Step{Time: first.at, Prices: map[string]decimal.Decimal{first.name: first.price}}
	for {
		r, err := c.row()
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if err != nil {
			return Step{}, err
		}
		if !r.at.Equal(st.Time) {
			c.next, c.hasNext = r, true
			return st, nil
		}
		st.Prices[r.name] = r.price
	}
}

// row reads and checks one data row.
func (c *CSVReader) row() (csvRow, error) {
	for {
		rec, err := c.r.Read()
		if errors.Is(err, io.EOF) {
			return csvRow{}, io.EOF
		}
		line, _ := c.r.FieldPos(0)
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return csvRow{}, fmt.Errorf("%s:%d: %w", c.name, pe.Line, pe.Err)
			}
			return csvRow{}, fmt.Errorf("%s: %w", c.name, err)
		}
		header := !c.started
		c.started = true
		at, terr := c.lastAt, error(nil)
		if rec[0] != c.lastText || c.lastText == "" {
			if at, terr = parseTime(rec[0]); terr == nil {
				c.lastText, c.lastAt = rec[0], at
			}
		}
		name := strings.TrimSpace(rec[1])
		price, perr := decimal.NewFromString(strings.TrimSpace(rec[2]))
		if header && terr != nil && perr != nil {
			continue // time,symbol,price
		}
		switch {
		case terr != nil:
			return csvRow{}, fmt.Errorf("%s:%d: %w", c.name, line, terr)
		case name == "":
			return csvRow{}, fmt.Errorf("%s:%d: the symbol or index name is empty", c.name, line)
		case perr != nil:
			return csvRow{}, fmt.Errorf("%s:%d: price %q is not a decimal number", c.name, line, rec[2])
		case !price.IsPositive():
			return csvRow{}, fmt.Errorf("%s:%d: price %s must be positive", c.name, line, price)
		case at.Before(c.last):
			return csvRow{}, fmt.Errorf("%s:%d: time %s is before the previous row's %s: rows must be in time order",
				c.name, line, at.Format(time.RFC3339Nano), c.last.Format(time.RFC3339Nano))
		}
		c.last = at
		return csvRow{at: at, name: name, price: price, line: line}, nil
	}
}

// parseTime reads RFC 3339 or Unix milliseconds, in UTC.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	// RFC 3339 has a '-' after its first digits: only the rest can be
	// milliseconds (ParseInt's error would allocate on every row).
	if !strings.Contains(strings.TrimPrefix(s, "-"), "-") {
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.UnixMilli(ms).UTC(), nil
		}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2026-01-02T15:04:05Z) or Unix milliseconds", s)
	}
	return t.UTC(), nil
}
