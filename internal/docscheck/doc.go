// Package docscheck holds no code: its tests keep docs/architecture.md, the
// one map of the repository, measured rather than written. They parse the
// Go source with go/parser and fail when a file, directory, function or
// name the map gives no longer exists, when a figure it states (Engine's
// fields, methods and files; the tick's stops and returns) differs from the
// one the source gives, and when a function grows past 150 lines.
//
//	go test ./internal/docscheck -v    # every figure, measured, in the log
package docscheck
