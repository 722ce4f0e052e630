package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/dispatch"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/notify"
)

// Leadership says whether this process may send the account's mutating
// calls: under ha, only the leader of the account's election does, and
// only while its lease is safely held (package ha's Seat). Without it the
// engine always may.
type Leadership interface {
	// MayAct reports whether a mutating call may start now, and why not.
	// It is asked when a tick decides a call and again right before the
	// call is sent (executorCall).
	MayAct(now time.Time) (bool, string)
	// Term identifies the leadership this process holds (it changes with
	// every election won), 0 on a standby.
	Term() int64
}

// SharedState is where the leader keeps the state for the next one: the
// state file's parts by name (rules/NAME, breaker, silences, pauses).
// SaveState writes only what differs from what it last wrote, fenced on
// the leadership: a deposed leader writes nothing.
type SharedState interface {
	LoadState(ctx context.Context) (map[string][]byte, error)
	SaveState(ctx context.Context, parts map[string][]byte) (int, error)
}

// IntentStore is a SharedState that also keeps each mutating call's intent,
// written before the call leaves and fenced on the leadership as the state
// is (package ha's Seat), so that a new leader finds the calls whose
// outcome the last one never saved. Intents are parts named
// "intents/ID" of LoadState; SaveState neither writes nor deletes them.
type IntentStore interface {
	SaveIntent(ctx context.Context, id string, intent []byte) error
	DropIntent(ctx context.Context, id string) error
}

// ErrStandby is the error of a call held back because this process does
// not lead the account (or no longer safely holds its lease). Like a pause
// it starts no cooldown and spends no budget: a takeover acts at its
// first tick.
var ErrStandby = dispatch.ErrStandby

// leader is this process's standing for the account: under ha, the seat
// it holds in the account's election and where the state for the next
// leader is kept; without ha (nil seat) it always may act. Its term is
// read by the executor's goroutine too; the rest is tick-owned.
type leader struct {
	// seat and shared are ha's (nil without it).
	seat   Leadership
	shared SharedState
	// term is the leadership whose shared state was loaded (0 on a
	// standby).
	term atomic.Int64
	// said holds the calls said held on a standby.
	said map[string]bool
	// unsaved: the last shared save failed.
	unsaved bool
	// ended are the intents whose calls ended, dropped from the shared
	// state once the state that counts their cooldowns is saved
	// (tick-owned).
	ended []string
}

// intentTimeout bounds the write of an intent before its call.
const intentTimeout = 2 * time.Second

// SaveIntent makes a call's intent durable in the shared state before the
// call leaves; nil without ha or without an IntentStore. A call whose
// intent cannot be written does not leave (ErrStandby: said, no cooldown).
// Safe from the executor's goroutine.
func (l *leader) SaveIntent(ctx context.Context, in act.Intent) error {
	st, ok := l.shared.(IntentStore)
	if !ok || l.seat == nil {
		return nil
	}
	b, err := json.Marshal(in)
	if err == nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), intentTimeout)
		err = st.SaveIntent(wctx, in.ID, b)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("%w: the call's intent could not be written to the shared state (%v); it is not sent", ErrStandby, err)
	}
	return nil
}

// KeepsIntents reports whether intents are kept: under ha, with a shared
// state that stores them (SaveIntent, Ended).
func (l *leader) KeepsIntents() bool {
	_, ok := l.shared.(IntentStore)
	return ok
}

// Ended records that the call of intent id ended: its intent is dropped
// after the next shared save.
func (l *leader) Ended(id string) {
	if l.KeepsIntents() && id != "" {
		l.ended = append(l.ended, id)
	}
}

// dropEnded drops the intents of the calls that ended, now that the state
// counting their cooldowns is saved; those etcd refuses are tried again
// after the next save.
func (l *leader) dropEnded() {
	st, ok := l.shared.(IntentStore)
	if !ok || len(l.ended) == 0 {
		return
	}
	var left []string
	for _, id := range l.ended {
		ctx, cancel := context.WithTimeout(context.Background(), intentTimeout)
		if err := st.DropIntent(ctx, id); err != nil {
			left = append(left, id)
		}
		cancel()
	}
	l.ended = left
}

