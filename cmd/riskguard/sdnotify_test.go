package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The daemon in-process under a fake systemd: a unixgram socket named by
// NOTIFY_SOCKET receives READY=1 once, after the first healthy tick, then
// WATCHDOG=1 per healthy tick, and STOPPING=1 when the context is cancelled.
func TestRunSDNotify(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	socket := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	states := make(chan string, 256)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(states)
				return
			}
			states <- string(buf[:n])
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var stderr lockedBuffer
	getenv := func(k string) string {
		if k == "NOTIFY_SOCKET" {
			return socket
		}
		return g.env(k)
	}
	m := &Main{Stdout: &stderr, Stderr: &stderr, Getenv: getenv}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, []string{"run", "--config", g.config, "--log-format", "json"}) }()

	var got []string
	// next returns the next datagram, failing the test after d.
	next := func(d time.Duration) string {
		t.Helper()
		select {
		case s, ok := <-states:
			if !ok {
				t.Fatalf("socket closed; got %q\n%s", got, stderr.String())
			}
			got = append(got, s)
			return s
		case <-time.After(d):
			t.Fatalf("no notification within %s; got %q\n%s", d, got, stderr.String())
			return ""
		}
	}
	if s := next(10 * time.Second); s != "READY=1" {
		t.Fatalf("first notification: got %q, want READY=1", s)
	}
	if s := next(10 * time.Second); s != "WATCHDOG=1" {
		t.Fatalf("after READY=1: got %q, want WATCHDOG=1", s)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop within 20s of cancel")
	}
	// Everything sent before Run returned is queued on the socket: the
	// watchdog pings of the ticks in between, then STOPPING=1, last.
	for len(got) == 0 || got[len(got)-1] != "STOPPING=1" {
		if len(got) > 200 {
			t.Fatalf("no STOPPING=1 among %d notifications", len(got))
		}
		s := next(5 * time.Second)
		if s != "WATCHDOG=1" && s != "STOPPING=1" {
			t.Fatalf("unexpected notification %q; got %q", s, got)
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(got), func(s string) bool { return s != "READY=1" })); n != 1 {
		t.Errorf("READY=1 sent %d times, want once: %q", n, got)
	}
	select {
	case s := <-states:
		t.Errorf("notification after STOPPING=1: %q", s)
	default:
	}
}

// A tick that fails sends nothing: no READY=1 before the first healthy
// tick, and no watchdog ping for a failed one.
func TestSDNotifyHookSkipsFailedTicks(t *testing.T) {
	t.Parallel()
	socket := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	logger := slog.New(slog.DiscardHandler)
	sd := newSystemd(func(k string) string {
		if k == "NOTIFY_SOCKET" {
			return socket
		}
		return ""
	}, time.Second, logger)
	sd.onTick(nil, errors.New("incomplete snapshot"))
	sd.onTick(nil, nil)
	sd.onTick(nil, errors.New("incomplete snapshot"))
	sd.onTick(nil, nil)
	sd.stopping(context.Background())
	var got []string
	buf := make([]byte, 64)
	for range 4 {
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, string(buf[:n]))
	}
	want := []string{"READY=1", "WATCHDOG=1", "WATCHDOG=1", "STOPPING=1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
