package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

// defaultSimListen is where `riskguard sim` serves without --listen: a
// fixed loopback port, so that a guard started in another shell with
// base_url http://127.0.0.1:8790 finds it.
const defaultSimListen = "127.0.0.1:8790"

// runSim is `riskguard sim`: the simulated exchange on its own, served over
// HTTP until ctx is done, its price paths stepped on a ticker. It accepts
// the key pair in RISKGUARD_API_KEY / RISKGUARD_API_SECRET, or
// sim.DefaultKey / sim.DefaultSecret when they are unset. A non-loopback
// --listen address is served too, with a warning: the sim is for tests and
// demos, and its key pair is public.
func (m *Main) runSim(ctx context.Context, args []string) error {
	fs := m.newFlags("sim", "sim [--listen 127.0.0.1:PORT] [--seed N] [--scenario FILE] [--step 1s] [--client-order-id-field NAME] [--forbid ROUTE]...",
		fmt.Sprintf("Serves the simulated exchange. It accepts the key pair in RISKGUARD_API_KEY and\nRISKGUARD_API_SECRET (default %s / %s).", sim.DefaultKey, sim.DefaultSecret))
	listen := fs.String("listen", defaultSimListen, "`address` to serve on, host:port (port 0 picks a free one)")
	seed := fs.Int64("seed", sim.DefaultSeed, "seed of the random index walks and generated orders")
	scenarioFile := fs.String("scenario", "", "scenario `file` (YAML or JSON); default: the built-in scenario")
	step := fs.Duration("step", time.Second, "how often the index paths advance")
	clientID := fs.String("client-order-id-field", "", "take an order's client order id in this body `field` and refuse one already used (as exchange.client_order_id_field sends it); default: no such field")
	var forbidden []string
	fs.Func("forbid", "answer this signed `route` 403 FORBIDDEN, as to a key without that permission (repeatable), e.g. "+exchange.DefaultOrderPath, func(r string) error {
		forbidden = append(forbidden, r)
		return nil
	})
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(m.Stderr, "riskguard sim: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return exitCode(2)
	}
	if *step <= 0 {
		return fmt.Errorf("sim: --step must be positive, got %s", *step)
	}
	if *clientID != "" {
		if err := exchange.CheckClientOrderIDField(*clientID); err != nil {
			return fmt.Errorf("sim: --client-order-id-field: %w", err)
		}
	}
	key, secret := m.Getenv("RISKGUARD_API_KEY"), m.Getenv("RISKGUARD_API_SECRET")
	if key == "" {
		key = sim.DefaultKey
	}
	if secret == "" {
		secret = sim.DefaultSecret
	}
	var scenario *sim.Scenario
	if *scenarioFile != "" {
		sc, err := sim.LoadScenario(*scenarioFile)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		scenario = sc
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, nil))
	ex, err := sim.New(sim.Config{Key: key, Secret: secret, Seed: *seed, Scenario: scenario, Logger: log, ClientOrderIDField: *clientID, Forbidden: forbidden})
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("sim: --listen %s: %w", *listen, err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		log.Warn("serving on a non-loopback address; the simulated exchange is for tests and demos", "addr", addr.String())
	}
	srv := &http.Server{Handler: ex, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stepCtx, stopStepping := context.WithCancel(ctx)
	stepped := make(chan struct{})
	go func() {
		defer close(stepped)
		_ = ex.Run(stepCtx, *step)
	}()
	defer func() {
		stopStepping()
		<-stepped
	}()
	// The default key pair is public (it is in README and --help), so the
	// banner shows it whole, ready to paste; a pair from the environment is
	// the user's, and its secret is never printed.
	pair := fmt.Sprintf("key %s, secret %s: export RISKGUARD_API_KEY=%s RISKGUARD_API_SECRET=%s", key, secret, key, secret)
	if key != sim.DefaultKey || secret != sim.DefaultSecret {
		pair = fmt.Sprintf("key %q and the secret from RISKGUARD_API_SECRET", key)
	}
	fmt.Fprintf(m.Stdout, "riskguard sim: listening on http://%s (seed %d)\nAPI %s\n", addr, *seed, pair)

	select {
	case err := <-served:
		return fmt.Errorf("sim: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("sim: shutdown: %w", err)
	}
	return nil
}
