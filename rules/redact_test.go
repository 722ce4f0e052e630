package rules

import "testing"

func TestRedactSecretValue(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`  api_secret: "s3cr`, `  api_secret: <redacted>`},
		{`  api_key: k-123`, `  api_key: <redacted>`},
		{`    token: 123:abc`, `    token: <redacted>`},
		{`  - password: hunter2`, `  - password: <redacted>`},
		{`    team: {type: slack, webhook_url: https://hooks/x}`, `    team: {type: slack, webhook_url: <redacted>`},
		{`    ops: {type: telegram, token_env: TG, chat_id: "1"}`, `    ops: {type: telegram, token_env: TG, chat_id: "1"}`},
		{`    webhook_url: https://hooks.slack.com/T/B/X`, `    webhook_url: <redacted>`},
		{`    Authorization: Bearer x`, `    Authorization: <redacted>`},
		{`  api_secret_file: /etc/rg/secret`, `  api_secret_file: /etc/rg/secret`},
		{`    token_env: TELEGRAM_TOKEN`, `    token_env: TELEGRAM_TOKEN`},
		{`  api_secret:`, `  api_secret:`},
		{`    when: position.leverage > 10`, `    when: position.leverage > 10`},
	}
	for _, tt := range tests {
		if got := redactSecretValue(tt.in); got != tt.want {
			t.Errorf("redactSecretValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
