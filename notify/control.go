package notify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Controller is what the Telegram control steers: the running guard. Each
// method says its outcome in a sentence for the chat; by names who asked
// ("telegram:@name").
type Controller interface {
	// Status is the guard's state in a few lines.
	Status(ctx context.Context) string
	// Pause stops every action for d (0: until resumed).
	Pause(ctx context.Context, by string, d time.Duration) (string, error)
	// Resume lets the guard act again.
	Resume(ctx context.Context, by string) (string, error)
	// Silence mutes the notifications of a rule or a symbol for d.
	Silence(ctx context.Context, by, target string, d time.Duration) (string, error)
	// Ack silences the firing alerts until they resolve.
	Ack(ctx context.Context, by string) (string, error)
}

// AccountSelector is implemented by a Controller of several accounts: a
// command whose first argument names one of them (/pause bot-2 30m,
// /status main) is run on that account's Controller alone.
type AccountSelector interface {
	// ForAccount returns the Controller of the account name, if any.
	ForAccount(name string) (Controller, bool)
}

// TelegramControl answers the commands of a Telegram chat through the Bot
// API's long polling (getUpdates): /status, /pause [duration], /resume,
// /silence <rule|symbol> <duration>, /ack and /help. Only the allowed chat
// ids are heard; anything else is ignored. /pause and /resume ask for a
// confirmation with an inline button, valid for confirmWindow.
type TelegramControl struct {
	bot     *telegram // the channel's Bot API client, with a long-polling timeout
	allowed []string
	ctrl    Controller
	log     *slog.Logger
	now     func() time.Time
	// poll is the long-polling timeout asked of getUpdates.
	poll time.Duration

	// failAfter is how long getUpdates may keep failing before alarm is
	// called; alarm is told when the control fails that long and when it
	// reads again (nil: only the log says so).
	failAfter time.Duration
	alarm     func(ctx context.Context, failing bool, text string)

	mu      sync.Mutex
	pending map[string]confirmation // by nonce
	offset  int64
	limit   int // updates asked of one getUpdates; halved after an answer past maxUpdatesAnswer
}

// Telegram's getUpdates answers at most 100 updates. One is at worst a
// 4096-character message whose text JSON may escape to 6 bytes a
// character, quoting another as reply_to_message, with entities and
// names: under 64 KiB. maxUpdatesAnswer reads 100 of them whole, so that
// a flood of long messages from anyone who can write to the bot cannot
// make an answer unreadable (it was cut at 64 KiB: the decode failed, the
// offset never moved, and the control never answered again).
const (
	updatesLimit     = 100
	maxUpdatesAnswer = 8 << 20
)

// DefaultControlFailAfter is how long getUpdates may keep failing before
// the control's alarm says so.
const DefaultControlFailAfter = 5 * time.Minute

// confirmation is a /pause or /resume waiting for its button.
type confirmation struct {
	verb string // pause or resume
	// ctrl is the account's Controller when the command named one; nil
	// is TelegramControl.ctrl.
	ctrl    Controller
	d       time.Duration
	chat    string
	expires time.Time
}

// confirmWindow is how long a confirmation button stays valid.
const confirmWindow = 5 * time.Minute

// TelegramControlOption configures a TelegramControl.
type TelegramControlOption func(*TelegramControl)

// WithControlClock sets the clock of confirmations (tests).
func WithControlClock(now func() time.Time) TelegramControlOption {
	return func(t *TelegramControl) { t.now = now }
}

// WithPollTimeout sets getUpdates' long-polling timeout (default 25 s).
func WithPollTimeout(d time.Duration) TelegramControlOption {
	return func(t *TelegramControl) { t.poll = d }
}

// WithControlAlarm calls alarm once getUpdates has been failing for after
// (0: DefaultControlFailAfter), with failing true and a sentence saying
// so, and again with false when it reads again.
func WithControlAlarm(after time.Duration, alarm func(ctx context.Context, failing bool, text string)) TelegramControlOption {
	return func(t *TelegramControl) {
		if after > 0 {
			t.failAfter = after
		}
		t.alarm = alarm
	}
}

