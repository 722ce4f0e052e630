package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
)

// errHelp is returned by a command that printed its usage because it was
// asked to (-h, --help): Main.Run exits 0 on it.
var errHelp = errors.New("help shown")

// newFlags is a command's flag set, its usage in the one form every command
// prints: "usage: riskguard CMD …", what it does, then its flags. usage is
// the line after "usage: riskguard ".
//
// Asked for (-h, --help) the usage goes to stdout, so that `riskguard
// backtest --help | less` shows it; after a usage error it goes to stderr
// with the error.
func (m *Main) newFlags(name, usage, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	out := &flagOutput{w: m.Stderr}
	fs.SetOutput(out)
	fs.Usage = func() {
		w := io.Writer(out)
		if m.help && !out.failed {
			w = m.Stdout
		}
		fmt.Fprintf(w, "usage: riskguard %s\n\n%s\n\nflags:\n", usage, summary)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
	return fs
}

// flagOutput is a flag set's output for its errors: stderr, noting that an
// error was written, so the usage printed after it goes there too.
type flagOutput struct {
	w      io.Writer
	failed bool
}

func (o *flagOutput) Write(p []byte) (int, error) {
	o.failed = true
	return o.w.Write(p)
}

// askedForHelp reports whether a command's arguments ask for its usage.
func askedForHelp(args []string) bool {
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "--help" || a == "-help" })
}

// parseFlags parses args: errHelp after -h or --help (the usage was
// printed), exitCode(2) after a bad flag (the flag package said which, and
// printed the usage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return errHelp
	}
	return exitCode(2)
}
