package main

import (
	"errors"
	"flag"
	"fmt"
)

// errHelp is returned by a command that printed its usage because it was
// asked to (-h, --help): Main.Run exits 0 on it.
var errHelp = errors.New("help shown")

// newFlags is a command's flag set, its usage in the one form every command
// prints: "usage: riskguard CMD …", what it does, then its flags. usage is
// the line after "usage: riskguard ".
func (m *Main) newFlags(name, usage, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: riskguard %s\n\n%s\n\nflags:\n", usage, summary)
		fs.PrintDefaults()
	}
	return fs
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
