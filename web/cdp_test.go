package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// viewport is a browser window as a test asks for it.
type viewport struct {
	Width, Height int
	// Mobile: the page's viewport meta tag is honoured, as on a phone.
	Mobile bool
}

// measure loads url in headless Chromium at vp and returns what the
// JavaScript expression js (which may return a promise) gives, decoded
// into out. It drives Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: commands on fd 3, answers on fd 4, each a
// JSON message ending in a NUL byte), so a test can read the layout and
// not only the DOM. It skips when chromium is not installed.
func measure(t *testing.T, url string, vp viewport, js string, out any) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install chromium; .ci/run installs it as root): the status page is not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	toChrome, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	answers, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--hide-scrollbars", "--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fd 3, fd 4
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	defer func() {
		cmdW.Close()
		cancel()
		cmd.Wait()
		answers.Close()
	}()

	type message struct {
		ID     int             `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msgs := make(chan message, 64)
	go func() {
		defer close(msgs)
		r := bufio.NewReader(answers)
		for {
			b, err := r.ReadBytes(0)
			if err != nil {
				return
			}
			var m message
			if json.Unmarshal(b[:len(b)-1], &m) == nil && m.ID != 0 {
				msgs <- m
			}
		}
	}()
	id := 0
	// try sends a command and decodes its answer's result into result; an
	// error is the command's own (a script's context destroyed by the
	// navigation under it).
	var try func(session, method string, params any, result any) error
	call := func(session, method string, params any, result any) {
		t.Helper()
		if err := try(session, method, params, result); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
	}
	try = func(session, method string, params any, result any) error {
		id++
		req := map[string]any{"id": id, "method": method, "params": params}
		if session != "" {
			req["sessionId"] = session
		}
		b, _ := json.Marshal(req)
		if _, err := cmdW.Write(append(b, 0)); err != nil {
			t.Fatalf("%s: %v\n%s", method, err, stderr.String())
		}
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("%s: chromium closed the pipe\n%s", method, stderr.String())
				}
				if m.ID != id {
					continue
				}
				if m.Error != nil {
					return fmt.Errorf("%s", m.Error.Message)
				}
				if result != nil {
					if err := json.Unmarshal(m.Result, result); err != nil {
						return fmt.Errorf("%v: %s", err, m.Result)
					}
				}
				return nil
			case <-ctx.Done():
				t.Fatalf("%s: no answer: %v\n%s", method, ctx.Err(), stderr.String())
			}
		}
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	s := att.SessionID
	call(s, "Emulation.setDeviceMetricsOverride", map[string]any{"width": vp.Width, "height": vp.Height, "deviceScaleFactor": 1, "mobile": vp.Mobile}, nil)
	call(s, "Page.navigate", map[string]any{"url": url}, nil)
	var ev struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	// The script waits in the page for what it measures; it runs again
	// when the navigation replaced the document it started in (at most a
	// few times: the page is loaded once).
	for attempt := 1; ; attempt++ {
		err := try(s, "Runtime.evaluate", map[string]any{"expression": js, "awaitPromise": true, "returnByValue": true}, &ev)
		if err == nil && ev.Exception == nil {
			break
		}
		if attempt == 5 {
			t.Fatalf("the measuring script failed: %v %+v", err, ev.Exception)
		}
	}
	if err := json.Unmarshal(ev.Result.Value, out); err != nil {
		t.Fatalf("measure: %v: %s", err, ev.Result.Value)
	}
	b, _ := json.Marshal(map[string]any{"id": id + 1, "method": "Browser.close"})
	cmdW.Write(append(b, 0)) // its answer may not come: the browser is gone
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
