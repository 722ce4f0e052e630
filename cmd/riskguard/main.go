// Command riskguard guards leveraged contract positions on the exchange: it
// evaluates user-written rules against positions, risk limits and index
// prices, and lowers risk when they fire.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Reload: hup}
	err := m.Run(ctx, os.Args[1:])
	var ec exitCode
	switch {
	case err == nil:
	case errors.As(err, &ec):
		os.Exit(int(ec))
	default:
		fmt.Fprintln(os.Stderr, "riskguard:", err)
		os.Exit(1)
	}
}

// Main is the program with its environment made explicit, so end-to-end tests
// drive the real command in-process.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; tests pass a map lookup.
	Getenv func(string) string
	// Reload delivers reload requests (SIGHUP) to a running daemon; nil
	// means none arrive.
	Reload <-chan os.Signal

	// help is set when the command's arguments ask for its usage, which
	// then goes to stdout.
	help bool
	// venues is the registry of venues the configuration's
	// exchange.venue is looked up in; nil is the shipped one (tests add
	// rows).
	venues venues
}

// exitCode is an error that carries the process exit status and has already
// been reported to the user.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// command is one subcommand.
type command struct {
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

// commands lists the subcommands; each lives in its own file.
func commands() map[string]command {
	return map[string]command{
		// subcommands: one line each, kept sorted
		"ack":      {"acknowledge a firing alert on the running daemon: its notifications are muted until it resolves", (*Main).runAck},
		"backtest": {"replay recorded data, a CSV or index history through the rules, with and without the guard", (*Main).runBacktest},
		"check":    {"load the config and compile every rule; print a summary or every error", (*Main).runCheck},
		"demo":     {"run rules.example.yaml against the embedded simulated exchange", (*Main).runDemo},
		"ha":       {"ha status: print who leads which account, and the live members (ha section)", (*Main).runHA},
		"notify":   {"notify test: send a test message through the configured channels", (*Main).runNotify},
		"pause":    {"stop the running daemon's actions (all, or a rule's or symbol's), optionally for a while; it still evaluates and says what it would do", (*Main).runPause},
		"record":   {"record the account's positions and index prices for backtests", (*Main).runRecord},
		"resume":   {"end the running daemon's pauses (all, or those of --rule/--symbol)", (*Main).runResume},
		"run":      {"guard the account: evaluate the rules every interval and act", (*Main).runRun},
		"silence":  {"silence add|list|expire: mute the running daemon's notifications of matching rules for a while", (*Main).runSilence},
		"sim":      {"serve the simulated exchange over HTTP", (*Main).runSim},
		"status":   {"print the running daemon's state (with several accounts: a line each, or --account NAME's)", (*Main).runStatus},
		"test":     {"run rule-test files: expected firing rules and actions over made-up prices", (*Main).runTest},
		"version":  {"print the version, commit and Go version of this build", (*Main).runVersion},
	}
}

// Run executes the subcommand named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	if m.Getenv == nil {
		m.Getenv = func(string) string { return "" }
	}
	cmds := commands()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			m.usage(m.Stderr, cmds)
			return exitCode(2)
		}
		m.usage(m.Stdout, cmds)
		return nil
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(m.Stderr, "riskguard: unknown command %q\n", args[0])
		m.usage(m.Stderr, cmds)
		return exitCode(2)
	}
	m.help = askedForHelp(args[1:])
	err := c.run(m, ctx, args[1:])
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// usage lists the commands on w: stdout when asked for, stderr after a
// usage error.
func (m *Main) usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: riskguard <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nStart with `riskguard demo`; README's \"Start here\" goes from there to your own account.")
}
