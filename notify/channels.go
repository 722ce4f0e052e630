package notify

import (
	"fmt"
	"strings"
)

// channelType is one row of the channel table: a kind of channel, named by
// its mapping's type: key.
type channelType struct {
	// name is the type: value (TypeSlack, …).
	name string
	// decode checks the channel's mapping m (its keys, unknown ones
	// included) and reads it into cc, reporting every problem through p at
	// path.KEY; path is the channel's, e.g. notify.channels.ops.
	decode func(p *parser, path string, m map[string]any, cc *ChannelConfig)
	// sender builds the Sender of a channel that decode accepted.
	sender func(cc ChannelConfig, o *options) (Sender, error)
	// secretURL says that cc.URL carries a secret (a webhook's token in its
	// path or query), so that errors leave it out.
	secretURL bool
}

// channelTypes is the channel table, one row per type, in the order the
// configuration's errors list them. Every place that lists channel types
// derives from it: the type: check of the notify section and its messages,
// the senders of the dispatcher, what errors redact. Adding a channel: its
// file in notify (its Type constant, decode, Sender) and one row here.
func channelTypes() []channelType {
	return []channelType{
		{name: TypeTelegram, decode: decodeTelegram, sender: newTelegramSender},
		{name: TypeSlack, decode: decodeSlack, sender: newSlack, secretURL: true},
		{name: TypeDiscord, decode: decodeDiscord, sender: newDiscord, secretURL: true},
		{name: TypeWebhook, decode: decodeWebhook, sender: newWebhook, secretURL: true},
		{name: TypeEmail, decode: decodeEmail, sender: newEmailSender},
		{name: TypeLog, decode: decodeLog, sender: newLogSender},
	}
}

// channelTypeOf returns the row of type name.
func channelTypeOf(name string) (channelType, bool) {
	for _, t := range channelTypes() {
		if t.name == name {
			return t, true
		}
	}
	return channelType{}, false
}

// channelTypeNames lists the types for messages: "telegram, slack, …".
func channelTypeNames() string {
	var names []string
	for _, t := range channelTypes() {
		names = append(names, t.name)
	}
	return strings.Join(names, ", ")
}

// decodeChannel checks the type of a channel's mapping and has its row
// decode the rest.
func (p *parser) decodeChannel(path string, m map[string]any, cc *ChannelConfig) {
	typ, _ := m["type"].(string)
	cc.Type = typ
	t, ok := channelTypeOf(typ)
	switch {
	case ok:
		t.decode(p, path, m, cc)
	case typ == "":
		p.errorf(path+".type", "required: one of %s", channelTypeNames())
	default:
		p.errorf(path+".type", "unknown type %q (known: %s)", typ, channelTypeNames())
	}
}

// newSender builds the sender of channel cc from its row.
func (d *Dispatcher) newSender(cc ChannelConfig) (Sender, error) {
	t, ok := channelTypeOf(cc.Type)
	if !ok {
		return nil, fmt.Errorf("unknown type %q", cc.Type)
	}
	return t.sender(cc, &d.opts)
}

// poster is the HTTP client of channel cc: the dispatcher's client and
// clock, with cc's secrets kept out of errors.
func (o *options) poster(cc ChannelConfig) httpPoster {
	return httpPoster{hc: o.hc, redact: cc.redactor(), target: cc.target(), now: o.now}
}
