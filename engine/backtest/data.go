// Package backtest replays price data through the engine on a simulated
// clock: the very engine code of the daemon ticks against an in-process
// simulated exchange (exchange/sim), whose positions the rules' actions
// change and which liquidates the positions whose liquidation price is
// crossed. The same data runs with the guard acting and without it (and,
// for a review of a rule change, with a baseline rule set), and the result
// says what the guard changed.
//
// Data comes as a stream of Steps, never loaded whole: recorded snapshots
// (JSON lines, see Recorder and DataReader), a CSV of prices (CSVReader),
// or index history fetched from the exchange and cached on disk
// (FetchHistory).
package backtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Step is one point of the data: the index prices at a time and, for
// recorded data, the account's positions.
type Step struct {
	Time time.Time
	// Prices maps an index name, or a contract symbol name standing for
	// its index, to its price. A name missing keeps its last price.
	Prices map[string]decimal.Decimal
	// Positions are the recorded positions; nil when the data has none
	// (CSV, history) or they did not change.
	Positions []exchange.Position
	// Symbols are the listed symbols and risk limits when they changed;
	// nil otherwise.
	Symbols *exchange.Trades
}

// Source yields the steps of the data in time order.
type Source interface {
	// Next returns the next step, or io.EOF after the last one. The step
	// is the caller's: the source does not reuse its maps or slices.
	Next() (Step, error)
}

// RecordVersion is the version of the record format that Recorder writes
// and DataReader reads.
const RecordVersion = 1

// record is one line of recorded data: either a tick (positions and index
// prices) or the symbols, written when they change.
//
//	{"v":1,"time":"2026-01-02T03:04:05Z","symbols":{…exchange.Trades…}}
//	{"v":1,"time":"2026-01-02T03:04:05Z","positions":[…],"indexPrices":{"BTC":"65000.5"}}
type record struct {
	V           int                        `json:"v"`
	Time        time.Time                  `json:"time"`
	Symbols     *exchange.Trades           `json:"symbols,omitempty"`
	Positions   []exchange.Position        `json:"positions,omitempty"`
	IndexPrices map[string]decimal.Decimal `json:"indexPrices,omitempty"`
}

// Snapshot is what one tick of the recorder saw.
type Snapshot struct {
	Time        time.Time
	Positions   []exchange.Position
	IndexPrices map[string]decimal.Decimal
	// Symbols are written only when they differ from the last ones
	// written; nil means unchanged.
	Symbols *exchange.Trades
}

// Recorder writes snapshots as JSON lines, one per tick, and the symbols
// line before a tick whenever they changed. Each Write is flushed to the
// file (through the gzip stream too), so a killed recorder loses at most
// the tick in flight.
type Recorder struct {
	w       io.Writer
	gz      *gzip.Writer
	f       *os.File
	buf     bytes.Buffer
	symbols []byte // the last symbols written, as JSON
}

// NewRecorder writes records to w. Call Close to flush a gzip stream.
func NewRecorder(w io.Writer) *Recorder { return &Recorder{w: w} }

// CreateRecorder creates (or truncates) the file at path, gzip-compressed
// when the name ends in .gz.
func CreateRecorder(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	r := &Recorder{w: f, f: f}
	if strings.HasSuffix(path, ".gz") {
		r.gz = gzip.NewWriter(f)
		r.w = r.gz
	}
	return r, nil
}

// Write appends the snapshot: a symbols line first when its symbols differ
// from the last written, then the tick line. Both reach the file before
// Write returns.
func (r *Recorder) Write(s Snapshot) error {
	r.buf.Reset()
	enc := json.NewEncoder(&r.buf)
	t := s.Time.UTC()
	if s.Symbols != nil {
		b, err := json.Marshal(s.Symbols)
		if err != nil {
			return fmt.Errorf("record symbols: %w", err)
		}
		if !bytes.Equal(b, r.symbols) {
			r.symbols = b
			if err := enc.Encode(record{V: RecordVersion, Time: t, Symbols: s.Symbols}); err != nil {
				return fmt.Errorf("record symbols: %w", err)
			}
		}
	}
	if err := enc.Encode(record{V: RecordVersion, Time: t, Positions: s.Positions, IndexPrices: s.IndexPrices}); err != nil {
		return fmt.Errorf("record tick: %w", err)
	}
	if _, err := r.w.Write(r.buf.Bytes()); err != nil {
		return fmt.Errorf("record tick: %w", err)
	}
	return r.flush()
}