// WithControlLogger sets the logger.
func WithControlLogger(l *slog.Logger) TelegramControlOption {
	return func(t *TelegramControl) { t.log = l }
}

// NewTelegramControl builds the control of a telegram channel whose
// Control is set.
func NewTelegramControl(cc ChannelConfig, ctrl Controller, opts ...TelegramControlOption) (*TelegramControl, error) {
	if cc.Type != TypeTelegram || len(cc.ControlChats) == 0 {
		return nil, fmt.Errorf("channel %s: control needs a telegram channel with control_chat_ids", cc.Name)
	}
	t := &TelegramControl{allowed: cc.ControlChats, ctrl: ctrl,
		log: slog.New(slog.DiscardHandler), now: time.Now, poll: 25 * time.Second, pending: map[string]confirmation{},
		failAfter: DefaultControlFailAfter, limit: updatesLimit}
	for _, o := range opts {
		o(t)
	}
	t.bot = newTelegram(cc, httpPoster{hc: &http.Client{Timeout: t.poll + 15*time.Second}, redact: cc.redactor(), target: cc.target(), now: t.now,
		limit: maxUpdatesAnswer})
	return t, nil
}

// Run polls for commands until ctx ends. Errors are logged and retried
// with a backoff from 1 s to 30 s, honouring Telegram's retry_after.
func (t *TelegramControl) Run(ctx context.Context) error {
	backoff := time.Second
	var failingSince time.Time
	alarmed := false
	for ctx.Err() == nil {
		ups, err := t.updates(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			wait := backoff
			var de *DeliveryError
			if errors.As(err, &de) && de.RetryAfter > 0 {
				wait = de.RetryAfter
			}
			t.log.Warn("telegram control: getUpdates failed; retrying", "err", err, "in", wait)
			if failingSince.IsZero() {
				failingSince = t.now()
			}
			if d := t.now().Sub(failingSince); !alarmed && d >= t.failAfter {
				alarmed = true
				t.log.Error("telegram control: commands cannot be read", "for", d.Round(time.Second), "err", err)
				if t.alarm != nil {
					t.alarm(ctx, true, fmt.Sprintf("The Telegram control cannot read commands: getUpdates has been failing for %s (%v). Use the API or the CLI meanwhile.", d.Round(time.Second), err))
				}
			}
			if sleepCtx(ctx, wait) != nil {
				break
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		if alarmed {
			t.log.Info("telegram control: commands are read again", "after", t.now().Sub(failingSince).Round(time.Second))
			if t.alarm != nil {
				t.alarm(ctx, false, fmt.Sprintf("The Telegram control reads commands again, after %s.", t.now().Sub(failingSince).Round(time.Second)))
			}
		}
		failingSince, alarmed = time.Time{}, false
		backoff = time.Second
		for _, u := range ups {
			t.handle(ctx, u)
		}
	}
	return nil
}

// tgUpdate is one of getUpdates' results, the parts the control reads.
type tgUpdate struct {
	UpdateID int64 `json:"update_id"`
	Message  *struct {
		MessageID int64  `json:"message_id"`
		From      tgUser `json:"from"`
		Chat      tgChat `json:"chat"`
		Text      string `json:"text"`
	} `json:"message"`
	CallbackQuery *struct {
		ID      string `json:"id"`
		From    tgUser `json:"from"`
		Data    string `json:"data"`
		Message *struct {
			MessageID int64  `json:"message_id"`
			Chat      tgChat `json:"chat"`
		} `json:"message"`
	} `json:"callback_query"`
}

type tgUser struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
}

type tgChat struct {
	ID int64 `json:"id"`
}

func (u tgUser) by() string {
	if u.Username != "" {
		return "telegram:@" + u.Username
	}
	return "telegram:" + strconv.FormatInt(u.ID, 10)
}

// updates long-polls for the next updates, at most limit of them. Each is
// decoded on its own: one that cannot be (a field of an unexpected type)
// is logged and skipped, and the offset moves past it, so that one odd
// update cannot stop the control for good. An answer longer than
// maxUpdatesAnswer halves the limit for the next poll; at one update, the
// offset moves past it.
func (t *TelegramControl) updates(ctx context.Context) ([]tgUpdate, error) {
	t.mu.Lock()
	offset, limit := t.offset, t.limit
	t.mu.Unlock()
	body := map[string]any{"offset": offset, "limit": limit, "timeout": int(t.poll.Seconds()), "allowed_updates": []string{"message", "callback_query"}}
	var raws []json.RawMessage
	if err := t.bot.call(ctx, "getUpdates", body, &raws); err != nil {
		if errors.Is(err, ErrAnswerTooLarge) {
			t.mu.Lock()
			if t.limit > 1 {
				t.limit = max(t.limit/2, 1)
			} else {
				// Update ids are consecutive: the one unreadable is offset.
				t.offset = offset + 1
				t.log.Error("telegram control: an update longer than the answer's bound; skipped", "update_id", offset)
			}
			t.mu.Unlock()
		}
		return nil, err
	}
	ups := make([]tgUpdate, 0, len(raws))
	next := offset
	for _, raw := range raws {
		var u tgUpdate
		if err := json.Unmarshal(raw, &u); err != nil {
			var id struct {
				UpdateID *int64 `json:"update_id"`
			}
			skipped := next // no id: update ids are consecutive
			if json.Unmarshal(raw, &id) == nil && id.UpdateID != nil {
				skipped = *id.UpdateID
			}
			next = max(next, skipped+1)
			t.log.Warn("telegram control: an update that cannot be decoded; skipped", "update_id", skipped, "err", err)
			continue
		}
		next = max(next, u.UpdateID+1)
		ups = append(ups, u)
	}
	t.mu.Lock()
	t.offset = max(t.offset, next)
	t.limit = updatesLimit
	t.mu.Unlock()
	return ups, nil
}

// handle answers one update from an allowed chat; others are ignored.
func (t *TelegramControl) handle(ctx context.Context, u tgUpdate) {
	switch {
	case u.Message != nil:
		chat := strconv.FormatInt(u.Message.Chat.ID, 10)
		if !slices.Contains(t.allowed, chat) {
			t.log.Warn("telegram control: a command from a chat not in control_chat_ids; ignored", "chat", chat)
			return
		}
		t.command(ctx, chat, u.Message.From.by(), u.Message.Text)
	case u.CallbackQuery != nil && u.CallbackQuery.Message != nil:
		q := u.CallbackQuery
		chat := strconv.FormatInt(q.Message.Chat.ID, 10)
		if !slices.Contains(t.allowed, chat) {
			t.log.Warn("telegram control: a button from a chat not in control_chat_ids; ignored", "chat", chat)
			return
		}
		t.button(ctx, chat, q.ID, q.Message.MessageID, q.From.by(), q.Data)
	}
}

const controlHelp = "Commands:\n/status: the guard's state\n/pause [1h]: stop every action (asks to confirm)\n" +
	"/resume: act again (asks to confirm)\n/silence <rule|symbol> <30m>: mute its notifications\n/ack: mute the firing alerts until they resolve"

// command runs a text command.
func (t *TelegramControl) command(ctx context.Context, chat, by, text string) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return
	}
	verb, _, _ := strings.Cut(strings.TrimPrefix(fields[0], "/"), "@") // /pause@riskguard_bot
	args := fields[1:]
	reply := func(s string) { t.send(ctx, chat, s, nil) }
	ctrl, account := t.ctrl, ""
	if sel, ok := t.ctrl.(AccountSelector); ok && len(args) > 0 {
		if c, ok := sel.ForAccount(args[0]); ok {
			ctrl, account, args = c, args[0], args[1:]
		}
	}
	switch verb {
	case "status":
		reply(ctrl.Status(ctx))
	case "pause", "resume":
		var d time.Duration
		if verb == "pause" && len(args) > 0 {
			var err error
			if d, err = time.ParseDuration(args[0]); err != nil || d <= 0 {
				reply(fmt.Sprintf("/pause %s: expected a duration like 30m or 2h", args[0]))
				return
			}
		}
		nonce := newNonce()
		t.mu.Lock()
		for k, c := range t.pending {
			if t.now().After(c.expires) {
				delete(t.pending, k)
			}
		}
		c := confirmation{verb: verb, d: d, chat: chat, expires: t.now().Add(confirmWindow)}
		if account != "" {
			c.ctrl = ctrl
		}
		t.pending[nonce] = c
		t.mu.Unlock()
		question := "Resume the guard's actions?"
		button := "Resume"
		if verb == "pause" {
			question, button = "Pause every action until resumed? The guard keeps evaluating and notifying \"would act, paused\".", "Pause"
			if d > 0 {
				question = fmt.Sprintf("Pause every action for %s? The guard keeps evaluating and notifying \"would act, paused\".", d)
				button = "Pause " + d.String()
			}
		}
		if account != "" {
			question = "Account " + account + ": " + question
		}
		t.send(ctx, chat, question, [][]map[string]string{{
			{"text": button, "callback_data": "yes:" + nonce},
			{"text": "Cancel", "callback_data": "no:" + nonce},
		}})
	case "silence":
		if len(args) != 2 {
			reply("usage: /silence <rule|symbol> <duration>, e.g. /silence XBTC 30m")
			return
		}
		d, err := time.ParseDuration(args[1])
		if err != nil || d <= 0 {
			reply(fmt.Sprintf("/silence: %q is not a duration like 30m or 2h", args[1]))
			return
		}
		reply(outcome(ctrl.Silence(ctx, by, args[0], d)))
	case "ack":
		reply(outcome(ctrl.Ack(ctx, by)))
	default:
		help := controlHelp
		if _, ok := t.ctrl.(AccountSelector); ok {
			help += "\nSeveral accounts: name one first (/pause main 30m, /status bot-2); without a name, every account"
		}
		reply(help)
	}
}

