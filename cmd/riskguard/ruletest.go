package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/ruletest"
	"github.com/riskguard/riskguard/rules"
)

// runTest is `riskguard test [--run REGEXP] FILE...`: it runs rule-test
// files (see package ruletest) through the daemon's own engine on a made-up
// clock. Every failing expectation is printed as expected vs got; the exit
// status is 0 when every test passed, 1 when one failed or a file could not
// be read, 2 on a usage error.
func (m *Main) runTest(ctx context.Context, args []string) error {
	fs := m.newFlags("test", "test [--run REGEXP] FILE...", commands()["test"].summary)
	run := fs.String("run", "", "run only the tests whose name matches this regular expression")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(m.Stderr, "riskguard test: give at least one test file")
		fs.Usage()
		return exitCode(2)
	}
	var match func(string) bool
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fmt.Fprintf(m.Stderr, "riskguard test: --run: %v\n", err)
			return exitCode(2)
		}
		match = re.MatchString
	}
	total, failed, broken := 0, 0, 0
	for _, path := range fs.Args() {
		suite, err := ruletest.Load(path, m.venues.loadTestRules)
		if err != nil {
			broken++
			var list *rules.ErrorList
			if errors.As(err, &list) {
				for _, e := range list.Errors {
					fmt.Fprintln(m.Stderr, e)
				}
				continue
			}
			fmt.Fprintln(m.Stderr, err)
			continue
		}
		n, f := ruletest.Report(m.Stdout, suite.Run(ctx, match))
		total += n
		failed += f
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	switch {
	case failed > 0 || broken > 0:
		var parts []string
		if total > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d %s failed", failed, total, plural(total, "test", "tests")))
		}
		if broken > 0 {
			parts = append(parts, fmt.Sprintf("%d %s not loaded", broken, plural(broken, "file", "files")))
		}
		fmt.Fprintln(m.Stdout, "FAIL "+strings.Join(parts, ", "))
		return exitCode(1)
	case total == 0:
		fmt.Fprintln(m.Stdout, "no test matched")
		return exitCode(1)
	}
	fmt.Fprintf(m.Stdout, "PASS %d %s\n", total, plural(total, "test", "tests"))
	return nil
}

// loadTestRules reads a config file as the daemon does (its venue one of
// the registry's), without
// environment overrides so that a test gives the same result everywhere, or
// a rules-only file (no exchange or engine section) with the engine's
// defaults.
func (vs venues) loadTestRules(path string) (*rules.Set, *engine.Config, error) {
	cfg, err := config.Load(path, func(string) string { return "" }, config.Options{SecretsOptional: true, RulesOnly: true, Venues: vs.specs()})
	if err != nil {
		return nil, nil, err
	}
	if cfg.RulesOnly {
		return cfg.Rules, nil, nil
	}
	return cfg.Rules, &cfg.Engine, nil
}
