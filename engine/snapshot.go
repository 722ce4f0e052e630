package engine

import (
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/market"
)

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
