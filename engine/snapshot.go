package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/market"
)

// Symbols returns the names of the contract symbols the exchange lists,
// from the symbols the ticks keep, read first when they are due or were
// never read (so the tick after it reads them no sooner than usual). It
// waits for a running tick: the daemon calls it before its first.
func (e *Engine) Symbols(ctx context.Context, now time.Time) ([]string, error) {
	e.tick.Lock()
	defer e.tick.Unlock()
	tr, err := e.snaps.ReadSymbols(ctx, now)
	if err != nil {
		return nil, err
	}
	e.board.setListed(tr)
	return e.ListedSymbols(), nil
}

// ListedSymbols returns the contract symbols of the last symbols read, or
// nil before the first; it never waits for a tick.
func (e *Engine) ListedSymbols() []string { return e.board.Listed() }

// Snapshot is one read of the account; see engine/market.
type Snapshot = market.Snapshot

// SnapshotReader is the one read of the exchange; see engine/market.
type SnapshotReader = market.SnapshotReader

// NewSnapshotReader reads through r, re-reading the symbols every
// symbolsRefresh (DefaultConfig's when 0). A nil logger discards.
func NewSnapshotReader(r Reader, symbolsRefresh time.Duration, logger *slog.Logger) *SnapshotReader {
	if symbolsRefresh <= 0 {
		symbolsRefresh = DefaultConfig().SymbolsRefresh
	}
	return market.NewSnapshotReader(r, symbolsRefresh, logger)
}
