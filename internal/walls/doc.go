// Package walls holds no code: its test keeps the repository's floors,
// the one direction its packages may import each other in, so that a
// wall the design draws is one the build keeps.
//
// From the top: cmd wires everything; config reads the one file; web,
// engine/backtest and engine/ruletest drive the engine; the engine's root
// composes its parts; the parts under engine/ (act, dispatch, market, ...)
// never import the root; exchange, rules, notify and ha know nothing of
// the engine; internal/ knows nothing of the rest. The compiler refuses a
// cycle; the test refuses an import that points up a floor, even one that
// would compile.
package walls
