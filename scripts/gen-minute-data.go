//go:build ignore

// gen-minute-data writes one-minute index prices for ten symbols as the CSV
// `riskguard backtest --csv` reads (time,name,price), streamed to a file:
// nothing is held in memory but the ten current prices, so any length can be
// generated. The same seed gives byte-identical output.
//
//	go run scripts/gen-minute-data.go -out year.csv            # 365 days from 2025-01-01
//	go run scripts/gen-minute-data.go -out week.csv -days 7 -seed 2
//
// Each index is a seeded geometric random walk (about 3% a day) pulled back
// towards its starting price (half-life about 50 days), so a year stays in
// range, with sudden moves that make a guard's life interesting: about once
// a month per index a crash or a squeeze of 8–25% spread over 20–120
// minutes.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// index is one generated price path.
type index struct {
	name  string
	start float64 // starting price, the walk's anchor
	scale int     // decimal places written
	level float64

	moveLeft int     // minutes of the sudden move still to go
	moveStep float64 // log-price change per minute of the move
}

// The ten indexes: the bases of the scenario's contracts (scripts/testdata).
func indexes() []*index {
	specs := []struct {
		name  string
		start float64
		scale int
	}{
		{"BTC", 65000, 2}, {"ETH", 3000, 2}, {"SOL", 150, 3}, {"DOGE", 0.15, 5}, {"ADA", 0.45, 4},
		{"XRP", 0.6, 4}, {"DOT", 7, 3}, {"LTC", 80, 2}, {"LINK", 15, 3}, {"AVAX", 35, 3},
	}
	out := make([]*index, len(specs))
	for i, s := range specs {
		out[i] = &index{name: s.name, start: s.start, scale: s.scale, level: s.start}
	}
	return out
}

// Parameters of the walk, per minute.
const (
	volatility = 0.0008  // ≈ 3% a day
	reversion  = 0.00001 // pull of the log price towards the start
	moveChance = 1.0 / (30 * 24 * 60)
)

// step moves the index by one minute.
func (ix *index) step(rng *rand.Rand) {
	d := volatility*rng.NormFloat64() - reversion*math.Log(ix.level/ix.start)
	if ix.moveLeft == 0 && rng.Float64() < moveChance {
		size := 0.08 + 0.17*rng.Float64()
		if rng.IntN(3) > 0 {
			size = -size // crashes twice as often as squeezes
		}
		ix.moveLeft = 20 + rng.IntN(101)
		ix.moveStep = math.Log1p(size) / float64(ix.moveLeft)
	}
	if ix.moveLeft > 0 {
		ix.moveLeft--
		d += ix.moveStep
	}
	ix.level *= math.Exp(d)
	if floor := math.Pow(10, -float64(ix.scale)); ix.level < floor {
		ix.level = floor
	}
}

func main() {
	out := flag.String("out", "", "CSV file to write (required)")
	days := flag.Int("days", 365, "days of one-minute data")
	seed := flag.Uint64("seed", 1, "seed of the random walks")
	from := flag.String("from", "2025-01-01T00:00:00Z", "time of the first row, RFC 3339")
	flag.Parse()
	if err := run(*out, *days, *seed, *from); err != nil {
		fmt.Fprintln(os.Stderr, "gen-minute-data:", err)
		os.Exit(1)
	}
}

func run(path string, days int, seed uint64, from string) (err error) {
	if path == "" {
		return errors.New("-out is required")
	}
	if days < 1 || days > 100*365 {
		return fmt.Errorf("-days %d: want 1..36500", days)
	}
	at, err := time.Parse(time.RFC3339, from)
	if err != nil {
		return fmt.Errorf("-from: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(seed, 0x6d696e757465))
	ixs := indexes()
	if _, err := w.WriteString("time,name,price\n"); err != nil {
		return err
	}
	var line []byte
	for range days * 24 * 60 {
		ts := at.UTC().AppendFormat(nil, time.RFC3339)
		for _, ix := range ixs {
			line = append(line[:0], ts...)
			line = append(line, ',')
			line = append(line, ix.name...)
			line = append(line, ',')
			line = strconv.AppendFloat(line, ix.level, 'f', ix.scale, 64)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
			ix.step(rng)
		}
		at = at.Add(time.Minute)
	}
	return w.Flush()
}
