package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// TypeTelegram is a Telegram chat, through a bot.
const TypeTelegram = "telegram"

// DefaultTelegramAPI is the Bot API's base URL.
const DefaultTelegramAPI = "https://api.telegram.org"

// telegramMaxText is the longest text Telegram takes, in characters.
const telegramMaxText = 4096

// decodeTelegram reads token (or token_env), chat_id, the optional api_url
// and control_chat_ids (the chats whose commands the control obeys).
func decodeTelegram(p *parser, path string, m map[string]any, cc *ChannelConfig) {
	p.unknown(path, m, "type", "token", "token_env", "chat_id", "api_url", "control_chat_ids")
	cc.Token = p.required(m, path, "token", true)
	if strings.ContainsAny(cc.Token, "/?#% ") {
		p.errorf(path+".token", "not a bot token: it contains /, ?, #, %% or a space")
	}
	cc.ChatID = p.chatID(m, path+".chat_id")
	if v, ok := m["control_chat_ids"]; ok {
		list, isList := v.([]any)
		if !isList || len(list) == 0 {
			p.errorf(path+".control_chat_ids", "expected a list of the chat ids whose commands the guard obeys, like [123456789]")
		}
		for i, id := range list {
			if s := p.chatID(map[string]any{"chat_id": id}, fmt.Sprintf("%s.control_chat_ids[%d]", path, i)); s != "" {
				cc.ControlChats = append(cc.ControlChats, s)
			}
		}
	}
	cc.URL = DefaultTelegramAPI
	if s, ok := p.str(m, path, "api_url"); ok && s != "" {
		if p.httpURL(path+".api_url", s) {
			cc.URL = strings.TrimRight(s, "/")
		}
	}
}

// chatID reads a chat id at path: a number (written as one or as a string)
// or @channelname.
func (p *parser) chatID(m map[string]any, path string) string {
	v, ok := m["chat_id"]
	if !ok || v == nil {
		p.errorf(path, "required: a chat id like \"-1001234567890\" or a channel like \"@name\"")
		return ""
	}
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
	case int:
		s = strconv.Itoa(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			p.errorf(path, "expected an integer or a string")
			return ""
		}
		s = strconv.FormatInt(int64(x), 10)
	default:
		p.errorf(path, "expected an integer or a string")
		return ""
	}
	if s == "" {
		p.errorf(path, "required: empty")
	} else if _, err := strconv.ParseInt(s, 10, 64); err != nil && !strings.HasPrefix(s, "@") {
		p.errorf(path, "expected a numeric chat id or @channelname")
	}
	return s
}

// telegram calls the Bot API's sendMessage. Text is sent plain (no parse
// mode), so that symbols and rule names need no escaping.
type telegram struct {
	httpPoster
	api    string // base URL without the /bot<token> part
	token  string
	chatID string
}

// newTelegram is the Bot API client of channel cc, which the sender and
// the Telegram control share.
func newTelegram(cc ChannelConfig, p httpPoster) *telegram {
	api := cc.URL
	if api == "" {
		api = DefaultTelegramAPI
	}
	return &telegram{httpPoster: p, api: strings.TrimRight(api, "/"), token: cc.Token, chatID: cc.ChatID}
}

func newTelegramSender(cc ChannelConfig, o *options) (Sender, error) {
	return newTelegram(cc, o.poster(cc)), nil
}

func (t *telegram) Send(ctx context.Context, m Message) error {
	return t.call(ctx, "sendMessage", map[string]any{
		"chat_id":                  t.chatID,
		"text":                     truncate(m.Text, telegramMaxText),
		"disable_web_page_preview": true,
	}, nil)
}

// call posts one Bot API method and decodes its result into out (nil:
// none). A refusal is a *DeliveryError with Telegram's code and
// retry_after; the token never appears in an error.
func (t *telegram) call(ctx context.Context, method string, body, out any) error {
	a, err := t.postJSON(ctx, t.api+"/bot"+t.token+"/"+method, body, nil)
	if err != nil {
		return err
	}
	var r struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  struct {
			RetryAfter float64 `json:"retry_after"`
		} `json:"parameters"`
	}
	jerr := json.Unmarshal(a.body, &r)
	if jerr == nil && r.OK && a.status/100 == 2 {
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				return &DeliveryError{Status: a.status, Permanent: true, Msg: fmt.Sprintf("%s: unexpected result: %v", method, err)}
			}
		}
		return nil
	}
	if jerr != nil || r.Description == "" {
		return t.statusError(a, 0)
	}
	code := r.ErrorCode
	if code == 0 {
		code = a.status
	}
	return &DeliveryError{
		Status:     code,
		RetryAfter: secondsDuration(r.Parameters.RetryAfter),
		Permanent:  code != http.StatusTooManyRequests && code < 500,
		Msg:        t.redact.apply(truncate(r.Description, 200)),
	}
}