// MayAct reports whether the calls may go out: always without ha; under
// ha when this process leads, has taken the shared state of its term, and
// its lease is safely held. Safe from the executor's goroutine.
func (l *leader) MayAct(now time.Time) error {
	if l.seat == nil {
		return nil
	}
	term := l.seat.Term()
	if term == 0 {
		_, why := l.seat.MayAct(now)
		return fmt.Errorf("%w: %s", ErrStandby, why)
	}
	if term != l.term.Load() {
		return fmt.Errorf("%w: leader since term %d, the shared state is not loaded yet", ErrStandby, term)
	}
	if ok, why := l.seat.MayAct(now); !ok {
		return fmt.Errorf("%w: %s", ErrStandby, why)
	}
	return nil
}

// OnStandby refuses a silence, pause, acknowledgement or resume made on a
// standby (Telegram's; the control API answers 421 before): the leader's
// would replace it at the next takeover, and the leader never hears of
// it. The error says where the leader is.
func (l *leader) OnStandby(now time.Time) error {
	if l.seat == nil || l.seat.Term() != 0 {
		return nil
	}
	_, why := l.seat.MayAct(now)
	return fmt.Errorf("%w: %s; make the change there", ErrStandby, why)
}

// SayStandby reports whether a call held on a standby is to be said: once
// per call and role, so a standby's audit log shows what it would do
// without repeating it every tick.
func (l *leader) SayStandby(key string) bool {
	if l.said[key] {
		return false
	}
	if l.said == nil {
		l.said = map[string]bool{}
	}
	l.said[key] = true
	return true
}

// Changed reports the term the seat holds when it is not the one whose
// shared state was taken: a term won, or 0 for one lost. It forgets what
// was said on standby then.
func (l *leader) Changed() (int64, bool) {
	if l.seat == nil {
		return 0, false
	}
	term := l.seat.Term()
	if term == l.term.Load() {
		return 0, false
	}
	clear(l.said)
	return term, true
}

// Load reads the last leader's state: none without a shared store.
func (l *leader) Load(ctx context.Context) (map[string][]byte, error) {
	if l.shared == nil {
		return nil, nil
	}
	return l.shared.LoadState(ctx)
}

// Took records that the shared state of term was taken (0: a standby);
// MayAct lets calls go out from then on.
func (l *leader) Took(term int64) { l.term.Store(term) }

// syncLeadership follows the role at the start of a tick: on a term won it
// loads the shared state (cooldowns, margin budgets, the breaker,
// silences, pauses and acks) over its own, keeping its warm pending and
// firing states and windows; on a term lost it says so. The caller holds
// tick.
func (e *Engine) syncLeadership(ctx context.Context, now time.Time) {
	term, changed := e.lead.Changed()
	if !changed {
		return
	}
	if term == 0 {
		e.lead.Took(0)
		e.jr.Emit(ctx, nil, event{Level: slog.LevelWarn, Msg: "standby: another process leads the account; actions are held",
			Audit: &journal.Record{Time: now, Type: "ha", To: "standby"}})
		return
	}
	parts, err := e.lead.Load(ctx)
	if err != nil {
		e.log.Error("leader, but the shared state could not be read: not acting until it is", "err", err, "term", term)
		return
	}
	if len(parts) > 0 {
		s, err := stateFromParts(parts)
		if err != nil {
			e.log.Error("the shared state could not be decoded; acting on this host's own state", "err", err)
		} else {
			// The breaker and the silences and pauses are the last
			// leader's; the rule states are merged (evaluator.takeover).
			b := s.Breaker
			b.Restore(now, e.cfg.BreakerReset)
			e.disp.SetBreaker(b)
			e.ctl.Replace(s.Silences, s.Pauses, now)
			e.eval.takeover(s, now)
			// The last leader's calls whose outcome it never saved: taken
			// as sent, their rules' cooldowns count from them, and the
			// first read says what the account shows.
			for _, in := range s.Intents {
				e.eval.adopt(in)
				e.recon.Adopted(in)
				e.jr.Emit(ctx, nil, event{Level: slog.LevelWarn, Msg: "taken over from the last leader: " + in.Action + " " + in.Symbol + " (intent " + in.ID + ") without a saved outcome; its rules' cooldowns count from it",
					Audit: &journal.Record{Time: now, Type: "action", Phase: "interrupted", Action: in.Action, Symbol: in.Symbol, Position: in.Position, Rules: in.Rules, Quantity: in.Quantity,
						Reason: fmt.Sprintf("intent %s of %s, made durable by the last leader before the call left; no outcome was saved: taken as sent, never sent again as such", in.ID, in.At.UTC().Format(time.RFC3339Nano))}})
			}
		}
	}
	e.file.changed() // the next save writes what differs from the shared state
	e.lead.Took(term)
	text := fmt.Sprintf("leader (term %d): this process sends the account's calls from now on", term)
	e.jr.Emit(ctx, nil, event{Level: slog.LevelWarn, Msg: text, Audit: &journal.Record{Time: now, Type: "ha", To: "leader", Reason: text},
		Note: &notify.Message{Time: now, Kind: notify.KindLifecycle, Severity: "warning", Text: text}})
}

