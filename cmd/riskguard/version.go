package main

import (
	"context"
	"fmt"
	"runtime/debug"
)

// runVersion is `riskguard version` (and `riskguard --version`): the
// module version, the commit it was built from and the Go version, from
// the build information. A build without version control information
// (go run, -buildvcs=false) says so.
func (m *Main) runVersion(_ context.Context, args []string) error {
	fs := m.newFlags("version", "version", commands()["version"].summary)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, versionLine(debug.ReadBuildInfo()))
	return nil
}

// versionLine describes a build: "riskguard v1.2.3 (commit abc123, modified) go1.26.8".
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "riskguard (no build information)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	commit, modified := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case commit == "":
		commit = "commit unknown: built without version control information"
	case modified:
		commit = "commit " + commit + ", modified"
	default:
		commit = "commit " + commit
	}
	return fmt.Sprintf("riskguard %s (%s) %s", version, commit, bi.GoVersion)
}