// button runs a confirmation's answer.
func (t *TelegramControl) button(ctx context.Context, chat, queryID string, messageID int64, by, data string) {
	answer, nonce, _ := strings.Cut(data, ":")
	t.mu.Lock()
	c, ok := t.pending[nonce]
	delete(t.pending, nonce)
	t.mu.Unlock()
	var text string
	ctrl := c.ctrl
	if ctrl == nil {
		ctrl = t.ctrl
	}
	switch {
	case !ok || c.chat != chat || t.now().After(c.expires):
		text = "This button has expired: send the command again."
	case answer != "yes":
		text = "Cancelled."
	case c.verb == "pause":
		text = outcome(ctrl.Pause(ctx, by, c.d))
	default:
		text = outcome(ctrl.Resume(ctx, by))
	}
	_ = t.bot.call(ctx, "answerCallbackQuery", map[string]any{"callback_query_id": queryID, "text": truncate(text, 190)}, nil)
	_ = t.bot.call(ctx, "editMessageText", map[string]any{"chat_id": chat, "message_id": messageID, "text": text}, nil)
}

func outcome(s string, err error) string {
	if err != nil {
		return "Failed: " + err.Error()
	}
	return s
}

// send sends a message, with an inline keyboard when given; a 429 is
// retried once after its retry_after (at most a minute).
func (t *TelegramControl) send(ctx context.Context, chat, text string, keyboard [][]map[string]string) {
	body := map[string]any{"chat_id": chat, "text": truncate(text, telegramMaxText), "disable_web_page_preview": true}
	if keyboard != nil {
		body["reply_markup"] = map[string]any{"inline_keyboard": keyboard}
	}
	err := t.bot.call(ctx, "sendMessage", body, nil)
	var de *DeliveryError
	if errors.As(err, &de) && de.RetryAfter > 0 && de.RetryAfter <= time.Minute && sleepCtx(ctx, de.RetryAfter) == nil {
		err = t.bot.call(ctx, "sendMessage", body, nil)
	}
	if err != nil {
		t.log.Error("telegram control: reply not sent", "err", err)
	}
}

func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
