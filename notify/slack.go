package notify

import (
	"context"
	"strings"
)

// TypeSlack is a Slack incoming webhook.
const TypeSlack = "slack"

// slackMaxText is the longest text Slack takes, in characters.
const slackMaxText = 40000

// decodeSlack reads webhook_url (or webhook_url_env), a secret.
func decodeSlack(p *parser, path string, m map[string]any, cc *ChannelConfig) {
	p.unknown(path, m, "type", "webhook_url", "webhook_url_env")
	cc.URL = p.requiredURL(m, path, "webhook_url", true)
}

// slack posts to a Slack incoming webhook.
type slack struct {
	httpPoster
	url string
}

func newSlack(cc ChannelConfig, o *options) (Sender, error) {
	return &slack{httpPoster: o.poster(cc), url: cc.URL}, nil
}

func (s *slack) Send(ctx context.Context, m Message) error {
	a, err := s.postJSON(ctx, s.url, map[string]string{"text": truncate(slackEscape(m.Text), slackMaxText)}, nil)
	if err != nil {
		return err
	}
	if a.status/100 != 2 {
		return s.statusError(a, 0)
	}
	return nil
}

// slackEscape escapes the three characters Slack's mrkdwn gives a meaning
// to, as Slack asks of every text that is not markup. It makes text that may come from outside (an exchange's error,
// a comment, a name, a rule's text) show as written: "<!channel>" pings
// nobody and "<https://evil.example|log in>" is no disguised link. The
// guard's own texts use no Slack markup, so the whole text is escaped.
func slackEscape(text string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(text)
}
