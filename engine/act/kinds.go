package act

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Kind is one kind of action, with its whole life: its row of the rules'
// table (Spec), how a rule's action of the kind merges into a position's
// plan (Merge), and, through the Step it merges into, the exchange calls it
// makes, how their outcome is settled and how it is said. Each kind is one
// file of this package and one row of DefaultKinds; nothing outside its
// file switches on it.
type Kind interface {
	// Name is the kind's name in the rules.
	Name() rules.ActionKind
	// Spec is the kind's row of the rules' table: its name, parameters
	// and descriptions.
	Spec() rules.KindSpec
	// Merge adds action a of due rule d to pl, evaluating its expressions
	// on env; a failure is d's error (its other actions go on). d is pl's
	// last Due, in place: a Merge adds no Due to pl.
	Merge(pl *Plan, d *Due, a *rules.Action, ev *rules.Evaluator, env *rules.Env)
}

// Step is one exchange call of a plan, merged from the actions of every
// rule that asked for it (the leverage cuts and isolation of a position
// merge into one settings call). A kind's Merge makes it (Plan.Step) and
// marks the rules that asked (Due.Ask). The engine runs a plan's steps in
// their Order: Prepare when the tick decides them, Done once what was sent
// has ended.
type Step interface {
	// Order ranks the call among its plan's: lower goes first (a cancel
	// 10, a reduce order 20, the settings call 30).
	Order() int
	// Prepare decides the call on the plan and readies it through h: what
	// to send, in order (nothing when nothing is left to do, or it is
	// held, skipped or refused, which it says). It returns the error its
	// rules hear when nothing goes out for a reason they should (nil for
	// nothing to do, or a dry run).
	Prepare(ctx context.Context, h Host, pl *Plan) ([]*Pending, error)
	// Done applies the outcome once what Prepare readied has ended
	// (Pending.Result), and returns what the call's rules hear: nil when
	// it did what they asked. It is called once per Prepare, on the
	// goroutine that collects the calls (a later tick's, for a call that
	// ran past its own).
	Done(ctx context.Context, h Host, pl *Plan) error
}

// Noter is a Step that says in a few words why its last Prepare sent
// nothing its rules asked for, when that was no failure (at target,
// skipped because …): the status page's "next" text of its rules. "" when
// it readied a call, or when its error says why not.
type Noter interface {
	Note() string
}

// Skipper is a Step that says whether its last Prepare left out what its
// rules asked for a reason money can change: a cut the free balance could
// not fund or a budget bounded, a call the margin model judged harmful on
// this account. Its rules decide again when the account's money changes
// (Model.MoneySig), not only after their cooldown.
type Skipper interface {
	Skipped() bool
}

// Pending is a mutating call a kind readied (Host.Prepare) and the
// executor sends: what its phases say, and, once it ended, its Result.
type Pending struct {
	Base         journal.Record
	Desc, Effect string
	// Event is the action as the tick's report shows it, completed with
	// its outcome.
	Event *journal.ActionEvent
	Do    func(context.Context) (json.RawMessage, error)
	// ReadStart is when the snapshot it was decided on began to be read.
	ReadStart time.Time
	Result    Result
}

// Exchange is what the kinds change on the exchange: both calls are
// idempotent. A kind that needs another call gets it from its Host
// (Placer), nil when the venue lacks it.
type Exchange interface {
	SetPositionSettings(ctx context.Context, symbol string, s exchange.Settings) (*exchange.Position, error)
	CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error)
}

// OrderPlacer is a venue that can place an order.
type OrderPlacer interface {
	PlaceOrder(ctx context.Context, symbol string, o exchange.OrderRequest) (*exchange.Order, error)
}

// Host is what the engine gives a plan's calls: the checks every mutating
// call passes, the journal, the tick's margin model and the exchange. One
// is made for deciding a tick's plans and one for collecting what ended.
type Host interface {
	// Now is the time of the tick that decided the plan.
	Now() time.Time
	// Tally: the actions are only counted (engine.Deps.Tally), without
	// their predicted effect.
	Tally() bool
	// DryRun: nothing is sent, nor any budget spent.
	DryRun() bool
	Logger() *slog.Logger
	// Emit says ev, in the report of the tick at hand. It copies what it
	// keeps of what ev points to: the caller may write it again once Emit
	// returns (a step's scratch).
	Emit(ctx context.Context, ev journal.Event)
	// Note says ev outside any tick's report.
	Note(ctx context.Context, ev journal.Event)
	// Wants reports the outputs an event at level reaches beside the
	// report and the audit log (journal.Journal.Wants): an event is built
	// without the others.
	Wants(ctx context.Context, level slog.Level) journal.Outputs
	// Prepare passes a mutating call through the checks every one passes
	// (a dry run, leadership, a pause, the snapshot's age, the action
	// budget with its breaker), saying a call held back. It returns the
	// call to send, or why none goes (nil for a dry run).
	Prepare(ctx context.Context, base journal.Record, desc, effect string, ev *journal.ActionEvent, do func(context.Context) (json.RawMessage, error)) (*Pending, error)
	// Finish takes in a call that ended and returns its error.
	Finish(p *Pending) error
	// Outcome counts a call's outcome on its symbol (its backoff).
	Outcome(ctx context.Context, symbol string, err error)
	// Model is the tick's margin model, built at its first use; it is
	// the tick's alone (the next tick's is built in its place): a step
	// keeps none of it past its Prepare but the predictions it made.
	Model() *Model
	// Moved moves the tick's margin model on to next when the tick that
	// decided at is still the one at hand: its later calls see the effect.
	Moved(at time.Time, next margin.Account)
	// ReadBack compares a liquidation price the exchange read back after
	// a call with the model's and says a difference of more than a basis
	// point of the index; settings: it also marks the model's fit.
	ReadBack(ctx context.Context, at time.Time, symbol string, predicted, got, index decimal.Decimal, settings bool)
	// Changed says the rule states changed: the state is saved.
	Changed()
	Exchange() Exchange
	// Placer is the venue's orders, nil when it places none (the venue's
	// capabilities are asked once, when the engine is built).
	Placer() OrderPlacer
	// Positions reads the account's positions (a read-back).
	Positions(ctx context.Context) ([]exchange.Position, error)
	// Settled says that the order of intent id, whose outcome was
	// unknown when its call ended, is settled: its durable intent (ha)
	// may go once the state is saved.
	Settled(id string)
	// ListingLag is how long after an answer that says an order filled
	// the positions listing may still show the position as before it
	// (engine.listing_lag): it is read again within it.
	ListingLag() time.Duration
	// FirstHarm reports whether no harmful action of the plan's rules was
	// notified yet in their current firing, and marks it so.
	FirstHarm(pl *Plan) bool
	// Once reports whether what is asked on symbol for the first time in
	// the tick (a symbol's cancel, shared by its long and short).
	Once(what, symbol string) bool
}