// The shared state's part names.
const (
	partBreaker  = "breaker"
	partSilences = "silences"
	partPauses   = "pauses"
	partRules    = "rules/"
	partIntents  = "intents/"
)

// parts splits the state into what SharedState keeps, one part per rule
// (with its positions' symbols), so a tick writes only the rules whose
// state changed.
func (s *savedState) parts() (map[string][]byte, error) {
	out := make(map[string][]byte, len(s.Rules)+3)
	put := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode state part %s: %w", name, err)
		}
		out[name] = b
		return nil
	}
	if err := errors.Join(put(partBreaker, s.Breaker), put(partSilences, s.Silences), put(partPauses, s.Pauses)); err != nil {
		return nil, err
	}
	for name, r := range s.Rules {
		if len(r.Positions) == 0 {
			continue
		}
		syms := make(map[string]string, len(r.Positions))
		for k := range r.Positions {
			syms[k] = s.Symbols[k]
		}
		if err := put(partRules+name, sharedRule{savedRule: r, Symbols: syms}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sharedRule is one rule's part: its states and the symbols of its
// positions.
type sharedRule struct {
	savedRule
	Symbols map[string]string `json:"symbols,omitempty"`
}

// stateFromParts is parts' inverse.
func stateFromParts(parts map[string][]byte) (*savedState, error) {
	s := &savedState{Version: stateFileVersion, Rules: map[string]savedRule{}, Symbols: map[string]string{}}
	var errs []error
	for name, b := range parts {
		var err error
		switch {
		case name == partBreaker:
			err = json.Unmarshal(b, &s.Breaker)
		case name == partSilences:
			err = json.Unmarshal(b, &s.Silences)
		case name == partPauses:
			err = json.Unmarshal(b, &s.Pauses)
		case strings.HasPrefix(name, partIntents):
			var in act.Intent
			if err = json.Unmarshal(b, &in); err == nil {
				s.Intents = append(s.Intents, in)
			}
		case strings.HasPrefix(name, partRules):
			var r sharedRule
			if err = json.Unmarshal(b, &r); err == nil {
				s.Rules[strings.TrimPrefix(name, partRules)] = r.savedRule
				for k, v := range r.Symbols {
					s.Symbols[k] = v
				}
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("state part %s: %w", name, err))
		}
	}
	slices.SortFunc(s.Intents, func(a, b act.Intent) int { return strings.Compare(a.ID, b.ID) })
	return s, errors.Join(errs...)
}

// handover is a Leadership that may be handing its account over to
// another process (package ha's Seat, when the accounts are spread anew):
// it starts no call then, but still writes the state of the calls it
// made, so the next leader has their cooldowns.
type handover interface{ HandingOver() bool }

// HandingOver reports whether the seat is handing the account over while
// this process still leads with its term's state taken.
func (l *leader) HandingOver() bool {
	h, ok := l.seat.(handover)
	return ok && h.HandingOver() && l.seat.Term() == l.term.Load()
}

// Shares reports whether there is a shared store to save to.
func (l *leader) Shares() bool { return l.shared != nil }

// Unsaved reports whether the last shared save failed.
func (l *leader) Unsaved() bool { return l.unsaved }

// SaveShared writes the state's changed parts while this process leads
// (or hands over); a failure leaves them for the next save, and is
// returned.
func (l *leader) SaveShared(s *savedState, now time.Time) error {
	if l.shared == nil || l.MayAct(now) != nil && !l.HandingOver() {
		return nil
	}
	parts, err := s.parts()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = l.shared.SaveState(ctx, parts)
		cancel()
	}
	l.unsaved = err != nil
	if err == nil {
		l.dropEnded()
	}
	return err
}

// waker is a Leadership that says when this process wins the account's
// election (package ha's Seat): Run ticks at once then, so a takeover
// acts on its warm states at once instead of up to an interval later.
type waker interface{ Won() <-chan struct{} }

// WonElection is the channel that wakes Run on a won election; nil
// (never) without ha or with a Leadership that does not say it.
func (l *leader) WonElection() <-chan struct{} {
	if w, ok := l.seat.(waker); ok {
		return w.Won()
	}
	return nil
}
