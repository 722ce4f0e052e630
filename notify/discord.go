package notify

import (
	"context"
	"encoding/json"
	"strings"
)

// TypeDiscord is a Discord webhook.
const TypeDiscord = "discord"

// discordMaxText is the longest text Discord takes, in characters.
const discordMaxText = 2000

// decodeDiscord reads webhook_url (or webhook_url_env), a secret.
func decodeDiscord(p *parser, path string, m map[string]any, cc *ChannelConfig) {
	p.unknown(path, m, "type", "webhook_url", "webhook_url_env")
	cc.URL = p.requiredURL(m, path, "webhook_url", true)
}

// discord posts to a Discord webhook. Mentions are disabled so that a
// message quoting "@everyone" pings nobody, and brackets are escaped so
// that "[log in](https://evil.example)" is no disguised link.
type discord struct {
	httpPoster
	url string
}

func newDiscord(cc ChannelConfig, o *options) (Sender, error) {
	return &discord{httpPoster: o.poster(cc), url: cc.URL}, nil
}

func (d *discord) Send(ctx context.Context, m Message) error {
	body := map[string]any{
		"content":          truncate(discordEscape(m.Text), discordMaxText),
		"allowed_mentions": map[string]any{"parse": []string{}},
	}
	a, err := d.postJSON(ctx, d.url, body, nil)
	if err != nil {
		return err
	}
	if a.status/100 == 2 {
		return nil
	}
	// Discord's 429 body has retry_after in seconds, with fractions.
	var rl struct {
		RetryAfter float64 `json:"retry_after"`
	}
	_ = json.Unmarshal(a.body, &rl)
	return d.statusError(a, secondsDuration(rl.RetryAfter))
}

// discordEscape escapes what makes a masked link in Discord's markdown
// ([text](url)): the brackets, and the backslash that could unescape
// them. Escaped, they show as written.
func discordEscape(text string) string {
	return strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`).Replace(text)
}