// ErrRefused marks the error of a call that repeating at every tick cannot
// change: its rules wait for their cooldown (errors.Is).
var ErrRefused = errors.New("refused")

// ErrHeld marks the error of a call held back until what came before it
// is settled: it starts no cooldown, counts as no failure and is said by
// its kind.
var ErrHeld = errors.New("held")

// marked is an error that says only its text and is its mark (ErrRefused,
// ErrHeld) for errors.Is: the mark tells its rules what to do, the text
// what happened.
type marked struct {
	text string
	mark error
}

func (m *marked) Error() string        { return m.text }
func (m *marked) Is(target error) bool { return target == m.mark }

// Refused reports whether err is a refusal the cooldown spaces out: the
// exchange's own for good (a 4xx other than 429: a leverage it will not
// accept, a bad signature) or one of a kind's (ErrRefused).
func Refused(err error) bool {
	var ae *exchange.APIError
	return errors.Is(err, ErrRefused) || errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != 429
}

// Intent is a mutating call as it was about to leave, made durable before
// it did (the audit log's intended and sent records; under ha, the shared
// state's intents): what a restart or a new leader finds when the call's
// outcome was never recorded.
type Intent struct {
	ID       string    `json:"id"`
	At       time.Time `json:"at"`
	Symbol   string    `json:"symbol"`
	Position string    `json:"position"` // the position's id
	Action   string    `json:"action"`
	Rules    []string  `json:"rules,omitempty"`
	// Quantity is an order's: set for a call that is not idempotent.
	Quantity *decimal.Decimal `json:"quantity,omitempty"`
}

// IntentID names a call's intent: its symbol, when it was decided and its
// action ("XSOL@20260301T120000.000Z/reduce_position").
func IntentID(symbol, action string, at time.Time) string {
	return symbol + "@" + at.UTC().Format("20060102T150405.000Z") + "/" + action
}

// ClientOrderID is the client order id of the order of the intent id: "rg"
// and 30 hex digits of the id's SHA-256, 32 characters of [0-9a-z] that
// every exchange taking such an id accepts. The same intent always has the
// same id, so an exchange that refuses a used id refuses a repeat of it.
func ClientOrderID(intentID string) string {
	sum := sha256.Sum256([]byte(intentID))
	return "rg" + hex.EncodeToString(sum[:15])
}

// IntentOf is the intent of the call an audit record says: the executor's
// before it sends, a restart's of a call left at "sent".
func IntentOf(r journal.Record) Intent {
	in := Intent{ID: IntentID(r.Symbol, r.Action, r.Time), At: r.Time, Symbol: r.Symbol, Position: r.Position, Action: r.Action, Rules: r.Rules}
	if r.Quantity != nil {
		q := *r.Quantity
		in.Quantity = &q
	}
	return in
}

// Kinds is the table of action kinds an engine knows, looked up by name.
type Kinds []Kind

// DefaultKinds is the table of the kinds the guard ships, each made afresh
// (a kind may keep state of its own: the reduce order stops after a
// position grew). A caller may append its own.
func DefaultKinds() Kinds {
	return Kinds{lowerLeverage{}, setIsolated{}, cancelOrders{}, &reducePosition{}, notifyKind{}}
}

// Of is the kind named k; nil when the table does not know it.
func (ks Kinds) Of(k rules.ActionKind) Kind {
	i := slices.IndexFunc(ks, func(kd Kind) bool { return kd.Name() == k })
	if i < 0 {
		return nil
	}
	return ks[i]
}

// Check refuses a rule set using a kind the table does not know: parsed
// with another table, its actions would be decided and never sent.
func (ks Kinds) Check(set *rules.Set) error {
	for _, r := range set.Rules {
		for _, a := range r.Actions {
			if ks.Of(a.Kind) == nil {
				return fmt.Errorf("rule %q: action %s: the engine knows no such action kind (it knows %s)", r.Name, a.Kind, strings.Join(ks.Table().Names(), ", "))
			}
		}
	}
	return nil
}

// Table is the rules' table of the kinds: what the loader parses with.
func (ks Kinds) Table() rules.Kinds {
	out := make(rules.Kinds, len(ks))
	for i, k := range ks {
		out[i] = k.Spec()
	}
	return out
}

// shipped is the rules' row of a shipped kind.
func shipped(k rules.ActionKind) rules.KindSpec {
	s, _ := rules.DefaultKinds().Spec(k)
	return s
}
