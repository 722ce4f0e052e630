// Package dispatch sends what a tick decided. A Dispatcher takes the
// tick's plans (engine/act), passes each mutating call through the checks
// every one passes, hands each symbol's calls to the executor, holds back a
// symbol whose calls keep failing, and says what became of each plan's
// rules once its calls ended.
//
// The checks are stages (Stage), one small value each, composed in one
// ordered list in one place (stages.go, Stages) as Alertmanager's notify
// pipeline composes inhibit, silence and receiver:
//
//	AtSymbol  a call on the symbol still in flight
//	AtPlan    the symbol's backoff after failed calls
//	AtDecide  tally, dry run, leadership, a pause, the snapshot's age, the
//	          action budget with its circuit breaker
//	AtSend    the executor's last look: the intended phase said,
//	          leadership, the pauses' gate, the snapshot's age, the
//	          intent made durable
//
// The first stage that holds a call back says why (in the tick's report,
// the audit log, the log, the metrics and the notifications, through one
// Emitter) and ends its way; a stage is tested alone, on a Call.
//
// The dispatcher owns the breaker, the backoff and the executor. What a
// plan's end changes elsewhere (the rule states, the state file, the
// status's next texts) it hands back through Outcomes, and its steps
// predict with the tick's margin model through Model. It asks whether it
// may act of a Leader and the pauses of Pauses. It never imports the
// engine: the engine builds it with these (New) and calls Begin, Run and
// End around each tick.
//
// A Dispatcher is tick-owned: only the goroutine running the tick calls
// it, but for InFlight and Busy, and for the executor's goroutines, which
// run the AtSend stages and say what happens.
package dispatch
