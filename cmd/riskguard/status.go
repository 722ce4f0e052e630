package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/web"
)

// runStatus is `riskguard status`: the running daemon's state as the
// status page shows it, in a few lines. With several accounts and no
// --account it lists the accounts, one line each.
func (m *Main) runStatus(ctx context.Context, args []string) error {
	cmd := m.newCtlCommand("status", "status [--json] [--account NAME] [--addr HOST:PORT | --config FILE]", commands()["status"].summary)
	asJSON := cmd.fs.Bool("json", false, "print the status as JSON (the liquidations not acknowledged first, each with its acknowledge command)")
	if err := cmd.parse(args, ""); err != nil {
		return err
	}
	c, err := m.statusClient(cmd.f)
	if err != nil {
		return cmd.fail(err)
	}
	if c.account == "" {
		var list []web.AccountSummary
		if err := c.do(ctx, http.MethodGet, "/api/v1/accounts", nil, &list); err != nil {
			return cmd.fail(err)
		}
		if len(list) > 1 && *asJSON {
			return writeJSON(m.Stdout, list)
		}
		if len(list) > 1 {
			tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACCOUNT\tHEALTHY\tLAST SNAPSHOT\tPOSITIONS\tFIRING\tPAUSED")
			for _, a := range list {
				last := "never"
				if !a.LastSuccess.IsZero() {
					last = time.Since(a.LastSuccess).Round(time.Second).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%t\t%s\t%d\t%d\t%t\n", control.Printable(a.Name), a.Healthy, last, a.Positions, a.Firing, a.Paused)
			}
			tw.Flush()
			fmt.Fprintln(m.Stdout, "\none account's detail: riskguard status --account NAME")
			return nil
		}
		if len(list) == 1 {
			c.account = list[0].Name
		}
	}
	var st struct {
		engine.Status
		Healthy bool `json:"healthy"`
	}
	if err := c.do(ctx, http.MethodGet, "/api/v1/status", nil, &st); err != nil {
		return cmd.fail(err)
	}
	// A liquidation stays first, loudest, until someone acknowledges it,
	// as on the page.
	liqs := make([]liquidationLine, len(st.Liquidations))
	for i, l := range st.Liquidations {
		liqs[i] = liquidationLine{LiquidationStatus: l, Acknowledge: ackCommand(l.Symbol, c.account)}
	}
	if *asJSON {
		return writeJSON(m.Stdout, struct {
			Liquidations []liquidationLine `json:"liquidations"`
			Account      string            `json:"account,omitempty"`
			Healthy      bool              `json:"healthy"`
			engine.Status
		}{liqs, c.account, st.Healthy, st.Status})
	}
	for _, l := range liqs {
		fmt.Fprintf(m.Stdout, "LIQUIDATED %s %s %s at %s: lost %s; liquidation price %s, index %s\n  acknowledge: %s\n",
			control.Printable(l.Symbol), l.Side, l.Quantity, l.Time.UTC().Format("2006-01-02 15:04:05 UTC"), control.Printable(l.Loss),
			l.LiquidationPrice, l.Index, control.Printable(l.Acknowledge))
	}
	head := "riskguard"
	if c.account != "" {
		head += " account " + c.account
	}
	health := "healthy"
	if !st.Healthy {
		health = "UNHEALTHY"
	}
	last := "no complete snapshot yet"
	if st.SnapshotAge != nil {
		last = fmt.Sprintf("last complete snapshot %s ago", time.Duration(*st.SnapshotAge*float64(time.Second)).Round(time.Millisecond))
	}
	fmt.Fprintf(m.Stdout, "%s: %s, %s", control.Printable(head), health, last)
	if st.DryRun {
		fmt.Fprint(m.Stdout, ", dry run")
	}
	fmt.Fprintln(m.Stdout)
	if st.LastError != "" {
		fmt.Fprintf(m.Stdout, "last tick failed: %s\n", control.Printable(st.LastError))
	}
	for _, p := range st.Pauses {
		fmt.Fprintf(m.Stdout, "PAUSED %s by %s\n", control.Printable(matchers(p.Rule, p.Symbol, "")), control.Printable(p.CreatedBy))
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SYMBOL\tSIDE\tLEVERAGE\tMARGIN\tDISTANCE\tRULES")
	for _, p := range st.Positions {
		dist := "no index"
		if p.Distance != nil {
			dist = fmt.Sprintf("%.2f%%", *p.Distance*100)
		}
		var active []string
		for _, r := range p.Rules {
			if r.State != alert.Inactive.String() {
				active = append(active, r.Rule+" "+r.State)
			}
		}
		mg := p.MarginMode
		if p.QuoteScale > 0 {
			mg += " " + p.Margin.Round(int32(p.QuoteScale)).StringFixed(int32(p.QuoteScale))
		} else {
			mg += " " + p.Margin.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%dx\t%s\t%s\t%s\n", control.Printable(p.Symbol), p.Side, p.Leverage, mg, dist, control.Printable(strings.Join(active, ", ")))
	}
	return tw.Flush()
}

// statusClient is m.client without the refusal of a missing --account:
// status lists the accounts instead.
func (m *Main) statusClient(f ctlFlags) (*ctlClient, error) {
	if *f.account != "" {
		return m.client(f)
	}
	return m.clientNoAccountCheck(f)
}

// liquidationLine is a marked liquidation as status prints it: with the
// command that acknowledges it.
type liquidationLine struct {
	engine.LiquidationStatus
	Acknowledge string `json:"acknowledge"`
}

// ackCommand is the command that unmarks the liquidation of symbol.
func ackCommand(symbol, account string) string {
	s := "riskguard ack --liquidation " + symbol
	if account != "" {
		s += " --account " + account
	}
	return s
}

// writeJSON prints v indented.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
