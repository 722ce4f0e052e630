package engine

import (
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/market"
)

// NewSnapshotReader reads through r, re-reading the symbols every
// symbolsRefresh (DefaultConfig's when 0). A nil logger discards.
func NewSnapshotReader(r market.Reader, symbolsRefresh time.Duration, logger *slog.Logger) *market.SnapshotReader {
	if symbolsRefresh <= 0 {
		symbolsRefresh = DefaultConfig().SymbolsRefresh
	}
	return market.NewSnapshotReader(r, symbolsRefresh, logger)
}