func (r *Recorder) flush() error {
	if r.gz != nil {
		if err := r.gz.Flush(); err != nil {
			return fmt.Errorf("record flush: %w", err)
		}
	}
	if f, ok := r.w.(interface{ Flush() error }); ok && r.gz == nil {
		if err := f.Flush(); err != nil {
			return fmt.Errorf("record flush: %w", err)
		}
	}
	return nil
}

// Close ends the gzip stream and closes the file the recorder created.
func (r *Recorder) Close() error {
	var err error
	if r.gz != nil {
		err = r.gz.Close()
	}
	if r.f != nil {
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("close recording: %w", err)
	}
	return nil
}

// maxLine bounds one line of recorded data (a tick of many positions).
const maxLine = 64 << 20

// DataReader reads recorded data line by line. A last line cut short (a
// recorder killed mid-write, a gzip stream without its end) ends the data
// cleanly and sets Truncated.
type DataReader struct {
	name string
	br   *bufio.Reader
	c    io.Closer
	line int
	// pending symbols, attached to the next tick.
	symbols *exchange.Trades
	// Truncated is set when the last line was incomplete and dropped.
	Truncated bool
}

// NewDataReader reads records from r; name labels errors.
func NewDataReader(name string, r io.Reader) *DataReader {
	return &DataReader{name: name, br: bufio.NewReaderSize(r, 1<<16)}
}

// OpenData opens recorded data at path, gunzipping when the name ends in
// .gz. Close it when done.
func OpenData(path string) (*DataReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open data: %w", err)
	}
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open data %s: %w", path, err)
		}
		r = gz
	}
	d := NewDataReader(path, r)
	d.c = f
	return d, nil
}

// Close closes the file OpenData opened.
func (d *DataReader) Close() error {
	if d.c == nil {
		return nil
	}
	return d.c.Close()
}

func (d *DataReader) truncated() bool { return d.Truncated }

// Next returns the next tick, with the symbols recorded since the previous
// one.
func (d *DataReader) Next() (Step, error) {
	for {
		line, complete, err := d.readLine()
		if err != nil {
			return Step{}, err
		}
		d.line++
		if len(bytes.TrimSpace(line)) == 0 {
			if !complete {
				return Step{}, io.EOF
			}
			continue
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil {
			if !complete {
				d.Truncated = true
				return Step{}, io.EOF
			}
			return Step{}, fmt.Errorf("%s:%d: %w", d.name, d.line, err)
		}
		if rec.V != RecordVersion {
			return Step{}, fmt.Errorf("%s:%d: record version %d is not supported (want %d)", d.name, d.line, rec.V, RecordVersion)
		}
		if rec.Time.IsZero() {
			return Step{}, fmt.Errorf("%s:%d: time is missing", d.name, d.line)
		}
		if rec.Symbols != nil {
			d.symbols = rec.Symbols
			continue
		}
		st := Step{Time: rec.Time, Prices: rec.IndexPrices, Positions: rec.Positions, Symbols: d.symbols}
		if st.Positions == nil {
			st.Positions = []exchange.Position{} // recorded: no position at all
		}
		d.symbols = nil
		return st, nil
	}
}

// readLine returns the next line without its newline; complete is false
// for a last line with no newline. A stream cut short (gzip without its
// end) reads as the end of the data.
func (d *DataReader) readLine() ([]byte, bool, error) {
	var line []byte
	for {
		chunk, err := d.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, false, fmt.Errorf("%s:%d: line longer than %d bytes", d.name, d.line+1, maxLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			if errors.Is(err, io.ErrUnexpectedEOF) {
				d.Truncated = true
			}
			if len(line) == 0 {
				return nil, false, io.EOF
			}
			return line, false, nil
		default:
			return nil, false, fmt.Errorf("%s:%d: %w", d.name, d.line+1, err)
		}
	}
}
