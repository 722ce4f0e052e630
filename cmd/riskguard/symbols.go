package main

import (
	"context"
	"fmt"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

// unknownSymbols returns an error for every rule's symbols: entry not
// among listed, read by list; its error is the read's, when the exchange
// could not be asked.
func unknownSymbols(ctx context.Context, list func(context.Context) ([]string, error), set *rules.Set) ([]*rules.Error, error) {
	names, err := list(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the exchange's symbols: %w", err)
	}
	return set.UnknownSymbols(names), nil
}

// publicSymbols lists the contract symbols of the exchange's public market
// data, through a client without credentials.
func publicSymbols(c *exchange.Client) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		tr, err := c.Trades(ctx)
		if err != nil {
			return nil, err
		}
		return tr.ContractNames(), nil
	}
}

// publicClient is a client without credentials, for the exchange's public
// market data (`check --exchange`).
func publicClient(baseURL string) (*exchange.Client, error) {
	c, err := exchange.New(baseURL, "", "", exchange.WithTimeout(10*time.Second),
		exchange.WithRetry(exchange.RetryPolicy{MaxAttempts: 2}))
	if err != nil {
		return nil, fmt.Errorf("--exchange: %w", err)
	}
	return c, nil
}
