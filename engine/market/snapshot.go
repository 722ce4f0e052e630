// Package market is what the guard reads of the exchange and how it joins
// it: the Snapshot of one read, the SnapshotReader that is the one read
// path (the daemon, the recorder and the demo share it), the position Key,
// and the conversion of a position into the rules' input (the expression
// boundary, where decimals become float64).
package market

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// ErrIncomplete is wrapped by Read's error when a read failed: a tick
// takes no action on what it left out.
var ErrIncomplete = errors.New("snapshot incomplete")

// Reader is what a tick reads from the exchange.
type Reader interface {
	Positions(ctx context.Context) ([]exchange.Position, error)
	IndexPrices(ctx context.Context) (map[string]decimal.Decimal, error)
	Trades(ctx context.Context) (*exchange.Trades, error)
}

// InProcessReader is implemented by a Reader whose reads are calls in the
// same process that neither block nor wait on a network, such as a
// backtest's simulated exchange. When InProcess reports true, Tick reads
// the index prices and then the positions one after the other instead of
// concurrently: that saves a goroutine per tick and changes nothing else,
// since a concurrent read has no order to rely on either.
type InProcessReader interface {
	InProcess() bool
}

// Snapshot is one read of the account: what a tick evaluates, and what
// `riskguard record` writes for backtests.
type Snapshot struct {
	Time      time.Time
	Positions []exchange.Position
	// IndexPrices is nil when the index read failed: every evaluation of
	// the tick then has no data.
	IndexPrices map[string]decimal.Decimal
	// Symbols is the symbol list in force: the last one read, kept
	// between reads.
	Symbols *exchange.Trades
	// Partial lists the items of this read's answers that could not be
	// decoded: the rest of each answer is in the snapshot.
	Partial []*exchange.PartialError
}

// SnapshotReader is the one read of the exchange: the daemon's ticks, the
// recorder and the demo all read through it, so they fail alike. It reads
// positions and index prices at every Read (concurrently, unless the
// Reader is in process), and the symbols with their risk limits at the
// first Read, every refresh interval, and when a position names a symbol
// id the list lacks. Its failure rules:
//   - positions not read: no snapshot, and the error;
//   - index prices not read: a snapshot without them (IndexPrices nil),
//     and the error wrapping ErrIncomplete;
//   - symbols not read: the cached list is kept (with a warning); without
//     any, no snapshot;
//   - an item of an answer that cannot be decoded (one position, one
//     index price, one symbol): that item is left out, named in
//     Snapshot.Partial, and the rest of the answer is used.
//
// A SnapshotReader is not safe for concurrent use: each loop has its own.
type SnapshotReader struct {
	reader  Reader
	refresh time.Duration
	log     *slog.Logger

	trades *exchange.Trades
	byID   map[int64]*exchange.ContractSymbol
	at     time.Time
	// partialSymbols names the symbols the last symbols read could not
	// decode.
	partialSymbols *exchange.PartialError
	// known are the symbol ids of the last positions found in byID, by
	// place: a position at the same place with the same id is known
	// without a lookup (cleared when byID is replaced).
	known []int64
}

// NewSnapshotReader reads through r, re-reading the symbols every
// symbolsRefresh (at every read when it is not positive). A nil logger
// discards.
func NewSnapshotReader(r Reader, symbolsRefresh time.Duration, logger *slog.Logger) *SnapshotReader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &SnapshotReader{reader: r, refresh: symbolsRefresh, log: logger}
}

// InProcess reports whether the reader is in process (InProcessReader):
// its reads neither block nor wait on a network.
func (s *SnapshotReader) InProcess() bool {
	ip, ok := s.reader.(InProcessReader)
	return ok && ip.InProcess()
}

// Read reads one snapshot at now; see SnapshotReader for what a failed
// read leaves out.
func (s *SnapshotReader) Read(ctx context.Context, now time.Time) (*Snapshot, error) {
	return s.ReadInto(ctx, now, nil)
}

// ReadInto is Read writing the snapshot into dst, which the caller owns
// (nil: a new one): dst is written only when a snapshot is returned, and
// the snapshot returned is then dst. A caller that reads each snapshot
// before the next and keeps none (the tick's report, Engine.TickInto)
// reads without making one each time.
func (s *SnapshotReader) ReadInto(ctx context.Context, now time.Time, dst *Snapshot) (*Snapshot, error) {
	refresh := s.due(now)
	var (
		pos                    []exchange.Position
		idx                    map[string]decimal.Decimal
		posErr, idxErr, symErr error
	)
	if s.InProcess() {
		idx, idxErr = s.reader.IndexPrices(ctx)
		if refresh {
			symErr = s.refreshSymbols(ctx, now)
		}
		pos, posErr = s.reader.Positions(ctx)
	} else {
		pos, posErr, idx, idxErr, symErr = s.readConcurrently(ctx, now, refresh)
	}
	var partial []*exchange.PartialError
	for _, err := range [...]*error{&posErr, &idxErr, &symErr} {
		if pe := partialOf(*err); pe != nil {
			partial, *err = append(partial, pe), nil
		}
	}
	if posErr != nil {
		return nil, fmt.Errorf("%w: positions: %w", ErrIncomplete, posErr)
	}
	if !refresh && s.unknownSymbol(pos) {
		symErr = s.refreshSymbols(ctx, now)
	}
	if symErr != nil {
		if s.byID == nil {
			return nil, fmt.Errorf("%w: symbols: %w", ErrIncomplete, symErr)
		}
		// The cached symbols still name every known position; risk limits
		// come with the positions themselves.
		s.log.Warn("symbols refresh failed; using the cached list", "err", symErr)
	}
	if s.partialSymbols != nil {
		partial = append(partial, s.partialSymbols)
	}
	snap := dst
	if snap == nil {
		snap = new(Snapshot)
	}
	*snap = Snapshot{Time: now, Positions: pos, Symbols: s.trades, Partial: partial}
	if idxErr != nil {
		return snap, fmt.Errorf("%w: index prices: %w", ErrIncomplete, idxErr)
	}
	if idx == nil {
		idx = map[string]decimal.Decimal{}
	}
	snap.IndexPrices = idx
	return snap, nil
}

// ReadSymbols returns the symbol list, read first when it is due.
func (s *SnapshotReader) ReadSymbols(ctx context.Context, now time.Time) (*exchange.Trades, error) {
	if s.due(now) {
		if err := s.refreshSymbols(ctx, now); err != nil {
			return nil, err
		}
	}
	return s.trades, nil
}

// Symbol returns the contract symbol with the id, from the list in force.
func (s *SnapshotReader) Symbol(id int64) (*exchange.ContractSymbol, bool) {
	c, ok := s.byID[id]
	return c, ok
}

func (s *SnapshotReader) due(now time.Time) bool {
	return s.byID == nil || now.Sub(s.at) >= s.refresh
}

func (s *SnapshotReader) refreshSymbols(ctx context.Context, now time.Time) error {
	tr, err := s.reader.Trades(ctx)
	pe := partialOf(err)
	if pe != nil && tr != nil {
		err = nil // the symbols that could be read are used
	}
	if err != nil {
		return fmt.Errorf("read symbols: %w", err)
	}
	s.partialSymbols = pe
	// The map is refilled in place: only the reader and its view (Join,
	// on the same goroutine) read it, and neither keeps it.
	m := s.byID
	if m == nil {
		m = make(map[int64]*exchange.ContractSymbol, len(tr.ContractsSymbols))
	}
	clear(m)
	for i := range tr.ContractsSymbols {
		m[tr.ContractsSymbols[i].ID] = &tr.ContractsSymbols[i]
	}
	s.trades, s.byID, s.at = tr, m, now
	clear(s.known)
	return nil
}

// readConcurrently reads the index prices on a goroutine of their own
// while the symbols (when refresh) and the positions are read.
func (s *SnapshotReader) readConcurrently(ctx context.Context, now time.Time, refresh bool) (pos []exchange.Position, posErr error, idx map[string]decimal.Decimal, idxErr, symErr error) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		idx, idxErr = s.reader.IndexPrices(ctx)
	}()
	if refresh {
		symErr = s.refreshSymbols(ctx, now)
	}
	pos, posErr = s.reader.Positions(ctx)
	wg.Wait()
	return pos, posErr, idx, idxErr, symErr
}

// partialOf is the *exchange.PartialError err is or wraps, nil when none.
func partialOf(err error) *exchange.PartialError {
	if err == nil {
		return nil
	}
	var pe *exchange.PartialError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// unknownSymbol reports whether a non-empty position names a symbol id
// the list lacks. The ids found are kept by place, so that the next read
// of the same account looks none up again.
func (s *SnapshotReader) unknownSymbol(pos []exchange.Position) bool {
	if len(s.known) != len(pos) {
		s.known = make([]int64, len(pos))
	}
	known := s.known
	for i := range pos {
		id := pos[i].SymbolID
		if pos[i].Empty || id == known[i] && id != 0 {
			continue
		}
		if _, ok := s.byID[id]; !ok {
			return true
		}
		known[i] = id
	}
	return false
}

// SetRefresh changes how often the symbols are re-read (a reload).
func (s *SnapshotReader) SetRefresh(d time.Duration) {
	if d > 0 {
		s.refresh = d
	}
}
